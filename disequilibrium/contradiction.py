"""z_C: internal contradiction between the agent's recent actions and the core schema H (paper §3.2, SPEC §3).

H is the read-only, human-written safety baseline, written as rules of the patch DSL. z_C is the share of the
agent's recent CONTROL actions (A_ctrl = A_tool ∪ A_env; text is never hard-masked, SPEC §1) that some rule of H
fires on — i.e. that H would have masked, evaluated with ``synthesis.dsl.semantics.fires``:

    z_C = |{(q, a) ∈ W : a ∈ A_ctrl, ∃ h ∈ H fires on (q, a)}| / |{(q, a) ∈ W : a ∈ A_ctrl}|     (0 when W has none)

W is a sliding window over the last ``DEFAULT_CONTRADICTION_WINDOW`` = 10 control decisions (the current step
included). When the base policy's proposal is known — π_0 over the admissible actions, *before* any mask — a
decision contributes the share of π_0's control mass that H forbids,

    c_t = Σ_{a ∈ A_ctrl(q), H fires on (q, a)} π_0(a|q) / Σ_{a ∈ A_ctrl(q)} π_0(a|q),

so z_C measures what the agent's own policy wants to do against H even though H's masks keep it from doing it
(the contradiction between the base policy and the core schema that §3.2 asks for); otherwise the executed action
contributes 1 or 0. A window rather than the single current step keeps z_C a graded "how much the agent's recent conduct
contradicts H" in [0, 1] instead of a second copy of z_V; ten steps is a fifth of an ALFWorld episode (50 steps).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scars.synthesis.dsl.ast import Action, Rule
from scars.synthesis.dsl.semantics import Classes, fires
from scars.synthesis.errors import ConfigError

DEFAULT_CONTRADICTION_WINDOW: int = 10


def contradicts_core(
    core: Sequence[Rule], q: Mapping[str, Any], a: Action, classes: Classes | None = None
) -> bool:
    """Would H have masked the control action a in context q?"""
    return a.is_control and any(fires(rule, q, a, classes) for rule in core)


def core_contradiction(
    core: Sequence[Rule], recent: Iterable[tuple[Mapping[str, Any], Action]], classes: Classes | None = None
) -> float:
    """z_C over the given (q, a) pairs (non-control actions are skipped)."""
    flags = [contradicts_core(core, q, a, classes) for q, a in recent if a.is_control]
    return float(sum(flags) / len(flags)) if flags else 0.0


class ContradictionWindow:
    """Streams (q, a) pairs and keeps z_C over the last ``window`` control actions."""

    def __init__(
        self, core: Sequence[Rule], classes: Classes | None = None, window: int = DEFAULT_CONTRADICTION_WINDOW
    ) -> None:
        if window < 1:
            raise ConfigError(f"contradiction window must be ≥ 1 control action, got {window}")
        self.core = tuple(core)
        self.classes = classes
        self._flags: deque[float] = deque(maxlen=window)

    def push(self, q: Mapping[str, Any], a: Action | None) -> float:
        """Add an executed action (1 if H forbids it, else 0); non-control actions are skipped."""
        if a is not None and a.is_control:
            self._flags.append(float(contradicts_core(self.core, q, a, self.classes)))
        return self.value

    def push_proposal(
        self,
        q: Mapping[str, Any],
        proposal: Sequence[tuple[Action, float]],
        forbidden: Sequence[bool] | None = None,
    ) -> float:
        """Add a decision by the base policy's proposal: the share of its control mass H forbids (docstring).
        ``forbidden``: which proposed actions H forbids, when the caller's controller already knows (it evaluated
        H at this decision); otherwise H is evaluated here."""
        if forbidden is None:
            forbidden = [contradicts_core(self.core, q, a, self.classes) for a, _ in proposal]
        elif not any(
            forbidden
        ):  # H forbids nothing proposed (most decisions): 0 / mass, exactly, where mass > 0
            mass = 0.0
            for a, p in proposal:
                if a.is_control:
                    mass += p
            if mass > 0:
                self._flags.append(0.0)
            return self.value
        mass = blocked = 0.0
        for (a, p), flag in zip(proposal, forbidden, strict=True):
            if a.is_control:
                mass += p
                blocked += p if flag else 0.0
        if mass > 0:
            self._flags.append(blocked / mass)
        return self.value

    @property
    def value(self) -> float:
        return float(sum(self._flags) / len(self._flags)) if self._flags else 0.0
