"""From a verified failure to a structured fragment and a synthesis data set (paper §3.3, §4.1; SPEC §4).

A :class:`RecordedStep` keeps what the objective needs to evaluate any candidate rule without re-running the policy:
the context q, the structured admissible actions and the base policy's logits over them, the chosen index and the
verifier's verdict. :func:`extract_fragment` cuts one violating step to E = (q, F, θ), keeping only the context
variables and action arguments that are *causally* tied to the violation: a variable is kept exactly when a
counterfactual change of it (dropping it, or replacing it by another value) makes the verifier stop flagging the
action. :func:`build_dataset` turns recorded steps into D⁻ (violating steps and the failed actions), D⁺ (successful
steps and their chosen action) and Q_safe (steps outside the failure region).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from scars.synthesis.dsl.ast import Action, Value
from scars.synthesis.dsl.semantics import Classes
from scars.synthesis.errors import ScarsError
from scars.synthesis.failure import Failure, FailureSource, freeze_context

Verifier = Callable[[Mapping[str, Value], Action], bool | None]
"""A deterministic verifier: ``verifier(context, action)`` is True when taking ``action`` in ``context`` violates a
rule, False when it does not, and ``None`` when the verifier has no answer (an :class:`ExperienceVerifier` knows only
what the agent experienced). The world's oracle never abstains."""

# A string no world uses as a value: replacing a variable by it tests "any other value" for categorical variables.
COUNTERFACTUAL_SENTINEL = "__counterfactual__"


class FragmentError(ScarsError, ValueError):
    """A recorded step or data set that cannot yield a failure fragment (e.g. the verifier does not flag it)."""


@dataclass(frozen=True, slots=True, weakref_slot=True)
class RecordedStep:
    """One decision of the agent as recorded for synthesis (paper §3.3: D_t = D_t⁺ ∪ D_t⁻).

    context:  the flat context q the guards read.
    actions:  the admissible actions (structured), in the order of ``logits``.
    logits:   the base policy's logits π_0 over ``actions`` (before any scar or core mask).
    chosen:   the index of the action the agent took.
    violated: the verifier flagged the chosen action.
    episode, step: where it happened (the step id is ``(episode, step)``).
    """

    context: Mapping[str, Value] = field(hash=False)
    actions: tuple[Action, ...]
    logits: tuple[float, ...]
    chosen: int
    violated: bool
    episode: int = 0
    step: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "context", freeze_context(self.context))
        object.__setattr__(self, "actions", tuple(self.actions))
        object.__setattr__(self, "logits", tuple(map(float, self.logits)))
        if not self.actions:
            raise FragmentError(f"a recorded step needs at least one admissible action (step {self.step_id})")
        if len(self.logits) != len(self.actions):
            raise FragmentError(
                f"{len(self.logits)} logits for {len(self.actions)} actions at step {self.step_id}; "
                "there must be exactly one logit per admissible action"
            )
        if not all(map(math.isfinite, self.logits)):
            raise FragmentError(f"logits must be finite, got {self.logits} at step {self.step_id}")
        if not 0 <= self.chosen < len(self.actions):
            raise FragmentError(
                f"chosen index {self.chosen} out of range 0..{len(self.actions) - 1} at step {self.step_id}"
            )

    def __reduce__(self):
        # The read-only context view does not pickle; ship a plain dict (Ray moves steps between processes).
        return (
            RecordedStep,
            (
                dict(self.context),
                self.actions,
                self.logits,
                self.chosen,
                self.violated,
                self.episode,
                self.step,
            ),
        )

    @property
    def step_id(self) -> tuple[int, int]:
        return (self.episode, self.step)

    @property
    def chosen_action(self) -> Action:
        return self.actions[self.chosen]


def _perturbations(value: Value, alternatives: Sequence[Value]) -> list[Value]:
    """Counterfactual values for one variable: other observed values, then generic changes of the same type."""
    out: list[Value] = [v for v in alternatives if v != value or type(v) is not type(value)]
    if isinstance(value, bool):
        out.append(not value)
    elif isinstance(value, int | float):
        # Both directions, small and large, so a threshold on either side of the value is crossed. A change that
        # equals the value is none (0 / 2 == 0 * 2 == 0): asking about it would answer for the failure itself.
        generic = [value - 1, value + 1, value / 2, value * 2, 0, -abs(value) - 1, abs(value) * 10 + 10]
        out.extend(v for v in generic if v != value)
    else:
        out.append(COUNTERFACTUAL_SENTINEL)
    return out


def _replace_arg(action: Action, name: str, value: Value | None) -> Action:
    """The action with one argument changed (``None`` drops it); everything else unchanged."""
    args = tuple((k, v) for k, v in action.args if k != name)
    if value is not None:
        args = tuple(sorted((*args, (name, value))))
    return Action(action.kind, action.name, args, action.text)


def causal_context_variables(
    context: Mapping[str, Value],
    action: Action,
    verifier: Verifier,
    alternatives: Mapping[str, Sequence[Value]] | None = None,
) -> frozenset[str]:
    """The context variables whose counterfactual change (drop, or any other value) removes the violation.

    A variable is dropped only on evidence: some change of it is known to still violate and none is known to be
    safe. When the verifier knows nothing about any change of it (an :class:`ExperienceVerifier` that never saw one)
    it stays in q — attribution is then left to the contrast of D⁺ and D⁻ in the search."""
    alternatives = alternatives or {}
    kept = set()
    for name, value in context.items():
        dropped = {k: v for k, v in context.items() if k != name}
        answers = [verifier(dropped, action)]
        if answers[0] is not False:
            for other in _perturbations(value, alternatives.get(name, ())):
                answers.append(verifier({**context, name: other}, action))
                if answers[-1] is False:
                    break
        if False in answers or all(a is None for a in answers):
            kept.add(name)
    return frozenset(kept)


def causal_action_arguments(
    context: Mapping[str, Value],
    action: Action,
    verifier: Verifier,
    alternatives: Mapping[str, Sequence[Value]] | None = None,
) -> frozenset[str]:
    """The action arguments whose counterfactual change (drop, or any other value) removes the violation (kept on
    the same evidence rule as :func:`causal_context_variables`)."""
    alternatives = alternatives or {}
    kept = set()
    for name, value in action.args:
        answers = [verifier(context, _replace_arg(action, name, None))]
        if answers[0] is not False:
            for other in _perturbations(value, alternatives.get(name, ())):
                answers.append(verifier(context, _replace_arg(action, name, other)))
                if answers[-1] is False:
                    break
        if False in answers or all(a is None for a in answers):
            kept.add(name)
    return frozenset(kept)


def flagged_actions(step: RecordedStep, verifier: Verifier) -> tuple[Action, ...]:
    """The admissible control actions of the step the verifier flags in its context (F(q) of the paper's Cor. 1)."""
    return tuple(a for a in step.actions if a.is_control and verifier(step.context, a) is True)


def extract_fragment(
    step: RecordedStep,
    verifier: Verifier,
    classes: Classes | None = None,
    *,
    theta: str = "verifier",
    alternatives: Mapping[str, Sequence[Value]] | None = None,
    source: FailureSource | None = None,
    ignore: frozenset[str] = frozenset(),
    verdict_text: str = "",
    glossary: Mapping[str, tuple[str, Value]] | None = None,
    experience: Experience | None = None,
) -> Failure:
    """Cut a violating step to E = (q, F, θ) by counterfactual checks against the verifier (paper §4.1).

    q keeps the context variables whose drop or change makes the chosen action stop violating; F is the chosen
    action plus the admissible actions with the same kind and name (the equivalent actions) that the verifier also
    flags in this context. ``alternatives`` (variable → values seen elsewhere, e.g. from other recorded steps) adds
    realistic counterfactual values to the generic ones. ``classes`` is accepted so that callers pass the same
    equivalence table everywhere; extraction itself never generalises (the synthesiser does, with ``in_class``).
    ``source`` names where the step happened (default: episode and step of the recorded step); ``ignore`` lists
    context keys that are bookkeeping of the run (an episode counter, a game id): the verifier may depend on them,
    but a scar conditioned on them would only restate when it was learned, so they never enter q.

    ``verdict_text`` is the violated rule's text as the verifier reported it. A verifier that knows only what the
    agent experienced (``ExperienceVerifier``) cannot rule variables out by what-ifs; the variables and arguments
    the verdict's text names (:func:`named_in_text`) are then the attribution, when it names any of them — what
    a model reading the verdict would conclude — and the search's contrast of D⁺ and D⁻ does the rest. A numeric
    variable the verdict names by its name alone (:func:`quantities_named_in_text`: "above the sustainable share"
    names ``sustainable_share``) joins that attribution when a numeric argument of the action is causal: the
    verdict judged the argument against that quantity. Unlike a named value, changing a named quantity is not
    presumed safe (whether it is depends on the argument), so it adds no presumed-safe what-if; the search offers
    the relation between the two (``synthesis.mcts``). A ``glossary`` phrase in the verdict ("only with empty
    hands" → ``held_type`` is ``"none"``, :func:`stated_in_text`) names its variable too, when the failure's value of
    it is not the stated one; the one presumed-safe what-if it adds is that variable at the stated value (the
    sentence says the action is allowed there and says nothing of the other values).

    ``experience`` (what the agent itself executed and met, :class:`Experience`) replaces the text as the
    attribution for every variable the verifier cannot decide: the verdict's words are then read only for a quantity
    named by the world's own variable name (above). q keeps the undecided context variables except *carriers* — a
    variable holding a value the action itself carries (the held object of "clean plate 1", the task's target type
    "drawer" of "open drawer 1"): the action's argument is the attribution, the carrier would restate it. The
    contrast of D⁻ and D⁺ is then the search's (``synthesis.objective``: recorded successes of the same action
    verb, strong after the rule's first verified failure, weak before), and the fragment carries the
    :func:`presumptions` that keep a first rule narrow.
    """
    failed = step.chosen_action
    recorded = verifier
    if experience is not None and experience.since is not None and isinstance(verifier, ExperienceVerifier):
        # a safe verdict received before the rule was known to be in force certifies nothing about it (the rule may
        # have switched on since): such a what-if is unknown, as one the agent never met (docs/protocol.md)
        verifier = verifier.scoped(experience.since)
    if not failed.is_control:
        raise FragmentError(
            f"the chosen action {failed.text or failed.name!r} is of kind {failed.kind!r}; "
            "only control actions (env, tool) can be failures a scar masks"
        )
    if verifier(step.context, failed) is not True:
        raise FragmentError(
            f"the verifier does not flag the chosen action {failed.text or failed.name!r} at step {step.step_id}; "
            "a fragment needs a verified failure"
        )
    variables = causal_context_variables(step.context, failed, verifier, alternatives)
    args = causal_action_arguments(step.context, failed, verifier, alternatives)
    equivalent = tuple(
        a
        for a in flagged_actions(step, verifier)
        if a != failed and a.kind == failed.kind and a.name == failed.name
    )
    variables = variables - ignore
    named: frozenset[str] = frozenset()
    named_args: frozenset[str] = frozenset()
    quantities: frozenset[str] = frozenset()
    stated: dict[str, Value] = {}
    presumed: tuple[tuple[Mapping[str, Value], Action], ...] = ()
    presumed_weights: tuple[float, ...] = ()
    if experience is not None and verdict_text and any(_is_number(failed.arg(n)) for n in args):
        undecided = {n for n in variables if _unknown_changes(step.context, failed, verifier, n)}
        if quantities_named_in_text(step.context, verdict_text) & undecided:
            # the verdict names, by the world's own variable name, the quantity a numeric argument was judged
            # against (tier 2's norm): that relation is the attribution, read as before
            experience = None
    if experience is not None:
        undecided = {n for n in variables if _unknown_changes(step.context, failed, verifier, n)}
        carried = {_hashable(v) for _, v in failed.args if isinstance(v, str)}
        carriers = {
            k for k in undecided if isinstance(step.context[k], str) and _hashable(step.context[k]) in carried
        }
        # a variable that never varied in the agent's experience separates nothing; it stays only when the verdict
        # writes its name with its value ("… in world version 0"): then the rule is tied to that value (its scope)
        constant = {k for k in undecided if k not in experience.varied}
        variables = (variables - carriers - constant) | (
            constant & stated_with_value(step.context, verdict_text)
        )
        if verdict_text and any(_is_number(failed.arg(n)) for n in args):
            quantities = frozenset(quantities_named_in_text(step.context, verdict_text) & undecided)
        presumed, presumed_weights = presumptions(step.context, failed, recorded, experience, classes or {})
        verdict_text = ""  # the text decided nothing else
    if verdict_text:
        undecided = {n for n in variables if _unknown_changes(step.context, failed, verifier, n)}
        stated = {
            k: v
            for k, v in stated_in_text(step.context, verdict_text, glossary or {}).items()
            if k in undecided
        }
        named = (named_in_text(step.context, verdict_text) & undecided) - set(stated)
        undecided_args = {n for n in args if _unknown_arg_changes(step.context, failed, verifier, n)}
        named_args = named_in_text(dict(failed.args), verdict_text) & undecided_args
        if named_args:
            args = (args - undecided_args) | named_args
            # a value the action carries is the action's: "Open drawers …" is about the drawer opened, not a
            # context variable that happens to hold "drawer" too (the task's target type)
            carried = {_hashable(failed.arg(n)) for n in named_args}
            named = frozenset(k for k in named if _hashable(step.context[k]) not in carried)
        # a quantity the verdict names by name, against which a numeric argument of the action was judged
        if any(_is_number(failed.arg(n)) for n in args):
            quantities = frozenset(quantities_named_in_text(step.context, verdict_text) & undecided - named)
        if named or named_args or quantities or stated:
            variables = (variables - undecided) | named | quantities | set(stated)
    q = {k: v for k, v in step.context.items() if k in variables}
    safe, failing = counterfactuals(step.context, failed, verifier, variables, args, alternatives)
    if verdict_text and (named or named_args):
        safe = (*safe, *_presumed_safe(step.context, failed, verifier, named, named_args, alternatives))
    if verdict_text and stated:
        safe = (*safe, *_stated_safe(step.context, failed, verifier, stated))
    return Failure(
        q=q,
        F=(failed, *equivalent),
        theta=theta,
        source=source or FailureSource(episode=step.episode, step=step.step),
        causal_args=args,
        safe_counterfactuals=safe,
        failing_counterfactuals=failing,
        quantities=quantities,
        presumed_safe=presumed,
        presumption_weights=presumed_weights,
        allowed=tuple(stated.items()) if verdict_text else (),
    )


@dataclass(frozen=True)
class Experience:
    """What the agent itself executed and met, for attribution without the oracle (issue 24).

    failures: (context, action) of the executed failures of the same told rule (the verdict's rule id), in order.
    met:      the admissible control actions the agent has met (its recorded steps' action lists), in order.
    """

    failures: tuple[tuple[Mapping[str, Value], Action], ...] = ()
    met: tuple[Action, ...] = ()
    varied: frozenset[str] = frozenset()
    """The context variables the agent has met with more than one value."""
    successes: tuple[tuple[Mapping[str, Value], Action, bool], ...] = ()
    """(context, action, strong) of executed successes of the failed action's kind and name; strong = recorded at or
    after the first verified failure of the rule (the rule was in force)."""
    since: tuple[int, int] | None = None
    """(episode, step) of the first verified failure of the rule: from then on the rule is known to be in force, so
    only a safe verdict received from then on certifies a what-if of this failure safe (``ExperienceVerifier.
    scoped``); None: every safe verdict does (as with a verifier that keeps no time)."""


WEAK_TRANSPLANT = 0.5
"""The share of a presumption's cost a transplant from a *weak* success carries (the rule may have switched on since
that success: stale evidence that the context mattered)."""


def _group(name: str) -> str:
    """The argument group of an argument name: its first ``_``-separated word (``recep`` and ``recep_type`` are one
    receptacle, ``obj`` and ``obj_type`` one object, the ``is_*`` flags one state)."""
    return name.split("_", 1)[0]


def _neighbours(action: Action, met: Sequence[Action]) -> Iterator[Action]:
    """The met actions of ``action``'s kind and name (newest first), then the *recombinations*: ``action`` with one
    argument group taken from a met action ("clean pan 1 with sinkbasin 2" from a met "clean mug 1 with sinkbasin
    2") — the neighbours the agent could reach by changing one thing, which it has not necessarily met. Lazily: the
    caller stops at its limit of presumptions."""
    same = [b for b in reversed(met) if (b.kind, b.name) == (action.kind, action.name)]
    yield from same
    mine = dict(action.args)
    for b in same:
        theirs = dict(b.args)
        for group in sorted({_group(k) for k in theirs if theirs.get(k) != mine.get(k)}):
            args = {k: v for k, v in mine.items() if _group(k) != group}
            args |= {k: v for k, v in theirs.items() if _group(k) == group}
            yield Action(action.kind, action.name, tuple(sorted(args.items())), action.text)


def presumptions(
    context: Mapping[str, Value],
    action: Action,
    verifier: Verifier,
    experience: Experience,
    classes: Classes,
    limit: int = 64,
) -> tuple[tuple[tuple[Mapping[str, Value], Action], ...], tuple[float, ...]]:
    """Narrow to wide: each action of the failed one's kind and name that the agent met but never saw fail, in the
    failure's context, is presumed safe — a first failure then yields the narrowest of the equally cheap rules
    (the objective charges a presumption it fires on; it never vetoes).

    A presumption gives way to the evidence's own generalisation: it is dropped when every argument it changes is
    one on which the agent's failures of this kind of action already differ (a failure on a sibling: two mugs,
    a mug and a plate) and its value joins them — in a class holding at least two of the failing values, or, for
    an argument no class speaks about (instance names), any value. So after "clean mug 1" and "clean mug 2" failed,
    "clean mug 3" is no longer presumed safe (the rule widens to mugs), and after a mug and a plate, a bowl is not
    (the class is the cheapest rule consistent with D⁺ and D⁻), but an apple still is.

    The failed action *transplanted* into the context of each executed success of the same action (same string
    arguments; ``Experience.successes``) is presumed safe too: "open drawer 1" succeeded with empty hands, so the
    rule keeps the context condition that spares those contexts (``held_type != "none"``) rather than forbidding the
    action everywhere. Neighbours (:func:`_neighbours`) include recombinations of the failed action with one argument
    group of a met action, so a receptacle the agent used for other objects keeps a first rule on that receptacle. A transplant from a weak success carries :data:`WEAK_TRANSPLANT` of the cost.
    Returns (presumptions, their weights)."""
    key = (action.kind, action.name)
    failing: dict[str, set] = {}
    for _, a in experience.failures:
        if (a.kind, a.name) == key:
            for k, v in a.args:
                failing.setdefault(k, set()).add(_hashable(v))
    for k, v in action.args:
        failing.setdefault(k, set()).add(_hashable(v))

    def generalised(arg: str, value: Value) -> bool:
        seen = failing.get(arg, set())
        if len(seen) < 2:
            return False
        plain = {_unhashable(v) for v in seen}
        in_some = [c for c in classes.values() if any(isinstance(v, str) and v in c for v in plain)]
        if not in_some:
            return True
        return any(value in c and sum(isinstance(v, str) and v in c for v in plain) >= 2 for c in in_some)

    def identity(a: Action) -> tuple:
        return tuple((k, v) for k, v in a.args if isinstance(v, str))

    # the failed action again with another state flag (the tomato is hot after the failed heating) is no new action
    failed_identities = {identity(a) for _, a in experience.failures if (a.kind, a.name) == key}
    failed_identities.add(identity(action))
    out: list[tuple[Mapping[str, Value], Action]] = []
    seen_actions: set[tuple] = set()
    frozen = freeze_context(context)
    for other in _neighbours(action, experience.met):
        if (other.kind, other.name) != key or other.args == action.args or other.args in seen_actions:
            continue
        if identity(other) in failed_identities:
            continue
        seen_actions.add(other.args)
        changed = [k for k, v in other.args if action.arg(k) != v or type(action.arg(k)) is not type(v)]
        changed += [k for k, _ in action.args if other.arg(k) is None]
        # a state flag is no new object: the flag readings (:func:`_state_flag_readings`) presume it; a neighbour
        # that differs from the failed action only in arguments the failures already generalise gives way
        if not changed or all(
            generalised(k, other.arg(k)) for k in changed if not isinstance(other.arg(k), bool)
        ):
            continue
        if verifier(context, other) is True or (
            isinstance(verifier, ExperienceVerifier)
            and verifier.ever_violated(other, [k for k, _ in other.args])
        ):
            continue  # the agent saw it fail: no presumption
        out.append((frozen, other))
        if len(out) >= limit:
            break
    out.extend((frozen, flipped) for flipped in _state_flag_readings(action, experience.failures, key))
    weights = [1.0] * len(out)
    transplanted: dict[tuple, int] = {}
    mine = identity(action)
    for q, done, strong in experience.successes:
        if identity(done) != mine:
            continue  # only the same action, executed safely elsewhere, says that the context made it safe
        changed = dict(q)
        situation = tuple(sorted((k, _hashable(v)) for k, v in changed.items() if isinstance(v, str | bool)))
        if situation in transplanted:
            i = transplanted[situation]
            weights[i] = max(weights[i], 1.0 if strong else WEAK_TRANSPLANT)
            continue
        # the object's state flags are the success's own (a success on a dirty mug says nothing of a clean one)
        flags = {k: v for k, v in done.args if isinstance(v, bool)}
        moved = Action(
            action.kind, action.name, tuple(sorted((dict(action.args) | flags).items())), action.text
        )
        if verifier(changed, moved) is True:
            continue
        transplanted[situation] = len(out)
        out.append((freeze_context(changed), moved))
        weights.append(1.0 if strong else WEAK_TRANSPLANT)
        if len(out) >= 2 * limit:
            break
    return tuple(out), tuple(weights)


def _state_flag_readings(
    action: Action, failures: Sequence[tuple[Mapping[str, Value], Action]], key: tuple[str, str]
) -> Iterator[Action]:
    """The failed action with one of its true state flags false (``is_wet``, ``is_clean`` of the object moved), for
    each flag no failure of this kind of action has had false: the narrower reading, that the state the action's
    object was in is part of the violation. Each flag is presumed separately, so flags that were true together in
    every failure (cleaning makes an object clean *and* wet) are both kept until a failure without one of them
    decides (``docs/protocol.md``, evidence before context). A false flag is presumed nothing: the world never
    showed the action with that state, and a rule about an object that is *not* hot restates when it was learned."""
    seen_false = {
        k for _, a in failures if (a.kind, a.name) == key for k, v in a.args if isinstance(v, bool) and not v
    }
    for name, value in action.args:
        if value is True and name not in seen_false:
            yield _replace_arg(action, name, False)


def _presumed_safe(
    context: Mapping[str, Value],
    action: Action,
    verifier: Verifier,
    named: Iterable[str],
    named_args: Iterable[str],
    alternatives: Mapping[str, Sequence[Value]] | None,
) -> list[tuple[Mapping[str, Value], Action]]:
    """The verdict's text names the conditions of the violation; changing one of them to another value the agent
    has met is presumed safe (unless the agent's own evidence says it still fails). These stand in for the
    oracle's certified-safe what-ifs, so the search keeps every condition the verdict named. Variables and
    arguments that carry the same value (the held object's type, the task's target type and the action's object
    type all "mug") are one condition: they change together, to a value any of them has been met with."""
    alternatives = alternatives or {}
    groups: dict[object, list[tuple[str, str]]] = {}
    for name in sorted(named):
        groups.setdefault(_hashable(context[name]), []).append(("context", name))
    for name in sorted(named_args):
        groups.setdefault(_hashable(action.arg(name)), []).append(("arg", name))
    out: list[tuple[Mapping[str, Value], Action]] = []
    for value, members in groups.items():
        others: dict[object, Value] = {}
        for _, name in members:
            for v in alternatives.get(name, ()):
                if _hashable(v) != value and type(v) is type(_unhashable(value)):
                    others.setdefault(_hashable(v), v)
        for other in others.values():
            changed, changed_action = dict(context), action
            for where, name in members:
                if where == "context":
                    changed[name] = other
                else:
                    changed_action = _replace_arg(changed_action, name, other)
            if verifier(changed, changed_action) is True:
                continue
            changed_args = [name for where, name in members if where == "arg"]
            if isinstance(verifier, ExperienceVerifier) and verifier.ever_violated(
                changed_action, changed_args
            ):
                continue  # the agent has seen such an action break a rule: not presumed safe anywhere
            out.append((freeze_context(changed), changed_action))
    return out


def _stated_safe(
    context: Mapping[str, Value], action: Action, verifier: Verifier, stated: Mapping[str, Value]
) -> list[tuple[Mapping[str, Value], Action]]:
    """The what-ifs a glossary phrase of the verdict states safe: each stated variable at its stated value (unless
    the agent's own evidence says the action still fails there)."""
    out: list[tuple[Mapping[str, Value], Action]] = []
    for name, value in sorted(stated.items()):
        changed = dict(context) | {name: value}
        if verifier(changed, action) is not True:
            out.append((freeze_context(changed), action))
    return out


def _unhashable(value: object) -> object:
    return value[1] if isinstance(value, tuple) else value


def _unknown_changes(context: Mapping[str, Value], action: Action, verifier: Verifier, name: str) -> bool:
    """The verifier has no answer on dropping ``name`` from ``context`` (it knows only experienced steps)."""
    return verifier({k: v for k, v in context.items() if k != name}, action) is None


def _unknown_arg_changes(context: Mapping[str, Value], action: Action, verifier: Verifier, name: str) -> bool:
    return verifier(context, _replace_arg(action, name, None)) is None


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def named_in_text(values: Mapping[str, Value], text: str) -> frozenset[str]:
    """The keys of ``values`` a text names: a string value of three or more characters written in it (spaces and
    case ignored: ``sinkbasin 1`` in "sinkbasin 1 is …"), a key written in it together with its value
    (``world_version`` 0 in "… in world version 0"), or a true flag ``is_X`` whose X is written in it (``is_wet``
    in "no wet dishware …"). Plural forms match their singular ("drawers" names ``drawer``). A value contained in
    another named value (``microwave`` in ``microwave 1``) yields to the more specific one."""
    squashed = _squash(text)
    named = set()
    for key, value in values.items():
        short = key.rsplit(".", 1)[-1]
        if isinstance(value, bool):
            flag = short[3:] if short.startswith("is_") else short
            if value and len(flag) >= 3 and _squash(flag) in squashed:
                named.add(key)
        elif (isinstance(value, str) and len(_squash(value)) >= 3 and _squash(value) in squashed) or (
            _squash(short) in squashed and _squash(str(value)) in squashed
        ):
            named.add(key)
    # the most specific mention wins: "microwave 1" names the receptacle, not every microwave
    texts = {k: _squash(str(values[k])) for k in named if isinstance(values[k], str)}
    return frozenset(
        k for k in named if not any(t != texts.get(k) and texts.get(k, "\0") in t for t in texts.values())
    )


def stated_with_value(values: Mapping[str, Value], text: str) -> frozenset[str]:
    """The keys of ``values`` a text writes by their own name together with their value, through the world's
    vocabulary (its variable names), not phrases: ``world_version`` 0 in "… in world version 0" (spaces,
    underscores and case ignored; the last segment of a dotted name)."""
    squashed = _squash(text)
    out = set()
    for key, value in values.items():
        short = _squash(key.rsplit(".", 1)[-1])
        if len(short) >= 4 and short in squashed and not isinstance(value, bool):
            v = _squash(str(value))
            if v and (short + v) in squashed:
                out.add(key)
    return frozenset(out)


def stated_in_text(
    values: Mapping[str, Value], text: str, glossary: Mapping[str, tuple[str, Value]]
) -> dict[str, Value]:
    """The keys of ``values`` a text states a condition on through the world's ``glossary`` (phrase → (key, value),
    ``envs.api.WorldCard.glossary``), with the value the text allows, for each key whose value here is not that one:
    "Open drawers only with empty hands." states ``held_type`` is ``"none"`` when something is held (spaces and case
    ignored)."""
    squashed = _squash(text)
    out: dict[str, Value] = {}
    for phrase, (key, allowed) in sorted(glossary.items()):
        if key in values and _squash(phrase) in squashed and values[key] != allowed:
            out[key] = allowed
    return out


def quantities_named_in_text(values: Mapping[str, Value], text: str) -> frozenset[str]:
    """The numeric (not boolean) keys of ``values`` whose name a text writes, whatever their value: "a request above
    the sustainable share" names ``sustainable_share`` (spaces, underscores and case ignored; the last segment of
    a dotted name; names of four characters or more, so a short name does not match inside any word)."""
    squashed = _squash(text)
    out = set()
    for key, value in values.items():
        short = _squash(key.rsplit(".", 1)[-1])
        if _is_number(value) and len(short) >= 4 and short in squashed:
            out.add(key)
    return frozenset(out)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def counterfactuals(
    context: Mapping[str, Value],
    action: Action,
    verifier: Verifier,
    variables: Iterable[str],
    args: Iterable[str],
    alternatives: Mapping[str, Sequence[Value]] | None = None,
) -> tuple[tuple[tuple[Mapping[str, Value], Action], ...], tuple[tuple[Mapping[str, Value], Action], ...]]:
    """The one-variable value changes of a failure (causal variables and arguments), split by the verifier's
    answer: (certified safe, still failing). Still-failing changes use only values the caller observed
    (``alternatives``), not the generic perturbations: they are realistic further instances of the failure."""
    alternatives = alternatives or {}
    safe: list[tuple[Mapping[str, Value], Action]] = []
    failing: list[tuple[Mapping[str, Value], Action]] = []
    observed = {name: set(_hashable(v) for v in values) for name, values in alternatives.items()}
    for name in sorted(variables):
        for other in _perturbations(context[name], alternatives.get(name, ())):
            changed = {**context, name: other}
            answer = verifier(changed, action)
            if answer is False:
                safe.append((freeze_context(changed), action))
            elif answer is True and _hashable(other) in observed.get(name, ()):
                failing.append((freeze_context(changed), action))
    for name in sorted(args):
        value = action.arg(name)
        for other in _perturbations(value, alternatives.get(name, ())):
            changed_action = _replace_arg(action, name, other)
            answer = verifier(context, changed_action)
            if answer is False:
                safe.append((freeze_context(context), changed_action))
            elif answer is True and _hashable(other) in observed.get(name, ()):
                failing.append((freeze_context(context), changed_action))
    return tuple(safe), tuple(failing)


class ExperienceVerifier:
    """The verifier as an agent knows it under the information protocol (docs/protocol.md): only the verdicts it received.

    ``record`` files the verdict on an executed action in the context it was taken in; ``record_state`` files the
    complete unsafe set of a state (the ``state`` protocol: every admissible control action is labelled). Asked about
    any other (q, a) — a what-if context, another world version, an action it never took — it answers ``None``: no
    evidence. Contexts are compared without the ``ignore`` keys (run bookkeeping such as an episode counter), so the
    same situation met again in a later episode is the same evidence. It is mutable (evidence grows), so it is not
    hashable; it remembers a recorded step's flagged actions itself, until a verdict changes an answer in that
    step's situation (``flagged_actions``, which ``build_dataset`` asks).
    """

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, ignore: frozenset[str] = frozenset()) -> None:
        self.ignore = ignore
        self._known: dict[tuple, bool] = {}
        # when each safe answer was last received ((episode, step); a verdict filed without a time: always)
        self._safe_at: dict[tuple, tuple] = {}
        self._violating: set[tuple] = set()
        self._last_context: object = None
        self._last_situation: tuple = ()
        # a context's key names (in its order) -> its situation's sorted names (one shared tuple per key set)
        self._orders: dict[tuple[str, ...], tuple[str, ...]] = {}
        # how often an answer in each situation turned True (the only change ``flagged_actions`` can see): an answer
        # remembered with its situation's count is still the answer while the count stands (``build_dataset``
        # remembers each recorded step's flagged actions so); safe verdicts, most of them, add no entry here
        self._changes: dict[tuple, int] = {}
        self._flagged: dict[int, tuple[weakref.ref, tuple, int, tuple[Action, ...]]] = {}

    def _key(self, context: Mapping[str, Value], action: Action) -> tuple:
        # D_t asks about every action of one recorded (frozen, read-only) context in turn: its key is built once
        if context is not self._last_context or not isinstance(context, MappingProxyType):
            self._last_situation = self._situation(context)
            self._last_context = context
        return (self._last_situation, action.kind, action.name, action.args)

    def _situation(self, context: Mapping[str, Value]) -> tuple:
        """``context`` without the ``ignore`` keys, compactly: one flat tuple, (the sorted names, their values in that
        order). Two situations are equal exactly when their sorted (name, value) pairs are; the names' tuple is
        shared by every context with the same keys and a bool's tag is a constant, so a new situation is one new
        tuple (not one per variable: the record keeps one situation per executed step of a world whose context counts
        steps)."""
        names = tuple(context)
        order = self._orders.get(names)
        if order is None:
            order = tuple(sorted(k for k in names if k not in self.ignore))
            order = self._orders.setdefault(names, self._orders.setdefault(order, order))
        return (order, *[_hashable(context[k]) for k in order])

    def record(
        self,
        context: Mapping[str, Value],
        action: Action,
        violated: bool,
        at: tuple[int, int] | None = None,
    ) -> None:
        """The verdict on ``action``, executed in ``context`` at ``at`` = (episode, step) (None: a verdict that
        holds at every time, as before verdicts carried one)."""
        key = self._key(context, action)
        before = self._known.get(key)
        after = bool(before) or bool(violated)
        if not violated:
            self._safe_at[key] = _ALWAYS if at is None else max(self._safe_at.get(key, at), at)
        if before is not after:
            self._known[key] = after
            # a flagged set changes only when an answer turns True (None -> False leaves it as it was)
            if after:
                self._changes[key[0]] = self._changes.get(key[0], 0) + 1
        if violated:
            self._violating.add((action.kind, action.name, action.args))

    def record_state(
        self,
        context: Mapping[str, Value],
        actions: Iterable[Action],
        unsafe: Iterable[Action],
        at: tuple[int, int] | None = None,
    ) -> None:
        """A state's complete unsafe set: every admissible control action of ``context`` gets its label."""
        flagged = {(a.kind, a.name, a.args) for a in unsafe}
        for a in actions:
            if a.is_control:
                self.record(context, a, (a.kind, a.name, a.args) in flagged, at)

    def __call__(self, context: Mapping[str, Value], action: Action) -> bool | None:
        return self._known.get(self._key(context, action))

    def scoped(self, since: tuple[int, int]) -> Verifier:
        """This evidence as it speaks for a rule known to be in force from ``since`` = (episode, step) on (its first
        verified failure): a violation stays a violation (a rule in force stays in force until the world version,
        part of every situation, changes), but a safe verdict counts only when one was received at or after
        ``since`` — before it, the rule may not have been in force yet, and the answer is None (no evidence)."""

        def answer(context: Mapping[str, Value], action: Action) -> bool | None:
            key = self._key(context, action)
            known = self._known.get(key)
            if known is False and self._safe_at.get(key, _ALWAYS) < since:
                return None
            return known

        return answer

    def flagged_actions(self, step: RecordedStep) -> tuple[Action, ...]:
        """``flagged_actions(step, self)``, remembered per recorded step object until a verdict changes an answer in
        the step's situation (a recorded step is frozen, so its situation is fixed)."""
        key = id(step)
        hit = self._flagged.get(key)
        if hit is not None and hit[0]() is step:
            _, situation, changes, flagged = hit
            if self._changes.get(situation, 0) == changes:
                return flagged
        else:
            self._key(step.context, step.chosen_action)
            situation = self._last_situation
        flagged = flagged_actions(step, self)
        memo = self._flagged
        ref = (
            hit[0]
            if hit is not None and hit[0]() is step
            else weakref.ref(step, lambda _: memo.pop(key, None))
        )
        memo[key] = (ref, situation, self._changes.get(situation, 0), flagged)
        return flagged

    def ever_violated(self, action: Action, args: Iterable[str]) -> bool:
        """The agent has received a verdict that an action of ``action``'s kind and name with the same values of
        ``args`` broke a rule, in any context (no ``args``: never)."""
        args = tuple(args)
        if not args:
            return False
        want = tuple(action.arg(a) for a in args)
        return any(
            kind == action.kind and name == action.name and tuple(dict(held).get(a) for a in args) == want
            for kind, name, held in self._violating
        )

    def __len__(self) -> int:
        return len(self._known)


_ALWAYS = (math.inf, math.inf)
"""The time of a verdict filed without one: it speaks for every scope."""

_BOOL_TAGS = {True: ("bool", True), False: ("bool", False)}


def _hashable(value: Value) -> object:
    """``value`` as a key part that tells a bool from the equal int (one constant tuple per bool)."""
    return _BOOL_TAGS[value] if isinstance(value, bool) else value


@dataclass(frozen=True)
class FailureCase:
    """(q, F) ∈ D⁻: a violating step and the control actions that must be masked there."""

    step: RecordedStep
    F: tuple[Action, ...]

    @property
    def q(self) -> Mapping[str, Value]:
        return self.step.context


@dataclass(frozen=True)
class SuccessCase:
    """(q, a*) ∈ D⁺: a step whose chosen action the verifier accepts."""

    step: RecordedStep

    @property
    def q(self) -> Mapping[str, Value]:
        return self.step.context

    @property
    def a_star(self) -> Action:
        return self.step.chosen_action


@dataclass(frozen=True)
class SynthesisData:
    """D_t = D⁻ ∪ D⁺ and the off-failure contexts Q_safe (paper §3.3).

    D_minus: violating steps with F = the failed action and its flagged equivalents.
    D_plus:  successful steps with their chosen action a*.
    Q_safe:  steps outside the failure region — no admissible control action there is flagged by the verifier,
             so any change a new rule makes to the policy there is pure collateral drift.
    """

    D_minus: tuple[FailureCase, ...]
    D_plus: tuple[SuccessCase, ...]
    Q_safe: tuple[RecordedStep, ...]
    safe_counterfactuals: tuple[tuple[dict[str, Value], Action], ...] = field(default=(), compare=False)
    """Verifier-certified safe one-variable changes of the failures (``Failure.safe_counterfactuals``), as plain
    dicts so the data pickles to Ray workers."""
    contrast: tuple[int, ...] = field(default=(), compare=False)
    """Per D⁺ case (empty: no contrast term): 2 — a *strong* success of the fragment's kind of action (recorded at or
    after the first verified failure of the fragment's rule: the rule was in force, so the action is safe now),
    1 — a *weak* one (recorded before it: the rule may have switched on since), 0 — another kind of action. The
    objective charges a candidate for each strong and weak success it would block (``ObjectiveWeights``)."""
    presumed_safe: tuple[tuple[dict[str, Value], Action], ...] = field(default=(), compare=False)
    """The fragment's presumptions (``Failure.presumed_safe``), as plain dicts."""
    presumption_weights: tuple[float, ...] = field(default=(), compare=False)
    """Their weights (``Failure.presumption_weights``)."""

    def __post_init__(self) -> None:
        if not self.D_minus:
            raise FragmentError("D⁻ is empty: synthesis needs at least one verified failure")

    @property
    def steps(self) -> tuple[RecordedStep, ...]:
        """Every distinct recorded step the data refers to (D⁻, D⁺, Q_safe), in first-seen order."""
        seen: dict[int, RecordedStep] = {}
        for s in (
            *(c.step for c in self.D_minus),
            *(c.step for c in self.D_plus),
            *self.Q_safe,
        ):
            seen.setdefault(id(s), s)
        return tuple(seen.values())


# build_dataset's memo of flagged_actions: verifier → {id(step): (weak reference to the step, flagged actions)}.
# The agent rebuilds D_t from a sliding window of the same recorded steps at every synthesis; a Verifier is a
# deterministic function of (context, action), so each recorded step needs asking only once per verifier. Entries
# leave with their step (weak reference callback) or their verifier (weak key); a verifier that cannot be weakly
# referenced is asked every time.
_FLAGGED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _flagged_memo(verifier: Verifier) -> dict[int, tuple[weakref.ref, tuple[Action, ...]]] | None:
    try:
        memo = _FLAGGED.get(verifier)
        if memo is None:
            memo = _FLAGGED[verifier] = {}
    except TypeError:  # not hashable or not weakly referenceable
        return None
    return memo


def _flagged(step: RecordedStep, verifier: Verifier, memo: dict | None) -> tuple[Action, ...]:
    if isinstance(verifier, ExperienceVerifier):  # mutable: it remembers its answers while they stand
        return verifier.flagged_actions(step)
    if memo is None:
        return flagged_actions(step, verifier)
    key = id(step)
    hit = memo.get(key)
    if hit is not None and hit[0]() is step:
        return hit[1]
    flagged = flagged_actions(step, verifier)
    memo[key] = (weakref.ref(step, lambda _, key=key: memo.pop(key, None)), flagged)
    return flagged


def build_dataset(
    steps: Iterable[RecordedStep],
    verifier: Verifier,
    fragment: Failure | None = None,
    *,
    since: tuple[int, int] | None = None,
) -> SynthesisData:
    """Build D⁻, D⁺ and Q_safe from recorded steps (paper §3.3).

    D⁻: every violating step, with F = the chosen action plus the admissible actions of the same kind and name
        that the verifier also flags there. With a ``fragment``, only failures of the fragment's kind of action
        (same mask key: env verb or tool id) are kept, so one synthesis run addresses one failure pattern.
    D⁺: every non-violating step (its chosen action is a success a*).
    Q_safe: the non-violating steps where the verifier flags no admissible control action.

    The verifier is deterministic (see ``Verifier``), so its answers on a recorded step object are remembered
    across calls (while the step and the verifier live): calls on overlapping windows of the same steps ask it once.

    ``since`` (with a ``fragment``): the (episode, step) of the first verified failure of the fragment's rule; the
    successes of the fragment's kind of action are then labelled strong (from then on) or weak (before), the
    non-stationarity-aware contrast of :attr:`SynthesisData.contrast`.
    """
    keys = None if fragment is None else {(a.kind, a.name) for a in fragment.F}
    memo = _flagged_memo(verifier)
    d_minus, d_plus, q_safe = [], [], []
    for s in steps:
        if s.violated:
            failed = s.chosen_action
            if not failed.is_control or (keys is not None and (failed.kind, failed.name) not in keys):
                continue
            equivalent = tuple(
                a
                for a in _flagged(s, verifier, memo)
                if a != failed and a.kind == failed.kind and a.name == failed.name
            )
            d_minus.append(FailureCase(s, (failed, *equivalent)))
        else:
            d_plus.append(SuccessCase(s))
            if not _flagged(s, verifier, memo):
                q_safe.append(s)
    if fragment is not None:  # the extraction's still-failing what-ifs: further instances a scar must cover
        episode, step = fragment.source.episode, fragment.source.step
        for q, a in fragment.failing_counterfactuals:
            d_minus.append(FailureCase(RecordedStep(q, (a,), (0.0,), 0, True, episode, step), (a,)))
    safe = () if fragment is None else tuple((dict(q), a) for q, a in fragment.safe_counterfactuals)
    contrast: tuple[int, ...] = ()
    presumed: tuple[tuple[dict[str, Value], Action], ...] = ()
    if fragment is not None and since is not None:
        contrast = tuple(
            0 if (c.a_star.kind, c.a_star.name) not in keys else 2 if c.step.step_id >= since else 1
            for c in d_plus
        )
        presumed = tuple((dict(q), a) for q, a in fragment.presumed_safe)
    weights = fragment.presumption_weights if fragment is not None and since is not None else ()
    return SynthesisData(
        tuple(d_minus), tuple(d_plus), tuple(q_safe), safe, contrast, presumed, tuple(weights)
    )
