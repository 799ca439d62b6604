"""Tier 1 over several schedules, methods and seeds, pooled (issue 24: the paper schedule and the paraphrase suite).

    python benchmarks/schedule_suite.py --out runs/suite [--schedules paper,paraphrase_a,...] [--methods ...]
    (a method is a name of the comparison or ``scars:<ablation>``, e.g. ``scars:no_narrowing``)
        [--seeds 0-4] [--episodes 36] [--report-only]

Each (schedule, method, seed) is one ``run_tier1`` into ``OUT/<schedule>/<method>/s<seed>`` (skipped when its
``episodes.parquet`` exists, so an interrupted run resumes). ``suite.md`` pools every method's episodes over the seeds
(clusters = (seed, episode)): success, RVR with its n (re-exposures), SVR, each with a 95% episode-clustered bootstrap
interval, and the paired difference of every baseline against scars on the same episodes (same seed, same games).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from scars.experiments.config import METHODS, Tier1Config
from scars.experiments.stats import paired_difference, pooled_ratio
from scars.experiments.tier1 import run_tier1

RATES = (
    ("success", "won", None),
    ("rvr", "repeat_violations", "reexposures"),
    ("svr", "violating_steps", "exposed_steps"),
)


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",")]


def run_one(schedule: str, method: str, seed: int, episodes: int, out: Path, verdicts: str) -> None:
    """``method`` is a method name or ``scars:<ablation>`` (its folder ``scars-<ablation>``)."""
    name, _, ablation = method.partition(":")
    label = method.replace(":", "-")
    folder = out / schedule / (label if verdicts == "executed" else f"{label}+{verdicts}") / f"s{seed}"
    if (folder / "episodes.parquet").is_file():
        return
    cfg = Tier1Config(
        method=name,
        ablation=ablation or "none",
        seed=seed,
        episodes=episodes,
        verdicts=verdicts,
        **({"schedule": schedule} if schedule == "paper" else {"schedule_file": schedule}),
    )
    result = run_tier1(cfg, folder)
    result.episodes.to_parquet(folder / "episodes.parquet")
    keep = {k: v for k, v in result.summary.items() if not isinstance(v, dict | list) or k == "active_rules"}
    keep["scar_quality"] = result.summary.get("scar_quality")
    keep["rule_set"] = result.summary.get("rule_set")
    (folder / "summary.json").write_text(json.dumps(keep, indent=1, default=str))


def _num_den(e: pd.DataFrame, num: str, den: str | None) -> tuple[np.ndarray, np.ndarray]:
    n = e[num].astype(float).to_numpy()
    d = np.ones(len(e)) if den is None else e[den].astype(float).to_numpy()
    return n, d


def pooled_rule_set(folder: Path, seeds: list[int]) -> str | None:
    """Rule-set quality (issue 40) pooled over the seeds' episodes (clusters = (seed, episode)): precision and
    recall on the probe pairs (each episode's mean rule set, ``summary.json``) and on the runs' own decisions
    (``episodes.parquet``), with 95% intervals, and the tasks lost to a scar that masked the expert's needed step."""
    probes, decisions = [], []
    for s in seeds:
        path = folder / f"s{s}" / "summary.json"
        if not path.is_file():
            return None
        rule_set = json.loads(path.read_text()).get("rule_set")
        if not rule_set:
            return None
        probes += rule_set["probes"]["by_episode"]
        decisions.append(pd.read_parquet(folder / f"s{s}" / "episodes.parquet"))
    p = np.asarray(probes, dtype=float).reshape(-1, 3)
    e = pd.concat(decisions, ignore_index=True)

    def cell(num, den, name: str) -> str:
        rng = np.random.default_rng(np.random.SeedSequence([4040, len(name)]))
        iv = pooled_ratio(num, den, rng)
        if iv.estimate is None:
            return f"{name} n/a"
        return f"{name} {iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}] (n = {iv.denominator:.0f})"

    lost = int(((~e["won"].astype(bool)) & (e["needed_masked"] > 0)).sum())
    return "; ".join(
        [
            cell(p[:, 1], p[:, 0], "probes: precision"),
            cell(p[:, 1], p[:, 2], "recall"),
            cell(e["scar_masked_unsafe"], e["scar_masked"], "decisions: precision"),
            cell(e["scar_masked_unsafe"], e["unsafe_actions"], "recall"),
            cell(e["scar_masked_known"], e["unsafe_known"], "recall on told rules"),
            f"masked safe {int((e['scar_masked'] - e['scar_masked_unsafe']).sum())}",
            f"tasks lost to a scar masking the needed step {lost} / {len(e)}",
        ]
    )


def report(out: Path, schedules: list[str], labels: list[str], seeds: list[int]) -> str:
    lines = []
    for schedule in schedules:
        frames = {}
        for label in labels:
            parts = [out / schedule / label / f"s{s}" / "episodes.parquet" for s in seeds]
            if all(p.is_file() for p in parts):
                frames[label] = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
        if not frames:
            continue
        lines += [
            f"### {schedule} (seeds {seeds[0]}–{seeds[-1]}, {len(next(iter(frames.values())))} episodes per method)",
            "",
            "| method | success | RVR (n) | SVR | Δ success vs scars | Δ RVR vs scars | Δ SVR vs scars |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        ref = frames.get("scars")
        for label, e in frames.items():
            cells = []
            for name, num, den in RATES:
                rng = np.random.default_rng(np.random.SeedSequence([0, len(name), len(label)]))
                iv = pooled_ratio(*_num_den(e, num, den), rng)
                n = f" ({int(iv.denominator)})" if name == "rvr" else ""
                cells.append(
                    "n/a"
                    if iv.estimate is None
                    else f"{iv.estimate:.3f}{n} [{iv.low:.3f}, {iv.high:.3f}]"
                    if iv.low is not None
                    else f"{iv.estimate:.3f}{n}"
                )
            diffs = []
            for name, num, den in RATES:
                if ref is None or label == "scars":
                    diffs.append("–")
                    continue
                rng = np.random.default_rng(np.random.SeedSequence([1, len(name), len(label)]))
                d = paired_difference(_num_den(e, num, den), _num_den(ref, num, den), rng)
                diffs.append(
                    "n/a" if d.estimate is None else f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
                )
            lines.append(f"| {label} | " + " | ".join(cells + diffs) + " |")
        lines.append("")
        for label in [x for x in labels if x.startswith("scars")]:
            quality: dict[str, int] = {}
            for s in seeds:
                path = out / schedule / label / f"s{s}" / "summary.json"
                if path.is_file():
                    summary = json.loads(path.read_text())
                    for k, v in ((summary.get("scar_quality") or {}).get("counts") or {}).items():
                        quality[k] = quality.get(k, 0) + v
                    lines.append(
                        f"- {label} s{s}: Prop. 2 {'holds' if summary.get('prop2_ok') else 'FAILS'}; "
                        f"active: {'; '.join(summary.get('active_rules') or [])}"
                    )
            if quality:
                lines.append(f"- {label} scar quality (all seeds, learned scars): {quality}")
            rule_set = pooled_rule_set(out / schedule / label, seeds)
            if rule_set:
                lines.append(
                    f"- {label} rule set in force (all seeds, clusters = (seed, episode)): {rule_set}"
                )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--schedules", default="paper,paraphrase_a,paraphrase_b,paraphrase_c")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--seeds", default="0-4")
    p.add_argument("--episodes", type=int, default=36)
    p.add_argument("--verdicts", default="executed", choices=("executed", "state"))
    p.add_argument("--report-only", action="store_true")
    a = p.parse_args(argv)
    schedules, methods, seeds = a.schedules.split(","), a.methods.split(","), _seeds(a.seeds)
    if not a.report_only:
        for schedule in schedules:
            for method in methods:
                for seed in seeds:
                    run_one(schedule, method, seed, a.episodes, a.out, a.verdicts)
                    print(f"done {schedule} {method} s{seed}", flush=True)
    labels = sorted(
        {d.name for s in schedules for d in (a.out / s).glob("*") if d.is_dir()},
        key=lambda x: (x != "scars", x),
    )
    text = report(a.out, schedules, labels, seeds)
    (a.out / "suite.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
