"""``scars run tier3 …``: train in arenas A and B with tier 2's runner, carry the state into arena C, measure identity
continuity, trajectory individuation and cross-domain drift (``experiments.tier3``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scars.experiments.commands._checks import (
    check_output_dir,
    claim_output,
    exit_if_stopped,
    overwrite_option,
    parse_seeds,
)
from scars.experiments.commands.options import config_options, seeds_option
from scars.experiments.config import (
    METHODS,
    NO_MEMORY,
    Tier3Config,
)
from scars.synthesis.errors import ScarsError

METHOD_CHOICES = (*Tier3Config.allowed("method"), "all")
"""Tier 3's methods (the registered ones and the no_memory control), and ``all`` (one table of every one)."""


@click.command("tier3")
@config_options(Tier3Config, skip=("method", "seeds", "ground_scars"))
@click.option(
    "--method",
    type=click.Choice(METHOD_CHOICES),
    default="scars",
    show_default=True,
    help="Memory method; no_memory is the control that carries nothing; all = every method of the comparison and no_memory "
    "(one table).",
)
@seeds_option("Seeds, e.g. 0-4 or 0,2,5 (at least two).")
@click.option(
    "--ground/--no-ground", default=True, show_default=True, help=Tier3Config.field_docs()["ground_scars"]
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("runs/tier3"),
    show_default=True,
    help="Output directory (a non-empty one is refused unless --overwrite).",
)
@overwrite_option
def tier3(method: str, seeds: str, ground: bool, out: Path, overwrite: bool, **fields) -> None:
    """Tier 3: per seed, one agent trained in arena A and one in arena B (tier 2's runner, focal seat) carry their
    state into arena C (an aquifer); writes summary.json, agents/steps tables, results.md and plots into OUT."""
    from rich.console import Console

    from scars.experiments.tier3 import run_tier3_table, table_markdown

    check_output_dir(out)
    try:
        seed_list = parse_seeds(seeds)
        names = (*METHODS, NO_MEMORY) if method == "all" else (method,)
        configs = [
            Tier3Config(
                method=name,
                seeds=seed_list,
                ground_scars=ground,
                # with --method all the ablation applies to scars; the baselines run as they are
                **(fields if method != "all" or name == "scars" else fields | {"ablation": "none"}),
            )
            for name in names
        ]
        claim_output(out, overwrite)
    except ScarsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    console = Console(stderr=True)
    with console.status("tier 3") as status:
        summaries = run_tier3_table(
            configs, out, progress=lambda message: status.update(f"tier 3 — {message}")
        )
    click.echo(table_markdown(summaries))
    click.echo(f"results: {out / 'results.md'}")
    exit_if_stopped(summaries)
