"""The real ALFWorld engine as the reference for the native household world (SPEC §7 tier 1, §9).

ALFWorld plays ``game.tw-pddl`` files through TextWorld's PDDL engine: a JSON file with the PDDL domain
(``alfworld/data/alfred.pddl``), the text grammar (``alfworld/data/alfred.twl2`` with the literal "UNKNOWN GOAL"
replaced by the task sentence), a PDDL problem and a ``solvable`` flag. This module

- :func:`export_game` writes the ``game.tw-pddl`` of a native :class:`~envs.household.world.GameSpec`, naming its
  PDDL ids so that ALFWorld's ``AlfredDemangler`` shows exactly the native names ("cabinet 2", "sinkbasin 1");
- :func:`load_game_file` imports an ALFWorld ``game.tw-pddl`` (one the exporter wrote, or ALFWorld's own) as a
  native :class:`~envs.household.world.GameSpec` (``World.from_tw_pddl``), or names the construct it cannot
  reproduce;
- :class:`TextWorldGame` plays any ``.tw-pddl`` file (an exported one or a real ALFWorld game) through TextWorld
  and exposes what the native :class:`~envs.household.world.World` exposes: observation, admissible commands,
  structured admissible actions, the flat context q that rule guards read, and ``won``;
- :class:`TextWorldHousehold` wraps a :class:`TextWorldGame` in the same Gymnasium interface and the same
  dynamic-rule verifier (``envs.household.rules``) as the native environment, so the safety-rule schedule can run
  over real ALFWorld games too.

TextWorld is an optional extra (``pip install 'scars-testbed[textworld]'`` plus ``pip install --no-deps alfworld``);
it is imported only when a game is played, and its absence raises :class:`TextWorldMissing` saying what to install.
The facts this module relies on (naming, listing order, texts, admissibility) are measured against the engine by
``tests/envs/household/test_textworld_differential.py``.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from scars.envs.household.alfworld_data import load_tables
from scars.envs.household.env import (
    COMMAND_CHARSET,
    MAX_COMMAND_LENGTH,
    MAX_OBSERVATION_LENGTH,
    OBSERVATION_CHARSET,
    HouseholdConfig,
)
from scars.envs.household.rules import Verifier
from scars.envs.household.world import (
    CAN_CONTAIN,
    NOWHERE,
    PROPERTIES,
    STATE_FLAGS,
    TASK_TYPES,
    GameSpec,
    ObjectSpec,
    ReceptacleSpec,
    TaskSpec,
    pddl_ids,
)
from scars.synthesis.dsl.ast import Value
from scars.synthesis.errors import ScarsError, WorldError

GOAL_PDDL: Mapping[str, str] = load_tables()["goal_pddl"]
"""ALFWorld's PDDL goal per task type, with ``{obj}``, ``{recep}``, ``{toggle}`` placeholders."""

INSTALL_HINT = (
    "the TextWorld reference engine needs the optional extra: "
    "pip install 'scars-testbed[textworld]' && pip install --no-deps alfworld"
)


class TextWorldMissing(ScarsError, ImportError):
    """``textworld[pddl]`` or ``alfworld`` is not installed; the message says how to install them."""


def _require_textworld() -> tuple[Any, Any, Any]:
    """Import textworld, its EnvInfos and ALFWorld's AlfredDemangler lazily (they are an optional extra)."""
    try:
        import textworld
        from textworld import EnvInfos
        from textworld.envs.pddl import pddl as tw_pddl
    except ImportError as err:
        raise TextWorldMissing(f"{INSTALL_HINT} ({err})") from err
    if tw_pddl.fast_downward_missing:
        raise TextWorldMissing(f"{INSTALL_HINT} (textworld is installed without its [pddl] extra)")
    try:
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    except ImportError as err:
        raise TextWorldMissing(f"{INSTALL_HINT} ({err})") from err
    return textworld, EnvInfos, AlfredDemangler


def textworld_available() -> bool:
    """True when the TextWorld PDDL engine and ALFWorld's data files can be used."""
    try:
        _require_textworld()
    except TextWorldMissing:
        return False
    return True


def _alfworld_data(name: str) -> str:
    """A file of the ``alfworld`` package's ``data/`` (the PDDL domain and the text grammar); exporting needs only
    ``alfworld`` installed, playing needs TextWorld too."""
    try:
        return importlib.resources.files("alfworld").joinpath("data", name).read_text()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise TextWorldMissing(f"{INSTALL_HINT} ({err})") from err


# ---------------------------------------------------------------------------------------------- export


def _pddl_ids(names_and_types: list[tuple[str, str]]) -> dict[str, str]:
    """Native names -> PDDL ids that AlfredDemangler shows as those names (:func:`envs.household.world.pddl_ids`)."""
    return pddl_ids(names_and_types)


def _type_const(typ: str) -> str:
    return f"{typ}type"


def _goal_pddl(task: TaskSpec, lamp_type: str | None) -> str:
    """The PDDL goal of ALFWorld's goal library (``alfworld.gen.goal_library.gdict``, carried in
    ``alfworld_tables.json``) for a native task."""
    lamp_type = task.toggle_type or lamp_type
    if task.task_type == "look_at_obj_in_light" and lamp_type is None:
        raise WorldError("look_at_obj_in_light game has no toggleable lamp to export")
    return GOAL_PDDL[task.task_type].format(obj=task.obj_type, recep=task.recep_type, toggle=lamp_type)


_PROPERTY_FACTS = {p: p for p in PROPERTIES} | {"receptacle_object": "isReceptacleObject"}
_STATE_FACTS = {
    "is_clean": "isClean",
    "is_hot": "isHot",
    "is_cool": "isCool",
    "is_sliced": "isSliced",
    "is_toggled": "isToggled",
}


def pddl_problem(spec: GameSpec) -> str:
    """The PDDL problem of a native game in ALFWorld's layout (``alfworld.gen.game_states``).

    One location per receptacle (``loc_bar_NNN``; receptacles with the same ``location`` share one), the agent starts at ``loc_bar_start`` where no receptacle
    stands ("You are in the middle of a room"); every object gets its type, receptacle, location, its property
    facts (including ``isReceptacleObject``) and initial state; ``canContain`` lists the game's (receptacle type,
    object type) pairs (:meth:`GameSpec.containment`: ALFWorld's table unless the game carries its own facts).
    """
    rids = spec.receptacle_ids()
    oids = spec.object_ids()
    loc: dict[str, str] = {}  # receptacle -> location id; receptacles with the same ``location`` share one
    shared: dict[str, str] = {}
    for i, r in enumerate(spec.receptacles):
        own = f"loc_bar_{i + 1:03d}"
        loc[r.name] = own if r.location is None else shared.setdefault(r.location, own)
    rtypes = sorted({r.rtype for r in spec.receptacles} | ({spec.task.recep_type} - {None}))
    otypes = sorted({o.otype for o in spec.objects} | {spec.task.obj_type})
    lamp_types = sorted({o.otype for o in spec.objects if "toggleable" in o.property_set()})

    objects = ["agent1 - agent"]
    objects += [f"{oids[o.name]} - object" for o in spec.objects]
    objects += [f"{rids[r.name]} - receptacle" for r in spec.receptacles]
    objects += [f"{lid} - location" for lid in dict.fromkeys(loc.values())] + ["loc_bar_start - location"]
    objects += [f"{_type_const(t)} - otype" for t in otypes] + [f"{_type_const(t)} - rtype" for t in rtypes]

    init = [f"(atLocation agent1 {loc[spec.start] if spec.start is not None else 'loc_bar_start'})"]
    for r in spec.receptacles:
        rid = rids[r.name]
        init += [
            f"(receptacleType {rid} {_type_const(r.rtype)})",
            f"(receptacleAtLocation {rid} {loc[r.name]})",
        ]
        if r.openable:
            init.append(f"(openable {rid})")
        if r.start_open:
            init.append(f"(opened {rid})")
    for o in spec.objects:
        oid = oids[o.name]
        init += [
            f"(objectType {oid} {_type_const(o.otype)})",
            f"(inReceptacle {oid} {rids[o.location]})",
            f"(objectAtLocation {oid} {loc[o.location]})",
        ]
        props = o.property_set()
        init += [f"({_PROPERTY_FACTS[p]} {oid})" for p in PROPERTIES if p in props]
        init += [f"({_STATE_FACTS[f]} {oid})" for f in STATE_FLAGS if f in o.state]
    allowed = spec.containment()
    init += [
        f"(canContain {_type_const(rt)} {_type_const(ot)})"
        for rt in rtypes
        for ot in otypes
        if (rt, ot) in allowed
    ]

    goal = _goal_pddl(spec.task, lamp_types[0] if lamp_types else None)
    return "\n".join(
        [
            f"(define (problem scars_seed_{spec.seed}_{spec.task.task_type})",
            "(:domain alfred)",
            "(:objects",
            *("  " + line for line in objects),
            ")",
            "(:init",
            *("  " + line for line in init),
            ")",
            goal,
            ")",
        ]
    )


def game_data(spec: GameSpec) -> dict[str, Any]:
    """The ``game.tw-pddl`` JSON of a native game (keys as ALFWorld's: pddl_domain, grammar, pddl_problem,
    solvable) plus a ``scars`` block (seed, room, task) that TextWorld ignores and :class:`TextWorldGame` reads."""
    grammar = _alfworld_data("alfred.twl2")
    if "UNKNOWN GOAL" not in grammar:
        raise WorldError(
            "alfworld's alfred.twl2 has no 'UNKNOWN GOAL' placeholder: unsupported alfworld version"
        )
    return {
        "pddl_domain": _alfworld_data("alfred.pddl"),
        "grammar": grammar.replace("UNKNOWN GOAL", spec.goal_text),
        "pddl_problem": pddl_problem(spec),
        "solvable": True,
        "scars": spec_to_dict(spec),
    }


def spec_to_dict(spec: GameSpec) -> dict[str, Any]:
    """A JSON-able form of a native game (stored in exported files so they can be replayed natively)."""
    task = spec.task
    return {
        "seed": spec.seed,
        "room": spec.room,
        "task_type": task.task_type,
        "obj_type": task.obj_type,
        "recep_type": task.recep_type,
        "task_text": task.text,
        "toggle_type": task.toggle_type,
        "receptacles": [
            [r.name, r.rtype, r.openable, r.start_open, r.pddl_id, r.location] for r in spec.receptacles
        ],
        "objects": [
            [
                o.name,
                o.otype,
                o.location,
                None if o.properties is None else sorted(o.properties),
                sorted(o.state),
                o.pddl_id,
            ]
            for o in spec.objects
        ],
        "can_contain": None if spec.can_contain is None else [list(p) for p in spec.can_contain],
        "start": spec.start,
    }


def spec_from_dict(data: Mapping[str, Any]) -> GameSpec:
    """Inverse of :func:`spec_to_dict` (also reads the shorter lists of files written before issue 12)."""
    try:
        receptacles = []
        for n, t, op, *rest in data["receptacles"]:
            start_open, rid, place = (list(rest) + [False, None, None])[:3]
            receptacles.append(
                ReceptacleSpec(
                    str(n), str(t), bool(op), start_open=bool(start_open), location=place, pddl_id=rid
                )
            )
        objects = []
        for n, t, loc, *rest in data["objects"]:
            props, state, oid = (list(rest) + [None, [], None])[:3]
            objects.append(
                ObjectSpec(
                    str(n),
                    str(t),
                    str(loc),
                    None if props is None else frozenset(props),
                    frozenset(state),
                    oid,
                )
            )
        can = data.get("can_contain")
        return GameSpec(
            seed=int(data["seed"]),
            room=str(data["room"]),
            receptacles=tuple(receptacles),
            objects=tuple(objects),
            task=TaskSpec(
                str(data["task_type"]),
                str(data["obj_type"]),
                data["recep_type"],
                data.get("task_text"),
                data.get("toggle_type"),
            ),
            can_contain=None if can is None else tuple((str(r), str(o)) for r, o in can),
            start=data.get("start"),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise WorldError(f"not a scars game description: {err!r}; expected the keys of spec_to_dict") from err


def export_game(spec: GameSpec, path: str | Path) -> Path:
    """Write the ALFWorld ``game.tw-pddl`` of a native game to ``path`` (which must end in ``.tw-pddl``: TextWorld
    picks its PDDL engine by that suffix). Returns the path."""
    path = Path(path)
    if not path.name.endswith(".tw-pddl"):
        raise WorldError(
            f"export path {str(path)!r} must end in '.tw-pddl' (TextWorld chooses its engine by it)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(game_data(spec)))
    return path


# ---------------------------------------------------------------------------------------------- import

# sha256 of alfworld 0.4.2's data/alfred.pddl and data/alfred.twl2 after _normalise_logic (comments dropped,
# whitespace collapsed, lower-cased; the grammar's task sentence put back to "UNKNOWN GOAL"). The native engine
# implements exactly this domain and grammar; a test checks these against the installed alfworld.
ALFWORLD_DOMAIN_SHA256 = "da18d44ab1bcf831f61e90b88a99ad5766d8bbb562b6f87839b4b6ace4f796fe"
ALFWORLD_GRAMMAR_SHA256 = "6a29acc53b9fdfa5f5f133d8387732904275a35d414d238a4ba37dcfb13948b6"

_TASK_RULE = re.compile(r'"rhs": "Your task is to: (.*?)\.?"')
_IGNORED_FACTS = frozenset({"=", "ison", "moveable", "checked", "wasinreceptacle", "examined"})
_PROPERTY_OF_FACT = {"isreceptacleobject": "receptacle_object"} | {
    p: p for p in ("pickupable", "cleanable", "heatable", "coolable", "toggleable", "sliceable")
}
_STATE_OF_FACT = {
    "isclean": "is_clean",
    "ishot": "is_hot",
    "iscool": "is_cool",
    "issliced": "is_sliced",
    "istoggled": "is_toggled",
}
_ARITY = {
    **{p: 2 for p in ("receptacletype", "objecttype", "receptacleatlocation", "objectatlocation")},
    **{p: 2 for p in ("inreceptacle", "cancontain", "atlocation")},
    **{p: 1 for p in ("opened", "openable", *_PROPERTY_OF_FACT, *_STATE_OF_FACT)},
}
"""The :init predicates the importer reads, with their arity (lower-cased, as PDDL is case-insensitive)."""


def _normalise_logic(text: str) -> str:
    """Comments dropped, whitespace collapsed, lower-cased: what two copies of the same PDDL/grammar share."""
    lines = [
        line.split(";", 1)[0] if not line.lstrip().startswith('"') else line for line in text.splitlines()
    ]
    return " ".join(" ".join(lines).split()).lower()


def _fingerprint(text: str) -> str:
    return hashlib.sha256(_normalise_logic(text).encode()).hexdigest()


def _grammar_fingerprint(grammar: str) -> str:
    return _fingerprint(_TASK_RULE.sub('"rhs": "Your task is to: UNKNOWN GOAL."', grammar, count=1))


def _sexpr(text: str, what: str) -> list:
    """Parse PDDL text into nested lists of lower-cased atoms; raises WorldError naming ``what`` on bad nesting."""
    tokens = re.findall(r"\(|\)|[^\s()]+", "\n".join(line.split(";", 1)[0] for line in text.splitlines()))
    stack: list[list] = [[]]
    for tok in tokens:
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                raise WorldError(f"{what}: unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok.lower())
    if len(stack) != 1:
        raise WorldError(f"{what}: {len(stack) - 1} unclosed '('")
    if len(stack[0]) != 1 or not isinstance(stack[0][0], list):
        raise WorldError(f"{what}: expected one (define ...) expression")
    return stack[0][0]


def _atoms(goal: list, problem: str) -> list[tuple[str, ...]]:
    """The atoms of a goal of and/exists/(not (= a b)) form, variables as written; anything else is unsupported."""
    out: list[tuple[str, ...]] = []

    def walk(e: Any) -> None:
        if not isinstance(e, list) or not e:
            raise WorldError(f"{problem}: malformed goal expression {e!r}")
        head = e[0]
        if head == "and":
            for x in e[1:]:
                walk(x)
        elif head == "exists":
            if len(e) != 3:
                raise WorldError(f"{problem}: malformed exists in the goal")
            walk(e[2])
        elif head == "not":
            if len(e) == 2 and isinstance(e[1], list) and e[1][:1] == ["="]:
                out.append(("not=", *sorted(e[1][1:])))
            else:
                raise WorldError(f"{problem}: unsupported negation in the goal: {_unparse(e)}")
        elif all(isinstance(x, str) for x in e):
            out.append(tuple(e))
        else:
            raise WorldError(
                f"{problem}: unsupported goal construct {head!r} (ALFWorld's goals use and/exists)"
            )

    walk(goal)
    return sorted(out)


def _unparse(e: Any) -> str:
    return "(" + " ".join(_unparse(x) for x in e) + ")" if isinstance(e, list) else str(e)


def _match_goal(goal: list, problem: str) -> TaskSpec:
    """Which of ALFWorld's six task goals (``GOAL_PDDL``) ``goal`` is, with its object/receptacle/lamp types."""
    atoms = _atoms(goal, problem)
    types = [a[2] for a in atoms if a[0] == "objecttype" and len(a) == 3]
    rtypes = [a[2] for a in atoms if a[0] == "receptacletype" and len(a) == 3]

    def strip(t: str) -> str:
        return t[: -len("type")] if t.endswith("type") else t

    for task_type, form in GOAL_PDDL.items():
        for obj in dict.fromkeys(types):
            for recep in dict.fromkeys(rtypes or [None]):  # type: ignore[list-item]
                for toggle in dict.fromkeys(types if task_type == "look_at_obj_in_light" else [None]):
                    expected = form.format(
                        obj=strip(obj), recep=recep and strip(recep), toggle=toggle and strip(toggle)
                    )
                    if _atoms(_sexpr(expected, "goal library")[1], "goal library") == atoms:
                        return TaskSpec(
                            task_type, strip(obj), recep and strip(recep), None, toggle and strip(toggle)
                        )
    raise WorldError(f"{problem}: the goal is none of ALFWorld's six task goals: {_unparse(goal)[:200]}")


def _demangled_names(ids: list[str]) -> dict[str, str]:
    """ALFWorld's ``Demangler`` naming (``alfworld/agents/utils/misc.py``): the stem before the first ``_bar_``
    (plus "basin" when the id contains it), numbered over the sorted ids with the FIRST id of a stem getting the
    HIGHEST number. Every declared id counts, even of objects no command can reach."""
    stems: dict[str, str] = {}
    counts: dict[str, int] = {}
    for i in sorted(ids):
        if "_bar_" in i:
            stem = i.split("_bar_", 1)[0] + ("basin" if "basin" in i else "")
            stems[i] = stem
            counts[stem] = counts.get(stem, 0) + 1
    names = {}
    for i in sorted(ids):
        if i in stems:
            names[i] = f"{stems[i]} {counts[stems[i]]}"
            counts[stems[i]] -= 1
    return names


def _declared(objects: list, problem: str) -> dict[str, str]:
    """The ``(:objects a b - type ...)`` section as id -> PDDL type."""
    out: dict[str, str] = {}
    pending: list[str] = []
    items = iter(objects)
    for tok in items:
        if not isinstance(tok, str):
            raise WorldError(f"{problem}: malformed :objects entry {_unparse(tok)}")
        if tok == "-":
            typ = next(items, None)
            if not isinstance(typ, str):
                raise WorldError(f"{problem}: ':objects' ends with '-' and no type")
            for name in pending:
                out[name] = typ
            pending = []
        else:
            pending.append(tok)
    for name in pending:
        out[name] = "object"
    return out


def _room_kind(rtypes: set[str]) -> str:
    """The room kind of the ALFWorld floor plan whose receptacle types best match (Jaccard) ``rtypes``."""
    best, room = -1.0, "unknown"
    for scene in load_tables()["scenes"].values():
        types = {t for t in scene["types"] if t in CAN_CONTAIN}
        score = len(types & rtypes) / max(1, len(types | rtypes))
        if score > best:
            best, room = score, scene["room"]
    return room


def load_game_file(path: str | Path, *, alfworld_logic: bool = False) -> GameSpec:
    """Import an ALFWorld ``game.tw-pddl`` file as a native :class:`GameSpec` (issue 12).

    The file must carry alfworld 0.4.2's PDDL domain and text grammar (the ones the native engine implements;
    checked by fingerprint) unless ``alfworld_logic`` is set, which plays the file's problem under those instead —
    as ALFWorld does when it regenerates game files from ``initial_state.pddl`` (:func:`rewrite_with_alfworld_logic`
    writes that file for TextWorld). Names are ALFWorld's demangled ones; the goal must be one of the six task
    goals of its goal library; the room kind is that of the ALFWorld floor plan whose receptacle types match
    best. Receptacles may share a location (stacked drawers); objects in no receptacle (windows, chairs, floor
    lamps) are never observable in TextWorld and are left out. Every construct the native engine cannot reproduce
    raises :class:`WorldError` naming it: a sliceable object next to a receptacle but in none or away from its
    receptacle's location, an object in two receptacles, an agent holding something at the start,
    objects inside receptacle objects, an unknown predicate or goal form.
    """
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise WorldError(f"game file {where!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise WorldError(f"{where}: not a JSON game.tw-pddl file ({err})") from None
    if not isinstance(data, dict):
        raise WorldError(
            f"{where}: not a game.tw-pddl file (a JSON object with pddl_domain, grammar, pddl_problem)"
        )
    missing = [k for k in ("pddl_domain", "grammar", "pddl_problem") if not isinstance(data.get(k), str)]
    if missing:
        raise WorldError(f"{where}: game.tw-pddl file without {', '.join(missing)}")
    if not alfworld_logic:
        if _fingerprint(data["pddl_domain"]) != ALFWORLD_DOMAIN_SHA256:
            raise WorldError(
                f"{where}: its pddl_domain is not alfworld 0.4.2's alfred.pddl, the domain the native engine "
                "implements (use --alfworld-logic / alfworld_logic=True to play its problem under that domain)"
            )
        if _grammar_fingerprint(data["grammar"]) != ALFWORLD_GRAMMAR_SHA256:
            raise WorldError(
                f"{where}: its grammar is not alfworld 0.4.2's alfred.twl2 (e.g. the pre-2024 'put X in/on Y' "
                "grammar); use --alfworld-logic / alfworld_logic=True to play its problem under alfred.twl2"
            )
    m = _TASK_RULE.search(data["grammar"])
    if m is None:
        raise WorldError(f'{where}: its grammar has no "Your task is to: ..." task sentence')
    text = m.group(1)
    problem = f"{where}: pddl_problem"
    tree = _sexpr(data["pddl_problem"], problem)
    sections = {s[0]: s for s in tree[1:] if isinstance(s, list) and s and isinstance(s[0], str)}
    if tree[:1] != ["define"] or not {":objects", ":init", ":goal"} <= set(sections):
        raise WorldError(f"{problem}: expected (define (problem ..) (:objects ..) (:init ..) (:goal ..))")
    if sections.get(":domain", [None, "alfred"])[1] != "alfred":
        raise WorldError(f"{problem}: domain {sections[':domain'][1]!r} is not 'alfred'")
    declared = _declared(sections[":objects"][1:], problem)
    names = _demangled_names(list(declared))

    rtype: dict[str, str] = {}
    otype: dict[str, str] = {}
    r_at: dict[str, list[str]] = {}
    o_at: dict[str, list[str]] = {}
    inside: dict[str, list[str]] = {}
    props: dict[str, set[str]] = {}
    state: dict[str, set[str]] = {}
    opened: set[str] = set()
    openable: set[str] = set()
    agent_at: list[str] = []
    can: list[tuple[str, str]] = []
    for fact in sections[":init"][1:]:
        if not isinstance(fact, list) or not fact or not all(isinstance(x, str) for x in fact[1:]):
            if isinstance(fact, list) and fact[:1] == ["="]:
                continue
            raise WorldError(f"{problem}: unsupported :init fact {_unparse(fact)}")
        pred, args = fact[0], fact[1:]
        if pred in _IGNORED_FACTS:
            continue
        if pred in ("holds", "holdsany", "holdsanyreceptacleobject"):
            raise WorldError(
                f"{problem}: the agent holds something at the start ({_unparse(fact)}): not supported"
            )
        if pred == "inreceptacleobject":
            raise WorldError(
                f"{problem}: objects inside receptacle objects ({_unparse(fact)}) are not supported"
            )
        if pred not in _ARITY:
            raise WorldError(f"{problem}: unknown predicate {pred!r} in {_unparse(fact)}")
        if len(args) != _ARITY[pred]:
            raise WorldError(f"{problem}: {pred} takes {_ARITY[pred]} argument(s): {_unparse(fact)}")
        a = args[0]
        if pred == "receptacletype":
            rtype[a] = args[1]
        elif pred == "objecttype":
            otype[a] = args[1]
        elif pred == "receptacleatlocation":
            r_at.setdefault(a, []).append(args[1])
        elif pred == "objectatlocation":
            o_at.setdefault(a, []).append(args[1])
        elif pred == "inreceptacle":
            inside.setdefault(a, []).append(args[1])
        elif pred == "cancontain":
            can.append((args[0], args[1]))
        elif pred == "atlocation":
            agent_at.append(args[1])
        elif pred == "opened":
            opened.add(a)
        elif pred == "openable":
            openable.add(a)
        elif pred in _PROPERTY_OF_FACT:
            props.setdefault(a, set()).add(_PROPERTY_OF_FACT[pred])
        else:
            state.setdefault(a, set()).add(_STATE_OF_FACT[pred])

    def typename(t: str) -> str:
        return t[: -len("type")] if t.endswith("type") else t

    def native_name(i: str, typ: str) -> str:
        name = names.get(i)
        if name is None or name.rsplit(" ", 1)[0] != typ:
            raise WorldError(
                f"{problem}: id {i!r} of type {typ!r} does not demangle to '{typ} <n>' (got {name!r}); ALFWorld "
                f"ids are '<Type>_bar_...' ('<Sink>_bar_..._bar_<SinkBasin>' for basins)"
            )
        return name

    receptacles: list[ReceptacleSpec] = []
    rname: dict[str, str] = {}
    loc_of: dict[str, str] = {}
    order = {i: k for k, i in enumerate(declared)}  # the game's own order: declaration order in :objects
    for r in sorted(rtype, key=lambda i: order.get(i, len(order))):
        if declared.get(r) != "receptacle":
            raise WorldError(f"{problem}: {r!r} has a receptacleType but is not declared '- receptacle'")
        locs = r_at.get(r, [])
        if len(locs) != 1:
            raise WorldError(
                f"{problem}: receptacle {r!r} must stand at exactly one location, has {len(locs)}"
            )
        loc_of[r] = locs[0]
        t = typename(rtype[r])
        rname[r] = native_name(r, t)
        receptacles.append(
            ReceptacleSpec(rname[r], t, r in openable, start_open=r in opened, location=locs[0], pddl_id=r)
        )
    for r in (set(r_at) | openable | opened) - set(rtype):
        raise WorldError(f"{problem}: receptacle {r!r} has no receptacleType fact")
    if len(agent_at) != 1:
        raise WorldError(f"{problem}: the agent must start at exactly one location, has {len(agent_at)}")
    start = min((rname[r] for r, loc in loc_of.items() if loc == agent_at[0]), default=None)
    objects: list[ObjectSpec] = []
    location_receptacle = {v: k for k, v in sorted(loc_of.items(), reverse=True)}
    for o in sorted(otype, key=lambda i: order.get(i, len(order))):
        t = typename(otype[o])
        containers = inside.get(o, [])
        locs = o_at.get(o, [])
        if not containers:
            # In no receptacle: TextWorld never lists, examines, takes or uses it (its "next to it" list is always
            # "nothing"), so it is left out — unless a knife could slice it where a receptacle stands.
            near = [loc for loc in locs if loc in location_receptacle]
            if near and "sliceable" in props.get(o, ()):
                raise WorldError(
                    f"{problem}: sliceable object {names.get(o, o)!r} stands next to receptacle "
                    f"{rname[location_receptacle[near[0]]]!r} but in none (TextWorld would let a knife slice it "
                    "there); not supported"
                )
            continue
        if len(containers) != 1 or containers[0] not in rname:
            raise WorldError(
                f"{problem}: object {o!r} must be in exactly one known receptacle, is in {containers}"
            )
        # objectAtLocation only matters to SliceObject (the "next to it" list is never shown): a sliceable object
        # must stand where its receptacle does, or a knife would slice it elsewhere in TextWorld.
        if locs != [loc_of[containers[0]]] and "sliceable" in props.get(o, ()):
            raise WorldError(
                f"{problem}: sliceable object {names.get(o, o)!r} is in {rname[containers[0]]!r} but its objectAtLocation is "
                f"{locs}, not that receptacle's location {loc_of[containers[0]]!r}"
            )
        objects.append(
            ObjectSpec(
                native_name(o, t),
                t,
                rname[containers[0]],
                frozenset(props.get(o, ())),
                frozenset(state.get(o, ())),
                o,
            )
        )
    for o in set(inside) - set(otype):
        raise WorldError(f"{problem}: object {o!r} is in a receptacle but has no objectType fact")
    task = _match_goal(sections[":goal"][1], problem)
    task = TaskSpec(task.task_type, task.obj_type, task.recep_type, text, task.toggle_type)
    meta = data.get("scars") if isinstance(data.get("scars"), dict) else {}
    return GameSpec(
        seed=int(meta.get("seed", -1)),
        room=str(meta.get("room") or _room_kind({r.rtype for r in receptacles})),
        receptacles=tuple(receptacles),
        objects=tuple(objects),
        task=task,
        can_contain=tuple(sorted({(typename(r), typename(o)) for r, o in can})),
        start=start,
    )


def rewrite_with_alfworld_logic(src: str | Path, dst: str | Path) -> Path:
    """Write ``src``'s problem and task sentence with alfworld's own alfred.pddl and alfred.twl2 to ``dst`` (what
    :func:`load_game_file` plays with ``alfworld_logic=True``), so TextWorld can play the same game. Needs the
    ``alfworld`` package."""
    data = json.loads(Path(src).read_text())
    m = _TASK_RULE.search(str(data.get("grammar", "")))
    if m is None:
        raise WorldError(f"{src}: its grammar has no task sentence")
    out = dict(data)
    out["pddl_domain"] = _alfworld_data("alfred.pddl")
    out["grammar"] = _alfworld_data("alfred.twl2").replace("UNKNOWN GOAL", m.group(1))
    dst = Path(dst)
    if not dst.name.endswith(".tw-pddl"):
        raise WorldError(f"output path {str(dst)!r} must end in '.tw-pddl'")
    dst.write_text(json.dumps(out))
    return dst


# ---------------------------------------------------------------------------------------------- task text


# ALFWorld's goal sentences (goal_library templates, both variants) -> (task type, obj group, recep group).
_GOAL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), t)
    for p, t in (
        (r"^look at (?P<obj>\w+) under the (?P<lamp>\w+)$", "look_at_obj_in_light"),
        (r"^examine the (?P<obj>\w+) with the (?P<lamp>\w+)$", "look_at_obj_in_light"),
        (r"^put a clean (?P<obj>\w+) in (?P<recep>\w+)$", "pick_clean_then_place_in_recep"),
        (r"^clean some (?P<obj>\w+) and put it in (?P<recep>\w+)$", "pick_clean_then_place_in_recep"),
        (r"^put a hot (?P<obj>\w+) in (?P<recep>\w+)$", "pick_heat_then_place_in_recep"),
        (r"^heat some (?P<obj>\w+) and put it in (?P<recep>\w+)$", "pick_heat_then_place_in_recep"),
        (r"^put a cool (?P<obj>\w+) in (?P<recep>\w+)$", "pick_cool_then_place_in_recep"),
        (r"^cool some (?P<obj>\w+) and put it in (?P<recep>\w+)$", "pick_cool_then_place_in_recep"),
        (r"^put two (?P<obj>\w+) in (?P<recep>\w+)$", "pick_two_obj_and_place"),
        (r"^find two (?P<obj>\w+) and put them in (?P<recep>\w+)$", "pick_two_obj_and_place"),
        (r"^put a (?P<obj>\w+) in (?P<recep>\w+)$", "pick_and_place_simple"),
        (r"^put some (?P<obj>\w+) on (?P<recep>\w+)$", "pick_and_place_simple"),
    )
)


def parse_task_text(text: str) -> tuple[str, str, str | None]:
    """(task type, object type, receptacle type or None) of an ALFWorld templated goal sentence.

    Real ALFWorld games may carry a human annotation instead of a template; those give ("unknown", "none", None).
    """
    text = text.strip().rstrip(".").lower()
    for pattern, task_type in _GOAL_PATTERNS:
        m = pattern.match(text)
        if m:
            return task_type, m.group("obj"), m.groupdict().get("recep")
    return "unknown", NOWHERE, None


# ---------------------------------------------------------------------------------------------- playing


_VERB_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), v)
    for p, v in (
        (r"^go to (?P<recep>.+)$", "goto"),
        (r"^open (?P<recep>.+)$", "open"),
        (r"^close (?P<recep>.+)$", "close"),
        (r"^take (?P<obj>.+) from (?P<recep>.+)$", "take"),
        (r"^move (?P<obj>.+) to (?P<recep>.+)$", "move"),
        (r"^(?P<verb>heat|clean|cool) (?P<obj>.+) with (?P<recep>.+)$", ""),
        (r"^slice (?P<obj>.+) with (?P<tool>.+)$", "slice"),
        (r"^use (?P<obj>.+)$", "use"),
        (r"^examine (?P<thing>.+)$", "examine"),
        (r"^(?P<verb>inventory|look|help)$", ""),
    )
)


def _type_of(name: str) -> str:
    """ "cabinet 2" -> "cabinet" (ALFWorld's shown names are '<type> <number>')."""
    return name.rsplit(" ", 1)[0] if " " in name else name


@dataclass(frozen=True, slots=True)
class _Facts:
    """The part of TextWorld's PDDL state that the structured context reads, by shown name."""

    location: str | None
    held: str | None
    opened: frozenset[str]
    clean: frozenset[str]
    hot: frozenset[str]
    cool: frozenset[str]
    contents: Mapping[str, tuple[str, ...]]


class TextWorldGame:
    """One ``.tw-pddl`` game played by TextWorld's PDDL engine with ALFWorld's ``AlfredDemangler`` names.

    Same surface as the native :class:`~envs.household.world.World`: ``reset() -> str``,
    ``step(command) -> (observation, won)``, ``admissible_commands()``, ``action_dict(command)``,
    ``admissible_actions()``, ``context()``, ``won()``. The structured views are rebuilt from the engine's PDDL
    facts; the native-only ``is_wet`` flag (cleaning wets, putting down dries) is tracked from the commands.
    TextWorld additionally always admits ``help``; :attr:`include_help` = False drops it so the admissible sets
    are the native ones.
    """

    def __init__(self, path: str | Path, *, include_help: bool = True) -> None:
        textworld, env_infos, demangler = _require_textworld()
        path = Path(path)
        if not path.name.endswith(".tw-pddl"):
            raise WorldError(f"game file {str(path)!r} must end in '.tw-pddl' (TextWorld's PDDL engine)")
        if not path.is_file():
            raise WorldError(f"game file {str(path)!r} does not exist")
        self.path = path
        self.include_help = include_help
        data = json.loads(path.read_text())
        meta = data.get("scars", {})
        self.spec: GameSpec | None = spec_from_dict(meta) if "receptacles" in meta else None
        m = re.search(r"Your task is to: (.*?)\.?\"", data["grammar"])
        self.goal_text = m.group(1) if m else ""
        parsed = parse_task_text(self.goal_text)
        try:  # the task and room as the native importer reads them (the same context in both engines)
            imported: GameSpec | None = load_game_file(path, alfworld_logic=True)
        except WorldError:
            imported = None
        task = imported.task if imported else None
        self.task_type: str = task.task_type if task else meta.get("task_type", parsed[0])
        self.target_obj_type: str = task.obj_type if task else meta.get("obj_type", parsed[1])
        recep = task.recep_type if task else meta.get("recep_type", parsed[2])
        self.target_recep_type: str = recep or NOWHERE
        self.room: str = meta.get("room") or (imported.room if imported else "unknown")
        infos = env_infos(admissible_commands=True, won=True, facts=True, feedback=True)
        self._env = textworld.start(str(path), request_infos=infos, wrappers=[demangler()])
        self._state: Any = None
        self._facts: _Facts | None = None
        self._wet: set[str] = set()
        self._went_to: str | None = None
        self.steps = 0

    # ------------------------------------------------------------------ engine state

    def _read_facts(self) -> _Facts:
        at_all: dict[str, str] = {}  # receptacle -> location
        agent_loc = None
        held = None
        opened, clean, hot, cool = set(), set(), set(), set()
        contents: dict[str, list[str]] = {}
        for fact in self._state["facts"]:
            n = fact.name
            args = [v.name.strip() for v in fact.arguments]
            if n == "receptacleatlocation":
                at_all[args[0]] = args[1]
            elif n == "atlocation":
                agent_loc = args[1]
            elif n == "holds":
                held = args[1]
            elif n == "opened":
                opened.add(args[0])
            elif n == "isclean":
                clean.add(args[0])
            elif n == "ishot":
                hot.add(args[0])
            elif n == "iscool":
                cool.add(args[0])
            elif n == "inreceptacle":
                contents.setdefault(args[1], []).append(args[0])
        here_all = [r for r, loc in at_all.items() if loc == agent_loc] if agent_loc is not None else []
        here = min(here_all) if here_all else None  # at the start: the first by name (as the importer says)
        if here is not None and self._went_to is not None and at_all.get(self._went_to) == agent_loc:
            here = self._went_to  # several receptacles at this location: the one the agent went to
        return _Facts(
            location=here,
            held=held,
            opened=frozenset(opened),
            clean=frozenset(clean),
            hot=frozenset(hot),
            cool=frozenset(cool),
            contents={k: tuple(sorted(v)) for k, v in contents.items()},
        )

    def _update(self, state: Any) -> None:
        self._state = state
        self._facts = self._read_facts()

    def reset(self) -> str:
        """Restart the game (TextWorld rebuilds its PDDL state: ~0.3 s); returns the intro text."""
        self._went_to = None
        self._update(self._env.reset())
        self._wet = set()
        self.steps = 0
        return self._state.feedback

    def step(self, command: str) -> tuple[str, bool]:
        """Play one command; returns (observation, won). Inadmissible commands answer "Nothing happens."."""
        action = self.action_dict(command)
        state, _, _ = self._env.step(command)
        self.steps += 1
        if action is not None:
            verb, args = action["name"], action["args"]
            if verb == "goto":
                self._went_to = str(args["recep"])
            elif verb == "clean":
                self._wet.add(str(args["obj"]))
            elif verb == "move":
                self._wet.discard(str(args["obj"]))
        self._update(state)
        return state.feedback, bool(state["won"])

    def won(self) -> bool:
        return bool(self._state["won"])

    def admissible_commands(self) -> list[str]:
        cmds = list(self._state["admissible_commands"])
        if not self.include_help:
            cmds = [c for c in cmds if c != "help"]
        return cmds

    def is_admissible(self, command: str) -> bool:
        return command in self.admissible_commands()

    # ------------------------------------------------------------------ structured views

    def _object_args(self, obj: str) -> dict[str, Value]:
        f = self._facts
        assert f is not None
        return {
            "obj": obj,
            "obj_type": _type_of(obj),
            "is_clean": obj in f.clean,
            "is_hot": obj in f.hot,
            "is_cool": obj in f.cool,
            "is_wet": obj in self._wet,
        }

    def action_dict(self, command: str) -> dict | None:
        """The structured form of an admissible command (the native world's layout: verb name, args with obj,
        obj_type, object state flags, recep, recep_type), or None if it is not admissible now."""
        if command not in self.admissible_commands():
            return None
        f = self._facts
        assert f is not None
        for pattern, verb in _VERB_PATTERNS:
            m = pattern.match(command)
            if m is None:
                continue
            groups = m.groupdict()
            verb = verb or groups["verb"]
            args: dict[str, Value] = {}
            if verb == "examine":
                thing = groups["thing"]
                if thing == f.held:
                    args = self._object_args(thing)
                else:
                    args = {"recep": thing, "recep_type": _type_of(thing)}
            elif verb == "slice":
                args = self._object_args(groups["obj"])
                args["tool"] = groups["tool"]
                holder = self._holder(groups["obj"])
                if holder is not None:
                    args["recep"], args["recep_type"] = holder, _type_of(holder)
            else:
                if groups.get("obj"):
                    args = self._object_args(groups["obj"])
                recep = groups.get("recep") or (self._holder(groups["obj"]) if verb == "use" else None)
                if recep:
                    args["recep"], args["recep_type"] = recep, _type_of(recep)
            return {"kind": "env", "name": verb, "args": args, "text": command}
        raise WorldError(f"TextWorld admitted a command of unknown form: {command!r}")

    def _holder(self, obj: str) -> str | None:
        """The receptacle holding ``obj`` (for use/slice, whose commands name no receptacle)."""
        assert self._facts is not None
        return next((r for r, objs in self._facts.contents.items() if obj in objs), self._facts.location)

    def admissible_actions(self) -> list[dict]:
        return [self.action_dict(c) for c in self.admissible_commands()]  # type: ignore[misc]

    def context(self) -> dict[str, Value]:
        """The flat context q of the native world (same keys), rebuilt from TextWorld's PDDL facts."""
        f = self._facts
        assert f is not None
        loc, held = f.location, f.held
        return {
            "room": self.room,
            "location": loc if loc is not None else NOWHERE,
            "location_type": _type_of(loc) if loc is not None else NOWHERE,
            "location_open": bool(loc is not None and loc in f.opened),
            "held_object": held if held is not None else NOWHERE,
            "held_type": _type_of(held) if held is not None else NOWHERE,
            "held_is_clean": held is not None and held in f.clean,
            "held_is_hot": held is not None and held in f.hot,
            "held_is_cool": held is not None and held in f.cool,
            "held_is_wet": held is not None and held in self._wet,
            "task_type": self.task_type,
            "target_obj_type": self.target_obj_type,
            "target_recep_type": self.target_recep_type,
            "step": self.steps,
        }

    def contents(self, recep: str) -> tuple[str, ...]:
        """The objects in a receptacle (sorted by name), read from the engine's facts."""
        assert self._facts is not None
        return self._facts.contents.get(recep, ())


# ---------------------------------------------------------------------------------------------- comparison

_LISTING = re.compile(r"(you see )([^.]+)(\.)")


def _sorted_listing(m: re.Match[str]) -> str:
    items = m.group(2)
    if items == "nothing":
        return m.group(0)
    parts = [p.strip() for p in items.replace(", and ", ", ").split(", ")]
    return m.group(1) + ", ".join(sorted(parts)) + m.group(3)


def canonical_observation(text: str) -> str:
    """The observation with every "you see a x, a y, and a z." listing sorted, so that two engines that list the
    same items in different orders give equal strings (TextWorld lists by internal id order)."""
    return _LISTING.sub(_sorted_listing, text)


# ---------------------------------------------------------------------------------------------- Gymnasium


class TextWorldHousehold(gym.Env[str, str]):
    """A ``.tw-pddl`` game (exported or real ALFWorld) behind the interface of ``scars/Household-v0``.

    Same spaces, same ``info`` keys (admissible_commands, admissible_actions, context, violations, active_rules,
    won, goal), same rewards and episode end, and the same :class:`~envs.household.rules.Verifier` over the same
    :class:`~envs.household.env.HouseholdConfig` schedule, so a dynamic-rule run can use the real engine. It is
    about a thousand times slower than the native engine (``benchmarks/world.py``); use it to check, not to sweep.
    ``config.task_type`` and ``config.game_seed`` are ignored: the game is the file.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self, game_file: str | Path, config: HouseholdConfig | None = None, *, include_help: bool = True
    ):
        self.config = config or HouseholdConfig()
        self.game = TextWorldGame(game_file, include_help=include_help)
        self.observation_space = spaces.Text(MAX_OBSERVATION_LENGTH, charset=OBSERVATION_CHARSET)
        self.action_space = spaces.Text(MAX_COMMAND_LENGTH, min_length=0, charset=COMMAND_CHARSET)
        self.verifier = Verifier(self.config.schedule)
        self.episode = -1
        self._last_obs = ""
        self._started = False

    def context(self) -> dict[str, Value]:
        """The context q for the next action: the game's, plus episode, versions and game seed (-1 when the file
        is not an exported native game)."""
        q = self.game.context()
        wv = self.config.world_version
        q["episode"] = self.episode
        q["world_version"] = wv
        q["rule_set_version"] = self.config.schedule.version(self.game.steps, self.episode, wv)
        q["game_seed"] = self.game.spec.seed if self.game.spec is not None else -1
        return q

    def _info(self, violations: list, won: bool) -> dict[str, Any]:
        active = self.config.schedule.active(self.game.steps, self.episode, self.config.world_version)
        return {
            "admissible_commands": self.game.admissible_commands(),
            "admissible_actions": self.game.admissible_actions(),
            "context": self.context(),
            "violations": [v.to_dict() for v in violations],
            "active_rules": [r.id for r in active],
            "won": won,
            "goal": self.game.goal_text,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        # As in the native env: a seeded reset starts a new run at episode 0.
        self.episode = 0 if seed is not None else self.episode + 1
        self._last_obs = self.game.reset()
        self._started = True
        return self._last_obs, self._info([], self.game.won())

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if not self._started:
            raise WorldError("step() called before reset()")
        if not isinstance(action, str):
            raise WorldError(f"action must be a command string, got {type(action).__name__}: {action!r}")
        structured = self.game.action_dict(action)
        violations = self.verifier.check(self.context(), structured) if structured is not None else []
        obs, won = self.game.step(action)
        reward = (self.config.win_reward if won else 0.0) + self.config.violation_reward * len(violations)
        truncated = (not won) and self.game.steps >= self.config.max_steps
        self._last_obs = obs
        return obs, float(reward), won, truncated, self._info(violations, won)

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None


__all__ = [
    "TextWorldHousehold",
    "canonical_observation",
    "spec_from_dict",
    "spec_to_dict",
    "INSTALL_HINT",
    "TASK_TYPES",
    "TextWorldGame",
    "TextWorldMissing",
    "export_game",
    "game_data",
    "parse_task_text",
    "pddl_problem",
    "textworld_available",
]
