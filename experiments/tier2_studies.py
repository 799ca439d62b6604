"""The tier-2 studies, each one function (and one command): the two of paper §6.2 — the anti-collusion test and the
counterfactual social transfer A → B — and GovSim's outsider variant.

**Anti-collusion** (``run_collusion``): a focal learner in the malicious arena, where a colluding majority (one
provenance root) punishes its harvests whatever they were, with TrustGate + NormVerifier on and off. Each seed is
one independent trajectory of ``runs`` runs (the learner keeps its memory across them). Per setting: the
inappropriate scars the focal agent admitted (a scar forbidding a harvest at or below the fair share at a pool level
where it is sustainable — the arena's ground truth), the share of trajectories with one, its gain lost below the fair
share per run, its over-usage and the cooperative yield, with 95% cluster-bootstrap intervals (clusters: seeds for
per-trajectory counts, (seed, run) for per-run values).

**Transfer** (``run_transfer``): for each method and seed, train in arena A (with punishment) for ``runs_a`` runs,
then play arena B (no immediate punishment) for ``runs_b`` runs twice — carrying the A state (scars ledger, baseline
memory) and from scratch, on the same arenas (same seed). The table compares B's cooperative yield, over-usage and
survival with and without the A history, and their paired difference (jointly resampled over the paired B runs).

**Outsider** (``run_outsider``): for each method and seed, the same arena played twice — every seat from month 1, and
GovSim's outsider variant (the last seat, a newcomer with the outsider persona, joins at ``outsider_month``). The
table compares survival, survival time and cooperative yield without and with the outsider (paired over the same
(seed, run)), the group's over-usage with it, the outsider's own over-usage over its seat-months, and the justified
punishments it received.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scars.experiments.commons_run import Tier2Result, run_tier2
from scars.experiments.config import Tier2Config
from scars.experiments.report import atomic_write_text, plt, save_figure, write_json, write_table
from scars.experiments.stats import paired_difference, pooled_ratio
from scars.experiments.stopping import RunStop
from scars.experiments.tier2_report import _ci, write_tier2

Progress = Callable[[str], None]


def _iv(num, den, salt: int, seed: int = 0) -> dict[str, Any]:
    return pooled_ratio(num, den, np.random.default_rng(np.random.SeedSequence([seed, salt]))).to_json()


def _study_run(cfg: Tier2Config, run_dir: Path, write: bool = True) -> Tier2Result:
    """One run of a study, written into its folder (``write``). A run another process stopped (its ledger written by
    someone else, ``experiments.stopping``) is written out all the same and then stops the study: a study's table is
    never built on a stopped run (fail closed, one error line naming the foreign events)."""
    stop = RunStop()
    result = run_tier2(cfg, run_dir, stop=stop)
    if write or stop.stopped:
        write_tier2(run_dir, {cfg.method_label: result}, {cfg.method_label: cfg})
    stop.check()
    return result


def run_collusion(
    base: Tier2Config, seeds: Sequence[int], out: Path, progress: Progress | None = None
) -> pd.DataFrame:
    """The anti-collusion table (module docstring) for ``base.method``; writes ``out/collusion.md``,
    ``collusion.json``, ``collusion_runs.csv/.parquet``, ``collusion.png`` and one run folder per (gates, seed)."""
    rows, per_run = [], []
    for gates in (True, False):
        setting = "gates on" if gates else "gates off"
        trajectories = []
        for seed in seeds:
            cfg = dataclasses.replace(
                base, setup="focal", arena="malicious", gates=gates, seed=seed, transfer_from=""
            )
            run_dir = out / f"gates-{'on' if gates else 'off'}" / f"seed-{seed}"
            result = _study_run(cfg, run_dir)
            s = result.summary
            trajectories.append(
                {
                    "gates": setting,
                    "seed": seed,
                    "scars_admitted": s["scars_admitted"],
                    "inappropriate_scars": s["inappropriate_scars"],
                    "inappropriate_rules": "; ".join(s["inappropriate_rules"]),
                }
            )
            runs = result.runs.assign(gates=setting, seed=seed)
            per_run.append(runs)
            if progress is not None:
                found = s["inappropriate_scars"]
                progress(
                    f"{setting}, seed {seed}: {'n/a (no scars)' if found is None else found} inappropriate scar(s)"
                )
        t = pd.DataFrame(trajectories)
        r = pd.concat([p for p in per_run if p["gates"].iloc[0] == setting], ignore_index=True)
        ones_t, ones_r = np.ones(len(t)), np.ones(len(r))
        scars = (
            t["scars_admitted"].notna().all()
        )  # a method without scars: the scar columns are undefined (n/a)
        rows.append(
            {
                "setting": setting,
                "method": base.method_label,
                "n_seeds": len(t),
                "n_runs": len(r),
                "scars_admitted_per_seed": _iv(t["scars_admitted"], ones_t, 1) if scars else None,
                "inappropriate_scars_per_seed": _iv(t["inappropriate_scars"], ones_t, 2) if scars else None,
                "seeds_with_inappropriate_scar": (
                    _iv((t["inappropriate_scars"] > 0).astype(float), ones_t, 3) if scars else None
                ),
                "gain_lost_per_run": _iv(r["learner_gain_lost"], ones_r, 4),
                "focal_gain_per_run": _iv(r["learner_gain"], ones_r, 5),
                "focal_over_usage": _iv(r["learner_over_count"], r["learner_seat_months"], 6),
                "cooperative_yield": _iv(r["cooperative_yield"], ones_r, 7),
                "unjustified_punishments_received": int(r["learner_punished_unjustified"].sum()),
                "inappropriate_rules": sorted(
                    {x for x in "; ".join(t["inappropriate_rules"]).split("; ") if x}
                ),
            }
        )
    table = pd.DataFrame(rows)
    write_json(out / "collusion.json", rows)
    write_table(pd.concat(per_run, ignore_index=True), out / "collusion_runs")
    _plot_collusion(table, out / "collusion.png")
    atomic_write_text(out / "collusion.md", collusion_markdown(table, base))
    return table


def _plot_collusion(table: pd.DataFrame, path: Path) -> Path:
    """Gates on vs off: inappropriate scars per seed and the focal seat's gain lost per run (95% intervals)."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
    panels = (
        ("inappropriate_scars_per_seed", "inappropriate scars per seed", "n_seeds"),
        ("gain_lost_per_run", "focal gain lost below the fair share per run", "n_runs"),
    )
    rows = table.to_dict("records")
    for ax, (key, label, n_key) in zip(axes, panels, strict=True):
        ax.set_ylabel(label, fontsize=8)
        if any(r[key] is None or r[key]["estimate"] is None for r in rows):
            ax.text(
                0.5, 0.5, "n/a (undefined for this method)", ha="center", va="center", transform=ax.transAxes
            )
            continue
        est = [r[key]["estimate"] for r in rows]
        ci = [r[key]["ci"] or [e, e] for r, e in zip(rows, est, strict=True)]
        err = [
            [e - c[0] for e, c in zip(est, ci, strict=True)],
            [c[1] - e for e, c in zip(est, ci, strict=True)],
        ]
        ax.bar([r["setting"] for r in rows], est, yerr=err, capsize=4, color=["tab:blue", "tab:orange"])
        ax.set_title(f"n = {rows[0][n_key]} per bar, 95% CI", fontsize=9)
    fig.suptitle("Anti-collusion: TrustGate + NormVerifier on vs off (malicious arena)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def collusion_markdown(table: pd.DataFrame, base: Tier2Config) -> str:
    lines = [
        "# Anti-collusion test (paper §6.2)",
        "",
        f"Method {base.method_label} (punishment attribution: {base.punishment_attribution}), focal seat "
        f"{base.focal_seat} in the malicious arena (a three-seat coalition with "
        f"one provenance root punishes it every month, whatever it harvested), {base.runs} runs of {base.months} "
        "months per seed. Estimates with 95% cluster-bootstrap intervals (clusters: seeds for per-seed counts, runs "
        "for per-run values; † fewer than 5 clusters).",
        "",
        "| setting | n seeds | n runs | scars admitted / seed | inappropriate scars / seed ↓ | seeds with one ↓ "
        "| gain lost / run ↓ | focal gain / run | focal over-usage | cooperative yield | unjustified punishments received |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in table.to_dict("records"):
        lines.append(
            f"| {row['setting']} | {row['n_seeds']} | {row['n_runs']} | {_ci(row['scars_admitted_per_seed'])} | "
            f"{_ci(row['inappropriate_scars_per_seed'])} | {_ci(row['seeds_with_inappropriate_scar'])} | "
            f"{_ci(row['gain_lost_per_run'], '{:.1f}')} | {_ci(row['focal_gain_per_run'], '{:.1f}')} | "
            f"{_ci(row['focal_over_usage'])} | {_ci(row['cooperative_yield'])} | "
            f"{row['unjustified_punishments_received']} |"
        )
    lines.append("")
    for row in table.to_dict("records"):
        rules = row["inappropriate_rules"]
        lines.append(
            f"Inappropriate scars, {row['setting']}: " + ("; ".join(f"`{r}`" for r in rules) or "none")
        )
        lines.append("")
    lines.append("![anti-collusion](collusion.png)")
    return "\n".join(lines) + "\n"


def run_transfer(
    base: Tier2Config,
    methods: Sequence[str],
    seeds: Sequence[int],
    runs_a: int,
    runs_b: int,
    out: Path,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """The transfer table (module docstring); writes ``out/transfer.md``, ``transfer.json``,
    ``transfer_runs.csv/.parquet``, ``transfer.png`` and the run folders ``<method>/seed-<s>/{A,B-with,B-without}``."""
    rows, per_run = [], []
    for method in methods:
        with_runs, without_runs = [], []
        for seed in seeds:
            root = out / method.replace(":", "-") / f"seed-{seed}"
            common = dict(method=method, seed=seed, transfer_from="")
            a_cfg = dataclasses.replace(base, arena="A", runs=runs_a, **common)
            _study_run(a_cfg, root / "A", write=False)
            for carried, sink in ((True, with_runs), (False, without_runs)):
                b_cfg = dataclasses.replace(
                    base,
                    arena="B",
                    runs=runs_b,
                    **(common | {"transfer_from": str(root / "A") if carried else ""}),
                )
                b_dir = root / ("B-with" if carried else "B-without")
                result = _study_run(b_cfg, b_dir)
                runs = result.runs.assign(history="with A" if carried else "without A", seed=seed)
                sink.append(runs)
                per_run.append(runs)
            if progress is not None:
                progress(f"{method}, seed {seed}")
        w = pd.concat(with_runs, ignore_index=True)
        wo = pd.concat(without_runs, ignore_index=True)
        ones = np.ones(len(w))
        rng = np.random.default_rng(np.random.SeedSequence([base.seed, 31]))
        rows.append(
            {
                "method": method,
                "n_seeds": len(seeds),
                "n_runs": len(w),
                "yield_with": _iv(w["cooperative_yield"], ones, 11),
                "yield_without": _iv(wo["cooperative_yield"], ones, 12),
                "yield_diff": paired_difference(
                    (w["cooperative_yield"], ones), (wo["cooperative_yield"], ones), rng
                ).to_json(),
                "over_usage_with": _iv(w["over_count"], w["seat_months"], 13),
                "over_usage_without": _iv(wo["over_count"], wo["seat_months"], 14),
                "over_usage_diff": paired_difference(
                    (w["over_count"], w["seat_months"]), (wo["over_count"], wo["seat_months"]), rng
                ).to_json(),
                "survival_with": _iv(w["survived"].astype(float), ones, 15),
                "survival_without": _iv(wo["survived"].astype(float), ones, 16),
            }
        )
    table = pd.DataFrame(rows)
    write_json(out / "transfer.json", rows)
    write_table(pd.concat(per_run, ignore_index=True), out / "transfer_runs")
    _plot_transfer(table, out / "transfer.png")
    atomic_write_text(out / "transfer.md", transfer_markdown(table, base, runs_a, runs_b))
    return table


def _plot_transfer(table: pd.DataFrame, path: Path) -> Path:
    """Cooperative yield in arena B with and without the arena-A history, per method (95% intervals)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(table))
    for offset, key, name in ((-0.18, "yield_with", "with A history"), (0.18, "yield_without", "without")):
        est = [r[key]["estimate"] or 0.0 for r in table.to_dict("records")]
        lo = [e - (r[key]["ci"] or [e, e])[0] for e, r in zip(est, table.to_dict("records"), strict=True)]
        hi = [(r[key]["ci"] or [e, e])[1] - e for e, r in zip(est, table.to_dict("records"), strict=True)]
        ax.bar(x + offset, est, width=0.36, yerr=[lo, hi], capsize=3, label=name)
    n = int(table["n_runs"].iloc[0]) if len(table) else 0
    ax.set_xticks(x, table["method"], rotation=20)
    ax.set_ylabel("cooperative yield in arena B")
    ax.set_title(f"Counterfactual social transfer A → B (n = {n} B runs per bar, 95% CI)")
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, path)


def transfer_markdown(table: pd.DataFrame, base: Tier2Config, runs_a: int, runs_b: int) -> str:
    lines = [
        "# Counterfactual social transfer A → B (paper §6.2)",
        "",
        f"{base.setup.capitalize()} set-up; each seed trains {runs_a} runs in arena A (peer punishment), then plays "
        f"{runs_b} runs of arena B (no punishment phase) with the A state carried (scars ledger, baseline memory) and "
        "without it, on the same arenas. Estimates over the B runs with 95% run-bootstrap intervals; the difference "
        "is paired over the same (seed, run) (2000 joint resamples).",
        "",
        "| method | n B runs | yield with A | yield without | Δ yield | over-usage with A ↓ | without | Δ over-usage "
        "| survival with A | without |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in table.to_dict("records"):
        lines.append(
            f"| {r['method']} | {r['n_runs']} | {_ci(r['yield_with'])} | {_ci(r['yield_without'])} | "
            f"{_ci(r['yield_diff'], '{:+.2f}')} | {_ci(r['over_usage_with'])} | {_ci(r['over_usage_without'])} | "
            f"{_ci(r['over_usage_diff'], '{:+.2f}')} | {_ci(r['survival_with'])} | {_ci(r['survival_without'])} |"
        )
    lines += ["", "![transfer](transfer.png)"]
    return "\n".join(lines) + "\n"


def run_outsider(
    base: Tier2Config,
    methods: Sequence[str],
    seeds: Sequence[int],
    outsider_month: int,
    out: Path,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """The outsider table (module docstring); writes ``out/outsider.md``, ``outsider.json``,
    ``outsider_runs.csv/.parquet``, ``outsider.png`` and the run folders ``<method>/seed-<s>/{without,with}``."""
    rows, per_run = [], []
    for method in methods:
        frames: dict[bool, list[pd.DataFrame]] = {False: [], True: []}
        summaries: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        for seed in seeds:
            root = out / method.replace(":", "-") / f"seed-{seed}"
            for joined in (False, True):
                cfg = dataclasses.replace(
                    base,
                    method=method,
                    seed=seed,
                    transfer_from="",
                    outsider_month=outsider_month if joined else 0,
                )
                run_dir = root / ("with" if joined else "without")
                result = _study_run(cfg, run_dir)
                runs = result.runs.assign(outsider="with" if joined else "without", seed=seed)
                frames[joined].append(runs)
                summaries[joined].append(result.summary)
                per_run.append(runs)
            if progress is not None:
                progress(f"{method}, seed {seed}")
        wo, w = (pd.concat(frames[k], ignore_index=True) for k in (False, True))
        ones = np.ones(len(w))
        rng = np.random.default_rng(np.random.SeedSequence([base.seed, 41]))
        admitted = [s["scars_admitted"] for s in summaries[True]]
        inappropriate = [s["inappropriate_scars"] for s in summaries[True]]
        rows.append(
            {
                "method": method,
                "n_seeds": len(seeds),
                "n_runs": len(w),
                "survival_without": _iv(wo["survived"].astype(float), ones, 21),
                "survival_with": _iv(w["survived"].astype(float), ones, 22),
                "survival_time_without": _iv(wo["survival_time"].astype(float), ones, 23),
                "survival_time_with": _iv(w["survival_time"].astype(float), ones, 24),
                "yield_without": _iv(wo["cooperative_yield"], ones, 25),
                "yield_with": _iv(w["cooperative_yield"], ones, 26),
                "yield_diff": paired_difference(
                    (w["cooperative_yield"], ones), (wo["cooperative_yield"], ones), rng
                ).to_json(),
                "over_usage_with": _iv(w["over_count"], w["seat_months"], 27),
                "outsider_over_usage": _iv(w["outsider_over_count"], w["outsider_seat_months"], 28),
                "outsider_seat_months": int(w["outsider_seat_months"].sum()),
                "outsider_punished_justified": int(w["outsider_punished_justified"].sum()),
                "scars_admitted": None if None in admitted else int(sum(admitted)),
                "inappropriate_scars": None if None in inappropriate else int(sum(inappropriate)),
            }
        )
    table = pd.DataFrame(rows)
    write_json(out / "outsider.json", rows)
    write_table(pd.concat(per_run, ignore_index=True), out / "outsider_runs")
    _plot_outsider(table, outsider_month, out / "outsider.png")
    atomic_write_text(out / "outsider.md", outsider_markdown(table, base, outsider_month))
    return table


def _plot_outsider(table: pd.DataFrame, outsider_month: int, path: Path) -> Path:
    """Cooperative yield without and with the outsider, per method (95% intervals)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(table))
    records = table.to_dict("records")
    for offset, key, name in (
        (-0.18, "yield_without", "every seat from month 1"),
        (0.18, "yield_with", f"outsider joins at month {outsider_month}"),
    ):
        est = [r[key]["estimate"] or 0.0 for r in records]
        lo = [e - (r[key]["ci"] or [e, e])[0] for e, r in zip(est, records, strict=True)]
        hi = [(r[key]["ci"] or [e, e])[1] - e for e, r in zip(est, records, strict=True)]
        ax.bar(x + offset, est, width=0.36, yerr=[lo, hi], capsize=3, label=name)
    n = int(table["n_runs"].iloc[0]) if len(table) else 0
    ax.set_xticks(x, table["method"], rotation=20)
    ax.set_ylabel("cooperative yield")
    ax.set_title(f"GovSim's outsider variant (n = {n} runs per bar, 95% CI)")
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, path)


def outsider_markdown(table: pd.DataFrame, base: Tier2Config, outsider_month: int) -> str:
    lines = [
        "# GovSim's outsider variant",
        "",
        f"{base.setup.capitalize()} set-up, arena {base.arena}, {base.months} months per run; each seed plays its runs "
        f"twice on the same arenas: every seat from month 1, and with the last seat joining at month {outsider_month} "
        "(a newcomer with the outsider persona"
        + (", new in every run" if base.outsider_fresh else "")
        + "). Estimates over the runs with 95% run-bootstrap intervals; Δ yield is paired over the same (seed, run). "
        "The outsider's over-usage is over its own seat-months (n).",
        "",
        "| method | n runs | survival, no outsider | with outsider | survival time, no outsider | with outsider "
        "| yield, no outsider | with outsider | Δ yield | over-usage with outsider ↓ | outsider's over-usage ↓ "
        "| outsider punished (justified) | scars / inappropriate |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in table.to_dict("records"):
        # a pandas column of counts and Nones holds NaN for "no scars schema" (a baseline)
        admitted, bad = r["scars_admitted"], r["inappropriate_scars"]
        scars = "–" if admitted is None or admitted != admitted else f"{int(admitted)} / {int(bad)}"
        lines.append(
            f"| {r['method']} | {r['n_runs']} | {_ci(r['survival_without'])} | {_ci(r['survival_with'])} | "
            f"{_ci(r['survival_time_without'], '{:.1f}')} | {_ci(r['survival_time_with'], '{:.1f}')} | "
            f"{_ci(r['yield_without'])} | {_ci(r['yield_with'])} | {_ci(r['yield_diff'], '{:+.2f}')} | "
            f"{_ci(r['over_usage_with'])} | {_ci(r['outsider_over_usage'])} (n = {r['outsider_seat_months']}) | "
            f"{r['outsider_punished_justified']} | {scars} |"
        )
    lines += ["", "![outsider](outsider.png)"]
    return "\n".join(lines) + "\n"
