"""The HuggingFace adapter: a real ``transformers.LogitsProcessor`` from the gate, driving ``model.generate`` of a tiny
randomly initialised GPT-2 built here (no download). A masked call is never generated, whatever the model prefers."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the 'hf' extra (torch, transformers) is not installed")
transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

from scars.agents.runtime import GateError, ToolSignature, open_gate  # noqa: E402
from scars.agents.runtime.adapters.hf import logits_processor  # noqa: E402

WORDS = "call search delete cats dogs all files now please".split()


@pytest.fixture(scope="module")
def model_and_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[EOS]": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]")
    fast.pad_token = "[EOS]"
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(vocab), n_positions=64, n_embd=16, n_layer=1, n_head=2)
    return transformers.GPT2LMHeadModel(config).eval(), fast


CANDIDATES = [
    ("search cats", ("search", {"q": "cats"})),
    ("search dogs", ("search", {"q": "dogs"})),
    ("delete all files", ("delete", {"what": "all"})),
]


def generate(model, tok, processor, prompt_ids, bias=None):
    processors = [processor]
    if bias is not None:  # make the model prefer a token strongly (before the scars mask applies)
        processors.insert(0, lambda ids, scores: scores + bias)
    out = model.generate(
        input_ids=torch.tensor([prompt_ids]),
        attention_mask=torch.ones((1, len(prompt_ids)), dtype=torch.long),
        logits_processor=transformers.LogitsProcessorList(processors),
        max_new_tokens=5,
        do_sample=False,
        pad_token_id=tok.pad_token_id,
    )
    return tok.decode(out[0, len(prompt_ids) :], skip_special_tokens=True).strip()


def test_the_processor_never_spells_a_masked_call(tmp_path, model_and_tokenizer):
    model, tok = model_and_tokenizer
    with open_gate(
        tmp_path / "l.sqlite", core=['if user == "guest" then forbid_tool_call("delete")']
    ) as gate:
        gate.mapping.declare(ToolSignature("search", {"q": (str,)}))
        gate.mapping.declare(ToolSignature("delete", {"what": (str,)}))
        gate.admit_rule('if action.q == "dogs" then forbid_tool_call("search")', reason="operator")
        prompt = tok("call now please", add_special_tokens=False)["input_ids"]
        processor, allowed = logits_processor(gate, tok, len(prompt), CANDIDATES, {"user": "guest"})
        assert [t for t, _ in allowed] == ["search cats"]
        for word in ("delete", "dogs", "all", "cats"):
            bias = torch.zeros(len(tok))
            bias[tok.convert_tokens_to_ids(word)] = 50.0  # the model wants this word above all
            assert generate(model, tok, processor, prompt, bias) == "search cats"
        processor, allowed = logits_processor(gate, tok, len(prompt), CANDIDATES, {"user": "admin"})
        bias = torch.zeros(len(tok))
        bias[tok.convert_tokens_to_ids("delete")] = 50.0
        assert (
            generate(model, tok, processor, prompt, bias) == "delete all files"
        )  # an admin may: the mask is H's
        with pytest.raises(GateError, match="take the fallback"):
            logits_processor(gate, tok, len(prompt), CANDIDATES[1:2], {"user": "admin"})
