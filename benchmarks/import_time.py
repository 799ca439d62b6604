"""Benchmark: what importing the public library costs (issue 23) — ``from scars.agents.runtime import Gate,
open_gate`` in a fresh interpreter — against an older tree of the project in the same sitting.

Each measurement starts a new interpreter and times the import statement alone with two clocks: wall-clock
(``time.perf_counter``) and the process's CPU time (``time.process_time``; a loaded shared machine inflates wall
clock with other jobs' time). Runs alternate between the trees (``--repeats`` each); the best and the median are
reported, with the third-party top-level packages the import loaded.

``--before DIR`` is a checkout of an older tree (``git worktree add /tmp/before REV``); ``--before-import`` the
statement that imports its library (before the one import root it was ``from agents.runtime import Gate,
open_gate``). Its folder goes first on ``sys.path``; this venv's packages serve both trees.

Usage:  python benchmarks/import_time.py [--repeats 7] [--before DIR [--before-import STMT]]
Prints a few readable lines, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

NOW = "from scars.agents.runtime import Gate, open_gate"
PROBE = """
import json, sys, time
sys.path[:0] = {path!r}
wall, cpu = time.perf_counter(), time.process_time()
{statement}
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
names = {{m.split(".")[0] for m in sys.modules}} - set(sys.stdlib_module_names)
third = sorted(m for m in names if not m.startswith("_") and m not in ("scars", "agents", "envs", "synthesis",
               "disequilibrium", "experiments"))
print(json.dumps({{"wall": wall, "cpu": cpu, "third_party": third, "modules": len(sys.modules)}}))
"""


def measure(statement: str, path: list[str]) -> dict:
    code = PROBE.format(statement=statement, path=path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict]) -> dict:
    return {
        "wall_best_s": min(r["wall"] for r in runs),
        "wall_median_s": statistics.median(r["wall"] for r in runs),
        "cpu_best_s": min(r["cpu"] for r in runs),
        "cpu_median_s": statistics.median(r["cpu"] for r in runs),
        "third_party": runs[0]["third_party"],
        "modules": runs[0]["modules"],
        "n": len(runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="fresh interpreters per tree (default 7)")
    parser.add_argument(
        "--before", type=Path, help="a checkout of an older tree to measure in the same sitting"
    )
    parser.add_argument(
        "--before-import", default="from agents.runtime import Gate, open_gate", help="its import statement"
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: give a whole number >= 1")
    if args.before is not None and not (args.before / "agents" / "runtime").is_dir():
        parser.error(f"--before {args.before}: not a checkout of the project (no agents/runtime/ in it)")
    trees = {"now": (NOW, [])}
    if args.before is not None:
        trees["before"] = (args.before_import, [str(args.before.resolve())])
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.repeats):
        for name, (statement, path) in trees.items():
            runs[name].append(measure(statement, path))
    result = {name: summarise(r) for name, r in runs.items()}
    for name, r in result.items():
        print(
            f"{name:>6}: wall best {r['wall_best_s']:.3f} s (median {r['wall_median_s']:.3f}), CPU best "
            f"{r['cpu_best_s']:.3f} s (median {r['cpu_median_s']:.3f}), n={r['n']}, {r['modules']} modules, "
            f"third-party: {', '.join(r['third_party']) or 'none'}"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
