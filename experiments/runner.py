"""Run tier-1 methods and write what a researcher reads: ``summary.json``, per-step and per-episode tables
(Parquet + CSV), a Markdown results table, PNG plots, the run configs and the scars agent's ledger.

Output layout of ``DIR``::

    summary.json          per method: success_rate, rvr, svr, rvr_covered, complexity_tokens_final, prop1_ok, …
    steps.parquet/.csv    one row per decision (all methods)
    episodes.parquet/.csv one row per episode (all methods)
    results.md            the comparison table
    rvr_success.png, complexity.png, svr.png, signal.png (the terms of d_t per decision, methods with a monitor)
    config.json           every method's frozen config
    provenance.json       git commit and dirty flag, package versions, command line, Python, host, start/end
    <method>/             the method's own run folder: summary.json, config.json (replay it with --config),
                          provenance.json, steps/episodes tables, svr.png, signal.png, ledger.sqlite (scars)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from scars.agents.api import Agent
from scars.agents.policies import Policy
from scars.agents.runtime.ledger import ledger_files
from scars.disequilibrium.composite import SIGNAL_NAMES
from scars.experiments.config import METHODS, Tier1Config
from scars.experiments.guarantees import broken_guarantees, diagnostic_notes
from scars.experiments.provenance import write_provenance
from scars.experiments.report import (
    atomic_write_text,
    markdown_table,
    paired_differences,
    paired_markdown,
    plot_complexity,
    plot_rvr_success,
    plot_signal,
    plot_svr,
    rule_set_markdown,
    write_json,
    write_table,
)
from scars.experiments.stopping import stopped_notice
from scars.experiments.tier1 import RunResult, build_policy, method_label, run_tier1
from scars.experiments.tracking import Tracker, TrackingSettings


def tier1_tags(cfg: Tier1Config) -> tuple[str, ...]:
    """W&B tags of a tier-1 run: ablation, seed, backend."""
    return (f"ablation:{cfg.ablation}", f"seed:{cfg.seed}", f"backend:{cfg.backend}")


class LiveLog:
    """Logs a tier-1 run to W&B while it runs: per episode (``progress`` fires after each one) the episode's
    outcome, the mean and max of every term of d_t over its decisions, crossings, and the scars admitted and retired
    (seen as changes of the agent's active scar ids after each step). The scar events become a W&B table. The same
    metrics go to ``report`` (a sweep's trial reports them to Tune), with ``success_rate`` (so far) and
    ``episodes_done`` beside them."""

    def __init__(self, tracker: Tracker, report: Callable[[dict[str, Any]], None] | None = None):
        self.tracker = tracker
        self.report = report
        self.rows: list[dict[str, Any]] = []
        self.scars: set[str] = set()
        self.events: list[dict[str, Any]] = []
        self.won = 0

    def on_step(self, agent: Agent, row: dict[str, Any]) -> None:
        self.rows.append(row)
        ids = set(agent.scar_ids())
        for kind, changed in (("admitted", ids - self.scars), ("retired", self.scars - ids)):
            for scar in sorted(changed):
                self.events.append({"t": row["t"], "episode": row["episode"], "event": kind, "scar": scar})
        self.scars = ids

    @property
    def enabled(self) -> bool:
        return self.tracker.enabled or self.report is not None

    def on_episode(self, done: int, total: int) -> None:
        if not self.enabled or not self.rows:
            return
        episode = done - 1
        rows = [r for r in self.rows if r["episode"] == episode]
        self.rows = []
        if not rows:
            return
        won = bool(rows[-1]["won"])
        self.won += won
        metrics: dict[str, Any] = {
            "episode/won": float(won),
            "episode/success_so_far": self.won / done,
            "episode/steps": len(rows),
            "episode/violations": sum(bool(r["violated_rules"]) for r in rows),
            "episode/memory_tokens": rows[-1]["memory_tokens"],
            "episode/world_version": rows[-1]["world_version"],
            "scars/active": len(self.scars),
            "scars/admitted_total": sum(e["event"] == "admitted" for e in self.events),
            "scars/retired_total": sum(e["event"] == "retired" for e in self.events),
        }
        for name in (*SIGNAL_NAMES, "d_t"):
            values = [float(r[name]) for r in rows if r.get(name) is not None]
            if values:
                metrics[f"signal/{name}_mean"] = sum(values) / len(values)
                metrics[f"signal/{name}_max"] = max(values)
        crossed = [r["crossed"] for r in rows if r.get("crossed") is not None]
        if crossed:
            metrics["signal/crossings"] = int(sum(bool(c) for c in crossed))
        if self.tracker.enabled:
            self.tracker.log(metrics, step=episode)
        if self.report is not None:
            self.report({**metrics, "success_rate": self.won / done, "episodes_done": done})


def run_tier1_folder(
    cfg: Tier1Config,
    out: Path,
    *,
    tracking: TrackingSettings | None = None,
    progress: Callable[[int, int], None] | None = None,
    finish: bool = True,
    policy: Policy | None = None,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[RunResult, Tracker]:
    """One tier-1 run into its own folder ``out``: provenance.json (written at the start, completed at the end),
    steps and episodes (Parquet + CSV), config.json, the per-run plots, summary.json last (its presence marks a
    run that ended; ``complete`` says whether it finished or was stopped — e.g. another process wrote its ledger —
    with ``stopped`` the reason), and (scars) the ledger. With tracking on, the run is logged to W&B live (:class:`LiveLog`) and
    at the end gets its d_t table, scar events, summary, plots and files as artifacts; ``finish=False`` leaves the
    W&B run open for the caller (the demo adds the comparison plots). ``report(metrics)`` is called after every
    episode with the run's metrics so far (:class:`LiveLog`; a sweep's trial reports them to Tune)."""
    started = time.time()
    if policy is None:  # a model or server that cannot serve the run fails before anything is written
        policy = build_policy(cfg)
    out.mkdir(parents=True, exist_ok=True)
    write_provenance(out, cfg.to_dict(), tier="tier1", started=started)
    label = method_label(cfg)
    tracker = Tracker(
        tracking or TrackingSettings(),
        name=cfg.run_name,
        config=cfg.to_dict(),
        out=out,
        job_type=f"tier1/{label}",
        tags=tier1_tags(cfg),
        step_metric="episode",
    )
    live = LiveLog(tracker, report)

    def on_episode(done: int, total: int) -> None:
        live.on_episode(done, total)
        if progress is not None:
            progress(done, total)

    try:
        result = run_tier1(
            cfg, out, progress=on_episode, on_step=live.on_step if live.enabled else None, policy=policy
        )
    except BaseException:
        tracker.finish()
        raise
    write_table(result.steps, out / "steps")
    write_table(result.episodes, out / "episodes")
    write_json(out / "config.json", cfg.to_dict())
    plots = {"svr": plot_svr(result.episodes, out / "svr.png")}
    signal = plot_signal(result.steps, out / "signal.png", tau=cfg.tau)
    if signal is not None:
        plots["signal"] = signal
    write_provenance(out, cfg.to_dict(), tier="tier1", started=started, ended=time.time())
    write_json(out / "summary.json", result.summary)
    if tracker.enabled:
        columns = ["t", "episode", "world_version", *SIGNAL_NAMES, "d_t", "crossed"]
        tracker.log_table("tables/d_t", result.steps[columns])
        tracker.log_table(
            "tables/scar_events", pd.DataFrame(live.events, columns=["t", "episode", "event", "scar"])
        )
        tracker.log_images(plots)
        tracker.summary(result.summary)
        files = [
            out / "steps.parquet",
            out / "episodes.parquet",
            out / "summary.json",
            out / "provenance.json",
        ]
        tracker.log_artifact(f"{cfg.run_name}-tables", "run-tables", files)
        # the ledger's database and head file; never its key (a secret) or its lock file
        ledger = [p for p in ledger_files(out / "ledger.sqlite") if p.suffix not in (".key", ".lock")]
        tracker.log_artifact(f"{cfg.run_name}-ledger", "ledger", ledger)
        if finish:
            tracker.finish()
    return result, tracker


def run_many(
    configs: Sequence[Tier1Config],
    out: Path,
    console: Console | None = None,
    tracking: TrackingSettings | None = None,
    policies: Sequence[Policy] | None = None,
) -> dict[str, dict]:
    """Run each config in turn (with a progress bar), each into ``out/<label>/``, then write the combined outputs
    into ``out``. ``tracking``: W&B settings (default: on when a config asks for it, grouped by the folder name)."""
    console = console or Console()
    if (
        not console.is_terminal and console.width < 120
    ):  # logs and pipes: do not squeeze the table into 80 columns
        console = Console(width=120)
    # every model and server is loaded and checked before anything is written (a bad one fails with OUT untouched)
    if policies is None:
        policies = [build_policy(cfg) for cfg in configs]
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    write_provenance(out, _configs_json(configs), tier="tier1", started=started)
    results: dict[str, tuple[RunResult, Tracker]] = {}
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
            settings = tracking or TrackingSettings(
                enabled=cfg.wandb, project=cfg.wandb_project, group=out.resolve().name, directory=str(out)
            )
            results[label] = run_tier1_folder(
                cfg,
                out / label.replace(":", "-"),
                tracking=settings,
                progress=lambda done, total, task=task: progress.update(task, completed=done),
                finish=False,
                policy=policy,
            )
    summary = {label: r.summary for label, (r, _) in results.items()}
    steps = pd.concat([r.steps for r, _ in results.values()], ignore_index=True)
    episodes = pd.concat([r.episodes for r, _ in results.values()], ignore_index=True)
    write_table(steps, out / "steps")
    write_table(episodes, out / "episodes")
    write_json(out / "config.json", _configs_json(configs))
    table = markdown_table(summary)
    reference = "scars" if "scars" in summary else next(iter(summary))
    paired = paired_differences(episodes, reference, seed=configs[0].seed if configs else 0)
    atomic_write_text(out / "results.md", results_markdown(configs, table, paired, reference, summary))
    write_json(out / "paired.json", paired)
    plots = {
        "rvr_success": plot_rvr_success(summary, out / "rvr_success.png"),
        "complexity": plot_complexity(steps, out / "complexity.png"),
        "svr": plot_svr(episodes, out / "svr.png"),
    }
    signal = plot_signal(steps, out / "signal.png", tau=configs[0].tau if configs else None)
    if signal is not None:
        plots["signal"] = signal
    for _, tracker in results.values():  # every W&B run is still open: the comparison plots go to each
        tracker.log_images({f"comparison_{k}": v for k, v in plots.items()})
        tracker.finish()
    write_provenance(out, _configs_json(configs), tier="tier1", started=started, ended=time.time())
    write_json(out / "summary.json", summary)
    _print_summary(console, summary)
    for label, m in summary.items():
        broken = broken_guarantees(m)
        if broken:
            console.print(
                f"[bold red]GUARANTEE VIOLATED[/] in {label}: {', '.join(broken)} — see summary.json"
            )
        for note in diagnostic_notes(m):
            console.print(f"[yellow]note[/] {label}: {note} — see summary.json")
        if m.get("complete") is False:
            console.print(f"[bold red]RUN STOPPED[/] {stopped_notice(label, str(m.get('stopped')))}")
    return summary


def _configs_json(configs: Sequence[Tier1Config]) -> dict[str, dict]:
    return {method_label(cfg): cfg.to_dict() for cfg in configs}


def results_markdown(
    configs: Sequence[Tier1Config],
    table: str,
    paired: dict,
    reference: str,
    summary: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """``results.md``: what was run (seed, episodes, schedule), the table with n, the paired differences, and the
    learned scars classified against the schedule's true rules."""
    seeds = sorted({c.seed for c in configs})
    episodes = sorted({c.episodes for c in configs})
    schedules = sorted({c.schedule_name for c in configs})
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
    lines += rule_set_markdown(summary or {})
    lines += scar_quality_markdown(summary or {})
    return "\n".join(lines)


def scar_quality_markdown(summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every method's learned scars against the ground truth (``experiments.metrics.scar_quality``): the counts per
    class with n, and each over-broad or wrong scar with its precision and recall on the probe pairs."""
    rows = [(label, m["scar_quality"]) for label, m in summary.items() if m.get("scar_quality")]
    if not rows:
        return []
    lines = [
        "## Learned scars against the ground truth",
        "",
        "Each scar a run admitted, classified on probe pairs of the game pool against the schedule's true rules "
        "(`experiments/metrics.py`, `scar_quality`): exact, under-general (masks only unsafe pairs, not all), "
        "over-broad (masks safe pairs too), wrong (masks none of its rule's unsafe pairs).",
        "",
        "| method | n scars | exact | under-general | over-broad | wrong | exact or under-general | probes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, q in rows:
        c = q["counts"]
        share = q.get("exact_or_under_general")
        lines.append(
            f"| {label} | {q['n']} | {c['exact']} | {c['under_general']} | {c['over_broad']} | {c['wrong']} | "
            f"{'n/a' if share is None else f'{share:.2f}'} | {q['probes']} |"
        )
    bad = [(label, s) for label, q in rows for s in q["scars"] if s["class"] in ("over_broad", "wrong")]
    if bad:
        lines += [
            "",
            "| method | scar | class | precision | recall | true rule |",
            "| --- | --- | --- | ---: | ---: | --- |",
        ]
        for label, s in bad:
            precision = "n/a" if s["precision"] is None else f"{s['precision']:.2f}"
            recall = "n/a" if s["recall"] is None else f"{s['recall']:.2f}"
            rule = s["rule"].replace("|", "\\|")
            lines.append(
                f"| {label} | `{rule}` | {s['class']} | {precision} | {recall} | {', '.join(s['true_rules'])} |"
            )
    lines.append("")
    return lines


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
    """Every method of the comparison on the paper schedule (``scars demo``), then the controls and the information-protocol
    variants (issue 11): the hard blocklist and storm control alone (no synthesis), scars under ``--verdicts state``
    (the complete unsafe set of each state, Cor. 1) and under ``--oracle counterfactual`` (the what-if oracle, which
    every method would get as a shield)."""
    base = [Tier1Config(method=m, episodes=episodes, seed=seed, wandb=wandb) for m in METHODS]
    controls = [
        Tier1Config(method="scars", ablation=a, episodes=episodes, seed=seed, wandb=wandb)
        for a in ("hard_blocklist", "storm_only")
    ]
    protocol = [
        Tier1Config(method="scars", verdicts="state", episodes=episodes, seed=seed, wandb=wandb),
        Tier1Config(method="scars", oracle="counterfactual", episodes=episodes, seed=seed, wandb=wandb),
    ]
    return base + controls + protocol


def load_summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


__all__ = ["LiveLog", "demo_configs", "load_summary", "run_many", "run_tier1_folder", "tier1_tags"]
