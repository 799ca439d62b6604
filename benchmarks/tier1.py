"""End-to-end throughput of the tier-1 experiment (SPEC §7 tier 1): decisions/s and episodes/s per method, and
synthesis calls for the scars agent, on the paper schedule with the embedded policy.

The alternative measured in the same run: the scars agent with MCTS on Ray (two root-parallel workers, the paper's
distributed synthesis) instead of the default in-process background thread. Both give the same results for the same
seed (tested); on a 2-core machine the question is which is faster end to end.

Every method is first run once on a few episodes (imports and first-use costs are not decisions), then the methods
run ``--repeats`` times in turn (so a change of machine load hits them alike) and the medians are reported. Goal
(issue 9, "Speed"): the scars agent's decisions/s at least half of static persona's — ``scars_vs_static`` is the
median over repeats of the ratio within one repeat.

For the scars agent it also reports the share of its run the loop spent waiting for a synthesis result at the
result's collection step (``scars_synthesis_wait_share``, issue 39's target ≤ 0.10) and the median wall seconds of a
search per kind: a new failure's, narrowing's re-synthesis, and the merge's consolidation search
(``scars_<kind>_synthesis_median_s``), medians over the repeats.

Prints one JSON line last: ``{"episodes": …, "<method>_steps_per_s": …, "<method>_episodes_per_s": …,
"scars_vs_static": …, "scars_synthesis_wait_share": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from scars.experiments.config import METHODS, Tier1Config  # noqa: E402
from scars.experiments.schedules import episode_games  # noqa: E402
from scars.experiments.tier1 import run_tier1  # noqa: E402


def measure(cfg: Tier1Config) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_tier1(cfg, Path(tmp))
        seconds = time.perf_counter() - start
    s = result.summary
    return {
        "seconds": seconds,
        "steps": s["steps"],
        "steps_per_s": s["steps"] / seconds,
        "episodes_per_s": s["episodes"] / seconds,
        "syntheses": s.get("syntheses"),
        "synthesis_median_seconds": s.get("synthesis_median_seconds"),
        "synthesis_median_seconds_by_kind": s.get("synthesis_median_seconds_by_kind"),
        "synthesis_wait_share": s.get("synthesis_wait_share"),
        "rvr": s["rvr"],
        "success_rate": s["success_rate"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats of every method")
    parser.add_argument("--no-ray", action="store_true", help="skip the scars-on-Ray row")
    args = parser.parse_args()
    start = time.perf_counter()
    episode_games(
        "paper", args.episodes, args.seed
    )  # the game pool is built once per process, not timed per method
    pool_seconds = time.perf_counter() - start
    out: dict = {"episodes": args.episodes, "game_pool_seconds": round(pool_seconds, 2)}
    for method in METHODS:  # warm-up: imports and first-use costs
        measure(Tier1Config(method=method, episodes=2, seed=args.seed))
    runs: dict[str, list[dict]] = {method: [] for method in METHODS}
    for _ in range(args.repeats):
        for method in METHODS:
            runs[method].append(measure(Tier1Config(method=method, episodes=args.episodes, seed=args.seed)))
    rows = [(method, _median_run(runs[method])) for method in METHODS]
    for method, m in rows:
        out[f"{method}_steps_per_s"] = round(m["steps_per_s"], 1)
        out[f"{method}_episodes_per_s"] = round(m["episodes_per_s"], 2)
    scars_runs = runs["scars"]
    out["scars_synthesis_wait_share"] = round(
        statistics.median(m["synthesis_wait_share"] for m in scars_runs), 3
    )
    for kind in ("failure", "narrowing", "consolidation"):
        medians = [m["synthesis_median_seconds_by_kind"][kind] for m in scars_runs]
        medians = [x for x in medians if x is not None]
        out[f"scars_{kind}_synthesis_median_s"] = round(statistics.median(medians), 4) if medians else None
    ratios = [
        a["steps_per_s"] / b["steps_per_s"]
        for a, b in zip(runs["scars"], runs["static_persona"], strict=True)
    ]
    out["scars_vs_static"] = round(statistics.median(ratios), 3)
    out["scars_vs_static_per_repeat"] = [round(r, 3) for r in ratios]
    if not args.no_ray:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray_cfg = Tier1Config(
            method="scars", episodes=args.episodes, seed=args.seed, executor="ray", workers=2
        )
        measure(replace(ray_cfg, episodes=2))  # start the workers
        ray_m = _median_run([measure(ray_cfg) for _ in range(args.repeats)])
        ray.shutdown()
        rows.append(("scars (MCTS on Ray, 2 workers)", ray_m))
        out["scars_ray_steps_per_s"] = round(ray_m["steps_per_s"], 1)
        out["scars_ray_episodes_per_s"] = round(ray_m["episodes_per_s"], 2)
    out["load_average_1min"] = round(os.getloadavg()[0], 2)
    print(
        "| method | decisions/s | episodes/s | syntheses | synthesis median s | wait share | RVR | success |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, m in rows:
        med, wait = m["synthesis_median_seconds"], m["synthesis_wait_share"]
        print(
            f"| {name} | {m['steps_per_s']:.0f} | {m['episodes_per_s']:.2f} | {m['syntheses'] or '–'} | "
            f"{'–' if med is None else f'{med:.3f}'} | {'–' if wait is None else f'{wait:.2f}'} | "
            f"{m['rvr']:.3f} | {m['success_rate']:.2f} |"
        )
    print(json.dumps(out))


def _median_run(runs: list[dict]) -> dict:
    """The run with the median decisions/s (its other figures come with it)."""
    return sorted(runs, key=lambda m: m["steps_per_s"])[len(runs) // 2]


if __name__ == "__main__":
    main()
