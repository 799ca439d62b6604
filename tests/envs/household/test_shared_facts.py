"""A PDDL state is a set of facts (issue 41): what ALFWorld's files state more than once, natively and in TextWorld.

ALFWorld's problems put one object in two receptacles (AI2-THOR's overlapping surfaces), one object inside two
receptacle objects (a pot "in" a pan and in a pot), and some state a fact twice. TextWorld's PDDL state is a set:
an object put back into a receptacle it is still in is there once, taking it again leaves it in neither, and a
pick-two goal needs two distinct objects. The games below are built small, played natively, then written as
``game.tw-pddl`` files and played in lockstep with TextWorld's PDDL engine (:mod:`support.household_lockstep`:
the native expert, a seeded walk and the containment scripts, comparing every admissible list, observation, won
flag, context and structured action). ALFWorld's own files with these constructs are played the same way by
``test_alfworld_lockstep.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scars.envs.household import GameSpec, ObjectSpec, ReceptacleSpec, TaskSpec, World
from scars.envs.household.game_file import INSTALL_HINT, TextWorldMissing, export_game, load_game_file
from scars.envs.household.textworld_game import textworld_available
from support.household_lockstep import Tally, containment_scripts, lockstep_file


def _two_sofas() -> GameSpec:
    """Pick two keychains and put them on a sofa; keychain 1 starts on both sofas."""
    receptacles = (
        ReceptacleSpec("sofa 1", "sofa", False),
        ReceptacleSpec("sofa 2", "sofa", False),
        ReceptacleSpec("armchair 1", "armchair", False),
        ReceptacleSpec("drawer 1", "drawer", True),
    )
    objects = (
        ObjectSpec("keychain 1", "keychain", "sofa 1", also_in=("sofa 2",)),
        ObjectSpec("keychain 2", "keychain", "armchair 1"),
    )
    return GameSpec(
        1, "livingroom", receptacles, objects, TaskSpec("pick_two_obj_and_place", "keychain", "sofa")
    )


def _nested_pots() -> GameSpec:
    """Pot 1 is inside pan 1 and inside pot 2 (the held-out file's pattern); pot 3 is listed inside itself."""
    receptacles = (
        ReceptacleSpec("countertop 1", "countertop", False),
        ReceptacleSpec("stoveburner 1", "stoveburner", False),
        ReceptacleSpec("cabinet 1", "cabinet", True),
    )
    objects = (
        ObjectSpec("pan 1", "pan", "stoveburner 1"),
        ObjectSpec("pot 1", "pot", "countertop 1", in_objects=("pan 1", "pot 2")),
        ObjectSpec("pot 2", "pot", "countertop 1"),
        ObjectSpec("pot 3", "pot", "stoveburner 1", in_objects=("pot 3",)),
    )
    return GameSpec(2, "kitchen", receptacles, objects, TaskSpec("pick_and_place_simple", "pot", "cabinet"))


def _play(world: World, commands: list[str]) -> list[tuple[str, bool]]:
    return [world.step(c) for c in commands]


# ---------------------------------------------------------------------------------------------- natively


def test_an_object_put_back_where_it_still_is_is_there_once():
    w = World(_two_sofas())
    w.reset()
    out = _play(
        w, ["go to sofa 1", "take keychain 1 from sofa 1", "go to sofa 2", "move keychain 1 to sofa 2"]
    )
    assert out[2] == ("You arrive at sofa 2. On the sofa 2, you see a keychain 1.", False)  # still in sofa 2
    assert out[3] == ("You move the keychain 1 to the sofa 2.", False)  # one keychain is not two
    assert w.step("examine sofa 2")[0] == "On the sofa 2, you see a keychain 1."
    assert w.step("take keychain 1 from sofa 2")[0] == "You pick up the keychain 1 from the sofa 2."
    assert w.step("examine sofa 2")[0] == "On the sofa 2, you see nothing."  # in neither sofa now
    assert w.location_of("keychain 1") is None and not w.is_in("keychain 1", "sofa 1")
    out = _play(w, ["move keychain 1 to sofa 2", "go to armchair 1", "take keychain 2 from armchair 1"])
    assert not any(won for _, won in out)
    out = _play(w, ["go to sofa 2", "move keychain 2 to sofa 2"])
    assert out[-1] == ("You move the keychain 2 to the sofa 2.", True)  # two distinct keychains on sofa 2
    assert w.step("examine sofa 2")[0] == "On the sofa 2, you see a keychain 2, and a keychain 1."


def test_an_object_stated_twice_in_one_receptacle_is_there_once():
    spec = _two_sofas()
    twice = ObjectSpec("keychain 2", "keychain", "armchair 1", also_in=("armchair 1",))
    w = World(GameSpec(spec.seed, spec.room, spec.receptacles, (spec.objects[0], twice), spec.task))
    w.reset()
    assert (
        w.step("go to armchair 1")[0] == "You arrive at armchair 1. On the armchair 1, you see a keychain 2."
    )
    w.step("take keychain 2 from armchair 1")
    assert w.step("examine armchair 1")[0] == "On the armchair 1, you see nothing."


def test_an_object_inside_two_objects_is_listed_in_each():
    w = World(_nested_pots())
    w.reset()
    _play(w, ["go to stoveburner 1", "take pan 1 from stoveburner 1"])
    assert w.step("examine pan 1")[0] == "This is a normal pan 1. In it, you see a pot 1."
    _play(w, ["move pan 1 to stoveburner 1", "take pot 3 from stoveburner 1"])
    # TextWorld lists no object inside itself (measured against the engine below)
    assert w.step("examine pot 3")[0] == "This is a normal pot 3. In it, you see nothing."
    _play(w, ["move pot 3 to stoveburner 1", "go to countertop 1", "take pot 2 from countertop 1"])
    assert w.step("examine pot 2")[0] == "This is a normal pot 2. In it, you see a pot 1."


# ---------------------------------------------------------------------------------------------- as files


def _exported(spec: GameSpec, path: Path) -> Path:
    try:
        return export_game(spec, path)
    except TextWorldMissing:
        pytest.skip("exporting needs the alfworld package (its alfred.pddl and alfred.twl2)")


def test_exported_constructs_import_as_they_were(tmp_path):
    for i, spec in enumerate((_two_sofas(), _nested_pots())):
        imported = load_game_file(_exported(spec, tmp_path / f"g{i}.tw-pddl"))
        assert [(o.name, o.receptacles, o.in_objects) for o in imported.objects] == [
            (o.name, o.receptacles, o.in_objects) for o in spec.objects
        ]


def _stated_twice(path: Path) -> Path:
    """The same problem with every :init fact stated twice."""
    data = json.loads(path.read_text())
    init, rest = data["pddl_problem"].split("(:init", 1)
    body, goal = rest.split("\n)\n", 1)
    facts = re.findall(r"\([^()]*\)", body)
    data["pddl_problem"] = f"{init}(:init\n  " + "\n  ".join(facts + facts) + f"\n)\n{goal}"
    out = path.with_name("twice.tw-pddl")
    out.write_text(json.dumps(data))
    return out


def test_facts_stated_twice_are_one_fact(tmp_path):
    path = _exported(_two_sofas(), tmp_path / "game.tw-pddl")
    twice = _stated_twice(path)
    assert load_game_file(twice) == load_game_file(
        path
    )  # a receptacle at "two" locations was an error before
    a, b = World.from_tw_pddl(path), World.from_tw_pddl(twice)
    assert a.reset() == b.reset()
    for command in ("go to armchair 1", "take keychain 2 from armchair 1", "examine armchair 1"):
        assert a.step(command) == b.step(command)


@pytest.mark.textworld
@pytest.mark.skipif(not textworld_available(), reason=INSTALL_HINT)
@pytest.mark.parametrize("build", [_two_sofas, _nested_pots])
def test_constructs_play_in_lockstep_with_textworld(build, tmp_path):
    path = _exported(build(), tmp_path / "game.tw-pddl")
    paths = [path] + ([_stated_twice(path)] if build is _two_sofas else [])
    tally = Tally()
    for p in paths:
        assert containment_scripts(World.from_tw_pddl(p))
        lockstep_file(p, tally, alfworld=False)
    assert not tally.mismatches, "\n".join(tally.mismatches)
    assert tally.plays["containment"] == len(paths) and tally.wins["native expert"] == len(paths)
