"""Write cost of the audit ledger (``agents.runtime.ledger``): events per second and milliseconds per commit, one
event per group (every append its own transaction and head-file protocol: how every event was written before group
commit) against groups of 3 (a scars step that records a failure, sets a temporary mask and is followed by a merge
decision writes about that many) and of 10, on the repository's disk (``runs/``) and on tmpfs (``/dev/shm``).

Each measurement records ``--events`` failures through the schema store (``SchemaStore.record_failure``: the write
path the scars agent uses; ``failure_observed`` events of about 600 bytes) in a fresh keyed ledger; the settings run ``--repeats`` times in turn (so a change of machine load hits them alike) and
the median is reported. Wall-clock time: the cost being measured is mostly fsync latency, which is what the
machine's I/O load changes.

Usage:  python benchmarks/ledger.py [--events 240] [--repeats 5]
Prints one line per setting, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.runtime.store import SchemaStore  # noqa: E402
from synthesis.dsl import Action  # noqa: E402
from synthesis.failure import Failure, FailureSource  # noqa: E402

GROUP_SIZES = (1, 3, 10)


def measure(folder: Path, events: int, group_size: int) -> float:
    """Seconds to append ``events`` events in groups of ``group_size`` to a new ledger in ``folder``."""
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
                for failure in failures[first : first + group_size]:
                    store.record_failure(failure, d_t=0.5)
        seconds = time.perf_counter() - start
        assert store.verify() and store.version == events + 1
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", type=int, default=240, help="events appended per measurement (default 240)"
    )
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats; the median is reported")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1:
        print(f"--events and --repeats must be ≥ 1, got {args.events} and {args.repeats}", file=sys.stderr)
        return 2
    disk = Path(__file__).resolve().parents[1] / "runs"
    disk.mkdir(exist_ok=True)
    places = {"disk": disk}
    if Path("/dev/shm").is_dir():
        places["tmpfs"] = Path("/dev/shm")
    times: dict[tuple[str, int], list[float]] = {(p, g): [] for p in places for g in GROUP_SIZES}
    for _ in range(args.repeats):
        for place, folder in places.items():
            for size in GROUP_SIZES:
                times[(place, size)].append(measure(folder, args.events, size))
    result: dict = {"events": args.events, "repeats": args.repeats, "load_1min": round(os.getloadavg()[0], 2)}
    for (place, size), seconds in times.items():
        median = statistics.median(seconds)
        commits = -(-args.events // size)
        result[f"{place}_group{size}_events_per_s"] = round(args.events / median, 1)
        result[f"{place}_group{size}_ms_per_commit"] = round(1000 * median / commits, 3)
        print(
            f"{place:<5} groups of {size:>2}: {args.events / median:9,.1f} events/s, "
            f"{1000 * median / commits:7.3f} ms per commit ({commits} commits)"
        )
    for place in places:
        result[f"{place}_group3_speedup"] = round(
            result[f"{place}_group3_events_per_s"] / result[f"{place}_group1_events_per_s"], 2
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
