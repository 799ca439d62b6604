"""Description length C = λ_tok·tokens + λ_ast·AST nodes + λ_pred·predicates (paper §3.3, SPEC §2)."""

from __future__ import annotations

import pytest

from scars.synthesis.dsl import (
    Lambdas,
    ast_node_count,
    canonical_text,
    cost_breakdown,
    description_length,
    parse_guard,
    parse_rule,
    predicate_count,
    token_count,
)
from scars.synthesis.dsl.parser import lex
from scars.synthesis.errors import ConfigError

PAPER_EXPORT = (
    'if intent_is("database_export") and data_scope_is("internal") and tool_is("send_data") '
    'then forbid_tool_call("send_data")'
)
PAPER_GOVSIM = 'if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")'


def test_dsl_cost_of_the_paper_example_by_hand():
    rule = parse_rule(PAPER_EXPORT)
    # if, 3 × name ( "v" ), 2 × and, then, forbid_tool_call ( "send_data" )
    assert token_count(rule) == 1 + 3 * 4 + 2 + 1 + 4 == 20
    assert ast_node_count(rule) == 6  # Rule, And, 3 predicates, mask
    assert predicate_count(rule) == 3
    assert description_length(rule) == 20 + 6 + 3
    assert description_length(rule, Lambdas(tok=0.5, ast=2.0, pred=0.0)) == 0.5 * 20 + 2.0 * 6


def test_dsl_cost_of_the_govsim_example_by_hand():
    rule = parse_rule(PAPER_GOVSIM)
    # if, pool_resource_level < 20, and, tool_is ( "harvest" ), then, forbid_tool_call ( "harvest" )
    assert cost_breakdown(rule).tokens == 1 + 3 + 1 + 4 + 1 + 4 == len(lex(PAPER_GOVSIM))
    assert cost_breakdown(rule).total == 14 + 5 + 2


def test_dsl_cost_is_measured_on_the_canonical_form():
    messy = parse_rule(
        'if tool_is("harvest") and (pool_resource_level < 20 and tool_is("harvest")) then forbid_tool_call("harvest")'
    )
    assert cost_breakdown(messy) == cost_breakdown(parse_rule(PAPER_GOVSIM))
    assert token_count(messy) == len(lex(canonical_text(messy)))


def test_dsl_parentheses_and_dotted_features_count_as_tokens():
    guard = parse_guard('(a == 1 or in_class(action.obj_type, "dishware")) and b != "x"')
    # ( a == 1 or in_class ( action.obj_type , "dishware" ) ) and b != "x"
    assert token_count(guard) == 1 + 3 + 1 + 6 + 1 + 1 + 3 == 16
    assert ast_node_count(guard) == 5
    assert predicate_count(guard) == 3


def test_dsl_cost_of_a_set_is_the_sum():
    rules = [parse_rule(PAPER_EXPORT), parse_rule(PAPER_GOVSIM)]
    assert description_length(rules) == description_length(rules[0]) + description_length(rules[1])
    assert description_length(iter(rules)) == description_length(rules)
    assert description_length([]) == 0.0


def test_dsl_a_more_specific_guard_costs_more():
    general = parse_rule('if in_class(action.obj_type, "dishware") then forbid_env_action("clean")')
    specific = parse_rule(
        'if action.obj_type == "cup" or action.obj_type == "plate" then forbid_env_action("clean")'
    )
    assert description_length(general) < description_length(specific)


@pytest.mark.parametrize("bad", [{"tok": -1.0}, {"ast": float("nan")}, {"pred": float("inf")}, {"tok": "1"}])
def test_dsl_lambdas_are_validated(bad):
    with pytest.raises(ConfigError):
        Lambdas(**bad)


def test_dsl_lambdas_default_and_frozen():
    lam = Lambdas()
    assert (lam.tok, lam.ast, lam.pred) == (1.0, 1.0, 1.0)
    with pytest.raises(AttributeError):
        lam.tok = 2.0  # type: ignore[misc]


def test_dsl_conjunction_cost_from_the_operands_sizes_equals_the_rules_cost():
    """The search's C (issue 39): a conjunction of canonical pool predicates taken in pool order costs, from its
    operands' kept sizes, exactly what ``canonical_cost`` and ``description_length`` give for the assembled rule — a
    disjunction or a class test among them, one operand or several, every mask kind, other lambdas."""
    import itertools

    from scars.synthesis.dsl import (
        And,
        Compare,
        ForbidEnvAction,
        ForbidToolArg,
        ForbidToolCall,
        InClass,
        Named,
        Or,
        Rule,
        canonical,
    )
    from scars.synthesis.dsl.cost import canonical_cost, conjunction_cost, operand_sizes

    pool = canonical(
        And(
            (
                Compare("action.obj", "==", "mug 1"),
                Named("action_is", "clean"),
                Or((Compare("held_type", "==", "mug"), Compare("held_type", "==", "cup"))),
                InClass("action.obj_type", "dishware"),
                Compare("step", ">=", 3),
            )
        )
    ).operands
    masks = (ForbidEnvAction("clean"), ForbidToolCall("send"), ForbidToolArg("send", "to", "x"))
    for lambdas in (Lambdas(), Lambdas(tok=0.7, ast=1.3, pred=2.1)):
        for k in (1, 2, 3):
            for preds, mask in itertools.product(itertools.combinations(pool, k), masks):
                rule = Rule(preds[0] if k == 1 else And(preds), mask)
                sizes = [operand_sizes(g, k > 1) for g in preds]
                cost = conjunction_cost(mask, sizes, lambdas)
                assert cost == canonical_cost(rule, lambdas) == description_length(rule, lambdas), rule
