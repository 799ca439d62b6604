"""Tier-2 outputs: the files of a run folder, the comparison tables (anti-collusion, transfer) and the plots.

Output layout of a ``scars run tier2`` folder ``DIR``::

    summary.json              the run's summary ({method label: summary} for several methods) (GovSim's suite with n and 95% run-clustered CIs, …)
    steps.parquet/.csv        one row per learning seat's decision (z_V, z_R, z_C, z_I, d_t, amount, f(t)/|I|, …)
    months.parquet/.csv       one row per (run, month): stock, f(t), requests, catches, punishments, karma
    runs.parquet/.csv         one row per run: GovSim's metrics and the learners' own
    results.md                the table, with n beside every rate
    resource.png, harvest.png, karma.png
    config.json               the frozen config
    tier2_state.json          the carried state of every learning seat (what ``--transfer-from`` reads)
    agent_i/ledger.sqlite     a scars seat's audit ledger; agent_i/memory.json a baseline's memory
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scars.experiments.report import (
    ARENA_RULE_SET_NOTE,
    atomic_write_text,
    plt,
    rule_set_markdown,
    save_figure,
    write_json,
    write_table,
)
from scars.experiments.stats import pooled_ratio


def _fmt(value: Any, fmt: str = "{:.2f}") -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    return fmt.format(value)


def _ci(interval: Mapping[str, Any] | None, fmt: str = "{:.2f}") -> str:
    """``est [lo, hi]`` from an ``Interval.to_json()``; "n/a" when undefined; † when it rests on < 5 clusters."""
    if not interval or interval.get("estimate") is None:
        return "n/a"
    text = fmt.format(interval["estimate"])
    if interval.get("ci"):
        lo, hi = interval["ci"]
        text += f" [{fmt.format(lo)}, {fmt.format(hi)}]"
    return text + ("†" if interval.get("few_clusters") else "")


SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    # (summary key, header); *_ci keys render as estimate [95% CI]
    ("runs", "n runs"),
    ("survival_rate_ci", "survival rate"),
    ("survival_time_ci", "survival time (months)"),
    ("efficiency_ci", "efficiency"),
    ("equality_mean", "equality"),
    ("over_usage_ci", "over-usage ↓"),
    ("learner_over_usage_ci", "learners' over-usage ↓"),
    ("cooperative_yield_ci", "cooperative yield"),
    ("rvr_ci", "tier-2 RVR ↓"),
    ("reexposures", "n re-exposures"),
    ("learner_punished_justified", "punishments received: justified"),
    ("learner_punished_unjustified", "unjustified"),
    ("scars_admitted", "scars admitted"),
    ("inappropriate_scars", "inappropriate scars ↓"),
    ("memory_tokens_final", "memory tokens"),
    ("plane_ledger_ok", "plane = ledger"),
    ("ledger_verified", "ledger verified"),
    ("prop1_ok", "Prop.1"),
    ("prop2_ok", "Prop.2"),
    ("prop3_ok", "Prop.3"),
)


OUTSIDER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("outsider_month", "outsider joins (month)"),
    ("outsider_over_usage_ci", "outsider's over-usage"),
    ("outsider_punished_justified", "outsider punished (justified)"),
)
"""Shown only when a summary comes from GovSim's outsider variant."""


def summary_table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """The Markdown table of one or more tier-2 summaries (one row per label)."""
    columns = SUMMARY_COLUMNS
    if any(s.get("outsider_month") for s in summaries.values()):
        columns = (*SUMMARY_COLUMNS[:1], *OUTSIDER_COLUMNS, *SUMMARY_COLUMNS[1:])
    head = "| method | " + " | ".join(h for _, h in columns) + " |"
    rule = "| --- |" + " ---: |" * len(columns)
    lines = [head, rule]
    for label, s in summaries.items():
        cells = []
        for key, _ in columns:
            value = s.get(key)
            cells.append(
                _ci(value)
                if key.endswith("_ci")
                else _fmt(value, "{:.0f}" if isinstance(value, int) else "{:.2f}")
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _monthly_band(months: pd.DataFrame, column: str, num_months: int, seed: int) -> tuple[np.ndarray, ...]:
    """Mean of ``column`` per month over runs (a month after a collapse counts 0) with a 95% run-bootstrap band."""
    runs = sorted(months["run"].unique())
    grid = np.zeros((len(runs), num_months))
    for r, run in enumerate(runs):
        rows = months[months["run"] == run]
        for row in rows.itertuples():
            grid[r, int(row.month) - 1] = float(getattr(row, column))
    mean, low, high = [], [], []
    rng = np.random.default_rng(np.random.SeedSequence([seed, 77]))
    for m in range(num_months):
        iv = pooled_ratio(grid[:, m], np.ones(len(runs)), rng, samples=500)
        mean.append(iv.estimate)
        low.append(iv.estimate if iv.low is None else iv.low)
        high.append(iv.estimate if iv.high is None else iv.high)
    return np.arange(1, num_months + 1), np.array(mean), np.array(low), np.array(high)


def _mark_outsider(ax, months_by_label: Mapping[str, pd.DataFrame]) -> None:
    """A dotted line at the month the outsider joined (GovSim's outsider variant), when a run's group grew."""
    joined = set()
    for months in months_by_label.values():
        if "group_size" in months and months["group_size"].nunique() > 1:
            grown = months[months["group_size"] == months["group_size"].max()]
            joined.add(int(grown["month"].min()))
    for month in sorted(joined):
        ax.axvline(month - 0.5, linestyle=":", color="grey", label=f"outsider joins (month {month})")


def plot_resource(
    months_by_label: Mapping[str, pd.DataFrame], num_months: int, path: Path, seed: int = 0
) -> Path:
    """The pool at the start of each month per method: mean over runs with a 95% band (0 after a collapse)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, months in months_by_label.items():
        x, mean, low, high = _monthly_band(months, "stock_before", num_months, seed)
        n = months["run"].nunique()
        ax.plot(x, mean, marker="o", label=f"{label} (n={n} runs)")
        ax.fill_between(x, low, high, alpha=0.2)
    ax.set_xlabel("month")
    _mark_outsider(ax, months_by_label)
    ax.set_ylabel("resource at month start h(t)")
    ax.set_title("Resource level per month (mean, 95% run-bootstrap band)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_harvest(
    months_by_label: Mapping[str, pd.DataFrame], num_months: int, path: Path, seed: int = 0
) -> Path:
    """The group's catch per month against the sustainable catch f(t) (means over runs, 95% bands)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, months in months_by_label.items():
        frame = months.assign(group_catch=months["catches"].map(lambda c: float(np.sum(c))))
        x, mean, low, high = _monthly_band(frame, "group_catch", num_months, seed)
        n = months["run"].nunique()
        line = ax.plot(x, mean, marker="o", label=f"{label}: Σ catch (n={n})")[0]
        ax.fill_between(x, low, high, alpha=0.15, color=line.get_color())
        x, f, _, _ = _monthly_band(months, "sustainable_catch", num_months, seed)
        ax.plot(x, f, linestyle="--", color=line.get_color(), label=f"{label}: f(t)")
    ax.set_xlabel("month")
    _mark_outsider(ax, months_by_label)
    ax.set_ylabel("units per month")
    ax.set_title("Group harvest vs the sustainable catch f(t)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_karma(
    months_by_label: Mapping[str, pd.DataFrame], num_months: int, path: Path, seed: int = 0
) -> Path:
    """Each seat's karma at the end of each month (mean over the runs that reached it)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, months in months_by_label.items():
        seats = len(months["karma"].iloc[0]) if len(months) else 0
        for j in range(seats):
            per_month = months.assign(k=months["karma"].map(lambda k, j=j: float(k[j]))).groupby("month")["k"]
            mean, count = per_month.mean(), per_month.count()
            ax.plot(mean.index, mean.values, marker=".", label=f"{label} agent_{j} (n≤{int(count.max())})")
    ax.set_xlabel("month")
    ax.set_ylabel("karma at month end")
    ax.set_title("Karma trajectories (mean over the runs that reached the month)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return save_figure(fig, path)


def write_tier2(
    out: Path, results: Mapping[str, Any], configs: Mapping[str, Any], title: str = "Tier-2 results"
) -> dict:
    """Write the files of the module docstring for one or more labelled ``Tier2Result`` s; returns the summaries."""
    out.mkdir(parents=True, exist_ok=True)
    summaries = {label: r.summary for label, r in results.items()}
    frames = {
        name: [getattr(r, name).assign(label=label) for label, r in results.items()]
        for name in ("steps", "months", "runs")
    }
    for name, parts in frames.items():
        table = (
            pd.concat([p for p in parts if not p.empty], ignore_index=True)
            if any(not p.empty for p in parts)
            else pd.DataFrame()
        )
        if name == "months" and not table.empty:  # list cells as text for CSV/Parquet
            for col in ("requests", "catches", "karma"):
                table[col] = table[col].map(lambda v: ",".join(f"{x:g}" for x in v))
        write_table(table, out / name)
    # one run: its config and summary as they are (a sweep's run folder); several: keyed by method label
    single = len(configs) == 1
    cfg_json = (
        next(iter(configs.values())).to_dict() if single else {k: c.to_dict() for k, c in configs.items()}
    )
    write_json(out / "config.json", cfg_json)
    write_json(out / "summary.json", next(iter(summaries.values())) if single else summaries)
    first = next(iter(configs.values()))
    months = {label: r.months for label, r in results.items()}
    plot_resource(months, first.months, out / "resource.png", first.seed)
    plot_harvest(months, first.months, out / "harvest.png", first.seed)
    plot_karma(months, first.months, out / "karma.png", first.seed)
    lines = [
        f"# {title}",
        "",
        f"Arena {', '.join(sorted({c.arena for c in configs.values()}))}, set-up "
        f"{', '.join(sorted({c.setup for c in configs.values()}))}, seed {first.seed}, {first.months} months per run. "
        "Rates are pooled counts over runs with 95% run-clustered bootstrap intervals (n = runs; † fewer than 5); "
        "`n/a` = undefined, never 0. Over-usage counts catches above f(t)/|I| (GovSim). An inappropriate scar forbids "
        "a harvest at or below the fair share at a pool level where it is sustainable (the arena's ground truth).",
        "",
        summary_table(summaries),
        "",
        "![resource](resource.png) ![harvest](harvest.png) ![karma](karma.png)",
        "",
        *rule_set_markdown(summaries, ARENA_RULE_SET_NOTE.format(clusters="run (a run's seats together)")),
    ]
    atomic_write_text(out / "results.md", "\n".join(lines))
    return summaries
