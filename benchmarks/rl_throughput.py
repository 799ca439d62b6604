"""Speed of the household's RL view and of the scars shield (issue 29 "Speed").

Goals (issue 29): a vectorised household (Gymnasium's ``SyncVectorEnv`` of the RL view) ≥ 20,000 env steps/s on one
core; the scars shield's added cost per step ≤ 2× the unshielded step at 1,000 scars.

In one run, on one core, uniformly random admissible (masked) actions — drawn for all envs at once from the masks,
as a learner's batched policy does (``argmax`` of uniform noise on the admissible slots) — games drawn from a pool of ``--games``
pre-generated games (so game generation, a per-reset cost of the default env, is timed on its own):

- ``world``: the engine alone (``World.step`` + reading the admissible commands and won) — the floor;
- ``env``: ``HouseholdEnv`` (text actions, the info dict: structured actions, context, verifier);
- ``view``: ``HouseholdRLView`` (slot order, encoding, masks) over it;
- ``vector``: ``gymnasium.vector.SyncVectorEnv`` of ``--num-envs`` views, steps counted per env (``num_envs`` per
  vector step), with the world's whole info and with ``lean_info`` (``vector_lean``; what
  ``gym.make_vec("scars/HouseholdRL-v0")`` builds);
- ``*_per_action``: the same for the view as it was before it was vectorised (issue 39 item 5: per-action slot
  features in Python), read from git at ``--baseline`` (skipped with a note where git or the commit is missing), in
  the same run, so that the ratio is measured under one load;
- ``generation``: resets per second that generate a new game from a seed (the default env's reset);
- ``shield_none`` / ``shield_scars_N``: ``agents.shield.ScarShield`` over the view with no shield and with the scars
  shield holding ``--scars`` admitted scars (synthetic household rules, distinct, most of which never fire on the
  walk), including the agent's per-step accommodation bookkeeping (``observe``) and its episode-end ledger check.
  The two walk the same games with the same draws (each its own generator, one seed; their masks differ only where a
  scar masks), each in a process of its own (its heap, garbage collections and caches its own: in one process the
  scars walker's allocations set off the full collections of both walkers' heaps), interleaved in
  ``--shield-chunks`` chunks of ``--shield-steps`` steps each, so both have met the same states when timed and the
  load falls on both; both start cold (``--shield-warmup 0``: the view's first encoding
  of each admissible set and the scars agent's first check of its 1,000 admissions are in the figure), as in every
  earlier run. The ratio is the shielded step's time over the unshielded step's.

Wall clock and CPU time (``*_cpu``) are both reported: the machine may be shared.

Usage:  python benchmarks/rl_throughput.py [--seconds 2.0] [--num-envs 8] [--scars 1000] [--games 64] [--seed 0]
        [--baseline COMMIT] [--repeat 1] [--warmup 2.0] [--shield-steps 150] [--shield-chunks 20] [--shield-warmup 0]
Prints readable lines (one per measurement), then, last, one JSON line (the medians over ``--repeat``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import gymnasium as gym
import numpy as np

from scars.agents.runtime.scar import Scar
from scars.agents.shield import ScarShield
from scars.envs.household.env import HouseholdEnv
from scars.envs.household.generator import generate_game
from scars.envs.household.world import World
from scars.envs.rl import HouseholdRLView
from scars.synthesis.dsl import parse_rule

BASELINE = "10ce257"
"""The last commit with the per-action view (main before issue 39 item 5)."""
ROOT = Path(__file__).resolve().parents[1]
RECEPTACLE_TYPES = ("cabinet", "drawer", "shelf", "countertop", "fridge", "sinkbasin", "microwave", "desk")
VERBS = ("move", "take", "open", "goto")


def synthetic_rules(n: int) -> list:
    """``n`` distinct household rules: a verb on one receptacle instance, guarded by what the agent holds."""
    rules = []
    for i in range(n):
        rtype = RECEPTACLE_TYPES[i % len(RECEPTACLE_TYPES)]
        verb = VERBS[(i // len(RECEPTACLE_TYPES)) % len(VERBS)]
        number = 50 + i // (len(RECEPTACLE_TYPES) * len(VERBS))  # instance numbers no game has: rarely fires
        rules.append(
            parse_rule(
                f'if action.recep == "{rtype} {number}" and held_type != "none" then forbid_env_action("{verb}")'
            )
        )
    rules.append(
        parse_rule('if action.recep_type == "garbagecan" then forbid_env_action("goto")')
    )  # one that fires
    return rules[:n]


def per_action_view(commit: str) -> type | None:
    """The ``HouseholdRLView`` class of ``envs/rl/household.py`` at ``commit`` (None, with a note, if git cannot
    show it): the baseline the vectorised view is measured beside."""
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:envs/rl/household.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        print(f"(no baseline: git cannot show envs/rl/household.py at {commit}: {err})", file=sys.stderr)
        return None
    module = types.ModuleType("household_view_per_action")
    exec(compile(source, f"{commit}:envs/rl/household.py", "exec"), module.__dict__)
    return module.HouseholdRLView


def pick_slots(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """A uniformly random admissible slot per row of ``masks`` (batched: one draw for every env)."""
    return (rng.random(masks.shape) * masks).argmax(axis=-1)


def timed(step, seconds: float) -> tuple[float, float, int]:
    """(steps per wall second, steps per CPU second, steps) of ``step()`` (returns steps taken) for ``seconds``."""
    wall, cpu, steps = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - wall < seconds:
        steps += step()
    return steps / (time.perf_counter() - wall), steps / (time.process_time() - cpu), steps


def shield_walker(shield: ScarShield, seed: int, games: list):
    """``step(n)``: ``n`` steps of a random masked walk over ``shield`` on games drawn from ``games`` (its own
    generator seeded with ``seed``: two walkers with one seed draw the same games and, where their masks agree, the
    same actions)."""
    rng = np.random.default_rng(seed)
    shield.reset(seed=seed, options={"game": games[int(rng.integers(len(games)))]})

    def step(n: int) -> None:
        for _ in range(n):
            _, _, terminated, truncated, _ = shield.step(int(pick_slots(rng, shield.action_masks())))
            if terminated or truncated:
                shield.reset(options={"game": games[int(rng.integers(len(games)))]})

    return step


def _shield_process(conn, kind: str, scars: int, seed: int, games: int) -> None:
    """One shield in a process of its own (``measure_shields``): built cold, then ``n`` steps of its walk for every
    ``n`` received, answering each chunk's (wall, CPU) seconds; 0 ends it (answered with ``masked_total``)."""
    pool = [generate_game(seed + i) for i in range(games)]
    with tempfile.TemporaryDirectory() as tmp:
        shield = ScarShield(
            HouseholdRLView(HouseholdEnv(max_steps=30)), shield=kind, ledger_path=Path(tmp) / "ledger.db"
        )
        if kind == "scars":
            store = shield.agent.store
            with store.group():
                for rule in synthetic_rules(scars):
                    store.admit(Scar(rule), reason="benchmark")
            assert len(store.scars) == scars, len(store.scars)
        step = shield_walker(shield, seed, pool)
        conn.send("ready")
        while n := conn.recv():
            wall, cpu = time.perf_counter(), time.process_time()
            step(n)
            conn.send((time.perf_counter() - wall, time.process_time() - cpu))
        conn.send(shield.masked_total)
        shield.close()


def measure_shields(args: argparse.Namespace) -> tuple[dict[str, list[float]], int]:
    """(wall, CPU) seconds of ``shield_none`` and ``shield_scars_N`` over the same walk (each shield its own
    generator, one seed: the same games and draws; their masks differ only where a scar masks), each in a process of
    its own (its heap, its garbage collections and its caches are its own, as a learner's env process's are),
    interleaved in chunks of equal steps so that both have met the same states when timed and the machine's load
    falls on both; and the scars shield's ``masked_total``."""
    context = multiprocessing.get_context("spawn")
    kinds = {"shield_none": ("none", 0), f"shield_scars_{args.scars}": ("scars", args.scars)}
    workers = {}
    for name, (kind, scars) in kinds.items():
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_shield_process, args=(theirs, kind, scars, args.seed, args.games), daemon=True
        )
        process.start()
        workers[name] = (process, ours)
    try:
        for _, conn in workers.values():
            if conn.recv() != "ready":
                raise RuntimeError("a shield process did not start")
        if args.shield_warmup:
            for _, conn in workers.values():
                conn.send(args.shield_warmup)
                conn.recv()
        spent = {name: [0.0, 0.0] for name in workers}
        for _ in range(args.shield_chunks):
            for name, (_, conn) in workers.items():
                conn.send(args.shield_steps)
                wall, cpu = conn.recv()
                spent[name][0] += wall
                spent[name][1] += cpu
        masked = 0
        for name, (process, conn) in workers.items():
            conn.send(0)
            total = conn.recv()
            masked = total if name != "shield_none" else masked
            process.join(timeout=60)
    finally:
        for process, _ in workers.values():
            if process.is_alive():
                process.terminate()
    return spent, masked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--scars", type=int, default=1000)
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds each view runs untimed first")
    parser.add_argument(
        "--baseline", default=BASELINE, help="commit of the per-action view to measure beside"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="measure the views this many times, interleaved (medians kept)"
    )
    parser.add_argument("--shield-steps", type=int, default=150, help="steps per shield and chunk")
    parser.add_argument("--shield-chunks", type=int, default=20, help="interleaved chunks of the two shields")
    parser.add_argument(
        "--shield-warmup", type=int, default=0, help="untimed steps of each shield first (0: both start cold)"
    )
    args = parser.parse_args()
    for name in ("shield_steps", "shield_chunks"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} = {getattr(args, name)}: must be a positive integer")
    if args.shield_warmup < 0:
        parser.error(f"--shield-warmup = {args.shield_warmup}: must be an integer >= 0")
    rng = np.random.default_rng(args.seed)
    games = [generate_game(args.seed + i) for i in range(args.games)]
    pick = lambda: games[int(rng.integers(len(games)))]  # noqa: E731
    result: dict[str, float] = {}

    runs: dict[str, list[tuple[float, float, int]]] = {}

    def record(name: str, rates: tuple[float, float, int]) -> None:
        """Keep the median (over ``--repeat`` measurements, interleaved with the others) of the wall and CPU rates."""
        runs.setdefault(name, []).append(rates)
        wall, cpu = (float(np.median([r[k] for r in runs[name]])) for k in (0, 1))
        result[f"{name}_steps_per_s"], result[f"{name}_steps_per_s_cpu"] = round(wall), round(cpu)
        print(f"{name:<24} {rates[0]:>9.0f} steps/s wall  {rates[1]:>9.0f} steps/s CPU  ({rates[2]} steps)")

    # the engine alone
    world = World(pick())
    state = {"n": 0}

    def world_step() -> int:
        commands = world.admissible_commands()
        world.step(commands[int(rng.integers(len(commands)))])
        state["n"] += 1
        if world.won() or state["n"] >= 30:
            world.__init__(pick())
            state["n"] = 0
        return 1

    record("world", timed(world_step, args.seconds))

    env = HouseholdEnv(max_steps=30)
    _, info = env.reset(seed=args.seed, options={"game": pick()})
    holder = {"info": info}

    def env_step() -> int:
        commands = holder["info"]["admissible_commands"]
        _, _, terminated, truncated, holder["info"] = env.step(commands[int(rng.integers(len(commands)))])
        if terminated or truncated:
            _, holder["info"] = env.reset(options={"game": pick()})
        return 1

    record("env", timed(env_step, args.seconds))

    def walker(e):
        e.reset(seed=args.seed, options={"game": pick()})

        def step() -> int:
            _, _, terminated, truncated, _ = e.step(int(pick_slots(rng, e.action_masks())))
            if terminated or truncated:
                e.reset(options={"game": pick()})
            return 1

        return step

    def vector_stepper(view: type, lean: bool):
        # each env replays one game of the pool (its game_seed): game generation is timed on its own below
        vector = gym.vector.SyncVectorEnv(
            [
                lambda i=i: view(HouseholdEnv(max_steps=30, game_seed=args.seed + i), lean_info=lean)
                for i in range(args.num_envs)
            ],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
        _, infos = vector.reset(seed=args.seed)
        holder = {"masks": infos["action_mask"]}

        def step() -> int:
            *_, infos = vector.step(pick_slots(rng, holder["masks"]))
            holder["masks"] = infos["action_mask"]
            return args.num_envs

        return step

    # Every walker lives for the whole run, as a learner's envs do, and is warmed up (untimed) before its first
    # window: what is measured is the steady state, both views' caches filled; the windows are interleaved.
    baseline = per_action_view(args.baseline)
    views = [("", HouseholdRLView)] + ([("_per_action", baseline)] if baseline is not None else [])
    walkers = {}
    for suffix, view in views:
        walkers[f"view{suffix}"] = walker(view(HouseholdEnv(max_steps=30)))
    for lean in (False, True):
        for suffix, view in views:
            walkers[f"vector{args.num_envs}{'_lean' if lean else ''}{suffix}"] = vector_stepper(view, lean)
    for step in walkers.values():
        timed(step, args.warmup)
    for _ in range(args.repeat):
        for name, step in walkers.items():
            record(name, timed(step, args.seconds))

    for name in ("view", f"vector{args.num_envs}", f"vector{args.num_envs}_lean"):
        if f"{name}_per_action_steps_per_s_cpu" in result:
            ratio = result[f"{name}_steps_per_s_cpu"] / result[f"{name}_per_action_steps_per_s_cpu"]
            result[f"{name}_speedup_cpu"] = round(ratio, 2)
            print(f"{name}: {ratio:.2f}x the per-action view (CPU, medians of {args.repeat})")

    generating = HouseholdEnv(max_steps=30)
    counter = {"seed": args.seed}

    def generate() -> int:
        counter["seed"] += 1
        generating.reset(seed=counter["seed"])
        return 1

    rate = timed(generate, args.seconds)
    result["generation_resets_per_s"] = round(rate[0])
    print(
        f"{'generation':<22} {rate[0]:>9.0f} resets/s wall (a new game from a seed: the default env's reset)"
    )

    # the shield: none vs scars with N admitted scars, the same walk, each in a process of its own, interleaved
    spent, masked = measure_shields(args)
    n = args.shield_chunks * args.shield_steps
    for name, (wall, cpu) in spent.items():
        record(name, (n / wall, n / cpu, n))
    result["shield_masked_per_decision"] = round(masked / (n + args.shield_warmup), 3)
    none_spent, scars_spent = spent["shield_none"], spent[f"shield_scars_{args.scars}"]
    result["shield_cost_ratio"] = round(scars_spent[0] / none_spent[0], 2)
    result["shield_cost_ratio_cpu"] = round(scars_spent[1] / none_spent[1], 2)
    result["shield_added_us_per_step"] = round(1e6 * (scars_spent[1] - none_spent[1]) / n, 1)
    print(
        f"shield cost at {args.scars} scars: {result['shield_cost_ratio']}x the unshielded step (wall), "
        f"{result['shield_cost_ratio_cpu']}x (CPU), +{result['shield_added_us_per_step']} µs per step "
        f"({n} steps each in its own process, {args.shield_chunks} interleaved chunks, after {args.shield_warmup} untimed)"
    )
    result.update({"num_envs": args.num_envs, "scars": args.scars, "games": args.games})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
