"""The simulated LM's planner inside a tier-1 run (issue 39 #3): the time spent in the expert's plans
(``envs.household.expert.expert_plan``, called by ``experiments.model_plan``) against the whole run, per method.

The planner is timed where the simulated LM calls it (its module's names are wrapped for the run; nothing else
changes). Methods run in turn, ``--repeats`` times, after a 2-episode warm-up each. Prints one JSON line per run:
``{"method": …, "wall_s": …, "cpu_s": …, "planner_s": …, "plans": …, "ms_per_plan": …, "load_average_1min": …}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import scars.experiments.model_plan as model_plan
from scars.experiments.config import METHODS, Tier1Config
from scars.experiments.schedules import episode_games
from scars.experiments.tier1 import run_tier1


def timed_run(method: str, episodes: int, seed: int) -> dict:
    spent = [0.0, 0]
    plan = model_plan.expert_plan

    def timed_plan(*args, **kwargs):
        start = time.perf_counter()
        try:
            return plan(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start
            spent[1] += 1

    def timed_next(world, forbidden=(), cache=None):
        steps = timed_plan(world, forbidden, cache)
        return steps[0] if steps else None

    saved = model_plan.expert_plan, model_plan.expert_next_command
    model_plan.expert_plan, model_plan.expert_next_command = timed_plan, timed_next
    try:
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu = time.perf_counter(), time.process_time()
            run_tier1(Tier1Config(method=method, episodes=episodes, seed=seed), Path(tmp))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        model_plan.expert_plan, model_plan.expert_next_command = saved
    return {
        "method": method,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "planner_s": round(spent[0], 3),
        "plans": spent[1],
        "ms_per_plan": round(1000 * spent[0] / max(spent[1], 1), 3),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--methods", default="scars,static_persona", help="comma-separated, from METHODS")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        print(f"--methods {args.methods!r}: each must be one of {', '.join(METHODS)}", file=sys.stderr)
        sys.exit(2)
    if args.episodes < 1 or args.repeats < 1:
        print(
            f"--episodes {args.episodes} / --repeats {args.repeats}: both must be at least 1", file=sys.stderr
        )
        sys.exit(2)
    episode_games("paper", args.episodes, args.seed)  # the game pool is built once, not timed
    for method in methods:
        timed_run(method, 2, args.seed)  # warm-up: imports and first-use costs
    for _ in range(args.repeats):
        for method in methods:
            print(json.dumps(timed_run(method, args.episodes, args.seed)), flush=True)


if __name__ == "__main__":
    main()
