"""The vLLM adapter's callable contract (vLLM itself is not installed: its documented per-request logits-processor
signatures are ``fn(output_token_ids, logits)`` and ``fn(prompt_token_ids, output_token_ids, logits)``): under
random logits, greedy decoding through the processor only ever spells allowed calls, never a masked one."""

from __future__ import annotations

import numpy as np
import pytest

from scars.agents.runtime import GateError, ToolSignature, open_gate
from scars.agents.runtime.adapters.vllm import VLLMLogitsProcessor

VOCAB = 128
EOS = 0


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]  # a character-level tokenizer (ids < 128, EOS = 0)


CANDIDATES = [
    ("search(cats)", ("search", {"q": "cats"})),
    ("search(dogs)", ("search", {"q": "dogs"})),
    ("delete(all)", ("delete", {"what": "all"})),
]


@pytest.fixture
def gate(tmp_path):
    g = open_gate(
        tmp_path / "ledger.sqlite", core=['if action.what == "all" then forbid_tool_call("delete")']
    )
    g.admit_rule('if action.q == "dogs" then forbid_tool_arg("search", "q", "dogs")', reason="operator")
    g.mapping.declare(ToolSignature("search", {"q": (str,)}))
    g.mapping.declare(ToolSignature("delete", {"what": (str,)}))
    yield g
    g.close()


def decode(processor, rng, three_args: bool, tensor=np.array):
    out: list[int] = []
    for _ in range(40):
        logits = tensor(rng.normal(size=VOCAB))
        logits = processor([1, 2, 3], list(out), logits) if three_args else processor(list(out), logits)
        token = int(logits.argmax())
        if token == EOS:
            break
        out.append(token)
    return out


def test_only_allowed_calls_can_be_spelled_in_either_call_form(gate):
    processor = VLLMLogitsProcessor(gate, encode, EOS, CANDIDATES, {})
    assert [text for text, _ in processor.allowed] == ["search(cats)"]
    rng = np.random.default_rng(0)
    for trial in range(30):
        out = decode(processor, rng, three_args=trial % 2 == 1)
        assert "".join(map(chr, out)) == "search(cats)"
        assert processor.call_of(out) == ("search", {"q": "cats"})
    with pytest.raises(TypeError, match="output_token_ids, logits"):
        processor(np.zeros(VOCAB))


def test_torch_tensors_work_the_same(gate):
    torch = pytest.importorskip("torch")
    processor = VLLMLogitsProcessor(gate, encode, EOS, CANDIDATES, {})
    out = decode(processor, np.random.default_rng(1), three_args=False, tensor=torch.tensor)
    assert "".join(map(chr, out)) == "search(cats)"


def test_every_candidate_masked_means_the_fallback(gate):
    with pytest.raises(GateError, match="take the fallback 'safe_refusal'"):
        VLLMLogitsProcessor(gate, encode, EOS, [CANDIDATES[1], CANDIDATES[2]], {})
