"""``scars poisoning DIR… [--out DIR]``: the memory-poisoning table and plot from attacked run folders."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scars.experiments.commands._checks import claim_output, overwrite_option


@click.command("poisoning")
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Where poisoning.md/.csv/.json/.png and poisoning_runs.csv go. Default: the first DIR.",
)
@overwrite_option
def poisoning(folders: tuple[Path, ...], out: Path | None, overwrite: bool) -> None:
    """Aggregate attacked runs (a poisoning sweep's OUT folder, or `scars run tier1|tier2 --attack …` folders)
    into the table of docs/poisoning.md: attack success per method (with its defences) × attack × poison rate,
    its 95% CI over seeds and n (seeds, opportunities), the lift over rate 0, utility, RVR, the method's
    detections and the attack's cost; and a plot of attack success against poison rate."""
    from scars.experiments.poisoning_report import write_poisoning_report
    from scars.synthesis.errors import ScarsError

    out = out or folders[0]
    try:
        for folder in folders:
            if not folder.is_dir():
                raise click.BadParameter(f"{str(folder)!r} is not a folder", param_hint="'DIR'")
        claim_output(
            out,
            overwrite,
            files=("poisoning.md", "poisoning.csv", "poisoning.json", "poisoning.png", "poisoning_runs.csv"),
        )
        paths = write_poisoning_report(list(folders), out)
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    for path in paths.values():
        click.echo(f"poisoning: {path}")
