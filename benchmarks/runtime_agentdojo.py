"""Benchmark of scars-runtime on AgentDojo (issue 42; not named agentdojo.py: the script's folder comes first on
sys.path and would shadow the package): every suite under the offline protocol (no LLM), the gate
against no defence, a ground-truth tool allow-list and a blind-written Progent-style static policy, in one run (``experiments.agentdojo_bench``; docs/runtime.md,
"On AgentDojo").

Per suite and overall it reports attack success (AgentDojo's ``security``) with and without the gate, the paired
difference against no defence, utility under attack and without attack (with the learned rules in force), the
first-exposure cost per injection task and the gate's per-call overhead beside the tool call's own time (wall-clock
``perf_counter_ns`` around each decision and each plain call, in the same process), each with n. The load average is
recorded with the figures (the machine is shared).

Usage:  python benchmarks/runtime_agentdojo.py [--suite all] [--seed 0] [--out DIR]
Prints the results table, then, last, one JSON line (the per-suite headline figures and the load average).
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="all", help="banking|slack|travel|workspace|all (default all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: a temporary one)")
    args = parser.parse_args(argv)
    try:
        suites = suite_names(args.suite)
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="agentdojo-"))
    load_before = os.getloadavg()
    start = time.perf_counter()
    summary = bench(suites, out, seed=args.seed, progress=lambda line: print(line, flush=True))
    seconds = time.perf_counter() - start
    load_after = os.getloadavg()
    print((out / "results.md").read_text())
    headline = {}
    for label, entry in summary["suites"].items():
        d = entry["defences"]
        headline[label] = {
            "n_cases": d["no_defence"]["attack_success"]["clusters"],
            "asr": {k: d[k]["attack_success"]["estimate"] for k in d},
            "scars_minus_no_defence": d["scars"]["asr_minus_no_defence"]["ci"],
            "progent_policy_minus_no_defence": d["progent_policy"]["asr_minus_no_defence"]["ci"],
            "progent_policy_utility_ratio": d["progent_policy"]["utility_ratio_without_attack"],
            "utility_ratio_without_attack": entry["utility_ratio_without_attack"],
            "gate_us_median": entry["gate_overhead_us"]["median"],
            "tool_us_median": entry["tool_call_us"]["median"],
        }
    print(
        json.dumps(
            {
                "seconds": round(seconds, 1),
                "load_before": load_before,
                "load_after": load_after,
                "out": str(out),
                "suites": headline,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
