"""What a reported failure and the gate's own observations say about a rule, when no verifier answers what-ifs.

Under the information protocol the framework reports only the executed call that violated (issue 42: AgentDojo's
``security`` turning true after a call); nobody is asked about calls that were not made. The gate saw more than the
breach, though: the same tool's calls it allowed before, which did not violate, and the earlier breaches of the
tool. :func:`contrast` reads both, and :func:`contrast_fragment` turns them into the fragment the search learns from:

- **counter-evidence** (``allowed``): the allowed calls of the breached tool whose arguments are not those of a
  reported breach (a call repeated after its case was already breached says nothing);
- **distinguishing arguments**: the breach's arguments whose value no counter-evidence call had (the recipient
  IBAN, the file id, the URL …); when every value was seen somewhere, the combination is what is new, and every
  argument is kept;
- **kept arguments**: the least general generalisation of the breach with the earlier breach of the same tool it
  shares the most distinguishing values with (what varies between two breaches is not what makes them breaches:
  the amount and subject of two transfers to the same attacker); with no such breach, every distinguishing
  argument (one breach and no contrast say nothing about which of its values matter).

The fragment the search gets (``Failure.causal_args`` = the kept arguments, no context variable: one breach's
context says only where it happened) carries, as its safe pairs (a veto in the objective's admission):
the counter-evidence calls, and for each kept argument the breach with that argument changed to a value nobody
used (a string to the extraction's sentinel, a number below and above it) — so an admitted rule tests every kept
argument by its value and generalises only as far as the evidence separates: never to a numeric range or a whole
tool on one breach.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from scars.synthesis.dsl import Action
from scars.synthesis.dsl.ast import Value
from scars.synthesis.failure import Failure
from scars.synthesis.fragments import COUNTERFACTUAL_SENTINEL, RecordedStep


def _same(a: Value | None, b: Value | None) -> bool:
    return a == b and type(a) is type(b)


def _tool(a: Action, b: Action) -> bool:
    return a.kind == b.kind and a.name == b.name


@dataclass(frozen=True)
class Contrast:
    """The breach against what the gate saw (module docstring).

    allowed: (context, call) of the counter-evidence; distinguishing / kept: argument names; partner: the earlier
    breach the kept arguments generalise with (None: the breach alone)."""

    allowed: tuple[tuple[Mapping[str, Value], Action], ...]
    distinguishing: frozenset[str]
    kept: frozenset[str]
    partner: Action | None = None

    def covers(self, breach: Action, other: Action) -> bool:
        """``other`` is the same tool as ``breach`` with the same value on every kept argument."""
        return _tool(breach, other) and all(_same(breach.arg(k), other.arg(k)) for k in self.kept)


def contrast(breach: Action, history: Iterable[RecordedStep], breaches: Sequence[Action]) -> Contrast:
    """The counter-evidence, distinguishing and kept arguments of ``breach`` (module docstring); ``history``: the
    gate's recorded calls (allowed ones ``violated=False``), ``breaches``: the reported breaches before this one."""
    known = {a.args for a in breaches if _tool(a, breach)} | {breach.args}
    allowed = tuple(
        (s.context, s.chosen_action)
        for s in history
        if not s.violated and _tool(s.chosen_action, breach) and s.chosen_action.args not in known
    )
    names = [k for k, _ in breach.args]
    distinguishing = frozenset(
        k for k, v in breach.args if not any(_same(a.arg(k), v) for _, a in allowed)
    ) or frozenset(names)
    partner, shared = None, frozenset()
    for earlier in reversed(breaches):  # the most recent first on a tie
        if not _tool(earlier, breach) or earlier.args == breach.args:
            continue
        overlap = frozenset(k for k in distinguishing if _same(earlier.arg(k), breach.arg(k)))
        if len(overlap) > len(shared):
            partner, shared = earlier, overlap
    return Contrast(allowed, distinguishing, shared or distinguishing, partner)


def _unused(value: Value) -> tuple[Value, ...]:
    """Values of an argument nobody used, to presume the breach safe at: a number below and above, another string."""
    if isinstance(value, bool):
        return (not value,)
    if isinstance(value, int | float):
        return (value - abs(value) - 1, value + abs(value) + 1)
    return (COUNTERFACTUAL_SENTINEL,)


def _with(action: Action, name: str, value: Value) -> Action:
    args = tuple(sorted((*(kv for kv in action.args if kv[0] != name), (name, value))))
    return Action(action.kind, action.name, args, action.text)


def contrast_fragment(failure: Failure, evidence: Contrast) -> Failure:
    """The fragment of ``failure`` (as observed: its whole context and call) under the contrast (module docstring)."""
    breach = failure.action
    changed = tuple(
        (failure.q, _with(breach, name, other))
        for name in sorted(evidence.kept)
        for other in _unused(breach.arg(name))
    )
    return replace(
        failure,
        q={},
        F=(breach,),
        causal_args=evidence.kept,
        safe_counterfactuals=(*evidence.allowed, *changed),
    )


__all__: Sequence[str] = ("Contrast", "contrast", "contrast_fragment")
