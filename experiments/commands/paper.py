"""``scars paper --scale smoke|full``: the paper's whole protocol as one Ray Tune sweep, then the report.

Every registered tier (``experiments.tiers``) contributes its protocol at the scale: tier 1 runs every method of the comparison,
the six ablations of §6.4 and the two controls (``hard_blocklist``, ``storm_only``; scars only) × seeds. ``smoke``
(2 seeds × 4 episodes, a small search budget) finishes in a few minutes on two cores and runs in CI; ``full`` (5 seeds
× 36 episodes) is the paper's scale (docs/sweeps.md: expected times). The tiers' sweeps share one Ray instance and each is
resumable (re-run the same command: ``Tuner.restore``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from scars.experiments.commands._checks import check_output_dir, claim_output, overwrite_option


@click.command("paper")
@click.option(
    "--scale",
    type=click.Choice(("smoke", "full")),
    default="smoke",
    show_default=True,
    help="Protocol scale.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Output folder (one sweep folder per tier, the report at the top). Default: runs/paper-<scale>-<UTC time>; "
    "re-running into the same folder resumes (another non-empty folder is refused unless --overwrite).",
)
@overwrite_option
@click.option(
    "--tiers", default="all", show_default=True, help="Comma-separated tiers, or 'all' registered ones."
)
@click.option(
    "--address", default=None, help="Ray cluster address (from `ray start --head`); default: local Ray."
)
@click.option(
    "--connect-timeout",
    "connect_timeout_s",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds to reach --address before giving up.",
)
@click.option(
    "--max-concurrent", type=click.IntRange(min=0), default=0, help="Trials at once (0: as CPUs allow)."
)
@click.option(
    "--wandb/--no-wandb", default=False, show_default=True, help="Log every run live to W&B (offline)."
)
@click.option("--wandb-project", default="scars-testbed", show_default=True, help="W&B project.")
@click.option("--wandb-entity", default="", help="W&B entity (user or team).")
def paper(
    scale: str,
    out: Path | None,
    overwrite: bool,
    tiers: str,
    address: str | None,
    connect_timeout_s: float,
    max_concurrent: int,
    wandb: bool,
    wandb_project: str,
    wandb_entity: str,
) -> None:
    """Run the paper's protocol (every registered tier × methods × ablations and controls × seeds) on Ray Tune and
    write report.md and report.html into OUT."""
    from scars.experiments.provenance import default_out
    from scars.experiments.tiers import load_tiers
    from scars.synthesis.errors import ScarsError

    registered = load_tiers()
    names = tuple(registered) if tiers == "all" else tuple(t.strip() for t in tiers.split(",") if t.strip())
    for name in names:
        if name not in registered:
            raise click.BadParameter(
                f"tier {name!r} is not one of {tuple(registered)} (or 'all')", param_hint="'--tiers'"
            )
    out = out or default_out("paper", scale)
    check_output_dir(out)
    try:
        import ray

        from scars.experiments.results_report import write_report
        from scars.experiments.sweep import connect_ray, run_sweep
        from scars.experiments.sweep_spec import SweepSpec

        specs = []
        for name in names:
            grid, fixed = registered[name].protocol(scale)
            specs.append(
                SweepSpec(
                    tier=name,
                    grid=grid,
                    fixed=fixed,
                    name=f"paper-{scale}-{name}",
                    address=address or "",
                    connect_timeout_s=connect_timeout_s,
                    max_concurrent=max_concurrent,
                    wandb=wandb,
                    wandb_project=wandb_project,
                    wandb_entity=wandb_entity,
                )
            )
        claim_output(out, overwrite, resumes=lambda folder: any(folder.glob("*/sweep.json")))
        started = time.time()
        started_here = connect_ray(address or "", connect_timeout_s)  # a dead address is one line, not a hang
        try:
            results = [run_sweep(spec, out / spec.tier) for spec in specs]
        finally:
            if started_here:
                ray.shutdown()
        markdown, html = write_report([out / spec.tier for spec in specs], out)
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    runs = sum(len(r.runs) for r in results)
    failed = sum(len(r.failed) for r in results)
    click.echo(
        f"{runs} runs ({failed} failed) in {time.time() - started:.0f} s\nreport: {markdown}\nreport: {html}"
    )
    if failed:
        sys.exit(1)
