"""``scars run tier1 …`` and ``scars demo``: every field of the frozen config is a command-line option."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from experiments.commands._checks import FINITE_FLOAT, check_output_dir, check_url
from experiments.config import (
    ABLATIONS,
    BACKENDS,
    CHOICE_PARAMS,
    DEVICES,
    DTYPES,
    EXECUTORS,
    METHODS,
    POLICY_MODES,
    Tier1Config,
)
from synthesis.errors import ScarsError

_CHOICES = {
    "method": METHODS,
    "backend": BACKENDS,
    "ablation": ABLATIONS,
    "executor": EXECUTORS,
    "embedder": ("hashing", "minilm"),
    "policy_mode": POLICY_MODES,
    "device": DEVICES,
    "dtype": DTYPES,
    "choice_param": CHOICE_PARAMS,
}
_ENVVARS = {"api_key": "OPENAI_API_KEY"}
"""Options that fall back to an environment variable (secrets: their value is never shown in --help)."""


def config_options(cls):
    """Decorate a click command with one option per config field, help text from the field's docstring."""
    docs = cls.field_docs()

    def decorate(fn):
        for f in reversed(dataclasses.fields(cls)):
            name = "--" + f.name.replace("_", "-")
            default = f.default
            if isinstance(default, bool):
                fn = click.option(
                    f"{name}/--no-{f.name.replace('_', '-')}",
                    default=default,
                    show_default=True,
                    help=docs[f.name],
                )(fn)
            elif f.name in _CHOICES:
                fn = click.option(
                    name,
                    type=click.Choice(_CHOICES[f.name]),
                    default=default,
                    show_default=True,
                    help=docs[f.name],
                )(fn)
            elif f.name in _ENVVARS:
                fn = click.option(
                    name,
                    type=str,
                    default=default,
                    envvar=_ENVVARS[f.name],
                    show_envvar=True,
                    help=docs[f.name],
                )(fn)
            else:
                kind = FINITE_FLOAT if isinstance(default, float) else type(default)
                callback = (lambda ctx, param, value: check_url(value)) if f.name == "server_url" else None
                fn = click.option(
                    name, type=kind, default=default, show_default=True, help=docs[f.name], callback=callback
                )(fn)
        return fn

    return decorate


@click.group("run")
def run() -> None:
    """Run experiments (tier 1: the household world with dynamic safety rules)."""


@run.command("tier1")
@config_options(Tier1Config)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("runs/tier1"),
    show_default=True,
    help="Output directory.",
)
def tier1(out: Path, **fields) -> None:
    """One method on tier 1: writes summary.json, tables, results.md, plots and (scars) the ledger into OUT."""
    from experiments.runner import run_many

    check_output_dir(out)
    try:
        cfg = Tier1Config(**fields)
        run_many([cfg], out)
    except ScarsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


@click.command("demo")
@click.option(
    "--episodes", type=click.IntRange(min=1), default=36, show_default=True, help="Episodes per method."
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Root seed.")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("runs/demo"),
    show_default=True,
    help="Output directory.",
)
@click.option(
    "--wandb/--no-wandb", default=False, show_default=True, help="Log to Weights & Biases (offline)."
)
def demo(episodes: int, seed: int, out: Path, wandb: bool) -> None:
    """All six methods (scars and the five baselines) on the paper's dynamic-rule schedule: the comparison table,
    results.md, plots and the scars ledger in OUT. Runs on the embedded simulated LM (no model, no network)."""
    from experiments.runner import demo_configs, run_many

    check_output_dir(out)
    try:
        run_many(demo_configs(episodes, seed, wandb), out)
    except ScarsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"results: {out / 'results.md'}")
