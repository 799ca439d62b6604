"""Write cost of the audit ledger (``agents.runtime.ledger``), in two parts.

1. Commits: events per second and milliseconds per commit with one event per group (every append its own
   transaction and head-file protocol, as every event was written before group commit) against groups of 3 (a scars
   step with a failure, a temporary mask and a merge decision writes about that many) and of 10, on the
   repository's disk (``runs/``) and on tmpfs (``/dev/shm``). Each measurement records ``--events`` failures
   through the schema store (``SchemaStore.record_failure``, ~600-byte ``failure_observed`` events) in a fresh keyed
   ledger; the settings run ``--repeats`` times in turn and the median is reported.
2. End to end, with ``--before DIR`` (a checkout of the code to compare with, e.g. the commit before group commit):
   the seconds spent inside the ledger (the outermost calls of ``Ledger`` methods), the commits (head-file protocols)
   and the fsyncs the ledger module itself issues (SQLite's own come on top) per tier-2 run of five scars seats
   (12 months, ``sustainable`` habits, as ``benchmarks/arena.py``) and per 60-episode tier-1 scars run, together
   with the whole run's seconds. Each tree runs in its own process (``--seeds`` fresh runs after one warm-up), the
   two trees alternating ``--rounds`` times so a change of machine load hits both; medians over rounds.

3. The foreign-write check a run's monitor makes at every decision (issue 41 #4): microseconds per
   ``SchemaStore.foreign_events()`` (one read of the head row) against ``Ledger.head()`` (commit any open group,
   stat the file, read the head row: what the check would cost written with the public head), interleaved in one
   process on a 50-event ledger, median of ``--repeats`` rounds of 20,000 calls each.

Wall-clock time throughout: the cost being measured is mostly fsync latency, which the machine's I/O load changes.

Usage:  python benchmarks/ledger.py [--events 240] [--repeats 5] [--before DIR [--rounds 2] [--seeds 5]]
Prints readable lines, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUP_SIZES = (1, 3, 10)


def measure(folder: Path, events: int, group_size: int) -> float:
    """Seconds to record ``events`` failures in groups of ``group_size`` through a new store in ``folder``."""
    from scars.agents.runtime.store import SchemaStore
    from scars.synthesis.dsl import Action
    from scars.synthesis.failure import Failure, FailureSource

    failures = [
        Failure(
            {"step": i, "obj": "cup 1", "note": "x" * 400},
            (Action.env("move", obj="cup 1", recep="sinkbasin 1"),),
            "no_cup_in_sink",
            FailureSource("bench", 0, i, "bench-verifier"),
        )
        for i in range(events + 1)
    ]
    with tempfile.TemporaryDirectory(dir=folder) as tmp, SchemaStore(Path(tmp) / "bench.sqlite") as store:
        store.record_failure(failures[-1])  # creation and the first commit are not what is measured
        start = time.perf_counter()
        for first in range(0, events, group_size):
            with store.group():
                for failure in failures[first : min(first + group_size, events)]:
                    store.record_failure(failure, d_t=0.5)
        seconds = time.perf_counter() - start
        assert store.verify() and store.version == events + 1
    return seconds


def commits_part(events: int, repeats: int) -> dict:
    places = {"disk": ROOT / "runs"}
    places["disk"].mkdir(exist_ok=True)
    if Path("/dev/shm").is_dir():
        places["tmpfs"] = Path("/dev/shm")
    times: dict[tuple[str, int], list[float]] = {(p, g): [] for p in places for g in GROUP_SIZES}
    for _ in range(repeats):
        for place, folder in places.items():
            for size in GROUP_SIZES:
                times[(place, size)].append(measure(folder, events, size))
    result: dict = {}
    for (place, size), seconds in times.items():
        median = statistics.median(seconds)
        commits = -(-events // size)
        result[f"{place}_group{size}_events_per_s"] = round(events / median, 1)
        result[f"{place}_group{size}_ms_per_commit"] = round(1000 * median / commits, 3)
        print(
            f"{place:<5} groups of {size:>2}: {events / median:9,.1f} events/s, "
            f"{1000 * median / commits:7.3f} ms per commit ({commits} commits)"
        )
    for place in places:
        result[f"{place}_group3_speedup"] = round(
            result[f"{place}_group3_events_per_s"] / result[f"{place}_group1_events_per_s"], 2
        )
    return result


def foreign_check_part(repeats: int, calls: int = 20_000) -> dict:
    """Part 3: µs per call of the per-decision foreign-write check against ``Ledger.head()``."""
    from scars.agents.runtime.store import SchemaStore
    from scars.synthesis.dsl import Action
    from scars.synthesis.failure import Failure

    failure = Failure({"step": 0}, (Action.env("move", obj="cup 1"),), "no_cup_in_sink")
    timings: dict[str, list[float]] = {"foreign_events": [], "head": []}
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp, SchemaStore(Path(tmp) / "bench.sqlite") as store:
        with store.group():
            for i in range(50):
                store.record_failure(failure, i=i)
        for _ in range(repeats):
            for name, call in (("foreign_events", store.foreign_events), ("head", store.ledger.head)):
                start = time.perf_counter()
                for _ in range(calls):
                    call()
                timings[name].append((time.perf_counter() - start) / calls * 1e6)
    result = {f"{name}_us": round(statistics.median(v), 2) for name, v in timings.items()}
    print(
        f"foreign-write check: {result['foreign_events_us']:.2f} µs per decision's read, Ledger.head() "
        f"{result['head_us']:.2f} µs (median of {repeats} × {calls} calls)"
    )
    return result


def _import_root(tree: Path) -> Path:
    """A folder ``scars`` whose entries are links to ``tree``'s five package folders (the wheel's layout)."""
    root = Path(tempfile.mkdtemp(prefix="scars-tree-")) / "scars"
    root.mkdir()
    for folder in ("agents", "disequilibrium", "envs", "experiments", "synthesis"):
        (root / folder).symlink_to(tree / folder, target_is_directory=True)
    return root


def share_child(tree: Path, seeds: int) -> dict:
    """In a process whose imports come from ``tree``: ledger seconds, commits and fsyncs per tier-2 / tier-1 run.
    The tree's five folders are mapped under the import root ``scars`` in front of the installed checkout."""
    import scars

    scars.__path__ = [str(_import_root(tree))]
    import importlib

    import scars.agents.runtime.ledger as ledger_module

    runner = "commons_run" if (tree / "experiments" / "commons_run.py").is_file() else "tier2"
    run_tier2 = importlib.import_module(f"scars.experiments.{runner}").run_tier2
    from scars.experiments.config import Tier1Config, Tier2Config
    from scars.experiments.tier1 import run_tier1

    foreign = [  # every project module must come from the tree (a mixed import would measure neither)
        m.__file__
        for name, m in sys.modules.items()
        if name.startswith("scars.")
        and getattr(m, "__file__", None)
        and not Path(m.__file__).resolve().is_relative_to(tree.resolve())
    ]
    assert not foreign and Path(ledger_module.__file__).resolve().is_relative_to(tree), foreign[:3]

    state = {"depth": 0, "seconds": 0.0, "fsyncs": 0, "commits": 0}

    def outermost(fn):
        def timed(*args, **kwargs):
            if state["depth"]:
                return fn(*args, **kwargs)
            state["depth"] += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                state["seconds"] += time.perf_counter() - start
                state["depth"] -= 1

        return timed

    cls = ledger_module.Ledger
    for name in ("__init__", "_append", "_commit_group", "verify", "head", "events", "may_admit", "close"):
        if hasattr(cls, name):  # the older code has no _commit_group: its commits are inside _append
            setattr(cls, name, outermost(getattr(cls, name)))
    real_fsync, write_head = os.fsync, cls._write_head_file

    def counted_fsync(fd):
        state["fsyncs"] += 1
        return real_fsync(fd)

    def counted_write(self, committed, pending, **kwargs):
        state["commits"] += pending is not None  # one pending head-file write per commit
        return write_head(self, committed, pending, **kwargs)

    ledger_module.os.fsync = counted_fsync  # the ledger module's own fsyncs (head file, key, folder)
    cls._write_head_file = counted_write
    runs = {
        "tier2": lambda seed, out: run_tier2(
            Tier2Config(method="scars", runs=1, seed=seed, habits="sustainable"), out
        ),
        "tier1": lambda seed, out: run_tier1(Tier1Config(method="scars", episodes=60, seed=seed), out),
    }
    folder = tree / "runs"
    folder.mkdir(exist_ok=True)
    result = {}
    for name, run in runs.items():
        with tempfile.TemporaryDirectory(dir=folder) as out:
            run(10_000, Path(out))  # warm-up
        rows = []
        for seed in range(seeds):
            state.update(seconds=0.0, fsyncs=0, commits=0)
            with tempfile.TemporaryDirectory(dir=folder) as out:
                start = time.perf_counter()
                run(seed, Path(out))
                rows.append(
                    (time.perf_counter() - start, state["seconds"], state["fsyncs"], state["commits"])
                )
        result[name] = {
            "run_s": statistics.median(r[0] for r in rows),
            "ledger_s": statistics.median(r[1] for r in rows),
            "fsyncs": statistics.median(r[2] for r in rows),
            "commits": statistics.median(r[3] for r in rows),
        }
    return result


def share_part(before: Path, rounds: int, seeds: int) -> dict:
    trees = {"before": before.resolve(), "after": ROOT}
    measured: dict[str, list[dict]] = {label: [] for label in trees}
    for _ in range(rounds):
        for label, tree in trees.items():
            out = subprocess.run(
                [sys.executable, __file__, "--share-child", str(tree), "--seeds", str(seeds)],
                cwd=tree,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            measured[label].append(json.loads(out.strip().splitlines()[-1]))
    result: dict = {}
    for label, rows in measured.items():
        for run in ("tier2", "tier1"):
            for key in ("run_s", "ledger_s", "fsyncs", "commits"):
                value = statistics.median(r[run][key] for r in rows)
                result[f"{label}_{run}_{key}"] = round(value, 3)
            print(
                f"{label:<6} {run}: {result[f'{label}_{run}_run_s']:.3f} s per run, "
                f"{result[f'{label}_{run}_ledger_s']:.3f} s in the ledger, {result[f'{label}_{run}_commits']:.0f} "
                f"commits, {result[f'{label}_{run}_fsyncs']:.0f} fsyncs by the ledger module"
            )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=240, help="events per commit measurement (default 240)")
    parser.add_argument(
        "--repeats", type=int, default=5, help="interleaved repeats of part 1; median reported"
    )
    parser.add_argument("--before", type=Path, help="a checkout to compare with end to end (part 2)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two trees in part 2")
    parser.add_argument("--seeds", type=int, default=5, help="fresh runs per tree and round in part 2")
    parser.add_argument("--share-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("events", "repeats", "rounds", "seeds"):
        if getattr(args, name) < 1:
            print(f"--{name} must be ≥ 1, got {getattr(args, name)}", file=sys.stderr)
            return 2
    if args.share_child is not None:
        print(json.dumps(share_child(args.share_child, args.seeds)))
        return 0
    if args.before is not None and not (args.before / "agents" / "runtime" / "ledger.py").is_file():
        print(
            f"--before {args.before}: not a checkout of this repository (no agents/runtime/ledger.py)",
            file=sys.stderr,
        )
        return 2
    if (
        args.before is not None
        and '"scars.agents" = "agents"' not in (args.before / "pyproject.toml").read_text()
    ):
        print(
            f"--before {args.before}: a tree from before the one import root `scars` (commit 4482132); its modules "
            "import each other by bare names and cannot be loaded beside this one: check out a later commit",
            file=sys.stderr,
        )
        return 2
    result: dict = {
        "events": args.events,
        "repeats": args.repeats,
        "load_1min_start": round(os.getloadavg()[0], 2),
    }
    result.update(commits_part(args.events, args.repeats))
    result.update(foreign_check_part(args.repeats))
    if args.before is not None:
        result.update(share_part(args.before, args.rounds, args.seeds))
    result["load_1min_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
