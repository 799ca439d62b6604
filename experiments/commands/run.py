"""``scars run tier1 …`` and ``scars demo``: every field of the frozen config is a command-line option."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.core import ParameterSource

from scars.experiments.commands._checks import check_output_dir, exit_if_stopped
from scars.experiments.commands.options import config_options
from scars.experiments.commands.run_tier2 import TIER2_COMMANDS, tier2_demo
from scars.experiments.commands.run_tier3 import tier3 as tier3_command
from scars.experiments.config import (
    Tier1Config,
)
from scars.synthesis.errors import ScarsError


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
        summary = run_many([cfg], out, policies=[policy])
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    click.echo(f"results: {out / 'results.md'}")
    exit_if_stopped(summary, announce=False)  # the runner printed RUN STOPPED


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
    """Every method of the comparison (scars and the text baselines, ``config.METHODS``) on the paper's dynamic-rule schedule: the comparison table,
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
        tier1_summary = run_many(demo_configs(episodes, seed, wandb), out, tracking=tracking)
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    click.echo(f"results: {out / 'results.md'}")
    exit_if_stopped(tier1_summary, announce=False)

    summaries = tier2_demo(out / "tier2", seed, tracking=tracking if wandb else None)
    for label, s in summaries.items():
        click.echo(
            f"tier 2 {label:<15} survival {s['survival_rate']:.2f} (n={s['runs']} runs), over-usage "
            f"{s['over_usage']:.2f}, cooperative yield {s['cooperative_yield_mean']:.2f}"
        )
    click.echo(f"tier-2 results: {out / 'tier2' / 'results.md'}")
    exit_if_stopped(summaries)
    from scars.experiments import tier3

    click.echo("tier 3 (short): trained in arenas A and B, carried into arena C")
    table = tier3.run_tier3_table(
        tier3.demo_configs(seed, wandb), out / "tier3", tracking=tracking if wandb else None
    )
    click.echo(tier3.table_markdown(table))
    click.echo(f"tier-3 results: {out / 'tier3' / 'results.md'}")
    exit_if_stopped(table)


for _command in (*TIER2_COMMANDS, tier3_command):  # `scars run tier2 …`, its studies, `scars run tier3`
    run.add_command(_command)
