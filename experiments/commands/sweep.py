"""``scars sweep``: a sweep of any tier's config fields on Ray Tune (SPEC §8).

    scars sweep --tier tier1 --grid method=scars,rag,reflexion --grid ablation=none,no_mdl --grid seed=0-4 \\
        --set episodes=36 --out runs/sweep [--address HOST:PORT] [--wandb]
    scars sweep SPEC.toml --out runs/sweep          # the same from a file (experiments.sweep.load_spec)
    scars sweep --grid method=scars,rag --grid tau=0.5,0.55,0.6 --grid seed=0-4 --search-alg optuna \\
        --num-samples 12 --scheduler asha --metric success_rate --mode max --out runs/search

Re-running the same command into the same ``--out`` resumes a killed sweep (``Tuner.restore``): finished runs are
kept, unfinished and failed ones run again.

Exit codes: 0 every run finished; 1 at least one run failed (the others finished and are aggregated); 2 bad input
(the message names the bad value and what is allowed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scars.experiments.commands._checks import check_output_dir, claim_output, overwrite_option


@click.command("sweep")
@click.argument("spec_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--tier", default=None, help="The tier to sweep (default tier1; registered: experiments.tiers)."
)
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="FIELD=V1,V2",
    help="A config field and the values to sweep (repeatable; int fields take ranges: seed=0-4).",
)
@click.option(
    "--set",
    "fixed",
    multiple=True,
    metavar="FIELD=VALUE",
    help="A config field fixed for every run (repeatable).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("runs/sweep"),
    show_default=True,
    help="Output folder; re-running the same sweep into it resumes it (another non-empty folder is refused "
    "unless --overwrite).",
)
@overwrite_option
@click.option(
    "--name", default=None, help="Sweep name (W&B group, Tune experiment). Default: the --out folder name."
)
@click.option(
    "--address", default=None, help="Ray cluster address (from `ray start --head`); default: local Ray."
)
@click.option(
    "--connect-timeout",
    "connect_timeout_s",
    type=click.FloatRange(min=0.1),
    default=None,
    help="Seconds to reach --address before giving up [30].",
)
@click.option(
    "--max-failures", type=click.IntRange(min=0), default=None, help="Retries of a failed trial [0]."
)
@click.option(
    "--max-concurrent",
    type=click.IntRange(min=0),
    default=None,
    help="Trials at once (0: as CPUs allow) [0].",
)
@click.option("--cpus-per-trial", type=click.FloatRange(min=0.01), default=None, help="CPUs per trial [1].")
@click.option(
    "--gpus-per-trial",
    type=click.FloatRange(min=0),
    default=None,
    help="GPUs per trial [auto: 1 for --set backend=hf when the cluster has GPUs, else 0].",
)
@click.option("--wandb/--no-wandb", default=None, help="Log every run live to W&B (offline, in OUT/wandb).")
@click.option("--wandb-project", default=None, help="W&B project [scars-testbed].")
@click.option("--wandb-entity", default=None, help="W&B entity (user or team).")
@click.option(
    "--search-alg",
    type=click.Choice(["grid", "basic", "optuna"]),
    default=None,
    help="How Tune picks trials: grid (every point once) [grid], basic (--num-samples random draws from the grid's "
    "values), optuna (--num-samples trials from Optuna's TPE optimising --metric; extra 'optuna').",
)
@click.option(
    "--scheduler",
    type=click.Choice(["none", "asha"]),
    default=None,
    help="Tune's scheduler: none, or asha (stops trailing trials on --metric, reported after every episode) [none].",
)
@click.option(
    "--num-samples", type=click.IntRange(min=1), default=None, help="Trials of --search-alg basic/optuna [8]."
)
@click.option("--metric", default=None, help="The metric Optuna and ASHA optimise [success_rate].")
@click.option("--mode", type=click.Choice(["max", "min"]), default=None, help="The metric's direction [max].")
@click.option("--search-seed", type=int, default=None, help="Seed of the random and Optuna search [0].")
@click.option("--bootstrap-samples", type=int, default=None, help="Bootstrap resamples per 95% CI [2000].")
@click.option("--bootstrap-seed", type=int, default=None, help="Bootstrap seed [0].")
def sweep(
    spec_file: Path | None,
    tier: str | None,
    grid,
    fixed,
    out: Path,
    overwrite: bool,
    name: str | None,
    **tune_fields,
) -> None:
    """Sweep any config fields of a tier on Ray Tune: one trial per grid point, each a run in OUT/runs/<name>/.
    Writes runs.parquet/.csv (one row per run, from Tune's ResultGrid), aggregate.parquet/.csv and aggregate.md
    (mean and 95% bootstrap CI over seeds, pooled rates and paired differences vs scars), ablations.png and
    sweep.json. Ablations apply to method scars only: a baseline crossed with an ablation is not run."""
    from scars.experiments.sweep_spec import SweepSpec, load_spec, parse_values
    from scars.synthesis.errors import ScarsError

    check_output_dir(out)
    try:
        overrides = {k: v for k, v in tune_fields.items() if v is not None}
        overrides["name"] = name
        if tier is not None:
            overrides["tier"] = tier
        if spec_file is not None:
            spec = load_spec(spec_file, **overrides)
        else:
            overrides["name"] = name or out.resolve().name
            spec = SweepSpec(**overrides)
        if grid or fixed:
            grid_values = dict(spec.grid) | dict(parse_values(spec.tier, g, many=True) for g in grid)
            fixed_values = dict(spec.fixed) | {
                k: v[0] for k, v in (parse_values(spec.tier, f, many=False) for f in fixed)
            }
            spec = SweepSpec(**{**spec.to_dict(), "grid": grid_values, "fixed": fixed_values})
        if not spec.grid:
            raise click.UsageError(
                "nothing to sweep: give --grid FIELD=V1,V2 (e.g. --grid seed=0-4) or a SPEC_FILE"
            )
        from scars.experiments.sweep import cluster_address, run_sweep

        cluster_address(spec.address)  # a bad --address is refused before the folder is claimed
        claim_output(out, overwrite, resumes=lambda folder: (folder / "sweep.json").is_file())
        result = run_sweep(spec, out)
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    if result.failed:
        sys.exit(1)
