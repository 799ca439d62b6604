"""Sweeps on Ray Tune (issue 16, "Speed"): Tune's overhead per trial and the speed-up of 2 workers over 1 on a
12-trial tier-1 sweep, and what live W&B logging costs, each beside its alternative in the same run.

1. Overhead: ``--trivial`` trials whose run function returns at once, through ``run_sweep`` (Tune, 2 CPUs), against
   the same calls as plain ``ray.remote`` tasks (what the hand-made executor did) — wall seconds per trial.
2. Speed-up: the same 12-trial tier-1 sweep (scars, rag, reflexion × seeds 0–3, ``--episodes`` episodes of the paper
   schedule) with ``max_concurrent`` 1 and then 2 on a 2-CPU Ray instance. Goal ≥ 1.7× on an idle two-core machine;
   the 1-minute load average before and after each measurement is recorded (the machine may be shared). Beside it,
   12 trials that each wait 1 s without CPU: Tune's own parallelism, independent of the load.
3. W&B: 4 tier-1 trials (1 worker) without W&B, with the in-run ``Tracker`` (live per-episode logging, tables, plots,
   artifacts) and with Tune's ``WandbLoggerCallback`` (offline) — wall seconds per trial.

Prints one JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

from rich.console import Console  # noqa: E402

from scars.experiments.sweep import run_sweep
from scars.experiments.sweep_spec import SweepSpec  # noqa: E402


def trivial_run(cfg, out, *, tracking=None, progress=None):
    return {"success_rate": 1.0, "episodes": cfg.episodes}


def sleep_run(cfg, out, *, tracking=None, progress=None):
    """A trial that waits 1 s without using the CPU: isolates Tune's parallelism from the machine's load."""
    time.sleep(1.0)
    return {"success_rate": 1.0, "episodes": cfg.episodes}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def timed_sweep(spec: SweepSpec, run_fn=None, callbacks=()) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        before = load()
        start = time.perf_counter()
        result = run_sweep(
            spec, Path(tmp) / "s", run_fn=run_fn, console=Console(quiet=True), callbacks=callbacks
        )
        seconds = time.perf_counter() - start
        assert not result.failed, result.failed
    return {
        "seconds": round(seconds, 2),
        "load_before": before,
        "load_after": load(),
        "trials": len(result.runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trivial", type=int, default=24, help="trivial trials for the overhead figure")
    parser.add_argument("--episodes", type=int, default=12, help="episodes per tier-1 run")
    parser.add_argument("--skip-wandb", action="store_true")
    args = parser.parse_args()

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    out: dict = {"cpus": os.cpu_count(), "load_start": load()}

    # 1. overhead per trivial trial: Tune against plain Ray tasks
    trivial = SweepSpec(
        grid={"seed": list(range(args.trivial))}, fixed={"method": "rag", "episodes": 1}, name="t"
    )
    tune_trivial = timed_sweep(trivial, run_fn=trivial_run)
    remote = ray.remote(num_cpus=1)(lambda seed: trivial_run(type("C", (), {"episodes": 1})(), None))
    ray.get(remote.remote(0))  # warm a worker, as Tune's first trial also pays for its own start
    start = time.perf_counter()
    ray.get([remote.remote(s) for s in range(args.trivial)])
    plain = time.perf_counter() - start
    out["tune_seconds_per_trivial_trial"] = round(tune_trivial["seconds"] / args.trivial, 3)
    out["ray_task_seconds_per_trivial_trial"] = round(plain / args.trivial, 4)
    out["tune_trivial"] = tune_trivial

    # 2. 12 tier-1 trials, 1 worker against 2
    grid = {"method": ["scars", "rag", "reflexion"], "seed": [0, 1, 2, 3]}
    fixed = {"episodes": args.episodes}
    one = timed_sweep(SweepSpec(grid=grid, fixed=fixed, name="one", max_concurrent=1))
    two = timed_sweep(SweepSpec(grid=grid, fixed=fixed, name="two", max_concurrent=2))
    out["sweep12_1_worker"] = one
    out["sweep12_2_workers"] = two
    out["speedup_2_over_1"] = round(one["seconds"] / two["seconds"], 2)

    # 2b. the same 12 trials as 1-second waits (no CPU used): Tune's parallelism alone, whatever the load
    sleeps = {"seed": list(range(12))}
    one_sleep = timed_sweep(
        SweepSpec(grid=sleeps, fixed={"method": "rag"}, name="s1", max_concurrent=1), sleep_run
    )
    two_sleep = timed_sweep(
        SweepSpec(grid=sleeps, fixed={"method": "rag"}, name="s2", max_concurrent=2), sleep_run
    )
    out["sleep12_speedup_2_over_1"] = round(one_sleep["seconds"] / two_sleep["seconds"], 2)
    out["sleep12"] = {"1_worker": one_sleep, "2_workers": two_sleep}

    # 3. W&B: none / in-run Tracker / Tune's WandbLoggerCallback, 4 trials on one worker
    if not args.skip_wandb:
        from ray.air.integrations.wandb import WandbLoggerCallback

        small = {"method": ["scars", "rag"], "seed": [0, 1]}
        base = dict(grid=small, fixed=fixed, max_concurrent=1)
        none = timed_sweep(SweepSpec(**base, name="none"))
        inrun = timed_sweep(SweepSpec(**base, name="inrun", wandb=True))
        callback = timed_sweep(
            SweepSpec(**base, name="callback"),
            callbacks=[WandbLoggerCallback(project="scars-bench", mode="offline", log_config=True)],
        )
        out["wandb"] = {
            "no_wandb_seconds_per_trial": round(none["seconds"] / 4, 2),
            "in_run_tracker_seconds_per_trial": round(inrun["seconds"] / 4, 2),
            "tune_wandb_callback_seconds_per_trial": round(callback["seconds"] / 4, 2),
            "loads": [none["load_before"], inrun["load_before"], callback["load_before"]],
        }
    ray.shutdown()
    out["load_end"] = load()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
