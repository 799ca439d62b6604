"""Throughput of the tier-2 commons arena (SPEC §7 tier 2): simulated months per second, 5 scripted agents.

Three measurements in one run, so the cost of each layer shows:

1. ``bare``: the GovSim dynamics alone (``harvest_month`` on the requests the same cooperators would make) —
   no discussion, no punishment, no observations or infos;
2. ``env_fixed``: ``commons_v0.parallel_env`` in arena A stepped with precomputed constant actions (the PettingZoo
   layer: three phases a month, observation and info dicts, admissible actions, provenance);
3. ``scripted``: the full arena with the scripted population deciding every step (``rollout.run_episode``), the
   figure reported as ``months_per_s``;
4. ``learners``: the tier-2 loop (``experiments.commons_run.run_tier2``) with five learning seats of one method on the
   embedded policy with the ``sustainable`` habits (so a run lasts its 12 months; the calibrated ``govsim`` seats
   collapse the pool in ~2.4) — scars and each text baseline — one fresh run per seed; the median seconds
   per run and months/s. Scars is measured twice, its ledgers on the run folder's disk and on tmpfs (``/dev/shm``):
   every ledger event is fsynced (the ledger's crash safety), which is most of its cost on a slow disk. Goal (issue
   14): a 12-month run with five scars agents ≤ 1 s median on two cores.

Prints one JSON line last: ``{"months_per_s": …, ...}``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

# benchmarks/synthesis.py would shadow the synthesis package: put the repository root first
from scars.envs.commons import commons_v0  # noqa: E402
from scars.envs.commons.dynamics import DynamicsConfig, harvest_month, sustainable_share  # noqa: E402
from scars.envs.commons.rollout import run_episode  # noqa: E402
from scars.experiments.config import METHODS  # noqa: E402

POPULATION = "coop:3,noisy:1,retaliator:1"  # survives the 12 months and exercises discussion and punishment
LEARNER_SEEDS = 7
HABITS = "sustainable"  # seats that keep the pool alive, so a run lasts the 12 months the goal is about
LEARNERS = METHODS
BUDGET_S = 2.0
GOVSIM = DynamicsConfig()


def _timed(fn, budget_s: float = BUDGET_S) -> tuple[int, float]:
    """Call ``fn`` (which returns months simulated) until the budget is spent; return (months, seconds)."""
    months, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < budget_s:
        months += fn()
    return months, elapsed


def bare_episode(rng: np.random.Generator, cfg: DynamicsConfig = GOVSIM) -> int:
    stock = cfg.start_stock
    for month in range(1, cfg.num_months + 1):
        share = math.floor(sustainable_share(stock, cfg))
        requests = [share] * (cfg.num_agents - 1) + [share + int(rng.integers(-3, 4))]
        out = harvest_month(stock, [max(0, r) for r in requests], cfg, rng)
        if out.collapsed:
            return month
        stock = out.next_stock
    return cfg.num_months


def env_fixed_episode(env, actions_by_phase) -> int:
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, *_ = env.step(actions_by_phase[obs["agent_0"]["phase"]])
    return len(env.history)


def learner_runs(method: str, root: Path) -> dict:
    """One fresh 12-month homogeneous run per seed (after one warm-up run): median seconds per run, months/s."""
    import tempfile

    from scars.experiments.commons_run import run_tier2
    from scars.experiments.config import Tier2Config

    def once(seed: int) -> tuple[float, int]:
        with tempfile.TemporaryDirectory(dir=root) as out:
            start = time.perf_counter()
            result = run_tier2(Tier2Config(method=method, runs=1, seed=seed, habits=HABITS), Path(out))
            return time.perf_counter() - start, int(result.runs["survival_time"].sum())

    once(10_000)
    timings = [once(seed) for seed in range(LEARNER_SEEDS)]
    seconds = [t for t, _ in timings]
    months = sum(m for _, m in timings)
    return {
        "median_s_per_run": round(float(np.median(seconds)), 3),
        "months_per_s": round(months / sum(seconds), 1),
        "mean_months_per_run": round(months / len(timings), 1),
    }


def main() -> None:
    rng = np.random.default_rng(0)
    bare_months, bare_s = _timed(lambda: bare_episode(rng))

    env = commons_v0.parallel_env(arena="A")
    quiet = {"harvest": 10, "message": 1, "limit": 10, "about": 0, "punish": np.zeros(5, dtype=np.int8)}
    fixed = {phase: dict.fromkeys(env.possible_agents, quiet) for phase in range(3)}
    env_months, env_s = _timed(lambda: env_fixed_episode(env, fixed))

    seeds = iter(range(10**9))
    scripted_months, scripted_s = _timed(
        lambda: len(run_episode(arena="A", population=POPULATION, seed=next(seeds)).months)
    )

    bare = bare_months / bare_s
    env_rate = env_months / env_s
    scripted = scripted_months / scripted_s
    print(f"bare GovSim dynamics          : {bare:12,.0f} months/s ({bare_months} months in {bare_s:.2f} s)")
    print(
        f"PettingZoo env, fixed actions : {env_rate:12,.0f} months/s ({env_months} months in {env_s:.2f} s)"
    )
    print(
        f"scripted 5-agent arena (A)    : {scripted:12,.0f} months/s ({scripted_months} months in {scripted_s:.2f} s)"
    )
    print(
        f"PettingZoo layer costs {bare / env_rate:.1f}x the bare dynamics; policies add {env_rate / scripted:.2f}x"
    )
    learners = {}
    shm = Path("/dev/shm")
    disk = Path(tempfile_dir())
    for method in LEARNERS:
        learners[method] = learner_runs(method, disk)
        r = learners[method]
        print(
            f"5 x {method:<15}: {r['months_per_s']:8,.1f} months/s, median {r['median_s_per_run']:.3f} s per run "
            f"({r['mean_months_per_run']} months on average, {LEARNER_SEEDS} seeds)"
        )
    if shm.is_dir():
        learners["scars_ledger_on_tmpfs"] = learner_runs("scars", shm)
        r = learners["scars_ledger_on_tmpfs"]
        print(
            f"5 x scars, ledgers on tmpfs : {r['months_per_s']:8,.1f} months/s, median {r['median_s_per_run']:.3f} s"
        )
    print(
        json.dumps(
            {
                "months_per_s": round(scripted, 1),
                "learners": learners,
                "scars_goal_met": learners["scars"]["median_s_per_run"] <= 1.0,
                "env_fixed_actions_months_per_s": round(env_rate, 1),
                "bare_dynamics_months_per_s": round(bare, 1),
                "api_layer_slowdown_x": round(bare / env_rate, 2),
                "population": POPULATION,
                "arena": "A",
            }
        )
    )


def tempfile_dir() -> str:
    """Where run folders go for the on-disk measurement: the repository's ``runs/`` (a real disk), else the system's
    temporary folder."""
    runs = Path(__file__).resolve().parents[1] / "runs"
    runs.mkdir(exist_ok=True)
    return str(runs)


if __name__ == "__main__":
    main()
