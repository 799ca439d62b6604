"""Narrowing (issue 24: a wrong guess should cost a repeat, not the task): what a lost task says about a scar.

A scar learned from one or two failures can be wider than its rule (``open fridge 1`` for "the fridge only with
empty hands"): the agent then never opens the fridge again, so it never meets the evidence that would narrow the
scar, and every task that needs the fridge is lost. The agent's own experience does hold evidence against the
scar, unverified but specific: the actions its model proposed that the scar blocked in an episode it then lost.

:func:`blocked_presumptions` turns those *blocked proposals* into presumptions for the next synthesis of the scar's
told rule: the blocked action, in the context of a failure of that rule with only the **categorical** variables
(strings, flags) changed to the blocked context's values, is presumed safe. The search must still cover every
verified failure of the rule (D⁻ is never given up, so Prop. 1 holds), and it pays a presumption's cost for each
one its rule still masks, so it keeps a condition that spares them when one exists (the held object's type,
here). Numeric variables are not transplanted: a step counter differs between any two decisions and would let a
rule ``step == 7`` spare every presumption while meaning nothing.

A presumption is dropped when the agent's own evidence refutes it: a recorded failure of the rule on the same
action (its string arguments) with the same values of the changed variables. A narrowed rule that is too narrow
therefore costs one repeat, after which that failure joins D⁻ and removes the presumption it refutes.

What it assumes: the model's proposals reflect what the task needs. A proposal the scar blocked in a *won* episode
says nothing (the task found another way) and is not used; in a lost one the blocked proposal may still have been
unsafe (the right rule blocks it too), which is why it is a presumption (a cost), never a veto, and why a refuting
failure removes it. An attacker who steers the model's proposals can narrow a scar at most down to the verified
failures it was learned from; it cannot make the agent forget one (docs/poisoning.md).

The loss is not the only such evidence (issue 40, item 3): a decision at which the scars leave the model no
unmasked way forward — its re-planned step masked again, a scar refusing its new way again, every action masked —
says the same, earlier. The scars agent then narrows at once from the episode's blocked proposals so far
(``agents.narrowing_book.NarrowingBook.at_once``), with the same presumptions, and the result arrives a fixed
number of decisions later, in the same episode.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from scars.synthesis.dsl.ast import Action, Value
from scars.synthesis.failure import Failure, freeze_context


@dataclass(frozen=True)
class BlockedProposal:
    """The model's proposal the control plane masked at one decision, and the scars that masked it.

    scars:   the ids of the scars that fired on the proposed action (H did not).
    context: the decision's context q.
    action:  the proposed action.
    at:      (episode, step) of the decision."""

    scars: frozenset[str]
    context: Mapping[str, Value]
    action: Action
    at: tuple[int, int]


def _categorical(value: object) -> bool:
    return isinstance(value, str | bool)


def _identity(a: Action) -> tuple:
    return (a.kind, a.name, tuple((k, v) for k, v in a.args if isinstance(v, str)))


def situation(b: BlockedProposal, bookkeeping: Collection[str]) -> tuple:
    """A blocked proposal's situation: the scars that masked it, the action (its string arguments) and the decision's
    categorical context (what a narrowing presumption is made of; the step counter and bookkeeping left out)."""
    context = tuple(sorted((k, v) for k, v in b.context.items() if k not in bookkeeping and _categorical(v)))
    return (b.scars, *_identity(b.action), context)


def blocked_presumptions(
    failure_context: Mapping[str, Value],
    failures: Sequence[tuple[Mapping[str, Value], Action]],
    blocked: Iterable[BlockedProposal],
    *,
    ignore: frozenset[str] = frozenset(),
    limit: int = 32,
) -> tuple[tuple[Mapping[str, Value], Action], ...]:
    """Presumptions for a told rule from the proposals its scars blocked in lost episodes (module docstring).

    failure_context: the full recorded context of the rule's newest failure (what the presumptions start from).
    failures:        (context, action) of every recorded failure of the rule (the refutations).
    blocked:         the blocked proposals of the rule's scars.
    ignore:          bookkeeping context keys (never changed, never compared).
    Returns at most ``limit`` distinct presumptions, newest blocked proposal first."""
    out: list[tuple[Mapping[str, Value], Action]] = []
    seen: set[tuple] = set()
    for b in sorted(blocked, key=lambda b: b.at, reverse=True):
        changed = {
            k: v
            for k, v in b.context.items()
            if k not in ignore
            and _categorical(v)
            and (
                k not in failure_context or failure_context[k] != v or type(failure_context[k]) is not type(v)
            )
        }
        for (
            k
        ) in failure_context:  # a categorical variable the blocked context lacks (nothing held: no held_type)
            if k not in ignore and k not in b.context and _categorical(failure_context[k]):
                changed[k] = None
        same_action = any(_identity(b.action) == _identity(a) for _, a in failures)
        if not changed and same_action:
            continue  # the failure's own situation: nothing to presume
        refuted = any(
            _identity(b.action) == _identity(a) and all(q.get(k) == v for k, v in changed.items())
            for q, a in failures
        )
        if refuted:
            continue
        q = {k: v for k, v in failure_context.items() if k not in changed or changed[k] is not None}
        q |= {k: v for k, v in changed.items() if v is not None}
        key = (tuple(sorted((k, repr(v)) for k, v in q.items())), b.action)
        if key in seen:
            continue
        seen.add(key)
        out.append((freeze_context(q), b.action))
        if len(out) >= limit:
            break
    return tuple(out)


def with_presumptions(fragment: Failure, extra: Sequence[tuple[Mapping[str, Value], Action]]) -> Failure:
    """The fragment with ``extra`` presumptions added at full weight (its own keep their weights)."""
    if not extra:
        return fragment
    weights = fragment.presumption_weights or (1.0,) * len(fragment.presumed_safe)
    return replace(
        fragment,
        presumed_safe=(*fragment.presumed_safe, *extra),
        presumption_weights=(*weights, *(1.0,) * len(extra)),
    )
