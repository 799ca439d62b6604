"""``scars sweep``: an ablation sweep, seeds × methods × ablations on tier 1, in-process or on Ray (SPEC §8).

    scars sweep --methods scars,rag,reflexion --ablations no_mdl,soft_bias_only --seeds 0-4 --episodes 36 \\
        --out runs/sweep [--executor ray] [--ray-address ADDR] [--wandb]

Exit codes: 0 every run finished; 1 at least one run failed (the others finished and are aggregated; re-run the
same command to retry only the failed ones); 2 bad input (the message names the bad value).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from experiments.commands._checks import MAX_SEEDS, check_output_dir, count_seeds
from experiments.config import ABLATIONS, METHODS
from experiments.schedules import SCHEDULES
from experiments.sweep import SWEEP_EXECUTORS, SweepConfig, parse_names, parse_seeds
from synthesis.errors import ScarsError

_DEFAULTS = SweepConfig()


@click.command("sweep")
@click.option(
    "--methods",
    default=",".join(_DEFAULTS.methods),
    show_default=True,
    help=f"Comma-separated methods, or 'all': {', '.join(METHODS)}.",
)
@click.option(
    "--ablations",
    default="",
    show_default=True,
    help=f"Comma-separated scars ablations (§6.4), or 'all': {', '.join(a for a in ABLATIONS if a != 'none')}. "
    "The full scars agent always runs too.",
)
@click.option("--seeds", default="0-4", show_default=True, help="Seeds: '0-4', '0,3,7-9' (ranges inclusive).")
@click.option("--episodes", type=int, default=_DEFAULTS.episodes, show_default=True, help="Episodes per run.")
@click.option(
    "--schedule",
    type=click.Choice(tuple(SCHEDULES)),
    default=_DEFAULTS.schedule,
    show_default=True,
    help="Named rule schedule.",
)
@click.option(
    "--max-steps", type=int, default=_DEFAULTS.max_steps, show_default=True, help="Steps per episode."
)
@click.option(
    "--search-iterations",
    type=int,
    default=_DEFAULTS.search_iterations,
    show_default=True,
    help="MCTS iterations per tree (scars runs).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("runs/sweep"),
    show_default=True,
    help="Output directory; re-running into it resumes (finished runs are skipped).",
)
@click.option(
    "--executor",
    type=click.Choice(SWEEP_EXECUTORS),
    default="inprocess",
    show_default=True,
    help="inprocess: runs one after another here; ray: each run a Ray task (num_cpus=1), gathered as they finish.",
)
@click.option(
    "--ray-address",
    default="",
    help="Address of a running Ray cluster (ray.init(address=...)); default: local Ray.",
)
@click.option(
    "--name", default=None, help="Sweep name (W&B group, aggregate.md title). Default: the --out folder name."
)
@click.option(
    "--wandb/--no-wandb",
    default=False,
    show_default=True,
    help="Each run its own offline W&B run (in OUT/wandb), grouped by the sweep name; sync later with wandb sync.",
)
@click.option("--wandb-project", default=_DEFAULTS.wandb_project, show_default=True, help="W&B project name.")
@click.option(
    "--bootstrap-samples",
    type=int,
    default=_DEFAULTS.bootstrap_samples,
    show_default=True,
    help="Bootstrap resamples per 95% CI.",
)
@click.option(
    "--bootstrap-seed", type=int, default=_DEFAULTS.bootstrap_seed, show_default=True, help="Bootstrap seed."
)
@click.option(
    "--tier",
    type=click.Choice(["1", "2", "3"]),
    default="1",
    show_default=True,
    help="1: the household world; 2: the commons arena (uses --arena, --setup, --runs; in-process); 3: train in "
    "arenas A and B, carry into arena C (tier 3's defaults; the seeds are the tier-3 run's seeds).",
)
@click.option(
    "--arena",
    type=click.Choice(["A", "B", "malicious"]),
    default="A",
    show_default=True,
    help="Tier 2: arena.",
)
@click.option(
    "--setup",
    type=click.Choice(["homogeneous", "focal"]),
    default="homogeneous",
    show_default=True,
    help="Tier 2: seats.",
)
@click.option(
    "--runs", type=click.IntRange(min=1), default=10, show_default=True, help="Tier 2: runs per seed."
)
def sweep(
    methods: str,
    ablations: str,
    seeds: str,
    out: Path,
    name: str | None,
    tier: str,
    arena: str,
    setup: str,
    runs: int,
    **fields,
) -> None:
    """Sweep tier 1 over METHODS × ABLATIONS (scars only) × SEEDS. Writes runs.parquet/.csv (one row per run),
    aggregate.parquet/.csv and aggregate.md (mean and 95% bootstrap CI over seeds per method/ablation),
    ablations.png, sweep.json and each run's tables under OUT/runs/<run_name>/."""
    from experiments.sweep import run_sweep

    if count_seeds(seeds) > MAX_SEEDS:
        raise click.BadParameter(
            f"{seeds!r} expands to {count_seeds(seeds):,} seeds; at most {MAX_SEEDS:,} per sweep",
            param_hint="'--seeds'",
        )
    check_output_dir(out)
    if tier == "2":
        _sweep_tier2(methods, ablations, seeds, out, arena, setup, runs, fields["search_iterations"])
        return
    if tier == "3":
        _sweep_tier3(methods, ablations, seeds, out, fields["search_iterations"])
        return
    try:
        cfg = SweepConfig(
            methods=parse_names(methods, METHODS, "method"),
            ablations=parse_names(ablations, tuple(a for a in ABLATIONS if a != "none"), "ablation")
            if ablations
            else (),
            seeds=parse_seeds(seeds),
            name=name or out.resolve().name,
            **fields,
        )
        result = run_sweep(cfg, out)
    except ScarsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if result.failed:
        sys.exit(1)


def _sweep_tier2(methods, ablations, seeds, out, arena, setup, runs, search_iterations) -> None:
    """``--tier 2``: ``experiments.tier2_studies.run_tier2_sweep`` (methods and scars ablations × seeds)."""
    from experiments.config import Tier2Config
    from experiments.tier2_studies import run_tier2_sweep

    try:
        base = Tier2Config(arena=arena, setup=setup, runs=runs, search_iterations=search_iterations)
        run_tier2_sweep(
            base,
            parse_names(methods, METHODS, "method"),
            parse_names(ablations, tuple(a for a in ABLATIONS if a != "none"), "ablation")
            if ablations
            else (),
            parse_seeds(seeds),
            out,
            progress=lambda line: click.echo(line, err=True),
        )
    except ScarsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo((out / "aggregate.md").read_text(encoding="utf-8"))


def _sweep_tier3(methods, ablations, seeds, out, search_iterations) -> None:
    """``--tier 3``: ``experiments.tier3.run_tier3_table`` over the methods and the scars ablations (each a tier-3
    run over all the seeds: individuation is held out by seed)."""
    from experiments.tier3 import Tier3Config, run_tier3_table, table_markdown

    try:
        names = parse_names(methods, METHODS, "method")
        extra = (
            parse_names(ablations, tuple(a for a in ABLATIONS if a != "none"), "ablation")
            if ablations
            else ()
        )
        seed_list = parse_seeds(seeds)
        configs = [Tier3Config(method=m, seeds=seed_list, search_iterations=search_iterations) for m in names]
        configs += [
            Tier3Config(method="scars", ablation=a, seeds=seed_list, search_iterations=search_iterations)
            for a in extra
        ]
        summaries = run_tier3_table(configs, out, progress=lambda line: click.echo(line, err=True))
    except ScarsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(table_markdown(summaries))
