"""The simulated LM's text channel, swept (issue 11): does a comparison survive the simulator's settings?

The embedded policy's in-context influence (``SimulatedLMConfig.influence_gain`` — how far one fully relevant text
item moves a logit — and ``compliance`` — how much text steers it at all) decides how much a text memory can do, and
its ``replan_competence`` — how well it finds a compliant route once it knows what not to do, whether a controller
masked the step or its context talked it out of it — how much that knowledge is worth to any method.
:func:`run_sensitivity` runs every method at every grid point on the same seeds; :func:`frontier` pools each
(method, grid point) over its episodes (success and SVR with episode-clustered bootstrap intervals, n = episodes);
:func:`claims` says, for each headline comparison, at how many grid points it holds — and where it does not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scars.experiments.config import METHODS, Tier1Config
from scars.experiments.report import save_figure
from scars.experiments.stats import pooled_ratio
from scars.experiments.tier1 import method_label, run_tier1

DEFAULT_METHODS = (METHODS[0], "scars:hard_blocklist", "scars:storm_only", *METHODS[1:])
"""Every method of the tier-1 table and the two controls (``method`` or ``scars:<ablation>``)."""


GRID_KEYS: tuple[str, ...] = ("influence_gain", "compliance", "replan_competence")
"""The simulator settings a grid point fixes (``SimulatedLMConfig`` fields, ``Tier1Config`` fields)."""


@dataclass(frozen=True)
class Grid:
    """The simulator settings swept: every combination of ``influence_gain``, ``compliance`` and
    ``replan_competence``."""

    influence_gain: tuple[float, ...] = (4.0, 12.0, 36.0, 96.0)
    compliance: tuple[float, ...] = (0.5, 1.0)
    replan_competence: tuple[float, ...] = (0.0, 0.5, 1.0)

    def points(self) -> list[tuple[float, float, float]]:
        return list(itertools.product(self.influence_gain, self.compliance, self.replan_competence))


def point_label(gain: float, compliance: float, competence: float) -> str:
    return f"gain {gain:g}, compliance {compliance:g}, re-plan {competence:g}"


def config_for(method: str, **fields) -> Tier1Config:
    """``scars:storm_only`` → the scars method with that ablation; anything else is a method name."""
    name, _, ablation = method.partition(":")
    return Tier1Config(method=name, ablation=ablation or "none", **fields)


def run_sensitivity(
    methods: Sequence[str],
    grid: Grid,
    seeds: Sequence[int],
    episodes: int,
    out: Path,
    progress: Callable[[int, int, str], None] | None = None,
    **fields,
) -> pd.DataFrame:
    """Every method × grid point × seed as one tier-1 run (run folders under ``out/runs``); returns the
    per-episode table of all runs, with the method label and the grid settings (``GRID_KEYS``) as columns."""
    jobs = [(m, point, s) for point in grid.points() for m in methods for s in seeds]
    tables = []
    for i, (method, point, seed) in enumerate(jobs):
        setting = dict(zip(GRID_KEYS, point, strict=True))
        cfg = config_for(method, episodes=episodes, seed=seed, **setting, **fields)
        label = method_label(cfg)
        gain, compliance, competence = point
        folder = f"gain{gain:g}-c{compliance:g}-r{competence:g}"
        run_dir = out / "runs" / folder / f"{label.replace(':', '-')}-s{seed}"
        result = run_tier1(cfg, run_dir)
        table = result.episodes.assign(method=label, **setting, seed=seed)
        tables.append(table)
        if progress is not None:
            progress(i + 1, len(jobs), f"{label} {point_label(*point)} seed={seed}")
    return pd.concat(tables, ignore_index=True)


def frontier(episodes: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per (method, grid point): success and SVR pooled over episodes (all seeds), each with its episode-clustered
    95% bootstrap interval, RVR pooled likewise, and n = episodes."""
    rows = []
    rng = np.random.default_rng(np.random.SeedSequence([seed, 5117]))
    for (method, gain, compliance, competence), g in episodes.groupby(["method", *GRID_KEYS], sort=True):
        success = pooled_ratio(g["won"].astype(float), np.ones(len(g)), rng)
        svr = pooled_ratio(g["violating_steps"], g["exposed_steps"], rng)
        rvr = pooled_ratio(g["repeat_violations"], g["reexposures"], rng)
        rows.append(
            {
                "method": method,
                "influence_gain": gain,
                "compliance": compliance,
                "replan_competence": competence,
                "n_episodes": len(g),
                "success": success.estimate,
                "success_lo": success.low,
                "success_hi": success.high,
                "svr": svr.estimate,
                "svr_lo": svr.low,
                "svr_hi": svr.high,
                "rvr": rvr.estimate,
                "rvr_lo": rvr.low,
                "rvr_hi": rvr.high,
                "reexposures": int(g["reexposures"].sum()),
                "replans": int(g["replans"].sum()),
            }
        )
    return pd.DataFrame(rows)


def claims(table: pd.DataFrame, reference: str = "scars") -> list[str]:
    """For each metric, at how many grid points the reference method is best (lowest RVR / SVR, highest success),
    and at which points another method beats it — stated whichever way the data fall. A metric undefined at a grid
    point (None: nothing to measure) is counted as such, never as a win."""
    out = []
    points = table.groupby(list(GRID_KEYS), sort=True)
    for metric, better in (("rvr", "lower"), ("svr", "lower"), ("success", "higher")):
        wins, lost, undefined = 0, [], 0
        for point, g in points:
            ref = g[g["method"] == reference][metric]
            if ref.empty or ref.isna().all():
                undefined += 1
                continue
            ref_value = float(ref.iloc[0])
            others = g[(g["method"] != reference) & g[metric].notna()]
            beaten = (
                others[others[metric] < ref_value]
                if better == "lower"
                else others[others[metric] > ref_value]
            )
            if beaten.empty:
                wins += 1
            else:
                who = ", ".join(f"{r.method} {getattr(r, metric):.3f}" for r in beaten.itertuples())
                sign = "<" if better == "higher" else ">"
                lost.append(f"{point_label(*point)}: {reference} {ref_value:.3f} {sign} {who}")
        total = wins + len(lost) + undefined
        line = f"{metric.upper()} ({better} is better): {reference} is best at {wins} of {total} grid points"
        if undefined:
            line += f" ({undefined} undefined)"
        line += "." if not lost else "; beaten at " + "; ".join(lost) + "."
        out.append(line)
    dominated, dominates = [], 0
    for point, g in points:
        ref = g[g["method"] == reference]
        if ref.empty or ref[["success", "svr"]].isna().any(axis=None):
            continue
        success, svr = float(ref["success"].iloc[0]), float(ref["svr"].iloc[0])
        others = g[(g["method"] != reference) & g["success"].notna() & g["svr"].notna()]
        better = others[
            (others["success"] >= success)
            & (others["svr"] <= svr)
            & ((others["success"] > success) | (others["svr"] < svr))
        ]
        worse = others[
            (others["success"] <= success)
            & (others["svr"] >= svr)
            & ((others["success"] < success) | (others["svr"] > svr))
        ]
        dominates += len(worse)
        dominated += [f"{r.method} at {point_label(*point)}" for r in better.itertuples()]
    line = (
        f"Frontier (success vs SVR, point estimates): {reference} is dominated at "
        f"{len(dominated)} (method, grid point) pairs"
    )
    line += ("." if not dominated else ": " + "; ".join(dominated) + ".") + (
        f" It dominates {dominates} (method, grid point) pairs."
    )
    out.append(line)
    return out


def plot_frontier(table: pd.DataFrame, path: Path) -> Path:
    """Success vs SVR per method, one panel per compliance, one point per influence_gain (labelled), with 95% CIs
    on both axes; n = episodes per point in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(c, r) for c, r in zip(table["compliance"], table["replan_competence"], strict=True)})
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.8), squeeze=False)
    methods = list(dict.fromkeys(table["method"]))
    colours = plt.get_cmap("tab10")
    for ax, (compliance, competence) in zip(axes[0], panels, strict=True):
        sub = table[(table["compliance"] == compliance) & (table["replan_competence"] == competence)]
        for k, method in enumerate(methods):
            m = sub[sub["method"] == method].sort_values("influence_gain")
            if m.empty:
                continue
            x, y = m["svr"].astype(float), m["success"].astype(float)
            xerr = np.vstack([x - m["svr_lo"].astype(float), m["svr_hi"].astype(float) - x])
            yerr = np.vstack([y - m["success_lo"].astype(float), m["success_hi"].astype(float) - y])
            colour = colours(k % 10)
            ax.errorbar(
                x,
                y,
                xerr=np.nan_to_num(xerr),
                yerr=np.nan_to_num(yerr),
                fmt="-o",
                ms=4,
                color=colour,
                label=method,
                capsize=2,
                lw=1,
            )
            for gx, gy, gain in zip(x, y, m["influence_gain"], strict=True):
                ax.annotate(f"{gain:g}", (gx, gy), fontsize=6, xytext=(3, 3), textcoords="offset points")
        n = int(sub["n_episodes"].min()) if len(sub) else 0
        ax.set_title(
            f"compliance {compliance:g}, re-plan competence {competence:g}\n(n = {n} episodes per point; labels: "
            "influence_gain)",
            fontsize=9,
        )
        ax.set_xlabel("safety-violation rate SVR (lower is better)")
        ax.set_ylabel("task success rate (higher is better)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path)


def frontier_markdown(table: pd.DataFrame) -> str:
    """The frontier table in Markdown: estimate [95% CI] per metric, n = episodes."""

    def cell(row, name: str) -> str:
        value, lo, hi = row[name], row[f"{name}_lo"], row[f"{name}_hi"]
        if value is None or value != value:
            return "undefined"
        ci = "" if lo is None or lo != lo else f" [{lo:.2f}, {hi:.2f}]"
        return f"{value:.3f}{ci}"

    lines = [
        "| influence_gain | compliance | replan_competence | method | success | SVR | RVR (re-exposures) "
        "| re-plans | n episodes |",
        "| ---: | ---: | ---: | --- | --- | --- | --- | ---: | ---: |",
    ]
    for _, row in table.iterrows():
        lines.append(
            f"| {row['influence_gain']:g} | {row['compliance']:g} | {row['replan_competence']:g} | {row['method']} "
            f"| {cell(row, 'success')} | {cell(row, 'svr')} | {cell(row, 'rvr')} ({row['reexposures']}) "
            f"| {row['replans']} | {row['n_episodes']} |"
        )
    return "\n".join(lines) + "\n"
