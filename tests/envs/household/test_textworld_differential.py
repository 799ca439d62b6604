"""Differential test: the native household engine against the real ALFWorld engine (TextWorld playing PDDL).

Issue 12 (and issue 3 before it; SPEC §9). On generated games of every (room kind, task type) pair ALFWorld plays
(its ``GOALS_VALID``: 14 pairs over the four room kinds and six task types), and on game files written by a second,
independent ALFWorld-style writer (``tests/support/alfworld_style_games.py``) that the native engine imports:

- the expert walkthrough wins in both engines, at its last command and not before;
- walks that mix the expert's next command, commands that visit clean/heat/cool/examine/slice/use/open states,
  random admissible and a few inadmissible commands give, at every step, the same admissible command lists, the
  same observations (exactly, listing order included), the same won flags, the same structured context and the
  same structured admissible actions in both engines.

The default run compares one game per pair; ``-m slow`` compares four per pair with longer walks. Each run
prints its coverage (games and steps compared per room kind and task type).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from scars.envs.household.expert import expert_next_command, expert_plan
from scars.envs.household.game_file import INSTALL_HINT, export_game, load_game_file
from scars.envs.household.generator import TASK_ROOMS, generate_game
from scars.envs.household.textworld_game import TextWorldGame, textworld_available
from scars.envs.household.world import TASK_TYPES, World
from support.alfworld_style_games import TASKS as STYLE_TASKS
from support.alfworld_style_games import write_alfworld_style_game

pytestmark = [
    pytest.mark.textworld,
    pytest.mark.skipif(not textworld_available(), reason=INSTALL_HINT),
]

PAIRS = [(tt, room) for tt in TASK_TYPES for room in TASK_ROOMS[tt]]
STATE_VERBS = ("clean", "heat", "cool", "examine", "slice", "use", "open")
COVERAGE: Counter = Counter()


def _assert_same_state(ref: TextWorldGame, native: World, where: str) -> list[str]:
    adm_ref, adm_nat = ref.admissible_commands(), native.admissible_commands()
    assert adm_ref == adm_nat, (
        f"{where}: admissible lists differ; only TextWorld: {sorted(set(adm_ref) - set(adm_nat))}, "
        f"only native: {sorted(set(adm_nat) - set(adm_ref))}"
    )
    assert ref.context() == native.context(), f"{where}: context differs"
    assert ref.admissible_actions() == native.admissible_actions(), f"{where}: structured actions differ"
    return adm_nat


def _play(ref: TextWorldGame, native: World, command: str, where: str) -> bool:
    obs_ref, won_ref = ref.step(command)
    obs_nat, won_nat = native.step(command)
    assert obs_ref == obs_nat, (
        f"{where} {command!r}: observations differ:\n  TextWorld: {obs_ref!r}\n  native: {obs_nat!r}"
    )
    assert won_ref == won_nat, f"{where} {command!r}: won {won_ref} (TextWorld) vs {won_nat} (native)"
    return won_nat


def compare(path: Path, native: World, seed: int, walk: int, key: tuple[str, str]) -> None:
    """Expert walkthrough, then a mixed walk, in both engines; counts compared steps in COVERAGE[key]."""
    ref = TextWorldGame(path)
    where = f"{path.name}"
    assert ref.reset() == native.reset(), f"{where}: intro differs"
    plan = expert_plan(native)
    for i, command in enumerate(plan):
        _assert_same_state(ref, native, f"{where} expert step {i}")
        won = _play(ref, native, command, f"{where} expert step {i}")
        assert won == (i == len(plan) - 1), f"{where}: expert plan won at step {i} of {len(plan)}"
        COVERAGE[key + ("steps",)] += 1
    COVERAGE[key + ("expert wins",)] += 1

    rng = np.random.default_rng(np.random.SeedSequence([seed, walk]))
    assert ref.reset() == native.reset()
    for step in range(walk):
        adm = _assert_same_state(ref, native, f"{where} walk step {step}")
        u = rng.random()
        # state-changing commands first, then examining what is held (its clean/hot/cool/sliced text)
        held = native.held_object()
        visiting = [c for c in adm if c.startswith(STATE_VERBS[:3] + ("slice", "use"))] or [
            c
            for c in adm
            if c.startswith(STATE_VERBS) and (held is None or c == f"examine {held}" or rng.random() < 0.3)
        ]
        exploring = step < 0.6 * walk  # explore first (state-changing commands), then let the expert finish
        if u < 0.05:
            command = (
                f"go to {native.current_location()}"
                if native.current_location()
                else "take cup 9 from sofa 9"
            )
        elif not exploring and u < 0.75:
            command = expert_next_command(native) or adm[int(rng.integers(len(adm)))]
        elif exploring and u < 0.5 and visiting:
            command = visiting[int(rng.integers(len(visiting)))]
        else:
            command = adm[int(rng.integers(len(adm)))]
        COVERAGE[key + ("steps",)] += 1
        COVERAGE[key + (command.split(" ", 1)[0],)] += 1
        if _play(ref, native, command, f"{where} walk step {step}"):
            COVERAGE[key + ("walk wins",)] += 1
            break


def _generated(task_type: str, room: str, seed: int, walk: int, tmp_path: Path) -> None:
    spec = generate_game(seed, task_type, room=room)
    path = export_game(spec, tmp_path / f"{room}_{task_type}_{seed}.tw-pddl")
    compare(path, World.from_spec(spec), seed, walk, (room, task_type))


@pytest.mark.parametrize(("task_type", "room"), PAIRS)
def test_generated_games_agree(task_type, room, tmp_path):
    _generated(task_type, room, 0, 25, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("task_type", "room"), PAIRS)
def test_generated_games_agree_more_seeds(task_type, room, tmp_path):
    for seed in range(1, 5):
        _generated(task_type, room, seed, 40, tmp_path)


@pytest.mark.parametrize("task_type", list(STYLE_TASKS))
def test_independently_written_files_import_and_agree(task_type, tmp_path):
    """A file from the second writer: the native engine imports it and plays it exactly as TextWorld does."""
    path = write_alfworld_style_game(tmp_path / f"style_{task_type}.tw-pddl", task_type, seed=3, shared=True)
    spec = load_game_file(path)
    assert spec.task.task_type == task_type
    assert spec.room == STYLE_TASKS[task_type][0]  # inferred from ALFWorld's floor plans
    assert all("_dot_" in (o.pddl_id or "") for o in spec.objects)  # ids with AI2-THOR coordinates
    compare(path, World.from_tw_pddl(path), 3, 40, ("alfworld-style", task_type))


def test_start_at_a_receptacle_agrees(tmp_path):
    """The agent starts where a receptacle (of a shared pair) stands: intro, context and play agree."""
    path = write_alfworld_style_game(
        tmp_path / "start.tw-pddl",
        "pick_clean_then_place_in_recep",
        seed=4,
        shared=True,
        start_at_receptacle=True,
    )
    native = World.from_tw_pddl(path)
    assert native.spec.start is not None
    compare(path, native, 4, 30, ("alfworld-style", "start at a receptacle"))


def test_zz_print_coverage():
    """Not a check: prints what the differential tests above compared in this run (pytest -s shows it)."""
    if not COVERAGE:
        pytest.skip("no differential test ran before this one")
    keys = sorted({k[:2] for k in COVERAGE})
    total = sum(v for k, v in COVERAGE.items() if k[2] == "steps")
    print(f"\ndifferential coverage: {len(keys)} (room, task) pairs, {total} steps compared")
    for k in keys:
        verbs = {k2[2]: v for k2, v in COVERAGE.items() if k2[:2] == k and k2[2] not in ("steps",)}
        print(f"  {k[0]:>14} {k[1]:<32} steps {COVERAGE[k + ('steps',)]:4d}  {verbs}")


def test_slicing_and_processed_texts_agree(tmp_path):
    """Scripted: take a knife, slice a tomato where it lies, then clean, heat and examine it (the sliced texts)."""
    path = write_alfworld_style_game(tmp_path / "slice.tw-pddl", "pick_clean_then_place_in_recep", seed=5)
    native, ref = World.from_tw_pddl(path), TextWorldGame(path)
    assert ref.reset() == native.reset()
    knife = native.objects_of_type("knife")[0]
    tomato = native.objects_of_type("tomato")[0]
    sink = native.receptacles_of_type("sinkbasin")[0]
    microwave = native.receptacles_of_type("microwave")[0]

    def run(command: str) -> None:
        _assert_same_state(ref, native, f"slice script before {command!r}")
        assert native.is_admissible(command), f"{command!r} not admissible: {native.admissible_commands()}"
        _play(ref, native, command, "slice script")
        COVERAGE[("alfworld-style", "slice script", "steps")] += 1

    def fetch(obj: str) -> None:
        src = native.location_of(obj)
        run(f"go to {src}")
        if not native.is_open(src):
            run(f"open {src}")
        run(f"take {obj} from {src}")

    fetch(knife)
    spot = native.location_of(tomato)
    if native.current_location() != spot:
        run(f"go to {spot}")
    run(f"slice {tomato} with {knife}")
    run(f"examine {knife}")
    run(f"go to {sink}")
    run(f"move {knife} to {sink}")
    fetch(tomato)
    run(f"examine {tomato}")  # "This is a sliced tomato 1."
    run(f"go to {sink}")
    run(f"clean {tomato} with {sink}")
    run(f"examine {tomato}")  # "This is a clean sliced tomato 1."
    run(f"go to {microwave}")
    run(f"heat {tomato} with {microwave}")
    run(f"examine {tomato}")  # "This is a hot and clean sliced tomato 1."
    assert native.step(f"examine {tomato}")[0] == f"This is a hot and clean sliced {tomato}."
