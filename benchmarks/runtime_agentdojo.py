"""Benchmark of scars-runtime on AgentDojo (issue 42; not named agentdojo.py: the script's folder comes first on
sys.path and would shadow the package): every suite under the offline protocol (no LLM), the gate
against no defence, a ground-truth tool allow-list and a blind-written Progent-style static policy, in one run (``experiments.agentdojo_bench``; docs/runtime.md,
"On AgentDojo").

Per suite and overall it reports attack success (AgentDojo's ``security``) with and without the gate, the paired
difference against no defence, utility under attack and without attack (with the learned rules in force), the
first-exposure cost per injection task and the gate's per-call overhead beside the tool call's own time (wall-clock
``perf_counter_ns`` around each decision and each plain call, in the same process), each with n. The load average is
recorded with the figures (the machine is shared).

Usage:  python benchmarks/runtime_agentdojo.py [--suite all] [--seeds 0-4] [--out DIR]
Prints each seed's results table, over several seeds the worst seed's figures per suite (the information-protocol
row ``scars``, its oracle control and the static policy), then, last, one JSON line (per seed and suite the headline figures, and the
load average).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from scars.experiments.agentdojo_bench import bench, suite_names


def _seeds(text: str) -> list[int]:
    """``0``, ``0,2``, ``0-4`` → the seeds, or ValueError naming what is allowed."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"--seeds {text!r}: expected seeds like 0, 0,2 or 0-4")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    return seeds


def headline(summary: dict) -> dict:
    """Per suite: n, each defence's ASR, the paired Δ ASR intervals of scars and its oracle control against no
    defence, the utility ratios (without and under attack) and the per-call times."""
    out = {}
    for label, entry in summary["suites"].items():
        d = entry["defences"]
        out[label] = {
            "n_cases": d["no_defence"]["attack_success"]["clusters"],
            "n_user_tasks": d["no_defence"]["utility_without_attack"]["clusters"],
            "asr": {k: d[k]["attack_success"]["estimate"] for k in d},
            "delta_asr_ci": {k: d[k]["asr_minus_no_defence"]["ci"] for k in d if k != "no_defence"},
            "utility_ratio_without_attack": {
                k: d[k]["utility_ratio_without_attack"] for k in d if k != "no_defence"
            },
            "utility_ratio_under_attack": {
                k: d[k]["utility_ratio_under_attack"] for k in d if k != "no_defence"
            },
            "first_exposure_mean": {
                k: d[k]["first_exposure_mean"]["estimate"] for k in d if "first_exposure_mean" in d[k]
            },
            "gate_us_median": entry["gate_overhead_us"]["median"],
            "tool_us_median": entry["tool_call_us"]["median"],
        }
    return out


def across_seeds(per_seed: dict[int, dict], defence: str = "scars") -> str:
    """One markdown table over the seeds for ``defence``: per suite, the worst (over seeds) of its figures."""
    suites = next(iter(per_seed.values())).keys()
    lines = [
        f"## {defence} over seeds {', '.join(map(str, per_seed))} (worst seed of each figure)",
        "",
        "| suite | n cases | ASR no defence | ASR | Δ ASR upper 95% bound | utility ÷ no defence, without attack | "
        "under attack | first-exposure mean |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for suite in suites:
        rows = [h[suite] for h in per_seed.values()]
        asr = [r["asr"][defence] for r in rows]
        none = [r["asr"]["no_defence"] for r in rows]
        upper = [r["delta_asr_ci"][defence][1] for r in rows]
        clean = [r["utility_ratio_without_attack"][defence] for r in rows]
        under = [r["utility_ratio_under_attack"][defence] for r in rows]
        worst_under = (
            "–" if None in under else f"{min(under):.3f}"
        )  # – : no defence had no utility under attack
        exposure = [r["first_exposure_mean"].get(defence) for r in rows]  # None: a row that does not learn
        lines.append(
            f"| {suite} | {rows[0]['n_cases']} | {min(none):.3f}–{max(none):.3f} | {min(asr):.3f}–{max(asr):.3f} | "
            f"{max(upper):.3f} | {min(clean):.3f} | {worst_under} | {'–' if None in exposure else f'{min(exposure):.2f}–{max(exposure):.2f}'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="all", help="banking|slack|travel|workspace|all (default all)")
    parser.add_argument("--seeds", default="0", help="case orders: 0, 0,2 or 0-4 (default 0)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: a temporary one)")
    args = parser.parse_args(argv)
    try:
        suites = suite_names(args.suite)
        seeds = _seeds(args.seeds)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="agentdojo-"))
    load_before = os.getloadavg()
    start = time.perf_counter()
    per_seed = {}
    for seed in seeds:
        folder = out / f"seed-{seed}" if len(seeds) > 1 else out
        summary = bench(suites, folder, seed=seed, progress=lambda line: print(line, flush=True))
        print((folder / "results.md").read_text())
        per_seed[seed] = headline(summary)
    seconds = time.perf_counter() - start
    load_after = os.getloadavg()
    if len(seeds) > 1:
        for defence in ("scars", "scars_oracle", "progent_policy"):
            print(across_seeds(per_seed, defence))
    print(
        json.dumps(
            {
                "seconds": round(seconds, 1),
                "load_before": load_before,
                "load_after": load_after,
                "out": str(out),
                "seeds": per_seed,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
