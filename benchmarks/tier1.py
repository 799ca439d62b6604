"""End-to-end throughput of the tier-1 experiment (SPEC §7 tier 1): decisions/s and episodes/s per method, and
synthesis calls for the scars agent, on the paper schedule with the embedded policy.

The alternative measured in the same run: the scars agent with MCTS on Ray (two root-parallel workers, the paper's
distributed synthesis) instead of the default in-process background thread. Both give the same results for the same
seed (tested); on a 2-core machine the question is which is faster end to end.

Prints one JSON line last: ``{"episodes": …, "<method>_steps_per_s": …, "<method>_episodes_per_s": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.config import METHODS, Tier1Config  # noqa: E402
from experiments.schedules import episode_games  # noqa: E402
from experiments.tier1 import run_tier1  # noqa: E402


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
        "rvr": s["rvr"],
        "success_rate": s["success_rate"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-ray", action="store_true", help="Skip the MCTS-on-Ray alternative.")
    args = parser.parse_args()
    start = time.perf_counter()
    episode_games(
        "paper", args.episodes, args.seed
    )  # the game pool is built once per process, not timed per method
    pool_seconds = time.perf_counter() - start
    out: dict = {"episodes": args.episodes, "game_pool_seconds": round(pool_seconds, 2)}
    rows = []
    for method in METHODS:
        m = measure(Tier1Config(method=method, episodes=args.episodes, seed=args.seed))
        rows.append((method, m))
        out[f"{method}_steps_per_s"] = round(m["steps_per_s"], 1)
        out[f"{method}_episodes_per_s"] = round(m["episodes_per_s"], 2)
    # the agent-layer target (issue "one agent for every world"): scars at least half of static persona's decisions/s
    out["scars_over_static_persona"] = round(out["scars_steps_per_s"] / out["static_persona_steps_per_s"], 3)
    if not args.no_ray:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray_m = measure(
            Tier1Config(method="scars", episodes=args.episodes, seed=args.seed, executor="ray", workers=2)
        )
        ray.shutdown()
        rows.append(("scars (MCTS on Ray, 2 workers)", ray_m))
        out["scars_ray_steps_per_s"] = round(ray_m["steps_per_s"], 1)
        out["scars_ray_episodes_per_s"] = round(ray_m["episodes_per_s"], 2)
    print("| method | decisions/s | episodes/s | syntheses | synthesis median s | RVR | success |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, m in rows:
        med = m["synthesis_median_seconds"]
        print(
            f"| {name} | {m['steps_per_s']:.0f} | {m['episodes_per_s']:.2f} | {m['syntheses'] or '–'} | "
            f"{'–' if med is None else f'{med:.3f}'} | {m['rvr']:.3f} | {m['success_rate']:.2f} |"
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
