"""Run tier-1 methods and write what a researcher reads: ``summary.json``, per-step and per-episode tables
(Parquet + CSV), a Markdown results table, PNG plots, the run configs and the scars agent's ledger.

Output layout of ``DIR``::

    summary.json          per method: success_rate, rvr, svr, rvr_covered, complexity_tokens_final, prop1_ok, …
    steps.parquet/.csv    one row per decision (all methods)
    episodes.parquet/.csv one row per episode (all methods)
    results.md            the comparison table
    rvr_success.png, complexity.png, svr.png, signal.png (the terms of d_t per decision, methods with a monitor)
    config.json           every method's frozen config
    <method>/ledger.sqlite   the scars agent's audit ledger (scars methods only)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from experiments.config import METHODS, Tier1Config
from experiments.report import (
    atomic_write_text,
    markdown_table,
    paired_differences,
    paired_markdown,
    plot_complexity,
    plot_rvr_success,
    plot_signal,
    plot_svr,
    write_json,
    write_table,
)
from experiments.tier1 import RunResult, build_policy, method_label, run_tier1
from experiments.tracking import Tracker


def run_many(configs: Sequence[Tier1Config], out: Path, console: Console | None = None) -> dict[str, dict]:
    """Run each config in turn (with a progress bar), then write the combined outputs into ``out``."""
    console = console or Console()
    if (
        not console.is_terminal and console.width < 120
    ):  # logs and pipes: do not squeeze the table into 80 columns
        console = Console(width=120)
    # every model and server is loaded and checked before anything is written (a bad one fails with OUT untouched)
    policies = [build_policy(cfg) for cfg in configs]
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, RunResult] = {}
    with Progress(
        TextColumn("[bold]{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("episodes"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        for cfg, policy in zip(configs, policies, strict=True):
            label = method_label(cfg)
            task = progress.add_task(label, total=cfg.episodes)
            method_dir = out / label.replace(":", "-")
            tracker = Tracker(
                cfg.wandb,
                project=cfg.wandb_project,
                name=cfg.run_name,
                config=cfg.to_dict(),
                out=out,
                group=out.name,
            )
            result = run_tier1(
                cfg,
                method_dir,
                progress=lambda done, total, task=task: progress.update(task, completed=done),
                policy=policy,
            )
            tracker.log_run(result.episodes, result.summary)
            results[label] = (result, tracker)
    summary = {label: r.summary for label, (r, _) in results.items()}
    steps = pd.concat([r.steps for r, _ in results.values()], ignore_index=True)
    episodes = pd.concat([r.episodes for r, _ in results.values()], ignore_index=True)
    write_table(steps, out / "steps")
    write_table(episodes, out / "episodes")
    write_json(
        out / "config.json", {label: cfg.to_dict() for label, cfg in zip(results, configs, strict=True)}
    )
    table = markdown_table(summary)
    reference = "scars" if "scars" in summary else next(iter(summary))
    paired = paired_differences(episodes, reference, seed=configs[0].seed if configs else 0)
    atomic_write_text(out / "results.md", results_markdown(configs, table, paired, reference))
    write_json(out / "paired.json", paired)
    plots = {
        "rvr_success": plot_rvr_success(summary, out / "rvr_success.png"),
        "complexity": plot_complexity(steps, out / "complexity.png"),
        "svr": plot_svr(episodes, out / "svr.png"),
    }
    signal = plot_signal(steps, out / "signal.png", tau=configs[0].tau if configs else None)
    if signal is not None:
        plots["signal"] = signal
    for _, tracker in results.values():
        tracker.log_images(plots)
        tracker.finish()
    write_json(out / "summary.json", summary)
    _print_summary(console, summary)
    for label, m in summary.items():
        broken = [name for key, name in GUARANTEES if m.get(key) is False]
        if broken:
            console.print(
                f"[bold red]GUARANTEE VIOLATED[/] in {label}: {', '.join(broken)} — see summary.json"
            )
    return summary


GUARANTEES: tuple[tuple[str, str], ...] = (
    ("plane_ledger_ok", "control plane ≠ fold of the ledger"),
    ("prop1_ok", "Prop. 1 (a covered failure is not masked)"),
    ("prop2_ok", "Prop. 2 (C(S_t) > K·C_max)"),
    ("prop3_ok", "Prop. 3 (off-failure drift above sqrt(ε/2))"),
    ("generate_mask_ok", "generate mode wrote a masked command"),
)
"""The checks a run must pass (``experiments.guarantees``): summary key, what a violation means."""


def results_markdown(configs: Sequence[Tier1Config], table: str, paired: dict, reference: str) -> str:
    """``results.md``: what was run (seed, episodes, schedule), the table with n, and the paired differences."""
    seeds = sorted({c.seed for c in configs})
    episodes = sorted({c.episodes for c in configs})
    schedules = sorted({c.schedule for c in configs})
    lines = [
        "# Tier-1 results",
        "",
        f"Seed {', '.join(map(str, seeds))}; {', '.join(map(str, episodes))} episodes per method; schedule "
        f"{', '.join(schedules)}; every method plays the same games. Rates are pooled counts (n beside each); "
        "`n/a` = undefined (nothing to measure), never 0. RVR counts exposure spells per rule family "
        "(`experiments/metrics.py`).",
        "",
        table,
        "",
    ]
    if paired:
        lines += [
            f"## Paired differences against {reference}",
            "",
            "Same seed, same games: each method's pooled rate minus the reference's, with a 95% interval from an "
            "episode-paired cluster bootstrap (2000 resamples); fewer than 5 paired episodes is flagged.",
            "",
            paired_markdown(paired, reference),
            "",
        ]
    return "\n".join(lines)


def _print_summary(console: Console, summary: dict[str, dict]) -> None:
    table = Table(title="Tier-1 comparison", min_width=100)
    cols = [
        ("success", "success_rate", "{:.2f}"),
        ("RVR", "rvr", "{:.3f}"),
        ("n", "reexposures", "{:.0f}"),
        ("RVR ep.", "rvr_episode", "{:.3f}"),
        ("RVR cov.", "rvr_covered", "{:.3f}"),
        ("SVR", "svr", "{:.3f}"),
        ("held-out", "heldout_first_violation_rate", "{:.2f}"),
        ("mem. tokens", "complexity_tokens_final", "{:.0f}"),
        ("Prop.1", "prop1_ok", "{}"),
        ("Prop.2", "prop2_ok", "{}"),
        ("Prop.3", "prop3_ok", "{}"),
    ]
    table.add_column("method", no_wrap=True)
    for name, _, _ in cols:
        table.add_column(name, justify="right", no_wrap=True)
    for label, m in summary.items():
        cells = []
        for _, key, fmt in cols:
            v = m.get(key)
            cells.append("–" if v is None or (isinstance(v, float) and v != v) else fmt.format(v))
        table.add_row(label, *cells)
    console.print(table)


def demo_configs(episodes: int, seed: int, wandb: bool = False) -> list[Tier1Config]:
    """All six methods on the paper schedule (``scars demo``)."""
    return [Tier1Config(method=m, episodes=episodes, seed=seed, wandb=wandb) for m in METHODS]


def load_summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


__all__ = ["demo_configs", "load_summary", "run_many"]
