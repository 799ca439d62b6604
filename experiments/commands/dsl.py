"""``scars dsl``: parse patch-DSL rules and show their canonical form and description length (SPEC §2, §3.3)."""

from __future__ import annotations

import json

import click

from scars.experiments.commands._checks import FINITE_FLOAT
from scars.synthesis.dsl import Lambdas, canonical_text, cost_breakdown, parse_guard, parse_rule
from scars.synthesis.errors import ConfigError, DSLSyntaxError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def dsl() -> None:
    """The patch DSL: parse rules, print their canonical form and cost."""


def _caret(err: DSLSyntaxError) -> str:
    """The offending line with a caret under the error's column."""
    lines = err.text.split("\n")
    if not 1 <= err.line <= len(lines):
        return ""
    # one character per code point, printable on any terminal (a lone surrogate becomes '?')
    line = lines[err.line - 1].replace("\t", " ").encode("utf-8", "replace").decode("utf-8")
    return f"  {line!s}\n  {' ' * (err.column - 1)}^"


@dsl.command("parse")
@click.argument("rule")
@click.option("--guard", "as_guard", is_flag=True, help="Parse RULE as a bare guard (no 'if … then mask').")
@click.option(
    "--lambda-tok", type=FINITE_FLOAT, default=1.0, show_default=True, help="λ_tok: weight of tokens in C."
)
@click.option(
    "--lambda-ast", type=FINITE_FLOAT, default=1.0, show_default=True, help="λ_ast: weight of AST nodes in C."
)
@click.option(
    "--lambda-pred",
    type=FINITE_FLOAT,
    default=1.0,
    show_default=True,
    help="λ_pred: weight of predicates in C.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.pass_context
def parse_command(
    ctx: click.Context,
    rule: str,
    as_guard: bool,
    lambda_tok: float,
    lambda_ast: float,
    lambda_pred: float,
    as_json: bool,
) -> None:
    """Parse RULE; print its canonical form and C = λ_tok·tokens + λ_ast·AST nodes + λ_pred·predicates.

    Exits with status 2 and the error (line, column, expected tokens) when RULE does not parse.

    Example: scars dsl parse 'if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")'
    """
    try:
        lambdas = Lambdas(tok=lambda_tok, ast=lambda_ast, pred=lambda_pred)
    except ConfigError as err:
        raise click.BadParameter(str(err)) from None
    try:
        node = parse_guard(rule) if as_guard else parse_rule(rule)
    except DSLSyntaxError as err:
        click.echo(f"error: {err}", err=True)
        caret = _caret(err)
        if caret:
            click.echo(caret, err=True)
        ctx.exit(2)
    cost = cost_breakdown(node, lambdas)
    canonical = canonical_text(node)
    if as_json:
        record = {
            "canonical": canonical,
            "tokens": cost.tokens,
            "ast_nodes": cost.ast_nodes,
            "predicates": cost.predicates,
            "lambdas": {"tok": lambdas.tok, "ast": lambdas.ast, "pred": lambdas.pred},
            "C": cost.total,
        }
        click.echo(json.dumps(record, ensure_ascii=False))
        return
    click.echo(f"canonical:  {canonical}")
    click.echo(f"tokens:     {cost.tokens}")
    click.echo(f"ast nodes:  {cost.ast_nodes}")
    click.echo(f"predicates: {cost.predicates}")
    click.echo(
        f"C = {lambdas.tok:g}·{cost.tokens} + {lambdas.ast:g}·{cost.ast_nodes} + "
        f"{lambdas.pred:g}·{cost.predicates} = {cost.total:g}"
    )
