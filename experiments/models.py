"""A randomly initialised causal LM written to a local folder, for smoke runs, benchmarks and tests of the real-model
backends (optional extra ``hf``). Nothing is downloaded: the byte-level BPE tokenizer is trained here (``tokenizers``)
on the prompt vocabulary of the household world, and the GPT-2 weights are random (seeded).

Random weights say nothing about an LLM's competence; they exercise the real code paths (tokenisation, KV cache,
the logits processor, GGUF export, a real server) at the cost of a real model of that size.
"""

from __future__ import annotations

from pathlib import Path

from synthesis.errors import ConfigError

CORPUS = (
    "Task: Next action: Observation: You are in the middle of a room. Looking quickly around you, you see "
    "System: Rules you must follow: Relevant past experience: Your memory for the task below: Skills you have "
    "learned: Trial In one short sentence, say what you are doing and why: I will I must not instead. "
    "go to take from put in on open close clean heat cool slice use examine look inventory with "
    "apple bread cup mug plate pan pot knife egg lettuce tomato potato bowl spoon fork book cellphone pen pencil "
    "fridge microwave sinkbasin bathtubbasin countertop cabinet drawer shelf stoveburner garbagecan diningtable "
    "sidetable desk dresser bed sofa toilet coffeemachine toaster safe lamp "
    "1 2 3 4 5 6 7 8 9 10 a the to do not it is broken hot cold clean dirty put some and then in a"
)


def write_random_causal_lm(
    folder: Path, *, layers: int = 2, width: int = 64, heads: int = 2, vocab: int = 400, seed: int = 0
) -> Path:
    """Write a random GPT-2 (``layers`` × ``width``) and its trained byte-level BPE tokenizer to ``folder``."""
    try:
        import torch
        import transformers
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ConfigError("a local causal LM needs the optional extra: pip install -e '.[hf]'") from exc
    if width % heads:
        raise ConfigError(f"width {width} must be a multiple of heads {heads}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([CORPUS] * 4, trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    torch.manual_seed(seed)
    eos = fast.convert_tokens_to_ids("<|endoftext|>")
    config = transformers.GPT2Config(
        vocab_size=len(fast),
        n_positions=1024,
        n_embd=width,
        n_layer=layers,
        n_head=heads,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    model = transformers.GPT2LMHeadModel(config)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
