"""Speed of the native household world against the real ALFWorld engine (issues 3 and 12 "Speed"; SPEC §7, §9).

Goals (issue 12): native steps/s >= 1000x TextWorld's, the full Gymnasium env >= 2000x.

On the SAME generated games (six task types x ``--seeds`` seeds, each exported with
``envs.household.game_file.export_game``), in one run:

- random admissible-command walks: a uniformly random admissible command each step, restarting the game when it is
  won or after 50 steps (ALFWorld's episode length); steps per second, where a step is ``step(command)`` plus
  reading the next admissible commands and the won flag;
- resets per second (back to the initial state of a loaded game);
- the same walks on ALFWorld's own game files (issue 27): ``--real-files N`` files (every k-th, sorted) under
  ``--game-files`` (default ``$ALFWORLD_DATA/json_2.1.1/valid_train``), native and TextWorld in the same run; the
  row is left out when there are no such files.

Engines:
  native      ``envs.household.world.World`` (the engine of ``scars/Household-v0``);
  native_env  the full Gymnasium env ``HouseholdEnv`` (info with structured actions, context, verifier);
  textworld   TextWorld's PDDL engine with ALFWorld's ``AlfredDemangler``, requesting only admissible commands and
              won (its fastest configuration; this is the alternative the native world replaces).

Steps/s are wall-clock; the CPU-time figures (``*_cpu``) are also given because the machine may be shared.

Usage:  python benchmarks/world.py [--seeds 1] [--textworld-steps 25] [--native-seconds 1.0] [--seed 0]
                                  [--game-files DIR] [--real-files 12]
Prints readable lines, then, last, one JSON line:
{"native_steps_per_s": …, "textworld_steps_per_s": …, "ratio": …, "native_resets_per_s": …, ...}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# benchmarks/synthesis.py would shadow the synthesis package: put the repository root first
from scars.envs.household.env import HouseholdEnv  # noqa: E402
from scars.envs.household.game_file import (  # noqa: E402
    INSTALL_HINT,
    export_game,
    find_game_files,
    load_game_file,
)
from scars.envs.household.generator import generate_game  # noqa: E402
from scars.envs.household.textworld_game import textworld_available  # noqa: E402
from scars.envs.household.world import TASK_TYPES, GameSpec, World  # noqa: E402

EPISODE_STEPS = 50  # ALFWorld's episode length


def native_walk(specs: list[GameSpec], rng: np.random.Generator, seconds: float) -> tuple[int, float, float]:
    """Random admissible walks over the games, round robin, for about ``seconds``; returns (steps, wall, cpu)."""
    worlds = [World.from_spec(s) for s in specs]
    steps, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        for world in worlds:
            world.reset()
            for _ in range(EPISODE_STEPS):
                adm = world.admissible_commands()
                _, won = world.step(adm[int(rng.integers(len(adm)))])
                steps += 1
                if won:
                    break
    return steps, time.perf_counter() - start, time.process_time() - cpu


def native_resets(specs: list[GameSpec], seconds: float) -> tuple[int, float]:
    worlds = [World.from_spec(s) for s in specs]
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for world in worlds:
            world.reset()
            world.admissible_commands()
            n += 1
    return n, time.perf_counter() - start


def native_env_walk(
    specs: list[GameSpec], rng: np.random.Generator, seconds: float
) -> tuple[int, float, float]:
    """Random admissible walks through the full Gymnasium env; returns (steps, wall seconds, CPU seconds)."""
    env = HouseholdEnv()
    steps, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        for spec in specs:
            _, info = env.reset(options={"game": spec})
            for _ in range(EPISODE_STEPS):
                adm = info["admissible_commands"]
                _, _, terminated, truncated, info = env.step(adm[int(rng.integers(len(adm)))])
                steps += 1
                if terminated or truncated:
                    break
    return steps, time.perf_counter() - start, time.process_time() - cpu


def textworld_measure(
    paths: list[Path], rng: np.random.Generator, steps_per_game: int, resets_per_game: int
) -> dict[str, float]:
    """Load each exported game in TextWorld, time ``resets_per_game`` resets and a random walk of
    ``steps_per_game`` steps (restarting on a win or after 50 steps; those resets are not counted as steps)."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler

    infos = textworld.EnvInfos(admissible_commands=True, won=True)
    load_s = reset_s = step_s = step_cpu = reset_cpu = 0.0
    n_resets = 0
    for path in paths:
        t0 = time.perf_counter()
        env = textworld.start(str(path), request_infos=infos, wrappers=[AlfredDemangler()])
        state = env.reset()
        load_s += time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(resets_per_game):
            state = env.reset()
        reset_s += time.perf_counter() - t0
        reset_cpu += time.process_time() - c0
        n_resets += resets_per_game
        taken = 0
        while taken < steps_per_game:
            for _ in range(min(EPISODE_STEPS, steps_per_game - taken)):
                adm = state["admissible_commands"]
                t0, c0 = time.perf_counter(), time.process_time()
                state, _, done = env.step(adm[int(rng.integers(len(adm)))])
                step_s += time.perf_counter() - t0
                step_cpu += time.process_time() - c0
                taken += 1
                if done:
                    break
            state = env.reset()
        env.close()
    return {
        "steps": steps_per_game * len(paths),
        "step_s": step_s,
        "step_cpu_s": step_cpu,
        "resets": n_resets,
        "reset_s": reset_s,
        "reset_cpu_s": reset_cpu,
        "load_s_per_game": load_s / len(paths),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=1, help="games per task type")
    ap.add_argument("--textworld-steps", type=int, default=25, help="random-walk steps per game in TextWorld")
    ap.add_argument("--textworld-resets", type=int, default=2, help="timed resets per game in TextWorld")
    ap.add_argument(
        "--native-seconds", type=float, default=1.0, help="time budget of each native measurement"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the random walks")
    default_real = Path(os.environ.get("ALFWORLD_DATA", "")) / "json_2.1.1" / "valid_train"
    ap.add_argument(
        "--game-files",
        default=str(default_real) if os.environ.get("ALFWORLD_DATA") else "",
        help="a folder of ALFWorld game files for the real-files row (default $ALFWORLD_DATA/json_2.1.1/valid_train)",
    )
    ap.add_argument("--real-files", type=int, default=12, help="ALFWorld game files in the real-files row")
    args = ap.parse_args(argv)
    if args.real_files < 1:
        ap.error(f"--real-files must be a positive integer, got {args.real_files}")
    real = find_game_files(args.game_files) if args.game_files and Path(args.game_files).is_dir() else []
    if args.game_files and not real:
        ap.error(f"--game-files {args.game_files!r} holds no *.tw-pddl file")
    real = real[:: max(1, len(real) // args.real_files)][: args.real_files]

    specs = [generate_game(seed, tt) for tt in TASK_TYPES for seed in range(args.seeds)]
    rng = np.random.default_rng(np.random.SeedSequence(args.seed))
    print(f"{len(specs)} games: {len(TASK_TYPES)} task types x {args.seeds} seeds", file=sys.stderr)

    steps, secs, cpu = native_walk(specs, rng, args.native_seconds)
    native_sps, native_cpu_sps = steps / secs, steps / cpu
    print(
        f"native world:      {native_sps:12,.0f} steps/s  ({steps} steps; {native_cpu_sps:,.0f}/CPU-s)",
        file=sys.stderr,
    )
    resets, secs = native_resets(specs, args.native_seconds)
    native_rps = resets / secs
    print(f"native world:      {native_rps:12,.0f} resets/s", file=sys.stderr)
    steps, secs, cpu = native_env_walk(specs, rng, args.native_seconds)
    env_sps, env_cpu_sps = steps / secs, steps / cpu
    print(
        f"native gym env:    {env_sps:12,.0f} steps/s (info, context, verifier; {env_cpu_sps:,.0f}/CPU-s)",
        file=sys.stderr,
    )

    result: dict = {
        "games": len(specs),
        "native_steps_per_s": round(native_sps, 1),
        "native_resets_per_s": round(native_rps, 1),
        "native_env_steps_per_s": round(env_sps, 1),
        "native_env_steps_per_cpu_s": round(env_cpu_sps, 1),
    }
    if not textworld_available():
        print(f"TextWorld not measured: {INSTALL_HINT}", file=sys.stderr)
        result.update({"textworld_steps_per_s": None, "ratio": None})
        return result
    with tempfile.TemporaryDirectory() as tmp:
        paths = [export_game(s, Path(tmp) / f"game_{i}.tw-pddl") for i, s in enumerate(specs)]
        tw = textworld_measure(paths, rng, args.textworld_steps, args.textworld_resets)
    tw_sps = tw["steps"] / tw["step_s"]
    tw_cpu_sps = tw["steps"] / tw["step_cpu_s"]
    tw_rps = tw["resets"] / tw["reset_s"]
    print(
        f"textworld (PDDL):  {tw_sps:12,.1f} steps/s  ({tw['steps']} steps; {tw_cpu_sps:.1f}/CPU-s)",
        file=sys.stderr,
    )
    print(
        f"textworld (PDDL):  {tw_rps:12,.2f} resets/s; load {tw['load_s_per_game']:.2f} s/game",
        file=sys.stderr,
    )
    if real:
        real_specs = [load_game_file(p) for p in real]
        steps, secs, cpu = native_walk(real_specs, rng, args.native_seconds)
        real_sps, real_cpu_sps = steps / secs, steps / cpu
        rtw = textworld_measure(real, rng, args.textworld_steps, args.textworld_resets)
        real_tw_sps, real_tw_cpu_sps = rtw["steps"] / rtw["step_s"], rtw["steps"] / rtw["step_cpu_s"]
        print(
            f"ALFWorld's files ({len(real)}): native {real_sps:12,.0f} steps/s, textworld {real_tw_sps:.1f} steps/s "
            f"({rtw['steps']} steps; load {rtw['load_s_per_game']:.2f} s/game), ratio {real_sps / real_tw_sps:,.0f}",
            file=sys.stderr,
        )
        result.update(
            {
                "real_files": len(real),
                "real_native_steps_per_s": round(real_sps, 1),
                "real_textworld_steps_per_s": round(real_tw_sps, 2),
                "real_textworld_load_s_per_game": round(rtw["load_s_per_game"], 3),
                "real_ratio": round(real_sps / real_tw_sps, 1),
                "real_native_steps_per_cpu_s": round(real_cpu_sps, 1),
                "real_textworld_steps_per_cpu_s": round(real_tw_cpu_sps, 2),
                "real_cpu_ratio": round(real_cpu_sps / real_tw_cpu_sps, 1),
            }
        )
    result.update(
        {
            "textworld_steps_per_s": round(tw_sps, 2),
            "textworld_resets_per_s": round(tw_rps, 3),
            "textworld_load_s_per_game": round(tw["load_s_per_game"], 3),
            "ratio": round(native_sps / tw_sps, 1),
            "cpu_ratio": round(native_cpu_sps / tw_cpu_sps, 1),
            "reset_ratio": round(native_rps / tw_rps, 1),
            "env_ratio": round(env_sps / tw_sps, 1),
            "env_cpu_ratio": round(env_cpu_sps / tw_cpu_sps, 1),
        }
    )
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
