"""Consolidation (issue 24 #3): one rule in place of several narrower scars, offered to the merge as a candidate.

The ILP merge (``synthesis.merge``) chooses among the rules it is given; when the agent has learned one scar per
object type (``cup`` in the sink, ``plate`` in the sink, …) the class rule is never among them, so it can never win.
``consolidations`` proposes it: for every group of scars with the same mask it anti-unifies their guards — the
least general generalisation over conjunctions of literals:

* a literal every member has is kept;
* every other literal of every member must survive at some level of its argument (the instance, its type, a class
  of either): a member whose condition no kept literal generalises (``action.obj == "potato 1"`` beside an
  appliance scar that never named the object) would be forgotten, so the group has no consolidation — the lgg of
  "anything in microwave 1" and "potato 1 in any microwave" is "anything in any microwave", wider than either;
* a feature some member compares with ``==`` is read off the group's failures: one value on all of them stays an
  equality, two or more members of one equivalence class become ``in_class(feature, C)`` (the smallest such class of
  the world's), instances no class holds meet at their type (``cabinet 1`` and ``cabinet 2`` at ``recep_type ==
  "cabinet"``);
* any other literal only some members have is dropped.

A candidate is offered only when it (1) masks every failed action of every failure the group covers, (2) masks no
action the agent executed without a verdict since the group's first failure (a recorded success — successes from
before the first failure are weak evidence under a changing rule set and do not veto), (3) keeps a guard (never
"forbid the verb everywhere"), and (4) costs less than the members together (``description_length``). The merge then
decides with the usual objective; the narrower scars it drops are retired with their evidence kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from scars.synthesis.dsl.ast import Action, And, Compare, Guard, InClass, Or, Rule
from scars.synthesis.dsl.canonical import canonical
from scars.synthesis.dsl.cost import description_length
from scars.synthesis.dsl.semantics import MISSING, Classes, Context, feature_value, fires
from scars.synthesis.failure import Failure

MAX_GROUP = 8
"""Groups larger than this are consolidated whole or pairwise only (the pairwise search is quadratic)."""


@dataclass(frozen=True, slots=True)
class Success:
    """An action the agent executed with no verdict: (q, a) and when ((episode, step))."""

    q: Context
    a: Action
    at: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Consolidation:
    """A rule proposed in place of ``members`` (indices into the rules given), with the failures it must cover."""

    rule: Rule
    members: tuple[int, ...]
    failures: tuple[Failure, ...]


def _literals(guard: Guard) -> frozenset[Guard] | None:
    """A conjunction's literals; None for a guard with a disjunction (not anti-unified here)."""
    if isinstance(guard, Or):
        return None
    if isinstance(guard, And):
        out: set[Guard] = set()
        for g in guard.operands:
            sub = _literals(g)
            if sub is None:
                return None
            out |= sub
        return frozenset(out)
    return frozenset({guard})


def _guard(literals: Iterable[Guard]) -> Guard | None:
    items = sorted(set(literals), key=repr)
    if not items:
        return None
    return items[0] if len(items) == 1 else And(tuple(items))


def _smallest_class(values: set, classes: Classes | None) -> str | None:
    """The smallest equivalence class holding every value (ties: by name)."""
    if not classes or not all(isinstance(v, str) for v in values):
        return None
    holding = [(len(members), name) for name, members in classes.items() if values <= set(members)]
    return min(holding)[1] if holding else None


def anti_unify(
    guards: Sequence[Guard],
    classes: Classes | None,
    points: Sequence[tuple[Context, Action]] = (),
) -> list[Guard]:
    """The least general generalisation of ``guards`` (module docstring): a differing equality becomes the smallest
    class holding its values, or is dropped when no class does; empty when no literal is left.

    ``points``: the failed (q, a) the guards cover. With them the generalisation reads the values off the failures
    rather than the guards' syntax, so two scars that name the same thing at different levels — one an instance
    (``action.obj == "plate 1"``), one a type (``action.obj_type == "mug"``) — still meet: every action argument whose
    values over the points are two or more members of one class becomes that class literal — when every guard
    constrains that argument (at either level): a scar that never named the object (``action.recep ==
    "microwave 1"``) says nothing about the object's class, and lifting its failures' objects to a class would
    replace its receptacle with a guess no member made."""
    sets = [_literals(g) for g in guards]
    if any(s is None for s in sets) or len(sets) < 2:
        return []
    literal_sets = [s for s in sets if s is not None]
    common = frozenset.intersection(*literal_sets)
    equalities: dict[str, list] = {}
    for s in literal_sets:
        for lit in s - common:
            if isinstance(lit, Compare) and lit.op == "==":
                equalities.setdefault(lit.feature, []).append(lit.value)
    kept = set(common)
    observed = _point_values(points, set(equalities))
    named = [{_family(lit.feature) for lit in s if isinstance(lit, Compare | InClass)} for s in literal_sets]
    for feature, values in equalities.items():
        if feature in observed:  # a feature some member names: what the failures say about it
            seen = observed[feature]
            if len(seen) == 1:
                kept.add(Compare(feature, "==", next(iter(seen))))
                continue
            if not all(_family(feature) in n for n in named):
                continue  # generalised only where every member constrained it
        elif len(values) != len(literal_sets):
            continue  # not every member constrains this feature by equality
        else:
            seen = set(values)
        name = _smallest_class(seen, classes)
        if name is not None:
            kept.add(InClass(feature, name))
        else:
            kept.update(_type_level(feature, points, classes))
    for feature, values in _argument_values(points).items():
        if not all(_family(feature) in n for n in named):
            continue  # a member that never constrained this argument says nothing about its class
        name = _smallest_class(values, classes) if len(values) >= 2 else None
        if name is not None and not any(isinstance(k, InClass) and k.feature == feature for k in kept):
            kept.add(InClass(feature, name))
    levels = {_family(k.feature) for k in kept if isinstance(k, Compare | InClass)}
    for s in literal_sets:  # generalise, never forget: every member's condition survives at some level
        for lit in s - kept:
            if not (isinstance(lit, Compare | InClass) and _family(lit.feature) in levels):
                return []
    guard = _guard(kept)
    return [] if guard is None else [guard]


def _type_level(
    feature: str, points: Sequence[tuple[Context, Action]], classes: Classes | None
) -> set[Guard]:
    """Instances no class holds (``cabinet 1``, ``cabinet 2``) meet one level up, at their type: its one value
    over the failures (``action.recep_type == "cabinet"``) or the smallest class of its values; nothing when the
    points have no such type feature."""
    if not feature.startswith("action.") or feature.endswith("_type"):
        return set()
    level = f"{feature}_type"
    seen = _point_values(points, {level}).get(level)
    if not seen:
        return set()
    if len(seen) == 1:
        return {Compare(level, "==", next(iter(seen)))}
    name = _smallest_class(seen, classes)
    return {InClass(level, name)} if name is not None else set()


def _family(feature: str) -> str:
    """The argument a feature reads, at any level: ``action.obj`` and ``action.obj_type`` are both ``obj``."""
    return feature.removesuffix("_type")


def _point_values(points: Sequence[tuple[Context, Action]], features: set[str]) -> dict[str, set]:
    """The values of each of ``features`` over the points, for the features every point has."""
    out: dict[str, set] = {}
    for feature in features:
        values = [feature_value(feature, q, a) for q, a in points]
        if values and all(v is not MISSING for v in values):
            out[feature] = set(values)
    return out


def _argument_values(points: Sequence[tuple[Context, Action]]) -> dict[str, set]:
    """Each action argument present on every point, with its values over the points."""
    if not points:
        return {}
    keys = set.intersection(*({k for k, _ in a.args} for _, a in points))
    return {f"action.{k}": {a.arg(k) for _, a in points} for k in sorted(keys)}


def consolidations(
    rules: Sequence[Rule],
    failures: Iterable[Failure],
    successes: Iterable[Success],
    classes: Classes | None = None,
) -> list[Consolidation]:
    """Rules that could replace groups of ``rules`` (module docstring), cheapest first per group."""
    failures = list(failures)
    successes = list(successes)
    covered = [tuple(f for f in failures if any(fires(rule, f.q, a, classes) for a in f.F)) for rule in rules]
    by_mask: dict[object, list[int]] = {}
    for i, rule in enumerate(rules):
        if covered[i]:
            by_mask.setdefault(rule.mask, []).append(i)
    found: dict[Rule, Consolidation] = {}
    for members in by_mask.values():
        if len(members) < 2:
            continue
        groups = [tuple(members)] if len(members) <= MAX_GROUP else []
        groups += [pair for pair in combinations(members, 2) if len(members) > 2]
        for group in groups:
            for c in _candidates(group, rules, covered, successes, classes):
                if c.rule not in found and not any(set(c.members) < set(o.members) for o in found.values()):
                    found[c.rule] = c
    return sorted(found.values(), key=lambda c: (-len(c.members), description_length(c.rule), repr(c.rule)))


def _candidates(
    group: tuple[int, ...],
    rules: Sequence[Rule],
    covered: Sequence[tuple[Failure, ...]],
    successes: Sequence[Success],
    classes: Classes | None,
) -> list[Consolidation]:
    mask = rules[group[0]].mask
    owed = {f.id: f for i in group for f in covered[i]}
    first = min((f.source.episode, f.source.step) for f in owed.values())
    since = [s for s in successes if s.at >= first]
    budget = sum(description_length(rules[i]) for i in group)
    out = []
    points = [(f.q, a) for f in owed.values() for a in f.F]
    for guard in anti_unify([rules[i].guard for i in group], classes, points):
        rule = canonical(Rule(guard, mask))
        if description_length(rule) >= budget:
            continue
        if not all(fires(rule, f.q, a, classes) for f in owed.values() for a in f.F):
            continue
        if any(fires(rule, s.q, s.a, classes) for s in since):
            continue
        out.append(Consolidation(rule, group, tuple(owed.values())))
    return out


def successes_of(steps: Iterable) -> list[Success]:
    """The recorded successes D⁺ of ``synthesis.fragments.RecordedStep``s: the executed action of every step the
    verifier did not flag (control actions only: text is never masked)."""
    out = []
    for step in steps:
        if step.violated or step.chosen < 0:
            continue
        a = step.actions[step.chosen]
        if a.kind not in ("env", "tool"):
            continue
        out.append(Success(step.context, a, (step.episode, step.step)))
    return out
