"""Co-firing, structurally (paper §4.3): whether two rules' conjunctive literals (equality, range, class, mask
included) can hold on one (q, a). It prunes candidate pairs before any evaluation."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from scars.synthesis.dsl.ast import (
    FLIPPED_OPS,
    NAMED_PREDICATES,
    And,
    Compare,
    CompareFeatures,
    ForbidEnvAction,
    ForbidToolArg,
    ForbidToolCall,
    Guard,
    InClass,
    Named,
    Rule,
    Value,
)
from scars.synthesis.dsl.semantics import Classes


def _mask_literals(rule: Rule) -> list[tuple[str, str, Value]]:
    """The equalities a candidate action must satisfy for the mask to cover it."""
    match rule.mask:
        case ForbidToolCall(tool_id):
            return [
                ("action.kind", "==", "tool"),
                ("action.name", "==", tool_id),
                ("action.tool", "==", tool_id),
            ]
        case ForbidToolArg(tool_id, arg_name, value):
            return [
                ("action.kind", "==", "tool"),
                ("action.name", "==", tool_id),
                ("action.tool", "==", tool_id),
                (f"action.{arg_name}", "==", value),
            ]
        case ForbidEnvAction(action_id):
            return [
                ("action.kind", "==", "env"),
                ("action.name", "==", action_id),
                ("action.verb", "==", action_id),
            ]
    raise TypeError(f"not an action mask: {rule.mask!r}")


def _conjuncts(guard: Guard) -> list[Guard]:
    """Top-level conjuncts of a guard; an ``or`` is kept whole (and treated as unconstrained)."""
    if isinstance(guard, And):
        out: list[Guard] = []
        for g in guard.operands:
            out.extend(_conjuncts(g))
        return out
    return [guard]


def _literals(
    rule: Rule,
) -> tuple[list[tuple[str, str, Value]], list[tuple[str, str]], list[tuple[str, str, str]]]:
    comparisons = _mask_literals(rule)
    memberships: list[tuple[str, str]] = []
    relations: list[tuple[str, str, str]] = []
    for g in _conjuncts(rule.guard):
        match g:
            case Compare(feature, op, value):
                comparisons.append((feature, op, value))
            case CompareFeatures(feature, op, other):
                # one orientation per pair of features, so `a < b` and `b < a` meet as `a < b`, `a > b`
                relations.append(
                    (feature, op, other) if feature <= other else (other, FLIPPED_OPS[op], feature)
                )
            case Named(name, value):
                comparisons.append((NAMED_PREDICATES[name], "==", value))
            case InClass(feature, class_name):
                memberships.append((feature, class_name))
    return comparisons, memberships, relations


# The outcomes of comparing two numbers (less, equal, greater) an op allows. An ordering op needs numbers; an
# ``==``/``!=`` of non-numbers still excludes its opposite, so intersecting these sets is sound for every value.
_OUTCOMES = {"<": {-1}, "<=": {-1, 0}, ">": {1}, ">=": {0, 1}, "==": {0}, "!=": {-1, 1}}


def _relations_satisfiable(
    relations: Sequence[tuple[str, str, str]], bounds: dict[str, tuple[float, float]]
) -> bool:
    """Can the relational conjuncts hold together, given the numeric range each feature's literals allow?
    Sound for ``False``: ``a < b`` with ``a > b``, ``a == b`` with ``a != b``, or ``a < b`` where the literals
    put every a at or above every b; anything unsure answers True."""
    outcomes: dict[tuple[str, str], set[int]] = {}
    for left, op, right in relations:
        if left == right:
            if op in ("<", ">"):
                return False
            continue
        allowed = outcomes.setdefault((left, right), {-1, 0, 1})
        allowed &= _OUTCOMES[op]
        if not allowed:
            return False
        if left in bounds and right in bounds:
            (lo_a, hi_a), (lo_b, hi_b) = bounds[left], bounds[right]
            impossible = {
                "<": lo_a >= hi_b,
                "<=": lo_a > hi_b,
                ">": hi_a <= lo_b,
                ">=": hi_a < lo_b,
                "==": lo_a > hi_b or lo_b > hi_a,
                "!=": False,
            }[op]
            if impossible:
                return False
    return True


def _is_number(v: object) -> bool:
    return (
        isinstance(v, int | float)
        and not isinstance(v, bool)
        and not (isinstance(v, float) and math.isnan(v))
    )


def _satisfiable(
    comparisons: list[tuple[str, str, Value]],
    memberships: list[tuple[str, str]],
    classes,
    relations: Sequence[tuple[str, str, str]] = (),
) -> bool:
    """Can one value per feature satisfy all these literals (and relations between features)? Sound for
    ``False``: unsure cases answer True."""
    bounds: dict[str, tuple[float, float]] = {}  # the numeric range a feature's literals confine it to
    by_feature: dict[str, list[tuple[str, Value]]] = defaultdict(list)
    for feature, op, value in comparisons:
        by_feature[feature].append((op, value))
    for feature, lits in by_feature.items():
        equal = {(type(v) is bool, v) for op, v in lits if op == "=="}
        if len(equal) > 1:
            return False
        lo, lo_strict, hi, hi_strict = -math.inf, False, math.inf, False
        for op, v in lits:
            if op in ("<", "<=", ">", ">=") and _is_number(v):
                if op in (">", ">=") and (v > lo or (v == lo and op == ">")):
                    lo, lo_strict = v, op == ">"
                if op in ("<", "<=") and (v < hi or (v == hi and op == "<")):
                    hi, hi_strict = v, op == "<"
        ranged = lo > -math.inf or hi < math.inf
        if lo > hi or (lo == hi and (lo_strict or hi_strict)):
            return False
        if ranged:
            bounds[feature] = (lo, hi)
        if equal:
            (_, v) = next(iter(equal))
            if _is_number(v):
                bounds[feature] = (v, v)
            if any(op == "!=" and (type(w) is bool) == (type(v) is bool) and w == v for op, w in lits):
                return False
            if ranged:
                if not _is_number(v):
                    return False
                if v < lo or v > hi or (v == lo and lo_strict) or (v == hi and hi_strict):
                    return False
            for f, cname in memberships:
                members = (classes or {}).get(cname)
                if f == feature and members is not None and v not in members:
                    return False
    if classes:
        by_class_feature: dict[str, list[frozenset]] = defaultdict(list)
        for f, cname in memberships:
            if cname in classes:
                by_class_feature[f].append(frozenset(classes[cname]))
        for sets in by_class_feature.values():
            if not frozenset.intersection(*sets):
                return False
    return _relations_satisfiable(relations, bounds)


def can_co_fire(rule_i: Rule, rule_j: Rule, classes: Classes | None = None) -> bool:
    """Can σ_i and σ_j fire on the same (q, a)? A cheap structural test, sound when it answers ``False``.

    Both rules' masks and the top-level conjuncts of both guards are put together; the pair cannot co-fire when
    those literals demand two different values of one feature (``tool_is("a")`` vs ``tool_is("b")``,
    ``forbid_env_action("clean")`` vs ``forbid_env_action("move")``, ``obj_type == "cup"`` vs ``obj_type ==
    "plate"``), an empty numeric range (``level < 10`` vs ``level > 20``), a value outside a required class, or
    disjoint classes, or relations between features that contradict each other or those ranges
    (``action.amount > share`` vs ``action.amount <= share``). Disjunctions are not analysed (treated as
    satisfiable).
    """
    ci, mi, ri = _literals(rule_i)
    cj, mj, rj = _literals(rule_j)
    return _satisfiable(ci + cj, mi + mj, classes, ri + rj)
