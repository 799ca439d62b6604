"""``scars calibrate``: fit w and τ of d_t on labelled validation trajectories (paper §3.2)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scars.experiments.commands._checks import check_output_file, claim_output, overwrite_option
from scars.synthesis.errors import ScarsError


@click.command("calibrate")
@click.argument("steps", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out", "out", required=True, type=click.Path(path_type=Path), help="The signal config to write (JSON)."
)
@click.option(
    "--label",
    default="violation",
    show_default=True,
    help="Which steps should trigger accommodation: 'violation' (the verifier flagged the action) or the name of "
    "a boolean column of the step tables.",
)
@click.option(
    "--grid",
    "grid_k",
    default=10,
    show_default=True,
    type=click.IntRange(1, 40),
    help="Weight grid step 1/GRID.",
)
@overwrite_option
def calibrate(steps: tuple[Path, ...], out: Path, label: str, grid_k: int, overwrite: bool) -> None:
    """Grid-search the weights w = [α, β, γ, δ] and the threshold τ of d_t = sigmoid(wᵀz) on the step tables
    STEPS (steps.parquet / steps.csv of earlier runs), maximising F1 of the label; write a config that
    `scars run tier1 --signal-config OUT` uses."""
    from scars.experiments.calibrate import calibrate_files, write_signal_config

    check_output_file(out, "--out")
    claim_output(out.parent if str(out.parent) else Path("."), overwrite, files=(out.name,))
    try:
        result = calibrate_files(list(steps), label=label, grid_k=grid_k)
        write_signal_config(result, out, [str(p) for p in steps])
    except (ScarsError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    w = ", ".join(f"{x:.2f}" for x in result.weights)
    click.echo(
        f"w = [{w}]  tau = {result.tau:.4f}  F1 = {result.f1:.3f} (precision {result.precision:.3f}, recall "
        f"{result.recall:.3f}; n = {result.n_steps} steps, {result.n_positive} positive) -> {out}"
    )
