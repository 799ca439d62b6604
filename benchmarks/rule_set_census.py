"""Where tier 1's rule-set precision and recall go, per schedule, pooled over a suite's seeds (issue 40), and a paired
comparison of two suites run on the same cells (a change against its base).

    python benchmarks/schedule_suite.py --in-process --methods scars --seeds 0-2 --episodes 36 \\
        --schedules paper,paraphrase_a,paraphrase_b,paraphrase_c --out BASE      # on the base commit
    python benchmarks/rule_set_census.py BASE [--against BRANCH] [--method scars]

Reads each cell's ``summary.json`` (``rule_set.probes``: ``by_episode``, ``known_by_episode``, ``recall_misses``,
``safe_masked_by_scar``; ``scar_quality``) and ``episodes.parquet``. Per schedule: precision and recall on the probes,
``recall_after_first_failure`` and ``recall_ceiling`` (``experiments.metrics.rule_set_quality``), exact-or-under-
general, success and RVR, each pooled over (seed, episode) with a 95% cluster-bootstrap interval; the precision lost
to each told rule (the masked-but-safe probe pairs of the scars told of it, weighted as the metric weights them, as a
share of all masked pairs: the points of precision it costs; and how much of it fell under a world version after
the run's first); the recall misses by reason, in all and per true rule. With ``--against``, the
paired difference (BRANCH − BASE) of each figure on the same (seed, episode) clusters.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from scars.experiments.metrics import RECALL_MISSES
from scars.experiments.stats import paired_difference, pooled_ratio

CENSUS_KEYS = (
    "by_episode",
    "known_by_episode",
    "recall_misses",
    "recall_misses_by_rule",
    "safe_masked_by_scar",
)
"""What a cell's ``rule_set.probes`` must hold (a suite run before the census has no census to read)."""


class CensusInputError(ValueError):
    """A suite folder whose cells cannot be read as a census (one line for the user)."""


def load(root: Path, schedule: str, method: str) -> dict | None:
    """One schedule's cells of a suite folder, pooled: per (seed, episode) cluster the ratio parts, and the sums."""
    cells = sorted((root / schedule / method).glob("s*/summary.json"))
    if not cells:
        return None
    parts: dict[str, list] = defaultdict(list)
    loss: Counter = Counter()
    after: Counter = Counter()  # of the loss, under a world version after the first (0)
    example: dict[str, tuple[float, str]] = {}
    misses: Counter = Counter()
    by_rule: Counter = Counter()  # (true rule, reason) -> missed pairs
    good = n_scars = 0
    for path in cells:
        summary = json.loads(path.read_text())
        episodes = pd.read_parquet(path.parent / "episodes.parquet").sort_values("episode")
        probes = (summary.get("rule_set") or {}).get("probes") or {}
        missing = [k for k in CENSUS_KEYS if k not in probes]
        if missing or "scar_quality" not in summary:
            raise CensusInputError(
                f"{path}: no rule-set census in summary.json (missing {', '.join(missing) or 'scar_quality'}); "
                "allowed: a schedule_suite cell of a scars method run with the census (this branch or later)"
            )
        per = np.asarray(probes["by_episode"], dtype=float).reshape(-1, 3)
        known = np.asarray(probes["known_by_episode"], dtype=float).reshape(-1, 2)
        seed = int(path.parent.name[1:])
        parts["cluster"] += [(seed, int(e)) for e in episodes["episode"]]
        parts["won"] += episodes["won"].astype(float).tolist()
        parts["repeats"] += episodes["repeat_violations"].astype(float).tolist()
        parts["reexposures"] += episodes["reexposures"].astype(float).tolist()
        parts["masked"] += per[:, 0].tolist()
        parts["masked_unsafe"] += per[:, 1].tolist()
        parts["unsafe"] += per[:, 2].tolist()
        parts["masked_known"] += known[:, 0].tolist()
        parts["unsafe_known"] += known[:, 1].tolist()
        misses.update(probes["recall_misses"])
        for rule, row in probes["recall_misses_by_rule"].items():
            for reason, x in row.items():
                by_rule[(rule, reason)] += x
        for row in probes["safe_masked_by_scar"]:
            told = "+".join(row["told"]) or "(none)"
            loss[told] += row["safe_masked"]
            versions = row["safe_masked_by_world_version"]
            after[told] += sum(x for v, x in versions.items() if int(v) > 0)  # every schedule starts in 0
            if row["safe_masked"] > example.get(told, (0.0, ""))[0]:
                example[told] = (row["safe_masked"], row["rule"])
        quality = summary["scar_quality"]
        good += quality["counts"]["exact"] + quality["counts"]["under_general"]
        n_scars += quality["n"]
    arrays = {k: np.asarray(v, dtype=float) for k, v in parts.items() if k != "cluster"}
    return {
        "clusters": parts["cluster"],
        "cells": len(cells),
        **arrays,
        "loss": loss,
        "after": after,
        "example": example,
        "misses": misses,
        "by_rule": by_rule,
        "good": good,
        "n_scars": n_scars,
    }


RATIOS = {
    "success": ("won", None),
    "RVR": ("repeats", "reexposures"),
    "precision (probes)": ("masked_unsafe", "masked"),
    "recall (probes)": ("masked_unsafe", "unsafe"),
    "recall after first failure": ("masked_known", "unsafe_known"),
    "recall ceiling": ("unsafe_known", "unsafe"),
}


def parts_of(cell: dict, name: str) -> tuple[np.ndarray, np.ndarray]:
    num, den = RATIOS[name]
    return cell[num], (np.ones(len(cell[num])) if den is None else cell[den])


def fmt(interval: dict | object) -> str:
    d = interval if isinstance(interval, dict) else interval.to_json()
    if d["estimate"] is None:
        return "–"
    ci = "" if d["ci"][0] is None else f" [{d['ci'][0]:.3f}, {d['ci'][1]:.3f}]"
    return f"{d['estimate']:.3f}{ci}"


def report(base_root: Path, schedules: list[str], method: str, against: Path | None) -> str:
    out = []
    rng = np.random.default_rng(4040)
    for schedule in schedules:
        base = load(base_root, schedule, method)
        if base is None:
            out.append(f"## {schedule}\n\nno cells under {base_root / schedule / method}\n")
            continue
        other = load(against, schedule, method) if against else None
        n = len(base["clusters"])
        out.append(f"## {schedule} (n = {n} episodes, {base['cells']} seeds)\n")
        head = "| figure | base |" + (" branch | Δ paired |" if other else "")
        out.append(head)
        out.append("| --- | ---: |" + (" ---: | ---: |" if other else ""))
        for name in RATIOS:
            row = f"| {name} | {fmt(pooled_ratio(*parts_of(base, name), rng))} |"
            if other is not None:
                if other["clusters"] != base["clusters"]:
                    raise CensusInputError(
                        f"the suites' (seed, episode) clusters differ on {schedule}; allowed: two suites of the same "
                        "seeds and episodes"
                    )
                row += f" {fmt(pooled_ratio(*parts_of(other, name), rng))} |"
                row += f" {fmt(paired_difference(parts_of(other, name), parts_of(base, name), rng))} |"
            out.append(row)
        eog = f"{base['good'] / base['n_scars']:.3f} ({base['good']}/{base['n_scars']})"
        row = f"| exact or under-general (scars) | {eog} |"
        if other is not None:
            row += f" {other['good'] / other['n_scars']:.3f} ({other['good']}/{other['n_scars']}) | |"
        out.append(row + "\n")
        for label, cell in (("base", base), ("branch", other)):
            if cell is None:
                continue
            masked = cell["masked"].sum()
            out.append(
                f"Precision lost by told rule ({label}; masked pairs {masked:.0f}, safe {masked - cell['masked_unsafe'].sum():.0f}):\n"
            )
            out.append(
                "| told rule(s) of the scars | safe pairs masked | after the world-version change | precision points "
                "| largest scar |"
            )
            out.append("| --- | ---: | ---: | ---: | --- |")
            for told, w in cell["loss"].most_common():
                if w <= 0:
                    continue
                rule = cell["example"][told][1].replace("|", "\\|")
                out.append(
                    f"| {told} | {w:.1f} | {cell['after'][told]:.1f} | {100 * w / masked:.2f} | `{rule}` |"
                )
            unsafe_missed = cell["unsafe"].sum() - cell["masked_unsafe"].sum()
            out.append(
                f"\nRecall misses ({label}; unsafe pairs {cell['unsafe'].sum():.0f}, missed {unsafe_missed:.0f}):\n"
            )
            out.append("| reason | missed pairs | share of unsafe |")
            out.append("| --- | ---: | ---: |")
            for reason in RECALL_MISSES:
                w = cell["misses"][reason]
                out.append(f"| {reason} | {w:.1f} | {w / cell['unsafe'].sum():.3f} |")
            rules = sorted(
                {r for r, _ in cell["by_rule"]},
                key=lambda r: -sum(cell["by_rule"][r, x] for x in RECALL_MISSES),
            )
            out.append(f"\nRecall misses by true rule ({label}; missed pairs by reason):\n")
            out.append("| true rule | " + " | ".join(RECALL_MISSES) + " |")
            out.append("| --- |" + " ---: |" * len(RECALL_MISSES))
            for rule in rules:
                out.append(
                    f"| {rule} | "
                    + " | ".join(f"{cell['by_rule'][rule, x]:.1f}" for x in RECALL_MISSES)
                    + " |"
                )
            out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("--against", type=Path, default=None)
    parser.add_argument("--method", default="scars")
    parser.add_argument("--schedules", default="paper,paraphrase_a,paraphrase_b,paraphrase_c")
    args = parser.parse_args(argv)
    for root in (args.base, args.against):
        if root is not None and not root.is_dir():
            print(
                f"rule_set_census: suite folder {str(root)!r} does not exist; give a schedule_suite --out folder"
            )
            return 2
    schedules = [s for s in args.schedules.split(",") if s]
    if "paraphrase_heldout" in schedules:
        print("rule_set_census: the held-out schedule is not read here; allowed: paper, paraphrase_a/b/c")
        return 2
    try:
        print(report(args.base, schedules, args.method, args.against))
    except CensusInputError as err:
        print(f"rule_set_census: {err}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
