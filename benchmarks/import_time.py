"""Benchmark: what importing the public library and starting the command line cost (issues 23 and 39) — against an
older tree of the project in the same sitting.

Each measurement starts a new interpreter. Imports (``import scars.agents.runtime``, ``from scars.agents.runtime
import Gate, open_gate``) are timed around the statement alone with two clocks: wall-clock (``time.perf_counter``)
and the process's CPU time (``time.process_time``; a loaded shared machine inflates wall clock with other jobs'
time). Commands (``scars --help``, ``scars dsl parse RULE``) are timed as a user waits for them: the whole process,
interpreter start-up included, wall clock (and the child's CPU time). Runs alternate between the trees (``--repeats``
each); the best and the median are reported, with the third-party top-level packages an import loaded. Python's
bytecode caches are on, as for an installed package (``PYTHONDONTWRITEBYTECODE`` is dropped from the measured
interpreters' environment, and one unmeasured run per tree and measurement writes the ``__pycache__`` files first);
``--no-pyc`` measures without them (every module compiled from source, as in a sandbox that sets
``PYTHONDONTWRITEBYTECODE=1``).

``--before DIR`` is a checkout of an older tree (``git worktree add /tmp/before REV`` or ``git archive REV | tar -x
-C DIR``): this venv's editable install is re-pointed at DIR inside each measured interpreter (its import finder's
folder map), so both trees import as ``scars.*`` with this venv's packages. ``--before-import`` replaces the import
statements for a tree from before the one import root (``from agents.runtime import Gate, open_gate``, with DIR first
on ``sys.path``; its commands are not measured).

Usage:  python benchmarks/import_time.py [--repeats 7] [--before DIR [--before-import STMT]]
Prints a few readable lines, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORTS = {
    "import scars.agents.runtime": "import scars.agents.runtime",
    "gate import": "from scars.agents.runtime import Gate, open_gate",
}
RULE = 'if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")'
COMMANDS = {"scars --help": ["--help"], "scars dsl parse": ["dsl", "parse", RULE]}

REPOINT = """
import sys
for _name, _mod in list(sys.modules.items()):
    if _name.startswith("__editable__") and isinstance(getattr(_mod, "MAPPING", None), dict):
        for _k, _v in _mod.MAPPING.items():
            _mod.MAPPING[_k] = _v.replace({root!r}, {tree!r})
sys.path[:0] = {path!r}
"""
PROBE = """
import json, sys, time
wall, cpu = time.perf_counter(), time.process_time()
{statement}
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
names = {{m.split(".")[0] for m in sys.modules}} - set(sys.stdlib_module_names)
third = sorted(m for m in names if not m.startswith("_") and m not in ("scars", "agents", "envs", "synthesis",
               "disequilibrium", "experiments"))
print(json.dumps({{"wall": wall, "cpu": cpu, "third_party": third, "modules": len(sys.modules)}}))
"""
COMMAND = """
import sys
from scars.experiments.cli import main
sys.argv = ["scars", *{args!r}]
main()
"""


def _prelude(tree: Path | None, path: list[str]) -> str:
    return REPOINT.format(root=str(ROOT), tree=str(tree) if tree else str(ROOT), path=path)


ENV = dict(os.environ)


def measure(statement: str, tree: Path | None, path: list[str]) -> dict:
    code = _prelude(tree, path) + PROBE.format(statement=statement)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/", env=ENV
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_command(args: list[str], tree: Path | None) -> dict:
    code = _prelude(tree, []) + COMMAND.format(args=args)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
        env=ENV,
    )
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "third_party": [], "modules": 0}


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
        "--before-import", default=None, help="its import statement, for a tree from before the scars.* root"
    )
    parser.add_argument("--no-pyc", action="store_true", help="measure without bytecode caches")
    args = parser.parse_args()
    if args.no_pyc:
        ENV["PYTHONDONTWRITEBYTECODE"] = "1"
        ENV["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(
            prefix="no-pyc-"
        )  # an empty cache: nothing read, nothing kept
    else:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: give a whole number >= 1")
    if args.before is not None and not (args.before / "agents" / "runtime").is_dir():
        parser.error(f"--before {args.before}: not a checkout of the project (no agents/runtime/ in it)")
    # (tree name, measurement name) -> a function measuring it once
    jobs = {}
    trees: dict[str, tuple[Path | None, list[str]]] = {"now": (None, [])}
    if args.before is not None:
        before = args.before.resolve()
        trees["before"] = (before, [str(before)] if args.before_import else [])
    for tree, (folder, path) in trees.items():
        statements = (
            IMPORTS if tree == "now" or not args.before_import else {"gate import": args.before_import}
        )
        for name, statement in statements.items():
            jobs[(tree, name)] = lambda s=statement, f=folder, p=path: measure(s, f, p)
        if tree == "now" or not args.before_import:
            for name, argv in COMMANDS.items():
                jobs[(tree, name)] = lambda a=argv, f=folder: measure_command(a, f)
    for (
        job
    ) in jobs.values():  # unmeasured: writes the bytecode caches (or, with --no-pyc, warms the disk cache)
        job()
    runs: dict[tuple[str, str], list[dict]] = {key: [] for key in jobs}
    for _ in range(args.repeats):
        for key, job in jobs.items():
            runs[key].append(job())
    result: dict[str, dict] = {}
    for (tree, name), r in runs.items():
        result.setdefault(tree, {})[name] = summarise(r)
    result["load_average"] = list(os.getloadavg())
    result["bytecode_cache"] = not args.no_pyc
    for tree in trees:
        for name, r in result[tree].items():
            extra = (
                f", {r['modules']} modules, third-party: {', '.join(r['third_party']) or 'none'}"
                if r["modules"]
                else ""
            )
            print(
                f"{tree:>6} {name:<28}: wall best {r['wall_best_s']:.3f} s (median {r['wall_median_s']:.3f}), CPU "
                f"best {r['cpu_best_s']:.3f} s (median {r['cpu_median_s']:.3f}), n={r['n']}{extra}"
            )
    print(f"load average {result['load_average']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
