"""The native household engine: ALFWorld texts, admissible commands, transitions, goals (SPEC §9)."""

from __future__ import annotations

import dataclasses

import pytest

from scars.envs.household import GameSpec, ObjectSpec, ReceptacleSpec, TaskSpec, World, generate_game
from scars.envs.household.world import HELP_TEXT, NOTHING_HAPPENS, TASK_TYPES
from scars.synthesis.errors import WorldError


def _kitchen(task: TaskSpec) -> GameSpec:
    receps = (
        ReceptacleSpec("countertop 1", "countertop", False),
        ReceptacleSpec("cabinet 1", "cabinet", True),
        ReceptacleSpec("sinkbasin 1", "sinkbasin", False),
        ReceptacleSpec("microwave 1", "microwave", True),
        ReceptacleSpec("fridge 1", "fridge", True),
        ReceptacleSpec("sidetable 1", "sidetable", False),
    )
    objs = (
        ObjectSpec("cup 1", "cup", "countertop 1"),
        ObjectSpec("apple 1", "apple", "fridge 1"),
        ObjectSpec("cup 2", "cup", "countertop 1"),
        ObjectSpec("desklamp 1", "desklamp", "sidetable 1"),
    )
    return GameSpec(7, "kitchen", receps, objs, task)


def test_intro_text_matches_alfworld():
    w = World(_kitchen(TaskSpec("pick_clean_then_place_in_recep", "cup", "cabinet")))
    assert w.reset() == (
        "-= Welcome to TextWorld, ALFRED! =-\n\n"
        "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, "
        "a fridge 1, a microwave 1, a sidetable 1, and a sinkbasin 1.\n\n"
        "Your task is to: put a clean cup in cabinet."
    )


def test_observation_texts_and_transitions():
    w = World(_kitchen(TaskSpec("pick_clean_then_place_in_recep", "cup", "cabinet")))
    # TextWorld's ``look`` at the start location lists nothing (only the intro lists the receptacles).
    assert (
        w.step("look")[0] == "You are in the middle of a room. Looking quickly around you, you see nothing."
    )
    assert w.step("go to countertop 1") == (
        "You arrive at countertop 1. On the countertop 1, you see a cup 2, and a cup 1.",  # PDDL id order
        False,
    )
    assert w.step("look")[0] == "You are facing the countertop 1. Next to it, you see nothing."
    assert w.step("take cup 1 from countertop 1")[0] == "You pick up the cup 1 from the countertop 1."
    assert w.step("inventory")[0] == "You are carrying: a cup 1."
    # ALFWorld marks cups receptacle objects: that text wins over every state (issue 12)
    assert w.step("examine cup 1")[0] == "This is a normal cup 1. In it, you see nothing."
    assert w.step("go to sinkbasin 1")[0] == "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing."
    assert w.step("clean cup 1 with sinkbasin 1")[0] == "You clean the cup 1 using the sinkbasin 1."
    assert w.step("examine cup 1")[0] == "This is a normal cup 1. In it, you see nothing."
    assert w.step("go to cabinet 1")[0] == "You arrive at cabinet 1. The cabinet 1 is closed."
    assert w.step("move cup 1 to cabinet 1")[0] == NOTHING_HAPPENS  # closed: not admissible
    assert (
        w.step("open cabinet 1")[0]
        == "You open the cabinet 1. The cabinet 1 is open. In it, you see nothing."
    )
    obs, won = w.step("move cup 1 to cabinet 1")
    assert (obs, won) == ("You move the cup 1 to the cabinet 1.", True)
    assert w.step("examine cabinet 1")[0] == "The cabinet 1 is open. In it, you see a cup 1."
    assert w.step("close cabinet 1")[0] == "You close the cabinet 1."
    assert w.step("inventory")[0] == "You are not carrying anything."
    assert w.step("help")[0] == HELP_TEXT
    assert HELP_TEXT.startswith("Available commands:\n") and HELP_TEXT.endswith("sharp object\n")
    assert w.steps == 17


def test_heat_cool_examine_texts_and_lamp():
    w = World(_kitchen(TaskSpec("look_at_obj_in_light", "cup", None)))
    for c in ("go to countertop 1", "take cup 1 from countertop 1", "go to microwave 1"):
        w.step(c)
    assert w.step("heat cup 1 with microwave 1")[0] == "You heat the cup 1 using the microwave 1."
    assert w.step("examine cup 1")[0] == "This is a normal cup 1. In it, you see nothing."
    assert w.object_state("cup 1")["is_hot"]
    w.step("go to fridge 1")
    assert w.step("cool cup 1 with fridge 1")[0] == "You cool the cup 1 using the fridge 1."
    state = w.object_state("cup 1")
    assert state["is_cool"] and not state["is_hot"]  # cooling removed the heat
    w.step("go to sidetable 1")
    assert not w.won()
    assert w.step("use desklamp 1") == ("You turn on the desklamp 1.", True)
    assert w.step("use desklamp 1")[0] == "You turn on the desklamp 1."  # isToggled stays true
    assert not w.step("go to countertop 1")[1]  # won is not sticky: the lamp is elsewhere now


def test_admissible_commands_follow_alfworld():
    w = World(_kitchen(TaskSpec("pick_and_place_simple", "cup", "cabinet")))
    start = w.admissible_commands()
    assert start == sorted(start)
    assert {"help", "inventory", "look", "go to fridge 1"} <= set(start)
    assert not any(c.startswith(("take", "examine", "open")) for c in start)
    w.step("go to fridge 1")
    adm = set(w.admissible_commands())
    assert "go to fridge 1" not in adm and "open fridge 1" in adm and "examine fridge 1" in adm
    assert "take apple 1 from fridge 1" not in adm  # closed
    w.step("open fridge 1")
    adm = set(w.admissible_commands())
    assert {"close fridge 1", "take apple 1 from fridge 1"} <= adm
    assert "examine apple 1" not in adm  # examine O only while holding O
    w.step("take apple 1 from fridge 1")
    adm = set(w.admissible_commands())
    assert {"examine apple 1", "cool apple 1 with fridge 1", "move apple 1 to fridge 1"} <= adm
    w.step("go to sidetable 1")
    adm = set(w.admissible_commands())
    assert "use desklamp 1" in adm and "take desklamp 1 from sidetable 1" not in adm


def test_inadmissible_commands_change_nothing_but_the_step():
    w = World(_kitchen(TaskSpec("pick_and_place_simple", "cup", "cabinet")))
    before = w.admissible_commands()
    for bad in ("", "dance", "take cup 1 from countertop 1", "go to nowhere 1"):
        assert w.step(bad) == (NOTHING_HAPPENS, False)
    assert w.admissible_commands() == before and w.steps == 4


def test_wet_flag_set_by_cleaning_and_cleared_by_putting_down():
    w = World(_kitchen(TaskSpec("pick_clean_then_place_in_recep", "cup", "cabinet")))
    for c in ("go to countertop 1", "take cup 1 from countertop 1", "go to sinkbasin 1"):
        w.step(c)
    w.step("clean cup 1 with sinkbasin 1")
    assert w.context()["held_is_wet"] is True
    assert w.action_dict("move cup 1 to sinkbasin 1")["args"]["is_wet"] is True
    w.step("move cup 1 to sinkbasin 1")
    w.step("take cup 1 from sinkbasin 1")
    assert w.context()["held_is_wet"] is False and w.context()["held_is_clean"] is True


def test_copy_is_independent():
    w = World(_kitchen(TaskSpec("pick_and_place_simple", "cup", "cabinet")))
    c = w.copy()
    c.step("go to countertop 1")
    c.step("take cup 1 from countertop 1")
    assert w.held_object() is None and w.location_of("cup 1") == "countertop 1"
    assert c.held_object() == "cup 1"


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_generation_is_deterministic_and_frozen(task_type):
    a, b = generate_game(11, task_type), generate_game(11, task_type)
    assert a == b and a.task.task_type == task_type
    assert generate_game(12, task_type) != a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.seed = 3  # type: ignore[misc]
    names = [r.name for r in a.receptacles] + [o.name for o in a.objects]
    assert len(names) == len(set(names))
    assert not World(a).won()  # the goal never holds at reset


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_bad_seed_is_a_world_error(bad):
    with pytest.raises(WorldError, match="seed"):
        generate_game(bad)  # type: ignore[arg-type]


def test_unknown_task_type_names_the_allowed_ones():
    with pytest.raises(WorldError, match="pick_and_place_simple"):
        generate_game(0, "make_coffee")
