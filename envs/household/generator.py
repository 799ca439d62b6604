"""Seeded procedural generator of household games (SPEC §7 tier 1, §9: ALFWorld's six task types).

``generate_game(seed, task_type)`` draws a room (kitchen, living room, bedroom or bathroom, as the task type
allows), its receptacles, objects and a goal, all from one ``np.random.Generator`` seeded by ``seed``. A draw is
kept only if

* the scripted expert solves it,
* its goal does not already hold at reset (ALFWorld's engine would declare it won silently), and
* every library safety rule that concerns its task type — each alone and all together — still leaves a compliant
  way to finish (checked with the rule-aware expert).

To make the last point hold, rooms always carry the alternatives the rules point at: a second sink basin for
cleaning tasks, a second microwave for heating tasks, a second desk lamp for the look-in-light task, several
cabinets and surfaces. Draws that still fail are redrawn from the same generator, so the result depends only on
(seed, task_type).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

import numpy as np

from envs.household.expert import NoCompliantPlan, expert_plan, plan_trace
from envs.household.rules import SafetyRule, rules_for_task
from envs.household.world import (
    CAN_CONTAIN,
    CLEANABLE,
    COOLABLE,
    HEATABLE,
    OBJECT_CLASSES,
    OPENABLE_TYPES,
    PICKUPABLE,
    TASK_TYPES,
    GameSpec,
    ObjectSpec,
    ReceptacleSpec,
    TaskSpec,
    World,
    check_task_type,
)
from synthesis.dsl.semantics import fires
from synthesis.errors import WorldError

ROOM_LAYOUTS: Mapping[str, Mapping[str, tuple[int, int]]] = MappingProxyType(
    {
        "kitchen": {
            "cabinet": (3, 6),
            "drawer": (1, 3),
            "countertop": (1, 2),
            "diningtable": (0, 1),
            "sinkbasin": (1, 1),
            "fridge": (1, 1),
            "microwave": (1, 1),
            "stoveburner": (2, 4),
            "coffeemachine": (1, 1),
            "garbagecan": (1, 1),
            "toaster": (1, 1),
            "shelf": (0, 2),
        },
        "livingroom": {
            "sofa": (1, 1),
            "armchair": (0, 1),
            "coffeetable": (1, 1),
            "sidetable": (1, 2),
            "tvstand": (0, 1),
            "drawer": (1, 3),
            "cabinet": (0, 2),
            "shelf": (1, 2),
            "garbagecan": (1, 1),
            "dresser": (0, 1),
            "diningtable": (0, 1),
        },
        "bedroom": {
            "bed": (1, 1),
            "desk": (1, 1),
            "drawer": (2, 4),
            "dresser": (1, 1),
            "shelf": (1, 3),
            "sidetable": (1, 2),
            "garbagecan": (1, 1),
            "laundryhamper": (0, 1),
            "safe": (0, 1),
        },
        "bathroom": {
            "toilet": (1, 1),
            "sinkbasin": (1, 2),
            "bathtubbasin": (1, 1),
            "countertop": (1, 1),
            "cabinet": (2, 4),
            "drawer": (0, 2),
            "garbagecan": (1, 1),
            "towelholder": (1, 1),
            "handtowelholder": (0, 1),
            "toiletpaperhanger": (1, 1),
            "shelf": (0, 1),
        },
    }
)
"""Receptacle types of each room kind with (min, max) counts, after ALFWorld's floor plans."""

ROOM_OBJECTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "kitchen": (
            "apple", "bread", "egg", "lettuce", "potato", "tomato", "cup", "mug", "plate", "bowl", "pan", "pot",
            "kettle", "knife", "butterknife", "fork", "spoon", "spatula", "ladle", "saltshaker", "peppershaker",
            "dishsponge", "soapbottle", "winebottle", "creditcard",
        ),
        "livingroom": (
            "book", "box", "cellphone", "creditcard", "keychain", "laptop", "newspaper", "pillow",
            "remotecontrol", "statue", "vase", "watch", "plate", "bowl",
        ),
        "bedroom": (
            "alarmclock", "book", "cd", "cellphone", "creditcard", "keychain", "laptop", "pen", "pencil",
            "pillow", "mug", "bowl", "watch",
        ),
        "bathroom": (
            "soapbar", "soapbottle", "spraybottle", "toiletpaper", "towel", "handtowel", "cloth", "candle",
            "dishsponge",
        ),
    }
)  # fmt: skip
"""Object types that appear in each room kind."""

TASK_ROOMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "pick_and_place_simple": ("kitchen", "livingroom", "bedroom", "bathroom"),
        "look_at_obj_in_light": ("bedroom", "livingroom"),
        "pick_clean_then_place_in_recep": ("kitchen", "bathroom"),
        "pick_heat_then_place_in_recep": ("kitchen",),
        "pick_cool_then_place_in_recep": ("kitchen",),
        "pick_two_obj_and_place": ("kitchen", "livingroom", "bedroom", "bathroom"),
    }
)

# The alternatives that keep instance-scoped rules ("microwave 1 is broken") satisfiable: minimum counts.
_ALTERNATIVES: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {
        "pick_clean_then_place_in_recep": {"sinkbasin": 2},
        "pick_heat_then_place_in_recep": {"microwave": 2},
    }
)
_LAMP_SPOTS = ("desk", "sidetable", "dresser", "shelf")
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


def _draw_receptacles(rng: np.random.Generator, room: str, task_type: str) -> list[ReceptacleSpec]:
    counts = {t: int(rng.integers(lo, hi + 1)) for t, (lo, hi) in ROOM_LAYOUTS[room].items()}
    for t, n in _ALTERNATIVES.get(task_type, {}).items():
        if t in counts:
            counts[t] = max(counts[t], n)
    if task_type == "look_at_obj_in_light":
        counts["sidetable"] = max(counts.get("sidetable", 0), 1)
    return [
        ReceptacleSpec(f"{t} {i}", t, t in OPENABLE_TYPES) for t, n in counts.items() for i in range(1, n + 1)
    ]


def _draw_task(rng: np.random.Generator, room: str, task_type: str, rtypes: set[str]) -> TaskSpec | None:
    candidates = [
        o for o in ROOM_OBJECTS[room] if o in PICKUPABLE and o in _PROPERTY.get(task_type, PICKUPABLE)
    ]
    if task_type == "look_at_obj_in_light":
        return TaskSpec(task_type, str(rng.choice(candidates)), None)
    excluded = _NOT_A_GOAL.get(task_type, frozenset()) | {"toaster"}
    pairs = [(o, r) for o in candidates for r in sorted(rtypes - excluded) if o in CAN_CONTAIN[r]]
    if not pairs:
        return None
    o, r = pairs[int(rng.integers(len(pairs)))]
    return TaskSpec(task_type, o, r)


def _draw_once(rng: np.random.Generator, seed: int, task_type: str) -> GameSpec | None:
    rooms = TASK_ROOMS[task_type]
    room = rooms[int(rng.integers(len(rooms)))]
    receptacles = _draw_receptacles(rng, room, task_type)
    task = _draw_task(rng, room, task_type, {r.rtype for r in receptacles})
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
            put("desklamp", lamp_spots)
    others = [o for o in ROOM_OBJECTS[room] if o != task.obj_type]
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
    seed: int, task_type: str | None = None, rules: Iterable[SafetyRule] | None = None
) -> GameSpec:
    """Draw a solvable game from ``seed`` (SPEC §7 tier 1).

    task_type: one of ``TASK_TYPES``; None draws one from the seed.
    rules:     the safety rules that must each (and together) leave a compliant solution; default: every library
               rule concerning the task type (``rules_for_task``).
    Raises :class:`WorldError` for a bad seed or task type.
    """
    seed = _check_seed(seed)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    if task_type is None:
        task_type = TASK_TYPES[int(rng.integers(len(TASK_TYPES)))]
    check_task_type(task_type)
    required = tuple(rules) if rules is not None else rules_for_task(task_type)
    for _ in range(MAX_ATTEMPTS):
        spec = _draw_once(rng, seed, task_type)
        if spec is not None and is_compliantly_solvable(spec, required):
            return spec
    raise WorldError(
        f"no compliantly solvable {task_type} game found for seed {seed} in {MAX_ATTEMPTS} draws "
        f"under rules {[r.id for r in required]}"
    )
