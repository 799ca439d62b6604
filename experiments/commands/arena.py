"""``scars arena``: run the tier-2 commons arena with scripted populations (SPEC §7 tier 2, §9).

    scars arena run --scenario fishery --arena A --population coop:4,greedy:1 --months 12 --seed 0 --runs 5

prints the month-by-month state of the first run, then the GovSim metrics of every run and their summary.
"""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from scars.envs.commons import metrics
from scars.envs.commons.rollout import build_population, run_episodes
from scars.envs.commons.scenarios import ARENAS, SCENARIOS
from scars.synthesis.errors import ConfigError


@click.group("arena")
def arena() -> None:
    """The GovSim-style commons arena with peer punishment and karma (tier 2)."""


def _month_table(record, title: str) -> Table:
    table = Table(title=title)
    for col in (
        "month",
        "stock",
        "f(t)",
        "|I(t)|",
        "requests",
        "catches",
        "left",
        "limit",
        "punish (justified)",
        "karma",
    ):
        table.add_column(
            col, justify="right" if col in ("month", "stock", "f(t)", "|I(t)|", "left", "limit") else "left"
        )
    for row in metrics.month_table(record).itertuples(index=False):
        table.add_row(
            str(row.month),
            str(row.stock_before),
            str(row.sustainable_catch),
            str(row.group_size),
            " ".join(map(str, row.requests)),
            " ".join(map(str, row.catches)),
            f"{row.stock_after}{' COLLAPSE' if row.collapsed else ''}",
            "-" if row.agreed_limit is None else str(row.agreed_limit),
            f"{row.punishments} ({row.justified})",
            " ".join(f"{k:g}" for k in row.karma),
        )
    return table


_SHOWN = (
    "seed",
    "survival_time",
    "total_gain",
    "efficiency",
    "equality",
    "over_usage",
    "cooperative_yield",
    "punishments",
    "justified_punishments",
    "punishment_roots",
)


@arena.command("run")
@click.option("--scenario", type=click.Choice(sorted(SCENARIOS)), default="fishery", show_default=True)
@click.option("--arena", "arena_name", type=click.Choice(list(ARENAS)), default="A", show_default=True)
@click.option(
    "--population", default=None, help="kind:count pairs, e.g. coop:4,greedy:1 (default: the arena's)"
)
@click.option(
    "--months", type=click.IntRange(min=1), default=12, show_default=True, help="T, the horizon in months"
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="root seed (>= 0)")
@click.option(
    "--runs",
    type=click.IntRange(min=1, max=10_000),
    default=1,
    show_default=True,
    help="independent runs (for the survival rate)",
)
@click.option(
    "--allocation", type=click.Choice(["stochastic", "proportional"]), default="stochastic", show_default=True
)
@click.option(
    "--outsider-month",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="GovSim's outsider variant: the last agent joins the group at this month (GovSim: 4); 0: off",
)
def run(
    scenario: str,
    arena_name: str,
    population: str | None,
    months: int,
    seed: int,
    runs: int,
    allocation,
    outsider_month: int,
):
    """Run scripted populations and print the month-by-month state and the metrics table."""
    console = Console(width=160)
    try:
        pop = build_population(arena_name, population)
        records = run_episodes(
            runs=runs,
            seed=seed,
            scenario=scenario,
            arena=arena_name,
            population=pop,
            num_months=months,
            allocation=allocation,
            outsider_month=outsider_month or None,
        )
    except ConfigError as err:
        raise click.BadParameter(str(err)) from err
    roles = ", ".join(f"agent_{i}={k}" for i, k in enumerate(pop.kinds))
    console.print(f"[bold]{scenario}[/bold], arena {arena_name}: {ARENAS[arena_name].description}")
    console.print(f"population {pop.spec}: {roles}")
    console.print(_month_table(records[0], f"run 0 (seed {records[0].seed}), month by month"))
    table = metrics.metrics_table(records)
    out = Table(title="metrics (GovSim §2.4 + cooperative yield)")
    for col in _SHOWN:
        out.add_column(col, justify="right")
    for row in table[list(_SHOWN)].itertuples(index=False):
        out.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    console.print(out)
    s = metrics.summary(records)
    console.print(
        f"survival rate {s['survival_rate']:.3f} over {int(s['runs'])} run(s); mean survival time "
        f"{s['survival_time']:.2f}, efficiency {s['efficiency']:.3f}, equality {s['equality']:.3f}, "
        f"over-usage {s['over_usage']:.3f}, cooperative yield {s['cooperative_yield']:.3f}"
    )
    console.print(_karma_table(records[0]))


def _karma_table(record) -> Table:
    karma = metrics.karma_trajectories(record)
    table = Table(title="karma trajectory (run 0)")
    table.add_column("month", justify="right")
    for a in karma.columns:
        table.add_column(a, justify="right")
    for month, row in karma.iterrows():
        table.add_row(str(month), *(f"{v:g}" for v in row))
    return table
