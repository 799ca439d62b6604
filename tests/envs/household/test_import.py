"""Importing ALFWorld ``game.tw-pddl`` files into the native engine (issue 12): round trips, the env option, the
CLI, ALFWorld's data tables, and one clear error per malformed or unsupported file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gymnasium as gym
import pytest
from click.testing import CliRunner

import scars.envs.household  # noqa: F401  (registers scars/Household-v0)
from scars.envs.household.alfworld_data import extract_tables, load_tables
from scars.envs.household.expert import expert_plan
from scars.envs.household.game_file import (
    DOMAIN_SECTIONS,
    GRAMMAR_SHA256,
    INSTALL_HINT,
    TextWorldMissing,
    _grammar_fingerprint,
    domain_sections,
    export_game,
    load_game_file,
    pddl_problem,
)
from scars.envs.household.generator import ROOM_OBJECTS, ROOM_RECEPTACLES, SCENES, TASK_ROOMS, generate_game
from scars.envs.household.spec import GameSpec, ObjectSpec, ReceptacleSpec, TaskSpec, type_properties
from scars.envs.household.textworld_game import textworld_available
from scars.envs.household.world import CAN_CONTAIN, OBJECT_CLASSES, ROOM_KINDS, TASK_TYPES, World
from scars.experiments.cli import main as cli
from scars.synthesis.errors import WorldError


def _exported(tmp_path: Path, seed: int = 2, task_type: str = "pick_clean_then_place_in_recep") -> Path:
    try:
        return export_game(generate_game(seed, task_type), tmp_path / "game.tw-pddl")
    except TextWorldMissing:
        pytest.skip("exporting needs the alfworld package (its alfred.pddl and alfred.twl2)")


# ---------------------------------------------------------------------------------------------- ALFWorld's data


def test_data_file_equals_alfworld_package():
    pytest.importorskip("alfworld.gen.constants")
    assert extract_tables() == load_tables(), "run: python -m envs.household.alfworld_data"


def test_logic_fingerprints_match_alfworld_package():
    pytest.importorskip("alfworld")
    import importlib.resources

    data = importlib.resources.files("alfworld").joinpath("data")
    assert domain_sections(data.joinpath("alfred.pddl").read_text()) == DOMAIN_SECTIONS["0.4"]
    assert _grammar_fingerprint(data.joinpath("alfred.twl2").read_text()) == GRAMMAR_SHA256["0.4"]


def test_containment_is_alfworlds_table():
    # The pairs issue 12 names: allowed by ALFWorld although the old native table forbade them, and the reverse.
    for recep, obj in [
        ("shelf", "kettle"),
        ("shelf", "pot"),
        ("armchair", "keychain"),
        ("armchair", "creditcard"),
    ]:
        assert obj in CAN_CONTAIN[recep]
    assert "dishsponge" in CAN_CONTAIN["toilet"] and "handtowel" in CAN_CONTAIN["sinkbasin"]
    assert "remotecontrol" not in CAN_CONTAIN["tvstand"] and CAN_CONTAIN["tvstand"] == {"tissuebox"}
    assert "bowl" not in CAN_CONTAIN  # receptacle objects are objects here, never static receptacles


def test_every_room_kind_has_its_alfworld_vocabulary():
    assert set(SCENES) == set(ROOM_KINDS) and all(len(s) == 30 for s in SCENES.values())
    for room, must in {
        "bathroom": {"plunger", "tissuebox", "toiletpaper", "soapbar"},
        "bedroom": {"baseballbat", "tennisracket", "alarmclock"},
        "livingroom": {"wateringcan", "remotecontrol", "keychain"},
        "kitchen": {"kettle", "glassbottle", "butterknife"},
    }.items():
        assert must <= set(ROOM_OBJECTS[room]), room
    assert "ottoman" in ROOM_RECEPTACLES["livingroom"] and "cart" in ROOM_RECEPTACLES["bathroom"]
    for cls, members in OBJECT_CLASSES.items():  # classes only name types that exist
        assert members <= set(ROOM_OBJECTS["kitchen"]) | {t for r in ROOM_OBJECTS.values() for t in r} | {
            "desklamp",
            "floorlamp",
        }, cls


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_generator_covers_every_room_kind_of_a_task(task_type):
    for room in TASK_ROOMS[task_type]:
        spec = generate_game(4, task_type, room=room)
        assert spec.room == room and spec.task.task_type == task_type
        templates = load_tables()["goal_templates"][task_type]
        fill = {"obj": spec.task.obj_type, "recep": spec.task.recep_type, "toggle": "desklamp"}
        assert spec.goal_text in {t.format(**fill) for t in templates}
    with pytest.raises(WorldError, match="no pick_heat_then_place_in_recep games"):
        generate_game(0, "pick_heat_then_place_in_recep", room="bathroom")


def test_task_sentences_use_every_template():
    texts = {generate_game(s, "pick_and_place_simple").goal_text.split(" ", 2)[1] for s in range(30)}
    assert {"a", "some"} <= texts  # "put a X in Y" and "put some X on Y"


def test_receptacle_objects_are_marked_in_exports():
    spec = next(
        s
        for s in (generate_game(k, "pick_clean_then_place_in_recep", room="kitchen") for k in range(30))
        if any(o.otype in ("cup", "mug", "bowl", "plate", "pan", "pot") for o in s.objects)
    )
    problem = pddl_problem(spec)
    assert "(isReceptacleObject " in problem
    assert problem.count("(canContain ") == len(spec.containment())


# ---------------------------------------------------------------------------------------------- importing


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_exported_games_import_to_the_same_game(task_type, tmp_path):
    spec = generate_game(5, task_type)
    path = _exported(tmp_path, 5, task_type)
    imported = load_game_file(path)
    a, b = World(spec), World.from_tw_pddl(path)
    assert a.reset() == b.reset()
    assert imported.task.task_type == task_type and imported.goal_text == spec.goal_text
    assert imported.containment() == spec.containment()
    plan = expert_plan(a)
    assert expert_plan(b) == plan
    for cmd in plan:
        assert a.admissible_commands() == b.admissible_commands()
        assert a.step(cmd) == b.step(cmd)
    assert b.won()


def test_env_plays_an_imported_file(tmp_path):
    path = _exported(tmp_path, 3, "pick_and_place_simple")
    env = gym.make("scars/Household-v0", game_file=str(path)).unwrapped
    obs, info = env.reset(seed=0)
    assert info["goal"] == load_game_file(path).goal_text
    for cmd in expert_plan(env.world):
        obs, reward, terminated, truncated, info = env.step(cmd)
    assert terminated and info["won"] and reward == 1.0
    obs2, _ = env.reset()
    assert obs2 == env.world.reset()  # the same file every episode


def test_cli_import_prints_the_walkthrough(tmp_path):
    path = _exported(tmp_path, 1, "pick_heat_then_place_in_recep")
    result = CliRunner().invoke(cli, ["world", "import", str(path)])
    assert result.exit_code == 0, result.output
    assert "pick_heat_then_place_in_recep" in result.output and "expert plan (" in result.output


def test_cli_play_game_file(tmp_path):
    path = _exported(tmp_path, 1, "pick_and_place_simple")
    plan = expert_plan(World.from_tw_pddl(path))
    result = CliRunner().invoke(
        cli, ["world", "play", "--game-file", str(path)], input="\n".join(plan) + "\n"
    )
    assert result.exit_code == 0 and f"[WON after {len(plan)} steps" in result.output, result.output


# ---------------------------------------------------------------------------------------------- malformed files


def _rewrite(path: Path, **changes: str) -> Path:
    data = json.loads(path.read_text())
    data.update(changes)
    out = path.with_name("bad.tw-pddl")
    out.write_text(json.dumps(data))
    return out


def _problem_edit(path: Path, old: str, new: str, count: int = 1) -> Path:
    data = json.loads(path.read_text())
    assert old in data["pddl_problem"], old
    return _rewrite(path, pddl_problem=data["pddl_problem"].replace(old, new, count))


BAD_CASES = {
    "not json": (
        lambda p: (p.with_name("bad.tw-pddl").write_text("{oops"), p.with_name("bad.tw-pddl"))[1],
        "not a JSON",
    ),
    "missing keys": (lambda p: _rewrite(p, pddl_problem=None), "without pddl_problem"),  # type: ignore[arg-type]
    "foreign domain": (
        lambda p: _rewrite(p, pddl_domain="(define (domain other))"),
        "none of the ALFWorld domains the native engine implements",
    ),
    "old grammar": (
        lambda p: _rewrite(
            p, grammar=json.loads(p.read_text())["grammar"].replace("move {o} to {r}", "put {o} in/on {r}")
        ),
        "not the alfred.twl2 of its domain's ALFWorld generation",
    ),
    "unbalanced": (lambda p: _problem_edit(p, "(:init", "(:init ("), "unclosed"),
    "unknown predicate": (
        lambda p: _problem_edit(p, "(:init", "(:init (isDirty cabinet_bar_001)"),
        "unknown predicate 'isdirty'",
    ),
    "holding at start": (
        lambda p: _problem_edit(p, "(:init", "(:init (holds agent1 x)"),
        "holds something at the start",
    ),
    "bad goal": (
        lambda p: _problem_edit(p, "(isClean ?o)", "(isHot ?o)"),
        "none of ALFWorld's six task goals",
    ),
    "goal with or": (
        lambda p: _problem_edit(p, "(isClean ?o)", "(or (isClean ?o) (isHot ?o))"),
        "unsupported goal construct 'or'",
    ),
    "bad arity": (lambda p: _problem_edit(p, "(:init", "(:init (openable a b)"), "openable takes 1 argument"),
    "bad name": (
        lambda p: _problem_edit(p, "sink_bar_001_bar_sinkbasin", "washer", 99),
        "has no '_bar_' part",
    ),
    "nested head fact": (
        lambda p: _problem_edit(p, "(:init", "(:init ((isDirty) cabinet_bar_001)"),
        r"unsupported :init fact \(\(isdirty\) cabinet_bar_001\)",
    ),
    "domain cooling another way": (
        lambda p: _rewrite(
            p, pddl_domain=json.loads(p.read_text())["pddl_domain"].replace("(not (isHot ?o))", "", 1)
        ),
        "differs from ALFWorld 0.4's in action coolobject;",
    ),
    "two agents' places": (
        lambda p: _problem_edit(p, "(:init", "(:init (atLocation agent1 loc_bar_001)"),
        "exactly one location",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_malformed_files_get_one_clear_error(case, tmp_path):
    make, message = BAD_CASES[case]
    bad = make(_exported(tmp_path))
    with pytest.raises(WorldError, match=message):
        load_game_file(bad)
    result = CliRunner().invoke(cli, ["world", "import", str(bad)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, (
        result.output
    )


def _other_costs(path: Path) -> Path:
    """The file with its domain's state-changing actions costing 2 instead of 5 (a planner's concern only)."""
    domain = json.loads(path.read_text())["pddl_domain"]
    assert "(increase (total-cost) 5)" in domain
    return _rewrite(
        path, pddl_domain=domain.replace("(increase (total-cost) 5)", "(increase (total-cost) 2)")
    )


def test_a_domain_differing_only_in_action_costs_is_its_generation(tmp_path):
    path = _exported(tmp_path, 3, "pick_cool_then_place_in_recep")
    assert load_game_file(_other_costs(path)) == load_game_file(path)


@pytest.mark.textworld
@pytest.mark.skipif(not textworld_available(), reason=INSTALL_HINT)
def test_a_domain_differing_only_in_action_costs_plays_in_lockstep_with_textworld(tmp_path):
    from support.household_lockstep import Tally, lockstep_file

    tally = Tally()
    lockstep_file(
        _other_costs(_exported(tmp_path, 3, "pick_cool_then_place_in_recep")), tally, alfworld=False
    )
    assert not tally.mismatches and tally.wins["native expert"] == 1, tally.mismatches


def test_old_grammar_plays_under_alfworld_logic(tmp_path):
    path = _exported(tmp_path)
    bad = BAD_CASES["old grammar"][0](path)
    spec = load_game_file(bad, alfworld_logic=True)
    assert World(spec).reset() == World.from_tw_pddl(path).reset()
    result = CliRunner().invoke(cli, ["world", "import", "--alfworld-logic", str(bad)])
    assert result.exit_code == 0, result.output


def test_missing_file(tmp_path):
    result = CliRunner().invoke(cli, ["world", "import", str(tmp_path / "nope.tw-pddl")])
    assert (
        result.exit_code == 2
        and result.output.strip().startswith("error: ")
        and "does not exist" in result.output
    )


def test_agent_starting_at_a_receptacle(tmp_path):
    path = _exported(tmp_path)
    moved = _problem_edit(path, "(atLocation agent1 loc_bar_start)", "(atLocation agent1 loc_bar_001)")
    spec = load_game_file(moved)
    first = spec.receptacles[0].name
    assert spec.start == first
    world = World(spec)
    assert f"You are facing the {first}. Next to it, you see nothing." in world.reset()
    assert f"go to {first}" not in world.admissible_commands() and world.context()["location"] == first


def test_object_location_is_kept_as_the_file_says(tmp_path):
    """objectAtLocation away from the object's receptacle: the texts are unchanged, and the engine keeps the
    file's location (SliceObject reads it)."""
    import re

    path = _exported(tmp_path)
    problem = json.loads(path.read_text())["pddl_problem"]
    fact = re.search(r"\(objectAtLocation (\S+) (loc_bar_\d+)\)", problem)
    assert fact is not None
    oid, loc = fact.groups()
    elsewhere = "loc_bar_start" if loc != "loc_bar_start" else "loc_bar_001"
    moved = _problem_edit(path, fact.group(0), f"(objectAtLocation {oid} {elsewhere})")
    assert World.from_tw_pddl(moved).reset() == World.from_tw_pddl(path).reset()
    sliceable = _problem_edit(moved, "(:init", f"(:init (sliceable {oid})")
    obj = next(o for o in load_game_file(sliceable).objects if o.pddl_id == oid)
    assert obj.at == (elsewhere,) and "sliceable" in obj.property_set()


# ---------------------------------------------------------------------------------------------- sliced tasks


def _sliced_cooling() -> GameSpec:
    """ALFWorld's pick_cool_then_place_in_recep_slice: cool a sliced apple and put it on the dining table."""
    receptacles = (
        ReceptacleSpec("countertop 1", "countertop", False),
        ReceptacleSpec("fridge 1", "fridge", True),
        ReceptacleSpec("diningtable 1", "diningtable", False),
    )
    objects = (
        ObjectSpec("apple 1", "apple", "countertop 1", type_properties("apple") | {"sliceable"}),
        ObjectSpec("knife 1", "knife", "countertop 1"),
    )
    task = TaskSpec("pick_cool_then_place_in_recep", "apple", "diningtable", sliced=True)
    return GameSpec(4, "kitchen", receptacles, objects, task)


SLICED_PLAN = [
    "go to countertop 1",
    "take knife 1 from countertop 1",
    "slice apple 1 with knife 1",
    "move knife 1 to countertop 1",
    "take apple 1 from countertop 1",
    "go to fridge 1",
    "cool apple 1 with fridge 1",
    "go to diningtable 1",
    "move apple 1 to diningtable 1",
]
UNSLICED_PLAN = [c for c in SLICED_PLAN if "knife" not in c]


def test_sliced_goals_are_alfworlds_slice_variants(tmp_path):
    spec = _sliced_cooling()
    assert spec.goal_text == "put a cool slice of apple in diningtable"
    problem = pddl_problem(spec)
    assert "(sliceable ?o) (isSliced ?o) (coolable ?o)" in problem
    imported = load_game_file(_exported_spec(spec, tmp_path))
    assert imported.task == dataclasses.replace(spec.task, text=spec.goal_text)
    w = World(imported)
    w.reset()
    assert [won for _, won in (w.step(c) for c in UNSLICED_PLAN)][-1] is False  # cool, but not sliced
    w.reset()
    assert [won for _, won in (w.step(c) for c in SLICED_PLAN)] == [False] * 8 + [True]
    with pytest.raises(WorldError, match="has no sliced variant"):
        TaskSpec("look_at_obj_in_light", "apple", None, sliced=True)


def test_the_expert_slices_the_goal_object_of_a_sliced_task():
    """Issue 41 #6: the native expert had no slicing step, so a sliced task had "no compliant plan" although the
    game plays. Now it takes a knife, slices the goal object where it lies, puts the knife down and goes on."""
    world = World(_sliced_cooling())
    world.reset()
    plan = expert_plan(world)
    assert plan == SLICED_PLAN and [won for _, won in (world.step(c) for c in plan)][-1] is True


def test_the_expert_slices_both_objects_of_a_sliced_pick_two_task():
    """pick_two_obj_and_place_slice: both goal objects sliced with one trip holding the knife, then placed."""
    sliceable = type_properties("apple") | {"sliceable"}
    spec = dataclasses.replace(
        _sliced_cooling(),
        objects=(
            ObjectSpec("apple 1", "apple", "countertop 1", sliceable),
            ObjectSpec("apple 2", "apple", "fridge 1", sliceable),
            ObjectSpec("knife 1", "knife", "diningtable 1"),
        ),
        task=TaskSpec("pick_two_obj_and_place", "apple", "diningtable", sliced=True),
    )
    world = World(spec)
    world.reset()
    plan = expert_plan(world)
    assert [c for c in plan if c.startswith("slice")] == [
        "slice apple 1 with knife 1",
        "slice apple 2 with knife 1",
    ]
    assert [won for _, won in (world.step(c) for c in plan)][-1] is True


def test_world_import_of_a_sliced_task_shows_its_expert_plan(tmp_path):
    """``scars world import`` of a sliced task exited 2 ("no compliant plan"); now it prints the slicing plan."""
    path = _exported_spec(_sliced_cooling(), tmp_path)
    result = CliRunner().invoke(cli, ["world", "import", str(path)])
    assert result.exit_code == 0, result.output
    assert "a cool slice of apple" in result.output and "slice apple 1 with knife 1" in result.output


@pytest.mark.textworld
@pytest.mark.skipif(not textworld_available(), reason=INSTALL_HINT)
def test_world_import_verifies_a_sliced_task_in_textworld(tmp_path):
    path = _exported_spec(_sliced_cooling(), tmp_path)
    result = CliRunner().invoke(cli, ["world", "import", "--verify", str(path)])
    assert result.exit_code == 0, result.output
    assert f"agree on all {len(SLICED_PLAN)} steps and win" in result.output


def _exported_spec(spec: GameSpec, tmp_path: Path) -> Path:
    try:
        return export_game(spec, tmp_path / "sliced.tw-pddl")
    except TextWorldMissing:
        pytest.skip("exporting needs the alfworld package (its alfred.pddl and alfred.twl2)")


@pytest.mark.textworld
@pytest.mark.skipif(not textworld_available(), reason=INSTALL_HINT)
def test_sliced_goals_play_in_lockstep_with_textworld(tmp_path):
    from scars.envs.household.textworld_game import TextWorldGame
    from support.household_lockstep import check_state, play_step

    path = _exported_spec(_sliced_cooling(), tmp_path)
    ref, native = TextWorldGame(path), World.from_tw_pddl(path)
    for plan, wins in ((UNSLICED_PLAN, False), (SLICED_PLAN, True)):
        assert ref.reset() == native.reset()
        for i, command in enumerate(plan):
            check_state(ref, native, f"step {i}")
            _, won = play_step(ref, native, command, f"step {i}")
        assert won is wins
