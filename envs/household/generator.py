"""Seeded procedural generator of household games (SPEC §7 tier 1, §9: ALFWorld's six task types).

``generate_game(seed, task_type)`` draws a room kind (kitchen, living room, bedroom or bathroom, as ALFWorld's
``GOALS_VALID`` allows for the task type), one of ALFWorld's 30 AI2-THOR floor plans of that kind, its receptacles
(the floor plan's receptacle types, with the counts its layout lists, at most ``MAX_PER_TYPE`` each), objects drawn
from the floor plan's own object types, and a goal with one of ALFWorld's task sentences — all from one
``np.random.Generator`` seeded by ``seed``. Containment, property flags and receptacle-object flags are ALFWorld's
(``envs.household.world``, from ``alfworld_tables.json``). A draw is kept only if

* the scripted expert solves it,
* its goal does not already hold at reset (ALFWorld's engine would declare it won silently), and
* every library safety rule that concerns its task type — each alone and all together — still leaves a compliant
  way to finish (checked with the rule-aware expert).

To make the last point hold, rooms always carry the alternatives the rules point at: a second sink basin for
cleaning tasks, a second microwave for heating tasks, a second desk lamp for the look-in-light task, several
cabinets and surfaces. Draws that still fail are redrawn from the same generator, so the result depends only on
(seed, task_type, room).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from scars.envs.household.alfworld_data import load_tables
from scars.envs.household.expert import NoCompliantPlan, expert_plan, plan_trace
from scars.envs.household.rules import SafetyRule, rules_for_task
from scars.envs.household.spec import (
    CAN_CONTAIN,
    CLEANABLE,
    COOLABLE,
    GOAL_TEMPLATES,
    HEATABLE,
    OBJECT_CLASSES,
    OPENABLE_TYPES,
    PICKUPABLE,
    ROOM_KINDS,
    TASK_TYPES,
    GameSpec,
    ObjectSpec,
    ReceptacleSpec,
    TaskSpec,
    check_task_type,
)
from scars.envs.household.world import World
from scars.synthesis.dsl.semantics import fires
from scars.synthesis.errors import WorldError

GENERATOR_VERSION = 1
"""The version of what a generated game is: bump it with any change to this generator, the expert
(``envs.household.expert``), the world (``envs.household.world``, ``spec``) or ALFWorld's tables that can change the
game a seed draws, or the route the expert takes in it. Cached game pools (``experiments.schedules.game_pool``) are
keyed by it, so a bump rebuilds them instead of reading pools of the old games."""

_TABLES = load_tables()

SCENES: Mapping[str, tuple[Mapping[str, Any], ...]] = MappingProxyType(
    {
        room: tuple(
            s for _, s in sorted(_TABLES["scenes"].items(), key=lambda kv: int(kv[0])) if s["room"] == room
        )
        for room in ROOM_KINDS
    }
)
"""ALFWorld's AI2-THOR floor plans by room kind (30 each): the object and receptacle types of each, and the
receptacle counts its layout lists (``alfworld/gen/layouts``, via ``alfworld_tables.json``)."""

ROOM_OBJECTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        room: tuple(sorted({t for s in scenes for t in s["types"] if t in PICKUPABLE}))
        for room, scenes in SCENES.items()
    }
)
"""Object types that appear in each room kind (the pickupable types of its floor plans)."""

ROOM_RECEPTACLES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        room: tuple(sorted({t for s in scenes for t in s["types"] if t in CAN_CONTAIN}))
        for room, scenes in SCENES.items()
    }
)
"""Receptacle types that appear in each room kind."""

TASK_ROOMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {t: tuple(r for r in ROOM_KINDS if r in _TABLES["task_rooms"][t]) for t in TASK_TYPES}
)
"""The room kinds each task type is generated in (``alfworld.gen.constants.GOALS_VALID``)."""

MAX_PER_TYPE = 6  # AI2-THOR kitchens have up to 28 cabinets; more than six only lengthens exploration
_COUNT_KEY = {
    "sinkbasin": "sink",
    "bathtubbasin": "bathtub",
}  # a basin's layout id starts with its sink/bathtub
_DEFAULT_COUNT = {"stoveburner": 4}  # not in the layouts' lists; AI2-THOR kitchens have four burners

# The alternatives that keep instance-scoped rules ("microwave 1 is broken") satisfiable: minimum counts.
_ALTERNATIVES: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {
        "pick_clean_then_place_in_recep": {"sinkbasin": 2},
        "pick_heat_then_place_in_recep": {"microwave": 2},
    }
)
_LAMP_SPOTS = ("desk", "sidetable", "dresser", "shelf")
_LAMP = "desklamp"  # alfred.pddl ToggleObject needs the lamp in a receptacle: floor lamps stand in none
_LAMPS = 2  # a second desk lamp: the alternative for "desk lamp 1 is faulty"
# Receptacle types a goal never names (ALFWorld does not either): appliances used to process the object.
_NOT_A_GOAL = {
    "pick_clean_then_place_in_recep": frozenset({"sinkbasin", "bathtubbasin"}),
    "pick_heat_then_place_in_recep": frozenset({"microwave"}),
    "pick_cool_then_place_in_recep": frozenset({"fridge"}),
}
_PROPERTY = {
    "pick_clean_then_place_in_recep": CLEANABLE,
    "pick_heat_then_place_in_recep": HEATABLE,
    "pick_cool_then_place_in_recep": COOLABLE,
}
MAX_ATTEMPTS = 200


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or int(seed) < 0:
        raise WorldError(f"game seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _receptacles(scene: Mapping[str, Any], task_type: str) -> list[ReceptacleSpec]:
    """The floor plan's receptacles (its layout's counts, at most MAX_PER_TYPE) plus the rules' alternatives."""
    counts = {}
    for t in scene["types"]:
        if t in CAN_CONTAIN:
            n = scene["receptacle_counts"].get(_COUNT_KEY.get(t, t), _DEFAULT_COUNT.get(t, 1))
            counts[t] = min(n, MAX_PER_TYPE)
    for t, n in _ALTERNATIVES.get(task_type, {}).items():
        if t in counts:
            counts[t] = max(counts[t], n)
    if task_type == "look_at_obj_in_light" and not any(t in counts for t in _LAMP_SPOTS):
        counts["sidetable"] = 1
    return [
        ReceptacleSpec(f"{t} {i}", t, t in OPENABLE_TYPES)
        for t, n in sorted(counts.items())
        for i in range(1, n + 1)
    ]


def _draw_task(
    rng: np.random.Generator, objects: list[str], task_type: str, rtypes: set[str]
) -> TaskSpec | None:
    candidates = [o for o in objects if o in PICKUPABLE and o in _PROPERTY.get(task_type, PICKUPABLE)]
    if not candidates:
        return None
    templates = GOAL_TEMPLATES[task_type]
    template = templates[int(rng.integers(len(templates)))]
    if task_type == "look_at_obj_in_light":
        obj = str(rng.choice(candidates))
        return TaskSpec(task_type, obj, None, template.format(obj=obj, toggle=_LAMP), _LAMP)
    excluded = _NOT_A_GOAL.get(task_type, frozenset()) | {"toaster"}
    pairs = [(o, r) for o in candidates for r in sorted(rtypes - excluded) if o in CAN_CONTAIN[r]]
    if not pairs:
        return None
    o, r = pairs[int(rng.integers(len(pairs)))]
    return TaskSpec(task_type, o, r, template.format(obj=o, recep=r))


def _draw_once(rng: np.random.Generator, seed: int, task_type: str, room: str | None) -> GameSpec | None:
    rooms = TASK_ROOMS[task_type] if room is None else (room,)
    room = rooms[int(rng.integers(len(rooms)))]
    scenes = SCENES[room]
    if task_type == "look_at_obj_in_light":
        scenes = tuple(s for s in scenes if _LAMP in s["types"])
    scene = scenes[int(rng.integers(len(scenes)))]
    receptacles = _receptacles(scene, task_type)
    scene_objects = [t for t in scene["types"] if t in PICKUPABLE]
    task = _draw_task(rng, scene_objects, task_type, {r.rtype for r in receptacles})
    if task is None:
        return None
    counters: dict[str, int] = {}
    objects: list[ObjectSpec] = []

    def put(otype: str, spots: list[ReceptacleSpec]) -> None:
        if not spots:
            return
        counters[otype] = counters.get(otype, 0) + 1
        where = spots[int(rng.integers(len(spots)))]
        objects.append(ObjectSpec(f"{otype} {counters[otype]}", otype, where.name))

    # Target objects never start inside a receptacle of the goal type, so the goal does not hold at reset.
    n_targets = int(rng.integers(2, 4)) if task_type == "pick_two_obj_and_place" else int(rng.integers(1, 4))
    target_spots = [
        r for r in receptacles if task.obj_type in CAN_CONTAIN[r.rtype] and r.rtype != task.recep_type
    ]
    for _ in range(n_targets):
        put(task.obj_type, target_spots)
    if task_type == "look_at_obj_in_light":
        lamp_spots = [r for r in receptacles if r.rtype in _LAMP_SPOTS]
        for _ in range(_LAMPS):
            put(_LAMP, lamp_spots)
    others = [o for o in scene_objects if o != task.obj_type]
    for _ in range(int(rng.integers(5, 13))):
        otype = others[int(rng.integers(len(others)))]
        put(otype, [r for r in receptacles if otype in CAN_CONTAIN[r.rtype]])
    return GameSpec(seed, room, tuple(receptacles), tuple(objects), task)


def is_compliantly_solvable(spec: GameSpec, rules: Iterable[SafetyRule]) -> bool:
    """The expert solves the game with no rule, with each rule alone and with all rules at once.

    The unconstrained plan is checked against every rule first; only the rules it would violate need a
    rule-aware re-plan, which keeps generation fast.
    """
    rules = tuple(rules)
    world = World(spec)
    if world.won():
        return False
    try:
        plan = expert_plan(world)
    except NoCompliantPlan:
        return False
    trace = plan_trace(world, plan)
    violated = [r for r in rules if any(fires(r.rule, q, a, OBJECT_CLASSES) for q, a in trace)]
    checks: list[tuple[SafetyRule, ...]] = [(r,) for r in violated]
    if violated and len(rules) > 1:
        checks.append(rules)
    for forbidden in checks:
        try:
            expert_plan(world, forbidden)
        except NoCompliantPlan:
            return False
    return True


def generate_game(
    seed: int,
    task_type: str | None = None,
    rules: Iterable[SafetyRule] | None = None,
    *,
    room: str | None = None,
) -> GameSpec:
    """Draw a solvable game from ``seed`` (SPEC §7 tier 1).

    task_type: one of ``TASK_TYPES``; None draws one from the seed.
    room:      one of ``ROOM_KINDS`` that the task type is played in (``TASK_ROOMS``); None draws one.
    rules:     the safety rules that must each (and together) leave a compliant solution; default: every library
               rule concerning the task type (``rules_for_task``).
    Raises :class:`WorldError` for a bad seed or task type.
    """
    seed = _check_seed(seed)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    if task_type is None:
        task_type = TASK_TYPES[int(rng.integers(len(TASK_TYPES)))]
    check_task_type(task_type)
    if room is not None and room not in TASK_ROOMS[task_type]:
        raise WorldError(
            f"room {room!r} has no {task_type} games in ALFWorld; allowed: {', '.join(TASK_ROOMS[task_type])}"
        )
    required = tuple(rules) if rules is not None else rules_for_task(task_type)
    for _ in range(MAX_ATTEMPTS):
        spec = _draw_once(rng, seed, task_type, room)
        if spec is not None and is_compliantly_solvable(spec, required):
            return spec
    raise WorldError(
        f"no compliantly solvable {task_type} game found for seed {seed} in {MAX_ATTEMPTS} draws "
        f"under rules {[r.id for r in required]}"
    )
