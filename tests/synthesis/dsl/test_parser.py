"""Parser and printer of the patch DSL (SPEC §2): the paper's rules, precedence, literals, error positions."""

from __future__ import annotations

import pytest

from scars.synthesis.dsl import (
    And,
    Compare,
    DSLValueError,
    ForbidEnvAction,
    ForbidToolArg,
    ForbidToolCall,
    InClass,
    Named,
    Or,
    Rule,
    parse_guard,
    parse_rule,
    to_text,
)
from scars.synthesis.dsl.parser import MAX_NESTING
from scars.synthesis.errors import DSLSyntaxError, ScarsError

PAPER_EXPORT = (
    'if intent_is("database_export") and data_scope_is("internal") and tool_is("send_data") '
    'then forbid_tool_call("send_data")'
)
PAPER_GOVSIM = 'if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")'


def test_dsl_golden_paper_export_rule():
    rule = parse_rule(PAPER_EXPORT)
    assert rule == Rule(
        And(
            (
                Named("intent_is", "database_export"),
                Named("data_scope_is", "internal"),
                Named("tool_is", "send_data"),
            )
        ),
        ForbidToolCall("send_data"),
    )
    assert to_text(rule) == PAPER_EXPORT


def test_dsl_golden_paper_govsim_rule():
    """The paper writes ``pool_resource_level < threshold``; the threshold is a number in a concrete rule."""
    rule = parse_rule(PAPER_GOVSIM)
    assert rule == Rule(
        And((Compare("pool_resource_level", "<", 20), Named("tool_is", "harvest"))), ForbidToolCall("harvest")
    )
    assert to_text(rule) == PAPER_GOVSIM


def test_dsl_masks_and_class_predicates():
    rule = parse_rule(
        'if in_class(action.obj_type, "dishware") and action.recep == "sinkbasin 1" then forbid_env_action("clean")'
    )
    assert rule.guard == And(
        (InClass("action.obj_type", "dishware"), Compare("action.recep", "==", "sinkbasin 1"))
    )
    assert rule.mask == ForbidEnvAction("clean")
    assert parse_rule('if action_is("put") then forbid_tool_arg("send", "to", 3)').mask == ForbidToolArg(
        "send", "to", 3
    )


@pytest.mark.parametrize(
    ("text", "guard"),
    [
        ("a == 1 or b == 2 and c == 3", Or((Compare("a", "==", 1), And((Compare("b", "==", 2), Compare("c", "==", 3)))))),
        ("a == 1 and b == 2 or c == 3", Or((And((Compare("a", "==", 1), Compare("b", "==", 2))), Compare("c", "==", 3)))),
        ("(a == 1 or b == 2) and c == 3", And((Or((Compare("a", "==", 1), Compare("b", "==", 2))), Compare("c", "==", 3)))),
        ("a == 1 and b == 2 and c == 3", And((Compare("a", "==", 1), Compare("b", "==", 2), Compare("c", "==", 3)))),
        ("a == 1 and (b == 2 and c == 3)", And((Compare("a", "==", 1), And((Compare("b", "==", 2), Compare("c", "==", 3)))))),
        ("((a == 1))", Compare("a", "==", 1)),
    ],
)  # fmt: skip
def test_dsl_and_binds_tighter_than_or(text, guard):
    assert parse_guard(text) == guard
    assert parse_guard(to_text(guard)) == guard


def test_dsl_minimal_parentheses_in_printed_text():
    assert to_text(parse_guard("(a == 1 and b == 2) or c == 3")) == "a == 1 and b == 2 or c == 3"
    assert to_text(parse_guard("(a == 1 or b == 2) and c == 3")) == "(a == 1 or b == 2) and c == 3"
    assert to_text(parse_guard("a == 1 or (b == 2 or c == 3)")) == "a == 1 or (b == 2 or c == 3)"


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ('"a\\"b\\\\c\\n\\u00e9"', 'a"b\\c\né'),
        ('"наш 表"', "наш 表"),
        ("-3", -3),
        ("+3", 3),
        ("2.5", 2.5),
        ("-1e-3", -0.001),
        (".5", 0.5),
        ("1E3", 1000.0),
        ("true", True),
        ("false", False),
    ],
)
def test_dsl_value_literals(literal, value):
    guard = parse_guard(f"x == {literal}")
    assert guard == Compare("x", "==", value)
    assert type(guard.value) is type(value)


def test_dsl_all_comparison_operators_and_whitespace():
    for op in ("==", "!=", "<", "<=", ">", ">="):
        assert parse_guard(f"x{op}1") == Compare("x", op, 1)
    assert parse_rule('if\n\tx == 1\r\n  then forbid_tool_call( "t" )') == Rule(
        Compare("x", "==", 1), ForbidToolCall("t")
    )


def test_dsl_keywords_are_reserved():
    for text in ("and == 1", "if == 1", "true == 1", "action.if == 1", "in_class == 1", "a.then.b == 1"):
        with pytest.raises(DSLSyntaxError):
            parse_guard(text)
    # A keyword inside a longer word is an ordinary feature name.
    assert parse_guard("iffy == 1 and android == 2") == And(
        (Compare("iffy", "==", 1), Compare("android", "==", 2))
    )


def _error(text: str, parse=parse_rule) -> DSLSyntaxError:
    with pytest.raises(DSLSyntaxError) as info:
        parse(text)
    return info.value


def test_dsl_error_names_line_column_and_expected_tokens():
    err = _error('if x == 1 1 then forbid_tool_call("t")')
    assert (err.line, err.column) == (1, 11)
    assert str(err) == "line 1, column 11: unexpected '1'; expected one of: 'and', 'or', 'then'"
    assert err.expected == ("'and'", "'or'", "'then'")
    # Exactly what fits at the error, not the LALR state's merged lookaheads:
    assert _error('if (x == 1 1) then forbid_tool_call("t")').expected == ("')'", "'and'", "'or'")
    assert _error("x == 1 1", parse_guard).expected == ("'and'", "'or'", "end of input")
    assert _error('if x == 1 then forbid_tool_call("t") )').expected == ("end of input",)

    err = _error('if x == 1\n   and y = 2 then forbid_tool_call("t")')
    assert (err.line, err.column) == (2, 10)
    assert "comparison operator" in str(err)

    err = _error("if x == 1 then")
    assert (err.line, err.column) == (1, 15)
    assert "unexpected end of input" in str(err)
    assert set(err.expected) == {"'forbid_tool_call'", "'forbid_tool_arg'", "'forbid_env_action'"}

    err = _error('if x == 1 then forbid_tool_call("t)')
    assert (err.line, err.column) == (1, 33)
    assert "unterminated" in str(err)

    err = _error('if and == 1 then forbid_tool_call("t")')
    assert (err.line, err.column) == (1, 4)
    assert "a feature name" in err.expected

    err = _error("")
    assert (err.line, err.column) == (1, 1)
    assert err.expected == ("'if'",)


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ('if x == 1e999 then forbid_tool_call("t")', 9, "out of range"),
        ('if x == -1e400 then forbid_tool_call("t")', 9, "out of range"),
        ('if x == nan then forbid_tool_call("t")', 9, "no NaN or infinity"),
        ('if x < Infinity then forbid_tool_call("t")', 8, "no NaN or infinity"),
        ('if x == 1\x00 then forbid_tool_call("t")', 10, "unexpected character '\\x00'"),
        ('if x == "a\x01" then forbid_tool_call("t")', 9, "unterminated or malformed string"),
        ('if x == "\\q" then forbid_tool_call("t")', 9, "unterminated or malformed string"),
        ("if x == " + "9" * 5000 + ' then forbid_tool_call("t")', 9, "too long"),
        ("if x == 1 then forbid_tool_call(t)", 33, "a string"),
        ('if x == 1 then forbid_tool_call("t") extra', 38, "end of input"),
        ('if x ≤ 1 then forbid_tool_call("t")', 6, "unexpected character '≤'"),
    ],
)
def test_dsl_hostile_inputs_give_positioned_errors(text, column, fragment):
    err = _error(text)
    assert (err.line, err.column) == (1, column)
    assert fragment in str(err)


def test_dsl_deep_nesting_is_a_syntax_error_not_a_recursion_error():
    deep = "a == 1 and (" * 10_000 + "b == 2" + ")" * 10_000
    err = _error(deep, parse_guard)
    assert f"deeper than {MAX_NESTING}" in str(err)
    ok = "a == 1 and (b == 1 or (" * 30 + "c == 2" + "))" * 30
    guard = parse_guard(ok)
    assert parse_guard(to_text(guard)) == guard
    # Parentheses inside strings do not count.
    assert parse_guard('x == "' + "(" * 500 + '"') == Compare("x", "==", "(" * 500)


def test_dsl_non_string_input_is_a_syntax_error():
    for bad in (None, 3, b"if", ["if"]):
        with pytest.raises(DSLSyntaxError):
            parse_rule(bad)  # type: ignore[arg-type]


def test_dsl_errors_are_part_of_the_one_hierarchy():
    assert issubclass(DSLSyntaxError, ScarsError)
    assert issubclass(DSLValueError, ScarsError)


@pytest.mark.parametrize(
    "bad",
    [
        Compare("x", "==", float("nan")),
        Compare("x", "==", float("inf")),
        Compare("x y", "==", 1),
        Compare("action.and", "==", 1),
        Compare("x", "=", 1),
        Compare("x", "==", None),
        Named("is_tool", "x"),
        And((Compare("x", "==", 1),)),
        Or(()),
        Rule(Compare("x", "==", 1), "forbid"),
    ],
)
def test_dsl_printer_refuses_asts_the_text_cannot_express(bad):
    with pytest.raises(DSLValueError):
        to_text(bad)


def test_dsl_parse_is_memoised_and_returns_frozen_nodes():
    assert parse_rule(PAPER_EXPORT) is parse_rule(PAPER_EXPORT)
    with pytest.raises(AttributeError):
        parse_rule(PAPER_EXPORT).guard = None  # type: ignore[misc]


def test_dsl_deep_asts_built_in_code_give_a_dsl_error_not_a_recursion_error():
    from scars.synthesis.dsl import canonical, description_length

    guard = Compare("x", "==", 0)
    for i in range(1, 5000):
        guard = (And if i % 2 else Or)((Compare("x", "==", i), guard))
    for operation in (to_text, canonical, description_length):
        with pytest.raises(DSLValueError, match="nested too deeply"):
            operation(guard)
