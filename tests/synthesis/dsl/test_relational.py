"""Relational predicates ``FEATURE OP FEATURE`` through the DSL: parse/print, canonical form, semantics, cost, the
compiled gate and the merge's co-firing test (docs/dsl.md, "Relational predicates")."""

from __future__ import annotations

import itertools

import pytest

from scars.agents.runtime.control import ControlPlane
from scars.agents.runtime.scar import Scar
from scars.synthesis.dsl import (
    Action,
    Compare,
    CompareFeatures,
    canonical,
    canonical_text,
    description_length,
    parse_guard,
    parse_rule,
    to_text,
    token_count,
)
from scars.synthesis.dsl.cost import ast_node_count, predicate_count
from scars.synthesis.dsl.printer import DSLValueError
from scars.synthesis.dsl.semantics import fires, guard_holds
from scars.synthesis.errors import DSLSyntaxError
from scars.synthesis.merge import can_co_fire

RULE = 'if action.amount > sustainable_share and tool_is("harvest") then forbid_tool_call("harvest")'
TAKE = Action.tool("harvest", amount=6)


def test_a_bare_name_on_the_right_is_a_feature_and_a_quoted_one_a_string():
    assert parse_guard("action.amount > sustainable_share") == CompareFeatures(
        "action.amount", ">", "sustainable_share"
    )
    assert parse_guard('action.amount > "sustainable_share"') == Compare(
        "action.amount", ">", "sustainable_share"
    )
    assert parse_guard("flag == true") == Compare("flag", "==", True)  # keywords stay literals
    rule = parse_rule(RULE)
    assert to_text(rule) == RULE and parse_rule(to_text(rule)) == rule
    assert to_text(parse_guard("a.b <= c.d")) == "a.b <= c.d"


def test_keywords_and_number_words_are_refused_on_the_right_with_a_position():
    with pytest.raises(DSLSyntaxError) as err:
        parse_guard("x < and")
    assert err.value.column == 5
    with pytest.raises(DSLSyntaxError, match="reserved word 'or'"):
        parse_guard("x < a.or")
    with pytest.raises(DSLSyntaxError, match="no NaN or infinity") as err:
        parse_guard("x < inf")
    assert err.value.column == 5
    with pytest.raises(DSLValueError, match="reads as a number"):
        to_text(CompareFeatures("x", "<", "NaN"))
    with pytest.raises(DSLValueError, match="not one of"):
        to_text(CompareFeatures("x", "=<", "y"))
    with pytest.raises(DSLValueError, match="dotted identifier"):
        to_text(CompareFeatures("x", "<", "y z"))


@pytest.mark.parametrize(
    ("q", "action", "holds"),
    [
        ({"sustainable_share": 5.5}, TAKE, True),
        ({"sustainable_share": 6}, TAKE, False),
        ({"sustainable_share": 6.5}, TAKE, False),
        ({}, TAKE, False),  # the context side missing
        ({"sustainable_share": 5}, Action.tool("harvest"), False),  # the action side missing
        ({"sustainable_share": "5"}, TAKE, False),  # not a number
        ({"sustainable_share": True}, Action.tool("harvest", amount=2), False),  # a boolean is no number
        ({"sustainable_share": float("nan")}, TAKE, False),
    ],
)
def test_semantics_is_false_never_an_error_when_a_side_is_missing_or_not_a_number(q, action, holds):
    rule = parse_rule(RULE)
    assert fires(rule, q, action) is holds
    plane = ControlPlane(scars=[Scar(rule)])  # the compiled gate means the same
    assert plane.masked(q, [action]) == [holds]


def test_equality_between_features_never_equates_a_boolean_with_a_number_and_missing_is_unequal():
    eq, ne = parse_guard("action.flag == karma"), parse_guard("action.flag != karma")
    a = Action.tool("t", flag=True)
    assert not guard_holds(eq, {"karma": 1}, a) and guard_holds(ne, {"karma": 1}, a)
    assert guard_holds(eq, {"karma": True}, a) and guard_holds(eq, {"karma": 1.0}, Action.tool("t", flag=1))
    assert not guard_holds(eq, {}, a) and guard_holds(ne, {}, a)  # missing: only != holds, as with a literal
    rules = [Scar(parse_rule(f'if {g} then forbid_tool_call("t")')) for g in ("action.flag == karma",)]
    plane = ControlPlane(scars=rules)
    assert plane.masked({"karma": 1}, [a, Action.tool("t", flag=1)]) == [False, True]


def test_canonical_form_reads_a_relation_from_one_side():
    flipped = parse_rule('if sustainable_share < action.amount then forbid_tool_call("harvest")')
    assert canonical(flipped) == canonical(
        parse_rule('if action.amount > sustainable_share then forbid_tool_call("harvest")')
    )
    assert canonical_text(parse_guard("b >= a")) == "a <= b"
    assert canonical_text(parse_guard("z != action.x")) == "action.x != z"
    # duplicates read from either side collapse; a relation is never merged with a string literal of that name
    assert canonical_text(parse_guard("a < b and b > a")) == "a < b"
    assert canonical_text(parse_guard('a < b and a < "b"')) == 'a < "b" and a < b'
    for op in ("<", "<=", ">", ">=", "==", "!="):  # flipping keeps the meaning on every pair of values
        guard = parse_guard(f"b {op} a")
        for x, y in itertools.product([1, 2, 2.0, True, "2", None], repeat=2):
            q = {k: v for k, v in (("a", x), ("b", y)) if v is not None}
            assert guard_holds(canonical(guard), q, TAKE) == guard_holds(guard, q, TAKE)


def test_a_relation_costs_what_a_literal_comparison_costs():
    relation = parse_rule('if action.amount > sustainable_share then forbid_tool_call("harvest")')
    literal = parse_rule('if action.amount > 10 then forbid_tool_call("harvest")')
    assert description_length(relation) == description_length(literal) == 13.0
    assert (token_count(relation), ast_node_count(relation), predicate_count(relation)) == (9, 3, 1)


def test_the_merge_knows_contradictory_relations_cannot_co_fire_and_stays_sound():
    def rule(guard: str):
        return parse_rule(f'if {guard} then forbid_tool_call("t")')

    assert not can_co_fire(rule("action.x > s"), rule("s >= action.x"))  # flipped: a > b vs a <= b
    assert not can_co_fire(rule("action.x == s"), rule("action.x != s"))
    assert not can_co_fire(rule("action.x < s and action.x >= 10"), rule("s <= 5"))
    assert not can_co_fire(rule("action.x < action.x"), rule("s > 1"))
    assert can_co_fire(rule("action.x > s"), rule("action.x >= s"))
    assert can_co_fire(rule("action.x < s and action.x >= 10"), rule("s <= 11"))
    # sound: whenever two rules fire together on some pair, the structural test says they can
    guards = [f"action.x {op} s" for op in ("<", "<=", ">", ">=", "==", "!=")]
    guards += ["action.x >= 3", "s < 2", "s == 2", "action.x == 2", "s != action.x and s > 1"]
    values = [None, 1, 2, 3, 4.5, "2", True]
    pairs = [
        ({} if s is None else {"s": s}, Action.tool("t") if x is None else Action.tool("t", x=x))
        for s, x in itertools.product(values, repeat=2)
    ]
    for gi, gj in itertools.product(guards, repeat=2):
        ri, rj = rule(gi), rule(gj)
        if any(fires(ri, q, a) and fires(rj, q, a) for q, a in pairs):
            assert can_co_fire(ri, rj), (gi, gj)
