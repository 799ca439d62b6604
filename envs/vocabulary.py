"""The abstract vocabulary: how a scar learned in one world can mean something in another (paper §6.3, tier 3).

A DSL rule is written in its world's surface names: a mask names a tool (``forbid_tool_call("harvest")``), a
comparison names a context key (``pool_resource_level < 20``). Each world's ``WorldCard`` also declares an abstract
vocabulary: the *classes* its tools belong to (``extraction``: the tools that take from a shared resource;
``sanction``: the tools that punish another agent) and the abstract *variable* each context key or action argument
is (``pool_resource_level`` → ``resource_level``, ``action.amount`` → ``extraction_amount``).

``ground(rule, source, target)`` re-expresses a rule of the source world in the target world's names, and it does so
only where every name the rule uses has an abstract meaning the source declares:

* the mask's tool is read through its class: the class a conjunct of the guard pins it to (``in_class(action.tool,
  "extraction")``), or else the one class the source card declares for it (``harvest`` is an ``extraction`` tool) —
  the grounded rules mask every tool of that class in the target (one rule each);
* every context feature and action argument the rule compares must be in the source's ``variables`` and its abstract
  variable must name exactly one feature of the target — both sides of a relation between two features
  (``action.amount > sustainable_share`` → ``action.<the target's extraction_amount> > <its fair_share>``);
* values are carried as they are: numbers and booleans only (a string value is a surface name — a tool, an agent,
  a phase — and has no meaning elsewhere). A threshold keeps its number, in the target's units;
* ``tool_is``/``action_is``/``intent_is``/``data_scope_is`` and comparisons of ``action.tool``/``action.name`` name a
  surface thing: a rule with any of them does not travel.

A rule that does not ground keeps its surface names: carried as it is into a world without its tool, it can never
fire there (its mask covers no action of that world). A scar learned on ``tool_is("harvest")`` or ``phase ==
"harvest"`` stays a scar about the commons; one learned on the resource level and the amount extracted can travel.
"""

from __future__ import annotations

from dataclasses import dataclass

from scars.envs.api import WorldCard
from scars.synthesis.dsl.ast import (
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
)

ACTION_NAME_FEATURES = frozenset({"action.tool", "action.name", "action.verb"})


class NotPortable(Exception):
    """Why a rule cannot be grounded in another world (raised inside ``ground``, returned as its reason)."""


@dataclass(frozen=True)
class Grounding:
    """The target-world rules a source rule grounds to (empty: not portable, and ``reason`` says why)."""

    source: Rule
    rules: tuple[Rule, ...]
    tool_class: str | None
    reason: str = ""

    @property
    def portable(self) -> bool:
        return bool(self.rules)


def _conjuncts(guard: Guard) -> tuple[Guard, ...]:
    return guard.operands if isinstance(guard, And) else (guard,)


def _feature(feature: str, source: WorldCard, target: WorldCard) -> str:
    if feature == "action.kind":
        return feature
    if feature in ACTION_NAME_FEATURES:
        raise NotPortable(f"the guard compares {feature}, a surface name of {source.id}")
    abstract = source.variables.get(feature)
    if abstract is None:
        raise NotPortable(f"{feature} is not in {source.id}'s abstract vocabulary")
    matches = sorted(f for f, a in target.variables.items() if a == abstract)
    if len(matches) != 1:
        raise NotPortable(
            f"{feature} is the abstract variable {abstract!r}, which {target.id} names "
            f"{'nowhere' if not matches else 'ambiguously: ' + ', '.join(matches)}"
        )
    return matches[0]


def _value(value, where: str):
    if isinstance(value, str):
        raise NotPortable(f"{where} compares with the string {value!r}, a surface value")
    return value


def _guard(guard: Guard, source: WorldCard, target: WorldCard) -> Guard:
    match guard:
        case InClass(feature, class_name):
            if class_name not in target.classes:
                raise NotPortable(f"{target.id} declares no class {class_name!r}")
            if feature in ACTION_NAME_FEATURES:
                return guard
            return InClass(_feature(feature, source, target), class_name)
        case Compare(feature, op, value):
            return Compare(_feature(feature, source, target), op, _value(value, feature))
        case CompareFeatures(feature, op, other):  # both sides are names: both must have an abstract meaning
            return CompareFeatures(_feature(feature, source, target), op, _feature(other, source, target))
        case Named(name, value):
            raise NotPortable(f"{name}({value!r}) names a surface thing of {source.id}: a surface-name scar")
        case And(operands):
            return And(tuple(_guard(g, source, target) for g in operands))
        case Or(operands):
            return Or(tuple(_guard(g, source, target) for g in operands))
    raise TypeError(f"not a guard: {guard!r}")


def _mask_name(mask: ActionMask) -> str:
    match mask:
        case ForbidToolCall(tool_id) | ForbidToolArg(tool_id, _, _):
            return tool_id
        case ForbidEnvAction(action_id):
            return action_id
    raise TypeError(f"not an action mask: {mask!r}")


def _mask(mask: ActionMask, member: str, source: WorldCard, target: WorldCard) -> ActionMask:
    match mask:
        case ForbidToolCall(_):
            return ForbidToolCall(member)
        case ForbidToolArg(_, arg_name, value):
            arg = _feature(f"action.{arg_name}", source, target)
            return ForbidToolArg(member, arg.removeprefix("action."), _value(value, f"action.{arg_name}"))
        case ForbidEnvAction(_):
            return ForbidEnvAction(member)
    raise TypeError(f"not an action mask: {mask!r}")


def action_class(rule: Rule, card: WorldCard) -> tuple[str | None, str]:
    """The class of the rule's masked tool: the one a guard conjunct ``in_class(action.tool, K)`` pins it to, or
    else the one class ``card`` declares for it; (None, why) when there is none or more than one."""
    name = _mask_name(rule.mask)
    for g in _conjuncts(rule.guard):
        in_tool_class = isinstance(g, InClass) and g.feature in ACTION_NAME_FEATURES
        if in_tool_class and name in card.classes.get(g.class_name, frozenset()):
            return g.class_name, ""
    declared = sorted(k for k, members in card.classes.items() if name in members)
    if len(declared) == 1:
        return declared[0], ""
    if not declared:
        return None, f"the mask's tool {name!r} belongs to no class of {card.id}'s vocabulary"
    return (
        None,
        f"the mask's tool {name!r} belongs to several classes ({', '.join(declared)}) and the guard pins none",
    )


def ground(rule: Rule, source: WorldCard, target: WorldCard) -> Grounding:
    """``rule`` of ``source`` in ``target``'s names (module docstring): one rule per target tool of its class."""
    tool_class, why = action_class(rule, source)
    if tool_class is None:
        return Grounding(rule, (), None, why)
    members = sorted(target.classes.get(tool_class, frozenset()))
    if not members:
        return Grounding(rule, (), tool_class, f"{target.id} has no tool of class {tool_class!r}")
    try:
        guard = _guard(rule.guard, source, target)
        rules = tuple(Rule(guard, _mask(rule.mask, m, source, target)) for m in members)
    except NotPortable as why:
        return Grounding(rule, (), tool_class, str(why))
    return Grounding(rule, rules, tool_class)
