"""ALFWorld's own data tables, carried into the project as ``alfworld_tables.json`` (SPEC §9; issue 12).

The native household world takes its containment facts, object property flags, receptacle-object flags, type
vocabulary, task sentences and room inventories from the tables that ship in the ``alfworld`` package (version
0.4.2), so that a game of the native world is a game ALFWorld's own problem generator could have written:

- ``can_contain``: ``alfworld/gen/constants.py`` ``VAL_RECEPTACLE_OBJECTS`` — the receptacle–object table from
  which ALFWorld's generator writes the ``(canContain RType OType)`` facts of every problem;
- ``cleanable`` / ``heatable`` / ``coolable`` / ``toggleable`` / ``sliceable``: ``VAL_ACTION_OBJECTS``;
- ``receptacle_objects``: ``MOVABLE_RECEPTACLES`` (the types that get ``(isReceptacleObject o)``);
- ``openable``: ``OPENABLE_CLASS_LIST``; ``object_types``: ``OBJECTS``; ``task_rooms``: ``GOALS_VALID``;
- ``goal_templates``: ``alfworld/gen/goal_library.py`` ``gdict[task]['templates']`` (every sentence variant);
- ``goal_pddl``: the PDDL goal of each task type (``gdict[task]['pddl']``, with ``{obj}``/``{recep}``/``{toggle}``);
- ``goal_pddl_sliced`` / ``goal_templates_sliced``: the goal and sentences of each task's sliced variant
  (``gdict[task + '_slice']``: the object must be sliced, "put a cool slice of apple in countertop"), for the
  tasks whose variant is well formed (:data:`SLICED_TASKS`);
- ``scenes``: the room kind (``SCENE_TYPE``) and the object/receptacle types of each AI2-THOR floor plan
  (``alfworld/gen/layouts/FloorPlanN-objects.json``), with the receptacle counts its ``-openable.json`` lists.

All type names are lower-cased, as ALFWorld's demangled names are. ``python -m envs.household.alfworld_data``
re-extracts the tables from the installed ``alfworld`` and rewrites the JSON file; a test checks that the file
still equals the extraction (skipped when ``alfworld`` is not installed), so the data cannot drift silently.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

TABLES_PATH = Path(__file__).with_name("alfworld_tables.json")
SOURCE = (
    "alfworld 0.4.2 (MIT): alfworld/gen/constants.py (VAL_RECEPTACLE_OBJECTS, VAL_ACTION_OBJECTS, "
    "MOVABLE_RECEPTACLES, OPENABLE_CLASS_LIST, OBJECTS, GOALS_VALID, SCENE_TYPE), alfworld/gen/goal_library.py "
    "(gdict templates), alfworld/gen/layouts/FloorPlan*-objects.json and -openable.json"
)
ROOM_OF_SCENE_TYPE = {
    "Kitchen": "kitchen",
    "LivingRoom": "livingroom",
    "Bedroom": "bedroom",
    "Bathroom": "bathroom",
}
TASKS = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

SLICED_TASKS = tuple(t for t in TASKS if t != "look_at_obj_in_light")
"""The tasks whose ``_slice`` goal in ALFWorld's goal library is well formed (look_at_obj_in_light_slice names
``?o`` outside the ``exists`` that binds it, so no planner or engine can evaluate it)."""


def _lower(names: Any) -> list[str]:
    return sorted({str(n).lower() for n in names})


def _goal_form(pddl: str) -> str:
    """The balanced ``(:goal ...)`` expression of a goal-library entry, whitespace collapsed, ``#`` typed as ``-``."""
    start = pddl.index("(:goal")
    depth = 0
    for i, ch in enumerate(pddl[start:], start):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return " ".join(pddl[start : i + 1].replace("#", "-").split())
    raise ValueError("unbalanced goal in alfworld's goal library")


def extract_tables() -> dict[str, Any]:
    """Read the tables from the installed ``alfworld`` package (see the module docstring for each source)."""
    import alfworld.gen.constants as constants
    import alfworld.gen.goal_library as goal_library

    layouts = importlib.resources.files("alfworld").joinpath("gen", "layouts")
    scenes: dict[str, Any] = {}
    for kind, numbers in constants.SCENE_TYPE.items():
        for n in numbers:
            objects_file = layouts.joinpath(f"FloorPlan{n}-objects.json")
            if not objects_file.is_file():
                continue
            openable_file = layouts.joinpath(f"FloorPlan{n}-openable.json")
            counts = Counter(
                k.split("|", 1)[0].lower()
                for k in (json.loads(openable_file.read_text()) if openable_file.is_file() else {})
            )
            scenes[str(n)] = {
                "room": ROOM_OF_SCENE_TYPE[kind],
                "types": _lower(json.loads(objects_file.read_text())),
                "receptacle_counts": dict(sorted(counts.items())),
            }
    actions = constants.VAL_ACTION_OBJECTS
    return {
        "source": SOURCE,
        "can_contain": {
            r.lower(): _lower(objs) for r, objs in sorted(constants.VAL_RECEPTACLE_OBJECTS.items())
        },
        "cleanable": _lower(actions["Cleanable"]),
        "heatable": _lower(actions["Heatable"]),
        "coolable": _lower(actions["Coolable"]),
        "toggleable": _lower(actions["Toggleable"]),
        "sliceable": _lower(actions["Sliceable"]),
        "receptacle_objects": _lower(constants.MOVABLE_RECEPTACLES),
        "openable": _lower(constants.OPENABLE_CLASS_LIST),
        "object_types": _lower(constants.OBJECTS),
        "task_rooms": {t: _lower(ROOM_OF_SCENE_TYPE[k] for k in constants.GOALS_VALID[t]) for t in TASKS},
        "goal_templates": {t: list(goal_library.gdict[t]["templates"]) for t in TASKS},
        "goal_pddl": {t: _goal_form(goal_library.gdict[t]["pddl"]) for t in TASKS},
        "goal_pddl_sliced": {t: _goal_form(goal_library.gdict[f"{t}_slice"]["pddl"]) for t in SLICED_TASKS},
        "goal_templates_sliced": {
            t: list(goal_library.gdict[f"{t}_slice"]["templates"]) for t in SLICED_TASKS
        },
        "scenes": scenes,
    }


@functools.cache
def load_tables() -> dict[str, Any]:
    """The tables as stored in ``alfworld_tables.json`` (read once)."""
    return json.loads(TABLES_PATH.read_text())


def main(argv: list[str] | None = None) -> int:
    """Rewrite ``alfworld_tables.json`` from the installed ``alfworld`` package."""
    tables = extract_tables()
    TABLES_PATH.write_text(json.dumps(tables, indent=1, sort_keys=True) + "\n")
    print(f"wrote {TABLES_PATH} ({len(tables['scenes'])} floor plans)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
