"""What a rule means on a pair (context q, candidate action a) — paper §3.1, §4.2.

A rule fires on (q, a) iff its mask covers a and its guard holds on (q, a). The masked set of a rule set on q is
U_S(q) = {a ∈ A_ctrl : some rule fires on (q, a)} (SPEC §1). Text and fallback actions are never masked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from scars.synthesis.dsl.ast import (
    NAMED_PREDICATES,
    Action,
    ActionMask,
    And,
    Compare,
    CompareFeatures,
    ForbidEnvAction,
    ForbidToolArg,
    ForbidToolCall,
    Guard,
    InClass,
    Named,
    Or,
    Rule,
    Value,
)

Context = Mapping[str, Value]
Classes = Mapping[
    str, frozenset[str]
]  # class name -> member values, e.g. {"dishware": {"cup", "plate", ...}}

_MISSING = object()
MISSING = _MISSING
"""What ``feature_value`` returns for a feature the pair does not have (compared by identity)."""


def feature_value(feature: str, q: Context, a: Action) -> object:
    """Read a feature: ``action.kind``/``action.name``/``action.tool``/``action.verb``/``action.<arg>`` or ``q[...]``."""
    if feature.startswith("action."):
        part = feature[7:]
        if part == "kind":
            return a.kind
        if part == "name":
            return a.name
        if part == "tool":
            return a.name if a.kind == "tool" else _MISSING
        if part == "verb":
            return a.name if a.kind == "env" else _MISSING
        value = a.arg(part, _MISSING)  # type: ignore[arg-type]
        return value
    return q.get(feature, _MISSING)


def _is_number(x: object) -> bool:
    return (
        isinstance(x, int | float)
        and not isinstance(x, bool)
        and not (isinstance(x, float) and math.isnan(x))
    )


def compare(left: object, op: str, right: Value) -> bool:
    if left is _MISSING:
        return op == "!="
    if op == "==":
        if isinstance(left, bool) or isinstance(right, bool):  # True == 1 must not hold
            return left is right
        return left == right
    if op == "!=":
        return not compare(left, "==", right)
    if not (_is_number(left) and _is_number(right)):
        return False
    if op == "<":
        return left < right  # type: ignore[operator]
    if op == "<=":
        return left <= right  # type: ignore[operator]
    if op == ">":
        return left > right  # type: ignore[operator]
    if op == ">=":
        return left >= right  # type: ignore[operator]
    raise ValueError(f"unknown comparison operator {op!r}; expected one of ==, !=, <, <=, >, >=")


def compare_features(left: object, op: str, right: object) -> bool:
    """``left op right`` for two read feature values (``MISSING`` when absent). Symmetric in its sides: a missing
    side makes every op false except ``!=`` (as a missing feature against a literal); ``<``/``<=``/``>``/``>=``
    are false unless both sides are numbers (not booleans, not NaN); ``==`` never equates a boolean with a
    number. Never raises for a DSL op."""
    if left is _MISSING or right is _MISSING:
        return op == "!="
    return compare(left, op, right)  # type: ignore[arg-type]


def guard_holds(guard: Guard, q: Context, a: Action, classes: Classes | None = None) -> bool:
    """Evaluate a guard on (q, a). Missing features make a predicate false (except ``!=``)."""
    # The commonest nodes by their exact class first (every caller's inner loop: the planner, the shield, the
    # search's atoms); the same answers, in the same order, as the match below.
    kind = guard.__class__
    if kind is Compare:
        return compare(feature_value(guard.feature, q, a), guard.op, guard.value)  # type: ignore[union-attr]
    if kind is And:
        for g in guard.operands:  # type: ignore[union-attr]  # noqa: SIM110 (no generator per node)
            if not guard_holds(g, q, a, classes):
                return False
        return True
    if kind is Or:
        for g in guard.operands:  # type: ignore[union-attr]  # noqa: SIM110 (no generator per node)
            if guard_holds(g, q, a, classes):
                return True
        return False
    match guard:
        case Compare(feature, op, value):
            return compare(feature_value(feature, q, a), op, value)
        case CompareFeatures(feature, op, other):
            return compare_features(feature_value(feature, q, a), op, feature_value(other, q, a))
        case Named(name, value):
            return compare(feature_value(NAMED_PREDICATES[name], q, a), "==", value)
        case InClass(feature, class_name):
            members = (classes or {}).get(class_name)
            value = feature_value(feature, q, a)
            return members is not None and value is not _MISSING and value in members
        case And(operands):
            return all(guard_holds(g, q, a, classes) for g in operands)
        case Or(operands):
            return any(guard_holds(g, q, a, classes) for g in operands)
    raise TypeError(f"not a guard: {guard!r}")


def mask_covers(mask: ActionMask, a: Action) -> bool:
    """Does the mask apply to this action (ignoring the guard)? Only control actions can be covered."""
    if mask.__class__ is ForbidEnvAction:  # the household's masks: the same answer as the match below
        return a.kind == "env" and a.name == mask.action_id
    match mask:
        case ForbidToolCall(tool_id):
            return a.kind == "tool" and a.name == tool_id
        case ForbidToolArg(tool_id, arg_name, value):
            return a.kind == "tool" and a.name == tool_id and compare(a.arg(arg_name, _MISSING), "==", value)  # type: ignore[arg-type]
        case ForbidEnvAction(action_id):
            return a.kind == "env" and a.name == action_id
    raise TypeError(f"not an action mask: {mask!r}")


def mask_key(mask: ActionMask) -> tuple[str, str]:
    """The (kind, name) an action must have for the mask to cover it: the index key for enforcement."""
    match mask:
        case ForbidToolCall(tool_id) | ForbidToolArg(tool_id, _, _):
            return ("tool", tool_id)
        case ForbidEnvAction(action_id):
            return ("env", action_id)
    raise TypeError(f"not an action mask: {mask!r}")


def fires(rule: Rule, q: Context, a: Action, classes: Classes | None = None) -> bool:
    """σ fires on (q, a): the mask covers a and the guard holds. φ_σ(q, a) = −∞ exactly when this is true."""
    return mask_covers(rule.mask, a) and guard_holds(rule.guard, q, a, classes)


def masked_set(rules, q: Context, actions, classes: Classes | None = None) -> frozenset[Action]:
    """U_S(q) restricted to the given candidate actions."""
    return frozenset(a for a in actions if a.is_control and any(fires(r, q, a, classes) for r in rules))
