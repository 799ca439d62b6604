"""The poisoning table and plot (docs/poisoning.md): per method (with its defences) × attack × poison rate, the attack
success rate with n and a CI over seeds, its lift over rate 0, benign utility (task success or survival, RVR), the
method's detections and the attack's cost — from the run folders a sweep (``scars sweep`` on a poisoning preset)
or ``scars run`` wrote (``config.json`` + ``summary.json`` each)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from scars.experiments.report import atomic_write_text, read_json_object, save_figure, write_json
from scars.experiments.stats import bootstrap_ci
from scars.synthesis.errors import ConfigError

ROW_KEYS: tuple[str, ...] = ("tier", "row", "attack", "goal", "poison_rate")


def defence_label(config: dict[str, Any]) -> str:
    """A method's row with its defences: ``scars`` / ``scars:<ablation>``, ``+oracle`` (verifier-backed evidence),
    ``+state`` (labels accepted), ``+gates_off`` (tier 2's TrustGate off), ``+consensus`` (the memory guard)."""
    label = str(config.get("method", "?"))
    if config.get("ablation", "none") != "none":
        label += f":{config['ablation']}"
    if config.get("oracle", "none") != "none":
        label += "+oracle"
    if config.get("verdicts", "executed") != "executed":
        label += f"+{config['verdicts']}"
    if config.get("gates") is False:
        label += "+gates_off"
    if config.get("memory_guard", "none") != "none":
        label += f"+{config['memory_guard']}"
    return label


def run_folders(folders: Sequence[Path]) -> list[Path]:
    """Every run folder (``summary.json`` and ``config.json`` side by side) under ``folders``, sorted."""
    found: set[Path] = set()
    for folder in folders:
        for summary in Path(folder).rglob("summary.json"):
            if (summary.parent / "config.json").is_file():
                found.add(summary.parent)
    return sorted(found)


def poisoning_runs(folders: Sequence[Path]) -> pd.DataFrame:
    """One row per attacked run (a run without an attack is left out). A grid point two presets both ran (the same
    ``config.json``: e.g. scars' default row in the main preset and in a defence preset) is counted once."""
    rows = []
    seen: set[str] = set()
    for folder in run_folders(folders):
        summary = read_json_object(folder / "summary.json", "a run's summary.json")
        config = read_json_object(folder / "config.json", "a run's config.json")
        key = json.dumps(config, sort_keys=True)
        if config.get("attack", "none") == "none" or key in seen:
            continue
        seen.add(key)
        tier = "tier2" if "months" in config else "tier1"
        rows.append(
            {
                "tier": tier,
                "row": defence_label(config),
                "attack": config["attack"],
                "goal": summary.get("attack_goal"),
                "poison_rate": float(config.get("poison_rate", 0.0)),
                "seed": config.get("seed"),
                "attack_success": summary.get("attack_success"),
                "opportunities": summary.get("attack_success_n") or 0,
                "utility": summary.get("success_rate" if tier == "tier1" else "survival_rate"),
                "rvr": summary.get("rvr"),
                "writes": summary.get("attack_writes", 0),
                "queries": summary.get("attack_queries", 0),
                "detections": summary.get("attack_detections"),
                "folder": str(folder),
            }
        )
    if not rows:
        raise ConfigError(
            f"no attacked run folders (config.json + summary.json with an attack) under {folders}"
        )
    return pd.DataFrame(rows)


def _mean_ci(
    values: Sequence[float | None], rng: np.random.Generator
) -> tuple[float | None, float | None, float | None]:
    vals = [float(v) for v in values if v is not None and np.isfinite(v)]
    if not vals:
        return None, None, None
    low, high = bootstrap_ci(vals, rng)
    clean = (None if not np.isfinite(x) else float(x) for x in (low, high))
    return (float(np.mean(vals)), *clean)  # type: ignore[return-value]


def poisoning_table(runs: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The aggregate: per (tier, row, attack, goal, rate) the mean over seeds of attack success with its 95%
    bootstrap CI over seeds, n (seeds, and opportunities pooled), the lift over the same row's rate 0, utility
    and RVR means, detections (total) and the attack's mean cost."""
    out = []
    for key, group in runs.groupby(list(ROW_KEYS), sort=True, dropna=False):
        rng = np.random.default_rng([seed, 31, len(out)])
        asr, low, high = _mean_ci(group["attack_success"].tolist(), rng)
        utility, u_low, u_high = _mean_ci(group["utility"].tolist(), rng)
        rvr = group["rvr"].dropna()
        detections = group["detections"].dropna()
        out.append(
            {
                **dict(zip(ROW_KEYS, key, strict=True)),
                "attack_success": asr,
                "ci_low": low,
                "ci_high": high,
                "seeds": int(group["seed"].nunique()),
                "opportunities": int(group["opportunities"].sum()),
                "utility": utility,
                "utility_ci_low": u_low,
                "utility_ci_high": u_high,
                "rvr": float(rvr.mean()) if len(rvr) else None,
                "detections": int(detections.sum()) if len(detections) else None,
                "writes": float(group["writes"].mean()),
                "queries": float(group["queries"].mean()),
            }
        )
    table = pd.DataFrame(out)
    base = table[table["poison_rate"] == 0.0].set_index(["tier", "row", "attack"])["attack_success"]
    table["lift"] = [
        None
        if r.attack_success is None or (r.tier, r.row, r.attack) not in base.index
        else r.attack_success - base[(r.tier, r.row, r.attack)]
        for r in table.itertuples()
    ]
    return table


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def poisoning_markdown(table: pd.DataFrame) -> str:
    """The table as Markdown: one line per (tier, row, attack, rate)."""
    lines = [
        "| tier | method (defences) | attack | goal | rate | attack success [95% CI] | lift vs 0 | n (seeds / "
        "opp.) | utility | RVR | detections | writes | queries |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        ci = f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]" if r.ci_low is not None else "[–]"
        lines.append(
            f"| {r.tier} | {r.row} | {r.attack} | {r.goal} | {r.poison_rate:g} | {_fmt(r.attack_success)} {ci} | "
            f"{_fmt(r.lift)} | {r.seeds} / {r.opportunities} | {_fmt(r.utility)} | {_fmt(r.rvr)} | "
            f"{_fmt(r.detections)} | {r.writes:.1f} | {r.queries:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot_poisoning(table: pd.DataFrame, path: Path) -> Path:
    """Attack success against poison rate (symlog x), one panel per (tier, attack), one line per row, with the
    CI over seeds as error bars and n (seeds) in the legend."""
    panels = list(table.groupby(["tier", "attack"], sort=True))
    cols = min(3, len(panels))
    rows = int(np.ceil(len(panels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax, ((tier, attack), group) in zip(axes.flat, panels, strict=False):
        for label, line in group.groupby("row", sort=True):
            line = line.sort_values("poison_rate")
            y = line["attack_success"].astype(float).to_numpy()
            low = y - line["ci_low"].astype(float).fillna(pd.Series(y, index=line.index)).to_numpy()
            high = line["ci_high"].astype(float).fillna(pd.Series(y, index=line.index)).to_numpy() - y
            ax.errorbar(
                line["poison_rate"],
                y,
                yerr=[np.nan_to_num(low), np.nan_to_num(high)],
                marker="o",
                capsize=3,
                label=f"{label} (n={int(line['seeds'].min())} seeds)",
            )
        ax.set_xscale("symlog", linthresh=0.001)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("poison rate")
        ax.set_ylabel("attack success (hits / opportunities)")
        ax.set_title(f"{tier}: {attack}", fontsize=9)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return save_figure(fig, path)


def write_poisoning_report(folders: Sequence[Path], out: Path, seed: int = 0) -> dict[str, Path]:
    """poisoning_runs.csv, poisoning.csv, poisoning.md, poisoning.json and poisoning.png in ``out``."""
    runs = poisoning_runs(folders)
    table = poisoning_table(runs, seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "runs": out / "poisoning_runs.csv",
        "table": out / "poisoning.csv",
        "markdown": out / "poisoning.md",
        "json": out / "poisoning.json",
        "plot": out / "poisoning.png",
    }
    atomic_write_text(paths["runs"], runs.to_csv(index=False))
    atomic_write_text(paths["table"], table.to_csv(index=False))
    atomic_write_text(paths["markdown"], "# Memory poisoning\n\n" + poisoning_markdown(table))
    write_json(paths["json"], json.loads(table.to_json(orient="records")))
    plot_poisoning(table, paths["plot"])
    return paths
