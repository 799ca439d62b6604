"""The enforcement invariant, checked independently at every decision (issue 25, item 1).

For every admissible control action a on which some rule in force fires — H, the active scars and the temporary
masks, as a *second, deliberately simple* fold of the ledger's events computes them (the stored events read in
sequence order and folded here, not by ``SchemaStore.apply``; rules evaluated with the DSL's reference semantics ``synthesis.dsl.semantics.fires``,
not the control plane's compiled index) —

1. the controller masked a (``Governed.masked``): what the plane *enforces* equals what the ledger says, in both
   directions (a dropped index entry and a widened guard both show);
2. in hard mode the governed probability of a is exactly 0;
3. a was not executed (the action handed to the world is never a masked one; the fallback a⊥ when all are masked).

A method without a self-schema is checked against H alone; the text-reflection ablation (its scars are text, not
enforced) likewise. Soft mode (the Soft-Bias-Only ablation) checks 1 only: a masked action keeps finite mass by
design. The check reads the ledger read-only and never changes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from scars.agents.runtime.control import Governed
from scars.envs.api import Decision
from scars.synthesis.dsl import Action, Rule, parse_rule
from scars.synthesis.dsl.semantics import Classes, fires


class EventSource(Protocol):
    """What the check reads: the ledger's events in sequence order after ``after`` (``Ledger.events``)."""

    def events(self, *, after: int = 0) -> Sequence[Any]: ...


@dataclass
class _InForce:
    rule: Rule
    until_step: int | None = None  # temporary masks: in force for steps < until_step
    expires_at_step: int | None = (
        None  # scars: in force for steps < expires_at_step (the plane's own reading)
    )


@dataclass
class EnforcementCheck:
    """One agent's enforcement invariant. ``ledger``: the agent's ledger file when its controller enforces its scars
    (None: H only), read through its events. ``after_step`` is called with the decision, the governed decision and the executed action."""

    core: Sequence[Rule]
    classes: Classes | None = None
    ledger: EventSource | None = None
    hard: bool = True
    decisions: int = 0
    violations: int = 0
    first: dict[str, Any] | None = None
    _seq: int = 0
    _rules: dict[str, _InForce] = field(default_factory=dict)

    def _fold(self) -> None:
        """Read the ledger's events after the last one seen (its rows as stored, through the ledger's own read) and
        fold them: admitted scars in, retired or revoked scars out, temporary masks set and lifted. Nothing else of
        an event is interpreted."""
        if self.ledger is None:
            return
        for event in self.ledger.events(after=self._seq):
            self._seq, kind, subject, p = event.seq, event.type, event.subject, event.payload
            if kind == "scar_admitted":
                scope = p.get("scope") or {}
                self._rules[p["id"]] = _InForce(
                    parse_rule(p["rule"]), expires_at_step=scope.get("expires_at_step")
                )
            elif kind in ("scar_retired", "scar_revoked"):
                self._rules.pop(subject, None)
            elif kind == "temp_mask_set":
                self._rules[p["mask_id"]] = _InForce(parse_rule(p["rule"]), until_step=p["until_step"])
            elif kind == "temp_mask_lifted":
                self._rules.pop(p["mask_id"], None)

    def in_force(self, step: int) -> list[Rule]:
        """H and the ledger's rules in force at decision ``step``."""
        self._fold()
        rules = list(self.core)
        for entry in self._rules.values():
            if entry.until_step is not None and step >= entry.until_step:
                continue
            if entry.expires_at_step is not None and step >= entry.expires_at_step:
                continue
            rules.append(entry.rule)
        return rules

    def reference_mask(self, decision: Decision) -> list[bool]:
        """Which admissible actions some rule in force fires on (control actions only)."""
        rules = self.in_force(decision.t)
        return [
            a.is_control and any(fires(r, decision.context, a, self.classes) for r in rules)
            for a in decision.actions
        ]

    def after_step(self, decision: Decision, governed: Governed, executed: Action) -> None:
        """Check one decision; the first violation is kept with what went wrong."""
        self.decisions += 1
        reference = self.reference_mask(decision)
        problems: list[str] = []
        enforced = [bool(m) for m in governed.masked]
        for i, (want, got) in enumerate(zip(reference, enforced, strict=True)):
            if want != got:
                problems.append(
                    f"{decision.actions[i].text or decision.actions[i].name!r}: the ledger's rules "
                    f"{'mask' if want else 'do not mask'} it, the controller {'masked' if got else 'did not'}"
                )
        probs = np.asarray(governed.probs, dtype=np.float64)
        masked = [i for i, m in enumerate(reference) if m]
        if self.hard and masked and governed.fallback is None and float(probs[masked].sum()) > 0.0:
            problems.append(f"masked actions keep probability {float(probs[masked].sum()):.3g}")
        if self.hard and executed.kind != "fallback":
            hit = [i for i in masked if decision.actions[i] == executed]
            if hit:
                problems.append(f"the masked action {executed.text or executed.name!r} was executed")
        if problems:
            self.violations += 1
            if self.first is None:
                self.first = {
                    "t": decision.t,
                    "episode": decision.episode,
                    "step": decision.step,
                    "what": problems,
                }

    def summary(self) -> Mapping[str, Any]:
        return {
            "enforcement_ok": self.violations == 0,
            "enforcement_decisions": self.decisions,
            "enforcement_violations": self.violations,
            "enforcement_first": self.first,
        }


def enforcement_check(
    agent: Any, core: Sequence[Rule], classes: Classes | None, ablation: str
) -> EnforcementCheck:
    """The check of one agent: against H and its own ledger when its controller enforces its scars (every scars
    variant but the text-reflection ablation, whose scars are prompt text), in soft mode for Soft-Bias-Only."""
    schema = agent.self_schema()
    ledger = None if schema is None or ablation == "text_reflection_scar" else schema.ledger
    return EnforcementCheck(tuple(core), classes, ledger, hard=ablation != "soft_bias_only")
