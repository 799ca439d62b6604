"""A second writer of ALFWorld ``game.tw-pddl`` files, independent of the project's exporter (issue 12).

It builds problems the way ALFWorld's own problem generator lays them out (``alfworld/gen/game_states``): CamelCase
AI2-THOR ids with coordinates (``Cabinet_bar__minus_01_dot_55_bar_...``, sink basins as ``Sink_bar_..._bar_
SinkBasin``), ``loc_bar_..`` locations, bare type constants and fixtures no command reaches (windows, a floor lamp,
a chair standing next to a receptacle), ``canContain`` facts repeated for every receptacle instance, property facts, an open receptacle and
an already-cool object at the start, sliceable food and a knife — all read straight from the ``alfworld``
package's tables (``alfworld.gen.constants``, ``alfworld.gen.goal_library``), never from the project's data file
or exporter. Its games are imported by the native engine and played against TextWorld in the differential test.
"""

from __future__ import annotations

import importlib.resources
import json
import random
from pathlib import Path

ROOMS = {  # receptacle types and object types per room kind, AI2-THOR names
    "kitchen": (
        [
            "Cabinet",
            "Cabinet",
            "Cabinet",
            "CounterTop",
            "SinkBasin",
            "Microwave",
            "Fridge",
            "StoveBurner",
            "Drawer",
        ],
        ["Apple", "Mug", "Cup", "Plate", "Knife", "Tomato", "Potato", "Bowl", "Pan", "Egg", "SaltShaker"],
    ),
    "livingroom": (
        ["Sofa", "ArmChair", "CoffeeTable", "SideTable", "Drawer", "Shelf", "TVStand", "Ottoman"],
        ["KeyChain", "CreditCard", "RemoteControl", "Box", "Vase", "WateringCan", "Statue", "TissueBox"],
    ),
    "bedroom": (
        ["Bed", "Desk", "Drawer", "Drawer", "Dresser", "Shelf", "SideTable", "Safe"],
        ["Book", "CellPhone", "Pen", "Pencil", "AlarmClock", "BaseballBat", "TennisRacket", "Mug", "CD"],
    ),
    "bathroom": (
        ["Toilet", "SinkBasin", "BathtubBasin", "CounterTop", "Cabinet", "TowelHolder", "HandTowelHolder"],
        ["SoapBar", "Cloth", "SprayBottle", "ToiletPaper", "HandTowel", "Candle", "Plunger", "DishSponge"],
    ),
}
TASKS = {
    "pick_and_place_simple": ("bathroom", "Cloth", "CounterTop"),
    "look_at_obj_in_light": ("bedroom", "CellPhone", None),
    "pick_clean_then_place_in_recep": ("kitchen", "Mug", "Cabinet"),
    "pick_heat_then_place_in_recep": ("kitchen", "Potato", "CounterTop"),
    "pick_cool_then_place_in_recep": ("kitchen", "Apple", "CounterTop"),
    "pick_two_obj_and_place": ("livingroom", "KeyChain", "Sofa"),
}


def _coord(rng: random.Random) -> str:
    def one() -> str:
        v = rng.uniform(-4, 4)
        sign = "_minus_" if v < 0 else "_plus_"
        whole, frac = f"{abs(v):05.2f}".split(".")
        return f"{sign}{whole}_dot_{frac}"

    return "_bar_".join(one() for _ in range(3))


def write_alfworld_style_game(
    path: Path, task_type: str, seed: int, *, shared: bool = False, start_at_receptacle: bool = False
) -> Path:
    """Write one ALFWorld-style game of ``task_type`` to ``path`` (``*.tw-pddl``); deterministic in ``seed``.

    ``shared``: receptacles of the same type stand two by two at one location, as stacked drawers and cabinet
    pairs do in AI2-THOR (many of ALFWorld's own problems have such locations). ``start_at_receptacle``: the agent
    starts where the first receptacle stands instead of at a free point."""
    import alfworld.gen.constants as constants
    import alfworld.gen.goal_library as goal_library

    rng = random.Random(seed)
    room, target, parent = TASKS[task_type]
    rtypes, otypes = ROOMS[room]
    rtypes = list(rtypes)
    if task_type == "look_at_obj_in_light":
        rtypes.append("SideTable")
    actions = constants.VAL_ACTION_OBJECTS
    pickupable = {o for objs in constants.VAL_RECEPTACLE_OBJECTS.values() for o in objs}

    receptacles = []  # (id, type, location)
    for i, t in enumerate(rtypes):
        stem = "Sink" if t == "SinkBasin" else "Bathtub" if t == "BathtubBasin" else t
        rid = f"{stem}_bar_{_coord(rng)}" + (f"_bar_{t}" if t.endswith("Basin") else "")
        loc = f"loc_bar_{i - 3}_bar_{rng.randint(-9, 20)}_bar_{i % 4}_bar_60"
        twin = [r for r in receptacles if r[1] == t]
        if shared and len(twin) % 2 == 1:
            loc = twin[-1][2]  # the second of a pair stands where the first does
        receptacles.append((rid, t, loc))
    objects = []  # (id, type, receptacle id)
    picks = [target] * (3 if task_type == "pick_two_obj_and_place" else 2)
    picks += rng.sample(otypes, 5) + (["Knife", "Tomato"] if room == "kitchen" else [])
    if task_type == "look_at_obj_in_light":
        picks += ["DeskLamp"]
    for t in picks:
        if t == "DeskLamp":
            spots = [r for r in receptacles if r[1] in ("Desk", "SideTable")]
        else:
            spots = [
                r
                for r in receptacles
                if t in constants.VAL_RECEPTACLE_OBJECTS.get(r[1], ()) and r[1] != parent
            ]
        if spots:
            objects.append((f"{t}_bar_{_coord(rng)}", t, rng.choice(spots)[0]))
    fixtures = [
        (f"{t}_bar_{_coord(rng)}", t, f"loc_bar_{20 + k}_bar_0_bar_0_bar_0")
        for k, t in enumerate(["Window", "Chair", "FloorLamp", "LightSwitch"])
    ]
    fixtures[1] = (fixtures[1][0], "Chair", receptacles[0][2])  # a chair next to a receptacle, in none

    lines_objects = ["agent1 - agent"] + [f"{t} - object" for t in ("Curtains", "Mirror", "TeddyBear")]
    lines_objects += [f"{o} - object" for o, _, _ in objects + fixtures]
    lines_objects += [f"{r} - receptacle" for r, _, _ in receptacles]
    locations = list(
        dict.fromkeys([loc for _, _, loc in receptacles + fixtures] + ["loc_bar_9_bar_9_bar_1_bar_30"])
    )
    lines_objects += [f"{loc} - location" for loc in locations]
    lines_objects += [f"{t}Type - otype" for t in sorted({t for _, t, _ in objects + fixtures} | {target})]
    lines_objects += [f"{t}Type - rtype" for t in sorted(set(rtypes) | ({parent} - {None}))]

    init = [f"(receptacleType {r} {t}Type)" for r, t, _ in receptacles]
    init += [f"(objectType {o} {t}Type)" for o, t, _ in objects + fixtures]
    present = {t for _, t, _ in objects}
    for _, rt, _ in receptacles:  # ALFWorld repeats these for every receptacle instance
        init += [
            f"(canContain {rt}Type {ot}Type)"
            for ot in sorted(present)
            if ot in constants.VAL_RECEPTACLE_OBJECTS.get(rt, ())
        ]
    for o, t, _ in objects:
        if t in pickupable:
            init.append(f"(pickupable {o})")
        for fact, table in (("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable")):
            if t in actions[table]:
                init.append(f"({fact} {o})")
        if t in actions["Sliceable"]:
            init.append(f"(sliceable {o})")
        if t in constants.MOVABLE_RECEPTACLES_SET:
            init.append(f"(isReceptacleObject {o})")
        if t in actions["Toggleable"]:
            init.append(f"(toggleable {o})")
    openable = [r for r, t, _ in receptacles if t in constants.OPENABLE_CLASS_SET]
    init += [f"(openable {r})" for r in openable]
    if openable:
        init.append(f"(opened {rng.choice(openable)})")
    coolable_others = [o for o, t, _ in objects if t != target and t in actions["Coolable"]]
    if coolable_others:
        init.append(f"(isCool {coolable_others[0]})")
    init.append(f"(atLocation agent1 {receptacles[0][2] if start_at_receptacle else locations[-1]})")
    init.append("(toggleable " + fixtures[2][0] + ")")
    loc_of = {r: loc for r, _, loc in receptacles}
    init += [f"(inReceptacle {o} {r})" for o, _, r in objects]
    init += [f"(receptacleAtLocation {r} {loc})" for r, _, loc in receptacles]
    init += [f"(objectAtLocation {o} {loc_of[r]})" for o, _, r in objects]
    init += [f"(objectAtLocation {o} {loc})" for o, _, loc in fixtures]
    rng.shuffle(init)

    entry = goal_library.gdict[task_type]
    fill = {"obj": target, "recep": parent or "", "toggle": "DeskLamp", "mrecep": ""}
    goal = entry["pddl"].format(**fill).replace("#", "-")
    sentence = rng.choice(entry["templates"]).format(**{k: v.lower() for k, v in fill.items()})
    problem = "\n".join(
        [
            f"(define (problem plan_trial_{seed})",
            "(:domain alfred)",
            "(:objects",
            *lines_objects,
            ")",
            "(:init",
            *init,
            ")",
            goal,
        ]
    )
    data = importlib.resources.files("alfworld").joinpath("data")
    game = {
        "pddl_domain": data.joinpath("alfred.pddl").read_text(),
        "grammar": data.joinpath("alfred.twl2").read_text().replace("UNKNOWN GOAL", sentence),
        "pddl_problem": problem,
        "solvable": True,
    }
    path.write_text(json.dumps(game))
    return path
