"""``scars dsl parse``: canonical form and cost on good input, exit 2 with a positioned error on bad input."""

from __future__ import annotations

import json

from click.testing import CliRunner

from scars.experiments.cli import main

GOVSIM = 'if tool_is("harvest") and pool_resource_level < 20 then forbid_tool_call("harvest")'


def test_dsl_cli_prints_canonical_form_and_cost():
    result = CliRunner().invoke(main, ["dsl", "parse", GOVSIM])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        'canonical:  if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")'
    )
    assert "tokens:     14" in lines
    assert "ast nodes:  5" in lines
    assert "predicates: 2" in lines
    assert lines[-1] == "C = 1·14 + 1·5 + 1·2 = 21"


def test_dsl_cli_json_guard_and_lambdas():
    result = CliRunner().invoke(
        main, ["dsl", "parse", "--guard", "--json", "--lambda-tok", "0.5", "b == 2 or a == 1"]
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["canonical"] == "a == 1 or b == 2"
    assert (record["tokens"], record["ast_nodes"], record["predicates"]) == (7, 3, 2)
    assert record["C"] == 0.5 * 7 + 3 + 2


def test_dsl_cli_bad_rule_exits_2_with_position_and_no_traceback():
    result = CliRunner().invoke(main, ["dsl", "parse", 'if x == 1\n and y = 2 then forbid_tool_call("x")'])
    assert result.exit_code == 2
    assert "error: line 2, column 8: unexpected character '='" in result.output
    assert "expected one of: a comparison operator" in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_dsl_cli_bad_lambda_is_a_usage_error():
    result = CliRunner().invoke(main, ["dsl", "parse", "--lambda-ast", "-1", GOVSIM])
    assert result.exit_code == 2
    assert "Lambdas.ast must be >= 0" in result.output


def test_dsl_cli_help_everywhere():
    for args in (["dsl", "--help"], ["dsl", "parse", "--help"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0
        assert "Usage:" in result.output
