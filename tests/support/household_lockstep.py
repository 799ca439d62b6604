"""Lockstep play of one game in TextWorld's PDDL engine and the native household engine (issues 12, 27).

Every step compares, between :class:`~envs.household.textworld_game.TextWorldGame` and
:class:`~envs.household.world.World`: the admissible command lists (exactly, order included), the observation
(exactly), the won flag, the structured context q and the structured admissible actions. A game's play stops at
its first mismatch (the two states may have diverged); :class:`Tally` counts files, steps and mismatches.

Three drivers choose the commands: the native expert's walkthrough, ALFWorld's own hand-coded expert
(``alfworld.agents.expert.HandCodedTWAgent``, which reads ``traj_data.json`` beside the game file and TextWorld's
facts), and a seeded random walk that favours the state-changing commands (clean, heat, cool, slice, use, open).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scars.envs.household.expert import NoCompliantPlan, expert_next_command, expert_plan
from scars.envs.household.textworld_game import TextWorldGame
from scars.envs.household.world import World

STATE_VERBS = ("clean", "heat", "cool", "slice", "use", "open")


class Mismatch(AssertionError):
    """The two engines disagree at one step."""


@dataclass
class Tally:
    """What a lockstep run compared: games, steps, wins per driver and every mismatch (one line each)."""

    files: int = 0
    steps: int = 0
    wins: Counter = field(default_factory=Counter)
    plays: Counter = field(default_factory=Counter)
    by_task: Counter = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)

    def summary(self) -> str:
        drivers = ", ".join(f"{d} won {self.wins[d]}/{n}" for d, n in sorted(self.plays.items()))
        tasks = ", ".join(f"{t} {n}" for t, n in sorted(self.by_task.items()))
        return (
            f"{self.files} files ({tasks}), {self.steps} steps compared, {len(self.mismatches)} mismatches; "
            f"{drivers}"
        )


def check_state(ref: TextWorldGame, native: World, where: str) -> list[str]:
    """The admissible lists, context and structured actions must be equal; returns the admissible list."""
    adm_ref, adm_nat = ref.admissible_commands(), native.admissible_commands()
    if adm_ref != adm_nat:
        raise Mismatch(
            f"{where}: admissible lists differ; only TextWorld: {sorted(set(adm_ref) - set(adm_nat))}, "
            f"only native: {sorted(set(adm_nat) - set(adm_ref))}"
        )
    if ref.context() != native.context():
        q_ref, q_nat = ref.context(), native.context()
        diff = {
            k: (q_ref.get(k), q_nat.get(k))
            for k in q_ref.keys() | q_nat.keys()
            if q_ref.get(k) != q_nat.get(k)
        }
        raise Mismatch(f"{where}: context differs (TextWorld, native): {diff}")
    if ref.admissible_actions() != native.admissible_actions():
        bad = [
            (a, b)
            for a, b in zip(ref.admissible_actions(), native.admissible_actions(), strict=True)
            if a != b
        ]
        raise Mismatch(f"{where}: structured actions differ, first (TextWorld, native): {bad[0]}")
    return adm_nat


def play_step(ref: TextWorldGame, native: World, command: str, where: str) -> tuple[str, bool]:
    """One command in both engines; observation and won must be equal."""
    obs_ref, won_ref = ref.step(command)
    obs_nat, won_nat = native.step(command)
    if obs_ref != obs_nat:
        raise Mismatch(
            f"{where} {command!r}: observations differ:\n  TextWorld: {obs_ref!r}\n  native:    {obs_nat!r}"
        )
    if won_ref != won_nat:
        raise Mismatch(f"{where} {command!r}: won {won_ref} (TextWorld) vs {won_nat} (native)")
    return obs_nat, won_nat


def _start(ref: TextWorldGame, native: World, where: str) -> str:
    intro_ref, intro_nat = ref.reset(), native.reset()
    if intro_ref != intro_nat:
        raise Mismatch(f"{where}: intros differ:\n  TextWorld: {intro_ref!r}\n  native:    {intro_nat!r}")
    return intro_nat


def expert_walkthrough(ref: TextWorldGame, native: World, tally: Tally, where: str) -> bool:
    """The native expert's plan from the start; True when both engines win at its last command."""
    _start(ref, native, where)
    plan = expert_plan(native)
    won = False
    for i, command in enumerate(plan):
        check_state(ref, native, f"{where} expert step {i}")
        _, won = play_step(ref, native, command, f"{where} expert step {i}")
        tally.steps += 1
        if won and i < len(plan) - 1:
            raise Mismatch(f"{where}: the expert plan won at step {i} of {len(plan)}")
    return won


def _to_04(command: str, native: World) -> str:
    """A command in alfworld 0.4's words (what ALFWorld's 0.4 expert reads and writes)."""
    if command.startswith("put ") and " in/on " in command:
        obj, recep = command[4:].split(" in/on ", 1)
        return f"move {obj} to {recep}"
    return command


def _from_04(command: str, native: World) -> str:
    if command.startswith("move ") and " to " in command:
        obj, recep = command[5:].split(" to ", 1)
        return native.put_command(obj, recep)
    return command


def alfworld_expert(
    ref: TextWorldGame, native: World, tally: Tally, where: str, max_steps: int = 120
) -> bool:
    """ALFWorld's hand-coded expert (the one its AlfredExpert wrapper runs) playing from TextWorld's state, each
    command played in both engines; commands are translated to and from the file's grammar ("put X in/on Y" in
    pre-0.4 files), which is all the expert needs to play them. True when both engines win."""
    from alfworld.agents.expert.handcoded_expert_tw import HandCodedTWAgent

    random.seed(0)  # the expert falls back on random.choice when it repeats itself
    agent = HandCodedTWAgent(max_steps=max_steps)
    agent.reset(str(ref.path))
    obs = _start(ref, native, where)
    agent.observe(obs)
    last = ""
    for i in range(max_steps):
        adm = check_state(ref, native, f"{where} alfworld expert step {i}")
        view = {
            "feedback": obs,
            "admissible_commands": [_to_04(c, native) for c in adm],
            "facts": ref.facts(),
        }
        try:
            command = agent.act(view, 0, ref.won(), last) if last else "look"
        except Exception:  # HandCodedAgentFailed / Timeout: the expert gave up (it is not always right)
            return False
        last = command
        obs, won = play_step(ref, native, _from_04(command, native), f"{where} alfworld expert step {i}")
        view["feedback"] = obs
        tally.steps += 1
        if won:
            return True
    return False


def _next_or_none(native: World) -> str | None:
    """The expert's next command, None where the goal holds or the walk reached a dead end (a held object that no
    receptacle's canContain facts accept: the initial placement of ALFWorld's problems ignores canContain)."""
    try:
        return expert_next_command(native)
    except NoCompliantPlan:
        return None


def random_walk(
    ref: TextWorldGame, native: World, tally: Tally, where: str, seed: int, steps: int = 40
) -> bool:
    """A seeded walk: state-changing commands first, then the native expert finishes; a few inadmissible ones."""
    _start(ref, native, where)
    rng = np.random.default_rng(np.random.SeedSequence([seed, steps]))
    for step in range(steps):
        adm = check_state(ref, native, f"{where} walk step {step}")
        u = rng.random()
        visiting = [c for c in adm if c.startswith(STATE_VERBS)]
        if u < 0.05:
            here = native.current_location()
            command = f"go to {here}" if here else "take cup 9 from sofa 9"
        elif step >= 0.6 * steps and u < 0.75:
            command = _next_or_none(native) or adm[int(rng.integers(len(adm)))]
        elif u < 0.5 and visiting:
            command = visiting[int(rng.integers(len(visiting)))]
        else:
            command = adm[int(rng.integers(len(adm)))]
        _, won = play_step(ref, native, command, f"{where} walk step {step}")
        tally.steps += 1
        if won:
            return True
    return False


def containment_scripts(native: World) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    """The scripts of the cases where the problem states a relation of one object several times: (receptacle,
    verb) steps for the object, verb "take", "put" or "examine" (the object in hand).

    - an object in several receptacles (issue 41's duplicate fact): taken from one and put in another, where its
      ``inReceptacle`` fact still holds — a PDDL state is a set, so TextWorld lists it there once and taking it
      again leaves it in neither — then taken again and put back;
    - a receptacle object that holds objects (``inReceptacleObject``; an object may be inside several, or inside
      itself): taken and examined ("In it, you see ..."), then put back.
    Only receptacles whose canContain facts accept the object are put into (ALFWorld's initial placement ignores
    them)."""
    scripts = []
    holders = {outer for o in native.spec.objects for outer in o.in_objects}
    for o in native.spec.objects:
        if "pickupable" not in o.property_set() or not o.receptacles:
            continue
        first, *others = o.receptacles
        back = [r for r in others if native.can_hold(r, o.otype)]
        if back:
            last = first if native.can_hold(first, o.otype) else back[0]
            scripts.append((o.name, ((first, "take"), (back[0], "put"), (back[0], "take"), (last, "put"))))
        if o.name in holders and native.can_hold(first, o.otype):
            scripts.append((o.name, ((first, "take"), (first, "examine"), (first, "put"))))
    return scripts


def containment_walk(ref: TextWorldGame, native: World, tally: Tally, where: str) -> bool:
    """Play :func:`containment_scripts`' scripts one after another, comparing the admissible lists, context and
    structured actions before every command and the observation and won flag after it; each receptacle is
    examined and looked at after the object is taken from or put in it. True when the game is won on the way."""
    _start(ref, native, where)
    won, step = False, 0
    for obj, script in containment_scripts(native):
        for recep, verb in script:
            commands = [] if native.is_at(recep) else [f"go to {recep}"]
            commands += [] if native.is_open(recep) else [f"open {recep}"]
            if verb == "take":
                commands += [f"take {obj} from {recep}", f"examine {recep}", "look"]
            elif verb == "put":
                commands += [native.put_command(obj, recep), f"examine {recep}", "look"]
            else:
                commands.append(f"examine {obj}")
            for command in commands:
                check_state(ref, native, f"{where} {obj} step {step}")
                _, won = play_step(ref, native, command, f"{where} {obj} step {step}")
                tally.steps += 1
                step += 1
    return won


def lockstep_file(
    path: Path,
    tally: Tally,
    *,
    seed: int = 0,
    alfworld: bool = True,
    walk: int = 40,
    all_drivers: bool = True,
) -> None:
    """The drivers over one game file (the native engine imports it as it is); mismatches go to ``tally``.
    ``all_drivers`` False plays only the native expert's walkthrough (TextWorld needs ~1.7 s to load a real file
    and ~60 ms a step, so CI plays the other two drivers on a sample)."""
    native = World.from_tw_pddl(path)
    ref = TextWorldGame(path)
    where = str(path.parent.parent.name if path.name == "game.tw-pddl" else path.name)
    tally.files += 1
    tally.by_task[native.spec.task.task_type] += 1
    drivers = [("native expert", lambda: expert_walkthrough(ref, native, tally, where))]
    if all_drivers and alfworld:
        drivers.append(("alfworld expert", lambda: alfworld_expert(ref, native, tally, where)))
    if all_drivers:
        drivers.append(("random walk", lambda: random_walk(ref, native, tally, where, seed, walk)))
    if containment_scripts(native):  # every file with an object in several receptacles or objects plays them
        drivers.append(("containment", lambda: containment_walk(ref, native, tally, where)))
    for name, run in drivers:
        tally.plays[name] += 1
        try:
            tally.wins[name] += bool(run())
        except Mismatch as err:
            tally.mismatches.append(str(err))
