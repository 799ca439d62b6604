"""``scars sensitivity``: every method over a grid of the simulated LM's text-channel settings (issue 11)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scars.experiments.commands._checks import claim_output, overwrite_option, parse_seeds
from scars.experiments.commands.options import seeds_option
from scars.synthesis.errors import ScarsError


def _floats(text: str, name: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a comma-separated list of numbers", param_hint=name
        ) from None
    if not values:
        raise click.BadParameter("give at least one value", param_hint=name)
    return values


@click.command("sensitivity")
@click.option(
    "--methods",
    default=None,
    help="Comma-separated methods (scars:<ablation> allowed); default: every "
    "method of the tier-1 table and the hard_blocklist and storm_only controls.",
)
@click.option(
    "--influence-gain",
    "gains",
    default="4,12,36,96",
    show_default=True,
    help="Simulated LM influence_gain values.",
)
@click.option(
    "--compliance",
    "compliances",
    default="0.5,1",
    show_default=True,
    help="Simulated LM compliance values (each in [0, 1]).",
)
@click.option(
    "--replan-competence",
    "competences",
    default="0,0.5,1",
    show_default=True,
    help="Simulated LM replan_competence values (each in [0, 1]): how well it re-plans around what it declined.",
)
@seeds_option()
@click.option("--episodes", default=36, show_default=True, type=click.IntRange(1), help="Episodes per run.")
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="Output folder (a non-empty one is refused unless --overwrite).",
)
@overwrite_option
def sensitivity(methods, gains, compliances, competences, seeds, episodes, out, overwrite) -> None:
    """Run every method at every (influence_gain, compliance, replan_competence) grid point of the embedded
    simulated LM and draw
    success vs SVR per method as a frontier plot (frontier.png), with the table (frontier.csv, frontier.md) and
    which headline claims hold at how many grid points (claims.md)."""
    from scars.experiments.report import atomic_write_text, write_table
    from scars.experiments.sensitivity import (
        DEFAULT_METHODS,
        GRID_KEYS,
        Grid,
        claims,
        config_for,
        frontier,
        frontier_markdown,
        plot_frontier,
    )

    grid = Grid(
        _floats(gains, "--influence-gain"),
        _floats(compliances, "--compliance"),
        _floats(competences, "--replan-competence"),
    )
    chosen = tuple(m.strip() for m in methods.split(",")) if methods else DEFAULT_METHODS
    seed_list = parse_seeds(seeds)
    try:
        for m in chosen:  # validate every method and grid value before the first run
            for point in grid.points():
                config_for(m, episodes=episodes, **dict(zip(GRID_KEYS, point, strict=True)))
        claim_output(out, overwrite)
        from scars.experiments.sensitivity import run_sensitivity

        total = len(chosen) * len(grid.points()) * len(seed_list)
        click.echo(
            f"{total} runs: {len(chosen)} methods × {len(grid.points())} grid points × {len(seed_list)} seeds"
        )
        episodes_table = run_sensitivity(
            chosen,
            grid,
            seed_list,
            episodes,
            out,
            progress=lambda i, n, what: click.echo(f"[{i}/{n}] {what}", err=True),
        )
    except ScarsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    table = frontier(episodes_table)
    write_table(episodes_table, out / "episodes")
    write_table(table, out / "frontier")
    atomic_write_text(out / "frontier.md", frontier_markdown(table))
    lines = claims(table)
    atomic_write_text(out / "claims.md", "\n".join(f"- {line}" for line in lines) + "\n")
    plot_frontier(table, out / "frontier.png")
    for line in lines:
        click.echo(f"- {line}")
    click.echo(f"-> {out}/frontier.png, frontier.md, claims.md")
