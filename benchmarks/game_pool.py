"""Benchmark: a tier-1 game pool built against one read from the user cache (issue 39, item 4).

For each schedule, in one process: the pool built with the cache off (what every process paid before), built into an
empty cache folder (the first run: build + write), and read back as a new process would (the in-process memo
cleared). CPU time (``time.process_time``) and wall clock; the entry's size.

Usage:  python benchmarks/game_pool.py [--schedules paper,paraphrase_a] [--seed 0]
Prints one line per schedule, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from scars.experiments import schedules
from scars.experiments.cache import CACHE_DIR_ENV, CACHE_ENV, entry_path


def _timed(fn) -> tuple[float, float]:
    schedules.game_pool.cache_clear()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", default="paper,paraphrase_a")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out: dict = {"seed": args.seed, "load_average": list(os.getloadavg())}
    with tempfile.TemporaryDirectory() as folder:
        os.environ[CACHE_DIR_ENV] = folder
        for name in args.schedules.split(","):
            key = name if name in schedules.SCHEDULES else schedules.load_schedule_file(name)[0]
            os.environ[CACHE_ENV] = "off"
            off = _timed(lambda k=key: schedules.game_pool(k, args.seed))
            os.environ[CACHE_ENV] = "on"
            cold = _timed(lambda k=key: schedules.game_pool(k, args.seed))
            warm = _timed(lambda k=key: schedules.game_pool(k, args.seed))
            path = entry_path("game_pool", schedules.pool_key(key, args.seed))
            size = path.stat().st_size if path is not None and path.is_file() else None
            games = len(schedules.game_pool(key, args.seed))
            out[name] = {"games": games, "entry_bytes": size, "off": off, "cold": cold, "warm": warm}
            print(
                f"{name}: {games} games; built {off[1]:.2f} s CPU ({off[0]:.2f} wall), first run {cold[1]:.2f} s "
                f"CPU, from the cache {warm[1] * 1000:.1f} ms CPU ({warm[0] * 1000:.1f} wall): "
                f"{off[1] / max(warm[1], 1e-9):.0f}x; entry {size} bytes"
            )
    out["load_average_end"] = list(os.getloadavg())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
