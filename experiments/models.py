"""A randomly initialised causal LM written to a local folder, for smoke runs, benchmarks and tests of the real-model
backends (optional extra ``hf``). Nothing is downloaded: the byte-level BPE tokenizer is trained here (``tokenizers``)
on the prompt vocabulary of the household world, and the GPT-2 weights are random (seeded).

Random weights say nothing about an LLM's competence; they exercise the real code paths (tokenisation, KV cache,
the logits processor, GGUF export, a real server) at the cost of a real model of that size.
"""

from __future__ import annotations

import json
from pathlib import Path

from scars.synthesis.errors import ConfigError

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
    """Write a random GPT-2 (``layers`` × ``width``) and its trained byte-level BPE tokenizer to ``folder``.

    The vocabulary covers the 128 ASCII bytes only: a random model's argmax is often a lone byte, and a byte of a
    multi-byte UTF-8 character is no text on its own (llama-cpp-python keeps generating until the text decodes,
    past ``max_tokens``, and fails at the context's end). Every token of this model decodes to ASCII text."""
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
    ascii_alphabet = sorted(
        {
            piece
            for b in range(128)
            for piece, _ in tok.pre_tokenizer.pre_tokenize_str(chr(b))
            if len(piece) == 1
        }
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=ascii_alphabet,
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


def export_gguf(folder: Path, out: Path) -> Path:
    """Write the GPT-2 in ``folder`` (as ``write_random_causal_lm`` makes it) to a GGUF file for llama.cpp servers.

    The tensors are mapped by ``gguf.TensorNameMap`` (Conv1D weights transposed to ``(out, in)``, as llama.cpp's
    own converter does); the byte-level BPE vocabulary and merges go in as a ``gpt2`` tokenizer."""
    try:
        import gguf
        import numpy as np
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the optional extras
        raise ConfigError("a GGUF export needs the optional extras: pip install -e '.[hf,llamacpp]'") from exc
    folder = Path(folder)
    model = transformers.GPT2LMHeadModel.from_pretrained(folder, local_files_only=True, dtype="float32")
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    config = model.config
    writer = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.GPT2])
    writer.add_name("scars-random-gpt2")
    writer.add_block_count(config.n_layer)
    writer.add_context_length(config.n_positions)
    writer.add_embedding_length(config.n_embd)
    writer.add_feed_forward_length(4 * config.n_embd)
    writer.add_head_count(config.n_head)
    writer.add_layer_norm_eps(config.layer_norm_epsilon)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    vocab = tokenizer["model"]["vocab"]
    tokens = [tok for tok, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    special = {t["content"] for t in tokenizer.get("added_tokens", [])}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(
        [gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens]
    )
    merges = tokenizer["model"]["merges"]
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    # llama-cpp-python pairs echoed prompt tokens with the logits row before them only when the prompt starts with BOS
    writer.add_add_bos_token(True)
    names = gguf.TensorNameMap(gguf.MODEL_ARCH.GPT2, config.n_layer)
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" or name.endswith((".attn.bias", ".attn.masked_bias")):
            continue  # the head is tied to token_embd; the causal-mask buffers are not weights
        base, suffix = name.rsplit(".", 1)
        mapped = names.get_name(base)
        if mapped is None:
            raise ConfigError(f"no GGUF name for tensor {name!r}")
        data = tensor.detach().numpy().astype(np.float32)
        if name.endswith((".c_attn.weight", ".c_proj.weight", ".c_fc.weight")):
            data = data.T.copy()
        writer.add_tensor(f"{mapped}.{suffix}", data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(out)
