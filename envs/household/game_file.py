"""ALFWorld's game-file format: write a native game as ``game.tw-pddl``, read one (of any ALFWorld release) back.

ALFWorld plays ``game.tw-pddl`` files through TextWorld's PDDL engine: a JSON file with the PDDL domain
(``alfworld/data/alfred.pddl``), the text grammar (``alfworld/data/alfred.twl2`` with the literal "UNKNOWN GOAL"
replaced by the task sentence), a PDDL problem and a ``solvable`` flag. This module

- :func:`export_game` writes the ``game.tw-pddl`` of a native :class:`~envs.household.spec.GameSpec`, naming its
  PDDL ids so that ALFWorld's ``AlfredDemangler`` shows exactly the native names ("cabinet 2", "sinkbasin 1");
- :func:`load_game_file` imports an ALFWorld ``game.tw-pddl`` — one the exporter wrote, or ALFWorld's own of any
  release — as a native :class:`~envs.household.spec.GameSpec` (``World.from_tw_pddl``): the logic generation
  (:data:`~envs.household.spec.LOGICS`) is read from the file's domain and grammar, and the file's facts are
  kept as they are (objects in several receptacles, in none, inside receptacle objects, away from their
  receptacle's location). A file it cannot reproduce raises one :class:`~synthesis.errors.WorldError` naming the
  construct.

Reading needs nothing beyond the standard library; writing needs the ``alfworld`` package (its domain and grammar
files); its absence raises :class:`TextWorldMissing` saying what to install.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scars.envs.household.alfworld_data import load_tables
from scars.envs.household.spec import (
    CAN_CONTAIN,
    LOGICS,
    NOWHERE,
    PROPERTIES,
    STATE_FLAGS,
    GameSpec,
    ObjectSpec,
    ReceptacleSpec,
    TaskSpec,
    pddl_ids,
)
from scars.synthesis.errors import ScarsError, WorldError

GOAL_PDDL: Mapping[str, str] = load_tables()["goal_pddl"]
"""ALFWorld's PDDL goal per task type, with ``{obj}``, ``{recep}``, ``{toggle}`` placeholders."""
SLICED_GOAL_PDDL: Mapping[str, str] = load_tables()["goal_pddl_sliced"]
"""The PDDL goal of each task's sliced variant (``gdict[task + '_slice']``): the object must be sliced too."""

INSTALL_HINT = (
    "the TextWorld reference engine needs the optional extra: "
    "pip install 'scars-testbed[textworld]' && pip install --no-deps alfworld"
)


class TextWorldMissing(ScarsError, ImportError):
    """``textworld[pddl]`` or ``alfworld`` is not installed; the message says how to install them."""


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
    goals = SLICED_GOAL_PDDL if task.sliced else GOAL_PDDL
    return goals[task.task_type].format(obj=task.obj_type, recep=task.recep_type, toggle=lamp_type)


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
    stands ("You are in the middle of a room"); every object gets its type, its receptacles (``also_in`` too) and
    their locations, the receptacle objects it is inside, its property facts (including ``isReceptacleObject``)
    and initial state; ``canContain`` lists the game's (receptacle type,
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
        init.append(f"(objectType {oid} {_type_const(o.otype)})")
        init += [f"(inReceptacle {oid} {rids[r]})" for r in o.receptacles]
        init += [f"(objectAtLocation {oid} {lid})" for lid in dict.fromkeys(loc[r] for r in o.receptacles)]
        init += [f"(inReceptacleObject {oid} {oids[outer]})" for outer in o.in_objects]
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
        "sliced": task.sliced,
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
                bool(data.get("sliced", False)),
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


def _without_costs(e: Any) -> Any:
    """``e`` without its ``(increase ...)``/``(decrease ...)`` terms: action costs steer a planner, never a play."""
    if not isinstance(e, list):
        return e
    return [
        _without_costs(x) for x in e if not (isinstance(x, list) and x[:1] in (["increase"], ["decrease"]))
    ]


def domain_sections(text: str, what: str = "pddl_domain") -> dict[str, str]:
    """What of a PDDL domain TextWorld's play reads, by section: ``":types"``, ``":constants"``,
    ``":predicates"`` and ``"action <name>"`` -> the sha256 (16 hex digits) of the section as parsed (comments,
    whitespace and case dropped, action costs removed). ``:requirements`` and ``:functions`` only serve the
    planner's cost bookkeeping and are left out. Raises :class:`WorldError` naming ``what`` when the text is no
    ``(define (domain ...) ...)``."""
    tree = _sexpr(text, what)
    if tree[:1] != ["define"]:
        raise WorldError(f"{what}: expected (define (domain ...) ...)")
    out: dict[str, str] = {}
    for section in tree[1:]:
        if not isinstance(section, list) or not section or not isinstance(section[0], str):
            raise WorldError(f"{what}: malformed section {_unparse(section)[:80]}")
        head = section[0]
        if head in ("domain", ":requirements", ":functions"):
            continue
        if head == ":action" and len(section) < 2:
            raise WorldError(f"{what}: an :action without a name")
        key = f"action {section[1]}" if head == ":action" else head
        out[key] = hashlib.sha256(_unparse(_without_costs(section)).encode()).hexdigest()[:16]
    return out


# The domain sections (domain_sections) of each ALFWorld generation the native engine implements: alfworld 0.4.2's
# data/alfred.pddl, and the domain of every json_2.1.1 game file ALFWorld's authors released (written before 0.4).
# They differ in two actions: CleanObject (the older also takes a SinkType) and help (0.4 only). A test checks the
# 0.4 table against the installed alfworld; the lockstep test imports ALFWorld's own files with the older one.
_SHARED_DOMAIN_SECTIONS = {
    ":types": "475498af513a7f28",
    ":predicates": "0ba6015ef8e9ab46",
    "action look": "af35305d0073105f",
    "action inventory": "707bf5a9f559863f",
    "action examinereceptacle": "b3bf49299bab5205",
    "action examineobject": "30dc940e6061553d",
    "action gotolocation": "0c8dd452e365e3bb",
    "action openobject": "2bc062eb1d9df5d9",
    "action closeobject": "0e47fbc0167256d8",
    "action pickupobject": "1444ea392f6a9369",
    "action putobject": "1fbcaa5fd57fdc8d",
    "action heatobject": "b43c3ff7246f4fc0",
    "action coolobject": "4e3bc39326e9c17f",
    "action toggleobject": "56004d7d864e9947",
    "action sliceobject": "649dd5f1804374a7",
}
DOMAIN_SECTIONS: Mapping[str, Mapping[str, str]] = {
    "0.4": {
        **_SHARED_DOMAIN_SECTIONS,
        "action cleanobject": "16fcb8610d262a98",
        "action help": "805c8dba41981b5e",
    },
    "pre-0.4": {**_SHARED_DOMAIN_SECTIONS, "action cleanobject": "1c0efb5a482b9a40"},
}
"""Per ALFWorld logic generation (a key of ``LOGICS``), what of its PDDL domain TextWorld's play reads."""

# sha256 of each generation's alfred.twl2 after _normalise_logic (comments dropped, whitespace collapsed,
# lower-cased; the task sentence put back to "UNKNOWN GOAL"); a test checks 0.4's against the installed alfworld.
GRAMMAR_SHA256: Mapping[str, str] = {
    "0.4": "6a29acc53b9fdfa5f5f133d8387732904275a35d414d238a4ba37dcfb13948b6",
    "pre-0.4": "c67c6831b1b936f93543bc9e0116fc1b1475ec1825f3098556df8112b505ba07",
}
"""Per ALFWorld logic generation, the fingerprint of its text grammar (every rule is a text TextWorld says)."""

_TASK_RULE = re.compile(r'"rhs": "Your task is to: (.*?)\.?"')
_IGNORED_FACTS = frozenset(
    {"=", "ison", "moveable", "checked", "wasinreceptacle", "examined", "full", "isreceptacleobjectfull"}
)  # facts no action or text of either logic generation reads
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
    **{p: 2 for p in ("inreceptacle", "inreceptacleobject", "cancontain", "atlocation")},
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
    """Which of ALFWorld's six task goals (``GOAL_PDDL``), or their sliced variants (``SLICED_GOAL_PDDL``),
    ``goal`` is, with its object/receptacle/lamp types."""
    atoms = _atoms(goal, problem)
    types = [a[2] for a in atoms if a[0] == "objecttype" and len(a) == 3]
    rtypes = [a[2] for a in atoms if a[0] == "receptacletype" and len(a) == 3]

    def strip(t: str) -> str:
        return t[: -len("type")] if t.endswith("type") else t

    forms = [(t, f, False) for t, f in GOAL_PDDL.items()] + [
        (t, f, True) for t, f in SLICED_GOAL_PDDL.items()
    ]
    for task_type, form, sliced in forms:
        for obj in dict.fromkeys(types):
            for recep in dict.fromkeys(rtypes or [None]):  # type: ignore[list-item]
                for toggle in dict.fromkeys(types if task_type == "look_at_obj_in_light" else [None]):
                    expected = form.format(
                        obj=strip(obj), recep=recep and strip(recep), toggle=toggle and strip(toggle)
                    )
                    if _atoms(_sexpr(expected, "goal library")[1], "goal library") == atoms:
                        return TaskSpec(
                            task_type,
                            strip(obj),
                            recep and strip(recep),
                            None,
                            toggle and strip(toggle),
                            sliced,
                        )
    raise WorldError(f"{problem}: the goal is none of ALFWorld's six task goals: {_unparse(goal)[:200]}")


def _demangled_names(ids: list[str]) -> dict[str, str]:
    """ALFWorld's ``Demangler`` naming (``alfworld/agents/utils/misc.py``): the stem before the first ``_bar_``
    (plus "basin" when the id contains it), numbered over the sorted ids with the FIRST id of a stem getting the
    HIGHEST number. The ids counted are TextWorld's entities: every id in some fact of the problem, even of objects
    no command can reach (locations too: "loc 12")."""
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


def _logic_of(data: Mapping[str, Any], where: str) -> str:
    """The ALFWorld logic generation (a key of ``LOGICS``) whose domain and grammar the file carries: the domain
    as TextWorld's play reads it (:func:`domain_sections`: comments, layout and action costs do not count), the
    grammar text exactly. A domain of no known generation raises one :class:`WorldError` naming the sections in
    which it differs from the closest one."""
    sections = domain_sections(data["pddl_domain"], f"{where}: pddl_domain")
    by_domain = [name for name, known in DOMAIN_SECTIONS.items() if known == sections]
    if not by_domain:

        def differing(known: Mapping[str, str]) -> list[str]:
            return sorted(k for k in known.keys() | sections.keys() if known.get(k) != sections.get(k))

        closest = min(DOMAIN_SECTIONS, key=lambda name: len(differing(DOMAIN_SECTIONS[name])))
        differ = differing(DOMAIN_SECTIONS[closest])
        shown = ", ".join(differ[:6]) + (f" and {len(differ) - 6} more" if len(differ) > 6 else "")
        raise WorldError(
            f"{where}: its pddl_domain is none of the ALFWorld domains the native engine implements "
            f"({', '.join(DOMAIN_SECTIONS)}): it differs from ALFWorld {closest}'s in {shown}; "
            "alfworld_logic=True (--alfworld-logic) plays its problem under alfworld 0.4's"
        )
    logic = by_domain[0]
    if GRAMMAR_SHA256[logic] != _grammar_fingerprint(data["grammar"]):
        raise WorldError(
            f"{where}: its grammar is not the alfred.twl2 of its domain's ALFWorld generation ({logic}); "
            "alfworld_logic=True (--alfworld-logic) plays its problem under alfworld 0.4's"
        )
    return logic


def find_game_files(root: str | Path) -> list[Path]:
    """The ``*.tw-pddl`` files of a run, sorted: ``root`` itself when it is a file, else every one under it (the
    layout of ALFWorld's data: ``$ALFWORLD_DATA/json_2.1.1/<split>/<task>/<trial>/game.tw-pddl``)."""
    root = Path(root)
    return sorted(root.rglob("*.tw-pddl")) if root.is_dir() else [root]


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (provenance: which game file a result was played on)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_game_file(path: str | Path, *, alfworld_logic: bool = False) -> GameSpec:
    """Import an ALFWorld ``game.tw-pddl`` file as a native :class:`GameSpec` (issues 12, 27).

    The logic generation is read from the file: its PDDL domain and text grammar must be one of those the native
    engine implements (:data:`~envs.household.spec.LOGICS`, checked by fingerprint: alfworld 0.4's, and the older
    one ALFWorld's json_2.1.1 files were written with). ``alfworld_logic`` overrides it: the file's problem is
    played under alfworld 0.4's domain and grammar, as ALFWorld does when it regenerates game files
    (:func:`rewrite_with_alfworld_logic` writes that file for TextWorld). Names are those ALFWorld's
    ``AlfredDemangler`` shows (numbered over the ids that occur in the problem's facts); the goal must be one of
    the six task goals of its goal library; the room kind is that of the ALFWorld floor plan whose receptacle
    types match best. The facts are kept as the file states them: receptacles sharing a location, objects in
    several receptacles, in none (windows, chairs), inside receptacle objects, or at locations other than their
    receptacle's. What the engine cannot reproduce raises :class:`WorldError` naming it: an agent holding
    something at the start, a receptacle at no or several locations, an unknown predicate or goal form.
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
    logic = "0.4" if alfworld_logic else _logic_of(data, where)
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

    rtype: dict[str, str] = {}
    otype: dict[str, str] = {}
    r_at: dict[str, list[str]] = {}
    o_at: dict[str, list[str]] = {}
    inside: dict[str, list[str]] = {}
    in_object: dict[str, list[str]] = {}
    props: dict[str, set[str]] = {}
    state: dict[str, set[str]] = {}
    opened: set[str] = set()
    openable: set[str] = set()
    agent_at: list[str] = []
    can: list[tuple[str, str]] = []
    in_facts: set[str] = set()  # the ids TextWorld's entity table holds: those in some :init fact
    stated: set[tuple[str, ...]] = set()  # a PDDL state is a set of facts: one stated twice is one fact
    for fact in sections[":init"][1:]:
        if not isinstance(fact, list) or not fact or not all(isinstance(x, str) for x in fact):
            if isinstance(fact, list) and fact[:1] == ["="]:
                continue
            raise WorldError(f"{problem}: unsupported :init fact {_unparse(fact)}")
        pred, args = fact[0], fact[1:]
        if pred == "=" or tuple(fact) in stated:
            continue
        stated.add(tuple(fact))
        in_facts.update(args)
        if pred in _IGNORED_FACTS:
            continue
        if pred in ("holds", "holdsany", "holdsanyreceptacleobject"):
            raise WorldError(
                f"{problem}: the agent holds something at the start ({_unparse(fact)}): not supported"
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
        elif pred == "inreceptacleobject":
            in_object.setdefault(a, []).append(args[1])
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
    names = _demangled_names(sorted(in_facts))

    def typename(t: str) -> str:
        return t[: -len("type")] if t.endswith("type") else t

    def shown_name(i: str) -> str:
        name = names.get(i)
        if name is None:
            raise WorldError(
                f"{problem}: id {i!r} has no '_bar_' part, so ALFWorld's Demangler gives it no name "
                "(ALFWorld ids are '<Type>_bar_...')"
            )
        return name

    receptacles: list[ReceptacleSpec] = []
    rname: dict[str, str] = {}
    order = {i: k for k, i in enumerate(declared)}  # the game's own order: declaration order in :objects
    for r in sorted(rtype, key=lambda i: order.get(i, len(order))):
        if declared.get(r) != "receptacle":
            raise WorldError(f"{problem}: {r!r} has a receptacleType but is not declared '- receptacle'")
        locs = r_at.get(r, [])
        if len(locs) != 1:
            raise WorldError(
                f"{problem}: receptacle {r!r} must stand at exactly one location, has {len(locs)}"
            )
        rname[r] = shown_name(r)
        receptacles.append(
            ReceptacleSpec(
                rname[r],
                typename(rtype[r]),
                r in openable,
                start_open=r in opened,
                location=locs[0],
                pddl_id=r,
                location_name=shown_name(locs[0]) if LOGICS[logic].arrive_at_location else None,
            )
        )
    for r in (set(r_at) | openable | opened) - set(rtype):
        raise WorldError(f"{problem}: receptacle {r!r} has no receptacleType fact")
    if len(agent_at) != 1:
        raise WorldError(f"{problem}: the agent must start at exactly one location, has {len(agent_at)}")
    start = min((rname[r] for r, locs in r_at.items() if locs[0] == agent_at[0]), default=None)
    objects: list[ObjectSpec] = []
    for o in sorted(otype, key=lambda i: order.get(i, len(order))):
        containers = inside.get(o, [])
        unknown = [c for c in containers if c not in rname]
        if unknown:
            raise WorldError(
                f"{problem}: object {o!r} is in {unknown[0]!r}, which is no receptacle of the problem"
            )
        outer = in_object.get(o, [])
        unknown = [c for c in outer if c not in otype]
        if unknown:
            raise WorldError(
                f"{problem}: object {o!r} is inside {unknown[0]!r}, which is no object of the problem"
            )
        objects.append(
            ObjectSpec(
                shown_name(o),
                typename(otype[o]),
                rname[containers[0]] if containers else None,
                frozenset(props.get(o, ())),
                frozenset(state.get(o, ())),
                o,
                also_in=tuple(rname[c] for c in containers[1:]),
                at=tuple(o_at.get(o, ())),
                in_objects=tuple(shown_name(c) for c in outer),
            )
        )
    for o in (set(inside) | set(in_object)) - set(otype):
        raise WorldError(f"{problem}: object {o!r} is in a receptacle but has no objectType fact")
    task = _match_goal(sections[":goal"][1], problem)
    task = dataclasses.replace(task, text=text)
    meta = data.get("scars") if isinstance(data.get("scars"), dict) else {}
    return GameSpec(
        seed=int(meta.get("seed", -1)),
        room=str(meta.get("room") or _room_kind({r.rtype for r in receptacles})),
        receptacles=tuple(receptacles),
        objects=tuple(objects),
        task=task,
        can_contain=tuple(sorted({(typename(r), typename(o)) for r, o in can})),
        start=start,
        logic=logic,
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
