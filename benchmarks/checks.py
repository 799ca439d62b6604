"""Benchmark: what the independent enforcement invariant (``experiments.enforcement``) costs a tier-1 run.

Each run is a fresh interpreter (synthesis results are cached per process, so a second run in the same process
would be faster for reasons unrelated to the check), alternating with and without the check (``--repeats`` each,
seeds 0, 1, …): scars on the paper schedule. Wall-clock seconds of ``run_tier1`` alone; the median and the best of
each arm, and the overhead of the medians.

Usage:  python benchmarks/checks.py [--repeats 3] [--episodes 12] [--method scars]
Prints one line per arm, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, sys, tempfile, time
from pathlib import Path
from scars.experiments import enforcement
from scars.experiments.config import Tier1Config
from scars.experiments.tier1 import run_tier1
if sys.argv[1] == "off":
    enforcement.EnforcementCheck.after_step = lambda self, *args: None
cfg = Tier1Config(method=sys.argv[2], episodes=int(sys.argv[3]), seed=int(sys.argv[4]), search_iterations=400)
started = time.perf_counter()
summary = run_tier1(cfg, Path(tempfile.mkdtemp())).summary
print(json.dumps({"seconds": time.perf_counter() - started, "decisions": summary["steps"]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per arm (default 3)")
    parser.add_argument("--episodes", type=int, default=12, help="episodes per run (default 12)")
    parser.add_argument("--method", default="scars", help="the method (default scars)")
    args = parser.parse_args()
    if args.repeats < 1 or args.episodes < 1:
        parser.error("--repeats and --episodes take whole numbers >= 1")
    runs: dict[str, list[float]] = {"on": [], "off": []}
    for rep in range(args.repeats):
        for arm in ("on", "off") if rep % 2 == 0 else ("off", "on"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, arm, args.method, str(args.episodes), str(rep)],
                capture_output=True,
                text=True,
                check=True,
            )
            runs[arm].append(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])
    result = {
        arm: {"median_s": statistics.median(v), "best_s": min(v), "n": len(v)} for arm, v in runs.items()
    }
    result["overhead"] = result["on"]["median_s"] / result["off"]["median_s"] - 1.0
    for arm in ("on", "off"):
        r = result[arm]
        print(f"check {arm:>3}: median {r['median_s']:.2f} s, best {r['best_s']:.2f} s (n={r['n']})")
    print(f"overhead of the check: {100 * result['overhead']:+.1f}% (medians)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
