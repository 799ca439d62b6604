"""``scars run tier1 …`` and ``scars demo``: every field of the frozen config is a command-line option."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click
from click.core import ParameterSource

from scars.experiments.commands._checks import FINITE_FLOAT, check_output_dir, check_url
from scars.experiments.config import (
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
from scars.synthesis.errors import ScarsError

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


def config_options(cls, choices: dict | None = None, skip: tuple[str, ...] = ()):
    """Decorate a click command with one option per config field, help text from the field's docstring
    (``choices``: field → allowed values, default the tier-1 ones; ``skip``: fields the command declares itself)."""
    docs = cls.field_docs()
    choices = _CHOICES if choices is None else choices

    def decorate(fn):
        for f in reversed(dataclasses.fields(cls)):
            if f.name in skip:
                continue
            name = "--" + f.name.replace("_", "-")
            default = f.default
            if isinstance(default, bool):
                fn = click.option(
                    f"{name}/--no-{f.name.replace('_', '-')}",
                    default=default,
                    show_default=True,
                    help=docs[f.name],
                )(fn)
            elif f.name in choices:
                fn = click.option(
                    name,
                    type=click.Choice(choices[f.name]),
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
    """Run experiments (tier 1: the household world with dynamic safety rules; tier 2: the commons arena)."""


@run.command("tier1")
@config_options(Tier1Config)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Replay a saved config.json (a run folder's, or <demo>/<method>/config.json); options given on the command "
    "line override its fields.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Output folder. Default: a new folder runs/tier1-<method>-<UTC time>.",
)
@click.option("--overwrite", is_flag=True, help="Replace the results in an existing, non-empty --out folder.")
@click.pass_context
def tier1(ctx: click.Context, config_file: Path | None, out: Path | None, overwrite: bool, **fields) -> None:
    """One method on tier 1: writes summary.json, tables, results.md, plots, provenance.json and (scars) the ledger
    into OUT (the method's own run folder is OUT/<method>/)."""
    from scars.experiments.provenance import claim_out, default_out, load_config
    from scars.experiments.runner import run_many
    from scars.experiments.tier1 import build_policy, method_label

    try:
        if config_file is not None:
            saved = load_config(config_file, Tier1Config)
            given = {
                k: v for k, v in fields.items() if ctx.get_parameter_source(k) == ParameterSource.COMMANDLINE
            }
            fields = {**fields, **saved, **given}
        cfg = Tier1Config(**fields)
        out = out or default_out("tier1", method_label(cfg).replace(":", "-"))
        check_output_dir(out)
        policy = build_policy(cfg)  # a model or server that cannot serve the run fails before OUT is claimed
        claim_out(out, overwrite)
        run_many([cfg], out, policies=[policy])
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    click.echo(f"results: {out / 'results.md'}")


@click.command("demo")
@click.option(
    "--episodes", type=click.IntRange(min=1), default=36, show_default=True, help="Episodes per method."
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Root seed.")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Output folder. Default: a new folder runs/demo-<UTC time>.",
)
@click.option("--overwrite", is_flag=True, help="Replace the results in an existing, non-empty --out folder.")
@click.option(
    "--wandb/--no-wandb",
    default=False,
    show_default=True,
    help="Log each method live to Weights & Biases (offline; prints each run's folder and the wandb sync command).",
)
@click.option("--wandb-project", default="scars-testbed", show_default=True, help="W&B project.")
@click.option("--wandb-entity", default="", help="W&B entity (user or team).")
def demo(
    episodes: int,
    seed: int,
    out: Path | None,
    overwrite: bool,
    wandb: bool,
    wandb_project: str,
    wandb_entity: str,
) -> None:
    """All six methods (scars and the five baselines) on the paper's dynamic-rule schedule: the comparison table,
    results.md, plots and the scars ledger in OUT. Runs on the embedded simulated LM (no model, no network)."""
    from scars.experiments.provenance import claim_out, default_out
    from scars.experiments.runner import demo_configs, run_many
    from scars.experiments.tracking import TrackingSettings

    out = out or default_out("demo")
    check_output_dir(out)
    try:
        claim_out(out, overwrite)
        tracking = TrackingSettings(
            enabled=wandb,
            project=wandb_project,
            entity=wandb_entity,
            group=out.resolve().name,
            directory=str(out),
        )
        run_many(demo_configs(episodes, seed, wandb), out, tracking=tracking)
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    click.echo(f"results: {out / 'results.md'}")
    from scars.experiments.commands.run_tier2 import tier2_demo

    summaries = tier2_demo(out / "tier2", seed)
    for label, s in summaries.items():
        click.echo(
            f"tier 2 {label:<15} survival {s['survival_rate']:.2f} (n={s['runs']} runs), over-usage "
            f"{s['over_usage']:.2f}, cooperative yield {s['cooperative_yield_mean']:.2f}"
        )
    click.echo(f"tier-2 results: {out / 'tier2' / 'results.md'}")
    from scars.experiments import tier3

    click.echo("tier 3 (short): trained in arenas A and B, carried into arena C")
    click.echo(tier3.table_markdown(tier3.run_tier3_table(tier3.demo_configs(seed, wandb), out / "tier3")))
    click.echo(f"tier-3 results: {out / 'tier3' / 'results.md'}")


# the tier-2 commands register themselves on the run group (``experiments.commands.run_tier2``)
import scars.experiments.commands.run_tier2  # noqa: E402, F401
