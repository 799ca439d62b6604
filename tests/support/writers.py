"""A faulty command writer for the generate-mode tests (``tests/experiments/test_loop.py``,
``tests/experiments/test_llm_modes.py``): it writes a masked command whenever the controller masks one — the fault
the per-step check must catch — and the simulated LM's habitual command otherwise."""

from __future__ import annotations

import numpy as np

from scars.agents.policies import Generation
from scars.agents.policies.embedded import SimulatedLM, SimulatedLMConfig


class MaskIgnoringWriter(SimulatedLM):
    """``masked_written``: the texts of the masked commands it wrote."""

    def __init__(self) -> None:
        super().__init__(SimulatedLMConfig())
        self.masked_written: list[str] = []

    def generate(self, inp, masked):
        habit = int(
            self.logits(inp, np.random.default_rng(0)).argmax()
        )  # the simulated model's habitual step
        index = next((i for i, m in enumerate(masked) if m), habit)
        if masked[index]:
            self.masked_written.append(inp.actions[index].text)
        return Generation(index, inp.actions[index].text or inp.actions[index].name, False)
