"""Benchmark: what the run's checks cost a tier-1 run — the independent enforcement invariant
(``experiments.enforcement``), the guarantee monitor (plane = ledger, Props 1–3, ``experiments.guarantees``) and
the in-run ledger verification at every episode end (``ScarsAgent._verify_ledger``); "off" disables all three.

Each run is a fresh interpreter (synthesis results are cached per process, so a second run in the same process
would be faster for reasons unrelated to the check), alternating with and without the check (``--repeats`` each,
seeds 0, 1, …): scars on the paper schedule. Wall-clock seconds of ``run_tier1`` alone; the median and the best of
each arm, and the overhead of the medians.

Usage:  python benchmarks/checks.py [--repeats 3] [--episodes 12] [--method scars]
Second measure, robust to machine load: the share of one run's wall time spent inside the three checks (timers
around their entry points in the same process; ``--repeats`` runs). Prints one line per arm, the share, then, last,
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

SHARE = """
import json, sys, tempfile, time
from pathlib import Path
from scars.agents.scars_agent import ScarsAgent
from scars.experiments import enforcement
from scars.experiments.config import Tier1Config
from scars.experiments.guarantees import GuaranteeMonitor
from scars.experiments.tier1 import run_tier1
inside = [0.0]
def timed(f):
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            inside[0] += time.perf_counter() - t
    return wrapper
enforcement.EnforcementCheck.after_step = timed(enforcement.EnforcementCheck.after_step)
GuaranteeMonitor.before_decision = timed(GuaranteeMonitor.before_decision)
GuaranteeMonitor.after_step = timed(GuaranteeMonitor.after_step)
ScarsAgent._verify_ledger = timed(ScarsAgent._verify_ledger)
cfg = Tier1Config(method=sys.argv[1], episodes=int(sys.argv[2]), seed=int(sys.argv[3]), search_iterations=400)
started = time.perf_counter()
run_tier1(cfg, Path(tempfile.mkdtemp()))
print(json.dumps({"share": inside[0] / (time.perf_counter() - started)}))
"""

CHILD = """
import json, sys, tempfile, time
from pathlib import Path
from scars.experiments import enforcement
from scars.experiments.config import Tier1Config
from scars.experiments.tier1 import run_tier1
if sys.argv[1] == "off":
    from scars.agents.scars_agent import ScarsAgent
    from scars.experiments.guarantees import GuaranteeMonitor
    enforcement.EnforcementCheck.after_step = lambda self, *args: None
    GuaranteeMonitor.before_decision = lambda self, *args: None
    GuaranteeMonitor.after_step = lambda self, *args: None
    ScarsAgent._verify_ledger = lambda self: None
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
    ratios: list[float] = []
    for rep in range(args.repeats):
        for arm in ("on", "off") if rep % 2 == 0 else ("off", "on"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, arm, args.method, str(args.episodes), str(rep)],
                capture_output=True,
                text=True,
                check=True,
            )
            runs[arm].append(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])
        ratios.append(runs["on"][-1] / runs["off"][-1])  # the same seed in both arms: a paired ratio
    result = {
        arm: {"median_s": statistics.median(v), "best_s": min(v), "n": len(v)} for arm, v in runs.items()
    }
    result["overhead"] = result["on"]["median_s"] / result["off"]["median_s"] - 1.0
    result["overhead_paired_median"] = statistics.median(ratios) - 1.0
    # the share of one run's wall time spent inside the checks (same process, so load scales both alike)
    shares = []
    for rep in range(args.repeats):
        out = subprocess.run(
            [sys.executable, "-c", SHARE, args.method, str(args.episodes), str(rep)],
            capture_output=True,
            text=True,
            check=True,
        )
        shares.append(json.loads(out.stdout.strip().splitlines()[-1])["share"])
    result["share_inside_checks"] = {
        "median": statistics.median(shares),
        "max": max(shares),
        "n": len(shares),
    }
    for arm in ("on", "off"):
        r = result[arm]
        print(f"check {arm:>3}: median {r['median_s']:.2f} s, best {r['best_s']:.2f} s (n={r['n']})")
    print(
        f"overhead of the checks: {100 * result['overhead']:+.1f}% (medians), "
        f"{100 * result['overhead_paired_median']:+.1f}% (median of the per-seed ratios)"
    )
    share = result["share_inside_checks"]
    print(
        f"time inside the checks: {100 * share['median']:.1f}% of a run (median, max {100 * share['max']:.1f}%)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
