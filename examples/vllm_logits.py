"""The scars mask behind vLLM's logits-processor interface (``SamplingParams(logits_processors=[processor])``),
driven here by a toy greedy decoder over random logits with a character-level tokenizer (vLLM is not needed): only
allowed calls can be spelled."""

import tempfile
from pathlib import Path

import numpy as np

from scars.agents.runtime import ToolSignature, open_gate
from scars.agents.runtime.adapters.vllm import VLLMLogitsProcessor

CANDIDATES = [("ls /tmp", ("shell", {"cmd": "ls"})), ("rm -rf /", ("shell", {"cmd": "rm"}))]

with open_gate(
    Path(tempfile.mkdtemp()) / "ledger.sqlite", core=['if action.cmd == "rm" then forbid_tool_call("shell")']
) as gate:
    gate.mapping.declare(ToolSignature("shell", {"cmd": (str,)}))
    processor = VLLMLogitsProcessor(gate, lambda s: [ord(c) for c in s], 0, CANDIDATES, {})
    rng = np.random.default_rng(0)
    out: list[int] = []
    while True:
        logits = processor(out, rng.normal(size=128))  # what vLLM does once per generated token
        token = int(logits.argmax())
        if token == 0:
            break
        out.append(token)
    print("generated:", "".join(map(chr, out)), "->", processor.call_of(out))
