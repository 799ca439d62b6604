"""``scars report DIR… [--out DIR] [--run NAME]``: Markdown and a self-contained HTML page from result folders."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scars.experiments.commands._checks import claim_output, overwrite_option


@click.command("report")
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Where report.md, report.html and report_assets/ go. Default: the first DIR.",
)
@click.option(
    "--run",
    "run_name",
    default=None,
    help="The run whose d_t and four terms are plotted (default: the first scars run).",
)
@overwrite_option
def report(folders: tuple[Path, ...], out: Path | None, run_name: str | None, overwrite: bool) -> None:
    """Write report.md and report.html (images inline as base64) from sweep folders (scars sweep / scars paper) and
    runner folders (scars demo / scars run): every tier's tables with n, CIs and paired differences, the ablation
    table with each ablation's own measures, plots with CI bands and markers at rule switches and world-version
    changes, and d_t with its four terms for one run."""
    from scars.experiments.results_report import expand_folders, folder_kind, write_report
    from scars.synthesis.errors import ScarsError

    out = out or folders[0]
    try:
        for folder in folders:
            if not folder.is_dir():
                raise click.BadParameter(f"{str(folder)!r} is not a folder", param_hint="'DIR'")
        for folder in expand_folders(folders):
            folder_kind(folder)
        # report writes beside the data it reads: only its own files count, and --overwrite replaces only them
        claim_output(out, overwrite, files=("report.md", "report.html", "report_assets"))
        markdown, html = write_report(list(folders), out, run=run_name)
    except ScarsError as exc:
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    click.echo(f"report: {markdown}\nreport: {html}")
