"""The native tier-1 household world: ALFWorld's semantics without the TextWorld engine (SPEC §7 tier 1, §9).

The state, the transitions and the texts follow ALFWorld's PDDL domain (``alfred.pddl``) and text grammar
(``alfred.twl2``): the same receptacle and object type names, the same command grammar (``go to``, ``open``,
``close``, ``take X from Y``, ``move X to Y``, ``examine``, ``use``, ``heat/clean/cool X with Y``, ``slice X with
K``, ``inventory``, ``look``, ``help``), the same feedback sentences and "Nothing happens." for anything
inadmissible. Its data — which receptacle type holds which object type (``canContain``), the per-object property
and receptacle-object flags, the type vocabulary and the task sentences — are ALFWorld's own tables
(``alfworld_tables.json``, see :mod:`envs.household.alfworld_data`); a game may carry its own facts instead (an
imported ALFWorld file). Receptacle contents are listed in PDDL id order, as TextWorld lists them.

Beyond ALFWorld the world tracks one extra, text-invisible state flag, ``is_wet``: cleaning an object makes it wet,
and it dries once it has been put down on (or in) any receptacle. It exists so that the paper's rule "no wet
dishware straight into the cabinet" (§6.1) has a meaning; it never changes an observation, an admissible command
or a goal, so the world stays observationally equal to ALFWorld's engine.

A :class:`GameSpec` is the frozen description of a game (what the generator draws, what the TextWorld exporter
writes and what the importer reads); a :class:`World` is one mutable play-through of it. Admissible commands are recomputed only after a state
change and cached, so a random admissible walk runs tens of thousands of steps per second.
"""

from __future__ import annotations

import re
from bisect import bisect_left, insort
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from scars.envs.household.alfworld_data import TASKS, load_tables
from scars.synthesis.dsl.ast import Value
from scars.synthesis.errors import WorldError

# ---------------------------------------------------------------------------------------------- vocabulary

TASK_TYPES: tuple[str, ...] = TASKS
"""ALFWorld's six task types (SPEC §9), in ALFWorld's order (the data module's list)."""

ROOM_KINDS: tuple[str, ...] = ("kitchen", "livingroom", "bedroom", "bathroom")

_TABLES = load_tables()  # ALFWorld's own tables (envs/household/alfworld_tables.json names each source)

RECEPTACLE_OBJECT_TYPES: frozenset[str] = frozenset(_TABLES["receptacle_objects"])
"""Object types ALFWorld marks ``(isReceptacleObject o)`` (``MOVABLE_RECEPTACLES``): bowl, box, cup, mug, pan,
plate, pot. TextWorld examines them as "This is a normal cup 1. In it, you see nothing."."""

OPENABLE_TYPES: frozenset[str] = frozenset(_TABLES["openable"])
"""Receptacle types with a door or lid (``alfworld.gen.constants.OPENABLE_CLASS_LIST``)."""

CLEANING_TYPES: frozenset[str] = frozenset({"sinkbasin"})  # alfred.pddl CleanObject: SinkBasinType only
HEATING_TYPES: frozenset[str] = frozenset({"microwave"})  # alfred.pddl HeatObject: MicrowaveType only
COOLING_TYPES: frozenset[str] = frozenset({"fridge"})  # alfred.pddl CoolObject: FridgeType only
KNIFE_TYPES: frozenset[str] = frozenset(
    {"knife", "butterknife"}
)  # alfred.pddl SliceObject: the cutting tools

# Object property tables of ``alfworld.gen.constants.VAL_ACTION_OBJECTS`` (they include the "...sliced" types that
# only AI2-THOR's slicing creates; no game of this world has objects of those types).
CLEANABLE: frozenset[str] = frozenset(_TABLES["cleanable"])
HEATABLE: frozenset[str] = frozenset(_TABLES["heatable"])
COOLABLE: frozenset[str] = frozenset(_TABLES["coolable"])
TOGGLEABLE: frozenset[str] = frozenset(_TABLES["toggleable"])
SLICEABLE: frozenset[str] = frozenset(_TABLES["sliceable"])

CAN_CONTAIN: Mapping[str, frozenset[str]] = MappingProxyType(
    {r: frozenset(objs) for r, objs in _TABLES["can_contain"].items() if r not in RECEPTACLE_OBJECT_TYPES}
)
"""Which object types each (static) receptacle type can hold: ALFWorld's receptacle–object table
(``VAL_RECEPTACLE_OBJECTS``), from which its generator writes the ``canContain`` facts of every problem. A game
may carry its own facts (:attr:`GameSpec.can_contain`, e.g. an imported ALFWorld file); this is the default."""

RECEPTACLE_TYPES: tuple[str, ...] = tuple(sorted(CAN_CONTAIN))

PICKUPABLE: frozenset[str] = frozenset(
    o for objs in _TABLES["can_contain"].values() for o in objs if not o.endswith("sliced")
)
"""Object types that can be picked up: every type some receptacle can hold (AI2-THOR marks exactly these
pickupable; lamps, televisions, windows and other fixtures are not)."""

OBJECT_TYPES: tuple[str, ...] = tuple(sorted(PICKUPABLE | TOGGLEABLE))
"""The object vocabulary of generated games: ALFWorld's pickupable types and its lamps."""

_FOOD = frozenset({"apple", "bread", "egg", "lettuce", "potato", "tomato"})
_CUTLERY = frozenset({"knife", "butterknife", "fork", "spoon", "spatula", "ladle"})

OBJECT_CLASSES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        # §6.1 "equivalent state generalisation": a scar learned on "cup in the sink" should cover "plate".
        "dishware": frozenset({"cup", "mug", "plate", "bowl", "pan"}),
        "cookware": frozenset({"pan", "pot", "kettle"}),
        "food": _FOOD,
        "cutlery": _CUTLERY,
        "sharp": frozenset({"knife", "butterknife"}),
        "fragile": frozenset({"cup", "mug", "plate", "bowl", "vase", "statue", "winebottle", "glassbottle"}),
        "electronics": frozenset({"alarmclock", "cellphone", "laptop", "remotecontrol", "cd", "watch"}),
        "toiletries": frozenset(
            {"soapbar", "soapbottle", "spraybottle", "toiletpaper", "towel", "handtowel"}
        ),
        "sports": frozenset({"baseballbat", "basketball", "tennisracket"}),
        "lamp": frozenset({"desklamp", "floorlamp"}),
    }
)
"""Equivalence classes of object types: the ``classes`` table of ``synthesis.dsl.semantics`` (``in_class``)."""

GOAL_TEMPLATES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {t: tuple(v) for t, v in _TABLES["goal_templates"].items()}
)
"""ALFWorld's task sentences per task type (``goal_library.gdict[task]['templates']``, every variant), without the
trailing period (the grammar adds it); ``{toggle}`` is the lamp type of look-in-light tasks."""

NOTHING_HAPPENS = "Nothing happens."
HELP_TEXT = (  # alfred.twl2 help.feedback as TextWorld returns it: leading newline stripped, trailing one kept
    "Available commands:\n"
    "  look:                             look around your current location\n"
    "  inventory:                        check your current inventory\n"
    "  go to (receptacle):               move to a receptacle\n"
    "  open (receptacle):                open a receptacle\n"
    "  close (receptacle):               close a receptacle\n"
    "  take (object) from (receptacle):  take an object from a receptacle\n"
    "  move (object) to (receptacle):  place an object in or on a receptacle\n"
    "  examine (something):              examine a receptacle or an object\n"
    "  use (object):                     use an object\n"
    "  heat (object) with (receptacle):  heat an object using a receptacle\n"
    "  clean (object) with (receptacle): clean an object using a receptacle\n"
    "  cool (object) with (receptacle):  cool an object using a receptacle\n"
    "  slice (object) with (object):     slice an object using a sharp object\n"
)
WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
NOWHERE = "none"  # the context value of location/held fields when there is none


def check_task_type(task_type: str) -> str:
    """Return ``task_type`` if it is one of ALFWorld's six, else raise :class:`WorldError` naming the allowed ones."""
    if task_type not in TASK_TYPES:
        raise WorldError(f"unknown task type {task_type!r}; allowed: {', '.join(TASK_TYPES)}")
    return task_type


# ---------------------------------------------------------------------------------------------- the spec

PROPERTIES: tuple[str, ...] = (
    "pickupable",
    "cleanable",
    "heatable",
    "coolable",
    "toggleable",
    "sliceable",
    "receptacle_object",
)
"""ALFWorld's per-object property facts (``receptacle_object`` is ``isReceptacleObject``), in the exporter's order."""

STATE_FLAGS: tuple[str, ...] = ("is_clean", "is_hot", "is_cool", "is_sliced", "is_toggled")
"""Initial state facts an object may start with (``isClean``, ``isHot``, ``isCool``, ``isSliced``, ``isToggled``)."""


def type_properties(otype: str) -> frozenset[str]:
    """The property facts ALFWorld's generator writes for an object of type ``otype`` (``VAL_ACTION_OBJECTS``,
    ``MOVABLE_RECEPTACLES``; pickupable as :data:`PICKUPABLE`). Sliceable is left out: this world's generated
    games have no slicing (an imported game may have it)."""
    props = {
        "pickupable": otype in PICKUPABLE,
        "cleanable": otype in CLEANABLE,
        "heatable": otype in HEATABLE,
        "coolable": otype in COOLABLE,
        "toggleable": otype in TOGGLEABLE,
        "receptacle_object": otype in RECEPTACLE_OBJECT_TYPES,
    }
    return frozenset(p for p, on in props.items() if on)


def pddl_ids(names_and_types: list[tuple[str, str]]) -> dict[str, str]:
    """Map native names ("cabinet 2") to PDDL ids that ALFWorld's ``AlfredDemangler`` shows as those same names.

    The Demangler shows the part of an id before the first ``_bar_`` (plus "basin" when the id contains "basin":
    a sink basin must be ``sink_bar_N_bar_sinkbasin``), sorts all ids as strings and gives the FIRST id of a name
    the HIGHEST number, so native "cabinet k" of n becomes ``cabinet_bar_{n-k+1:03d}`` (zero-padded so string order
    is numeric order). TextWorld lists a receptacle's contents in id order, which is why the world needs them too.
    """
    counts: dict[str, int] = {}
    for name, typ in names_and_types:
        m = _NAME.match(name)
        if m is None or m.group(1) != typ:
            raise WorldError(f"entity name {name!r} is not '<type> <number>' with type {typ!r}")
        counts[typ] = counts.get(typ, 0) + 1
    ids = {}
    for name, typ in names_and_types:
        k = int(name.rsplit(" ", 1)[1])
        n = counts[typ]
        if k > n:
            raise WorldError(f"entity {name!r}: numbers of type {typ!r} must be 1..{n}")
        num = f"{n - k + 1:03d}"
        ids[name] = (
            f"{typ[: -len('basin')]}_bar_{num}_bar_{typ}" if typ.endswith("basin") else f"{typ}_bar_{num}"
        )
    return ids


_NAME = re.compile(r"^([a-z]+) ([1-9][0-9]*)$")


@dataclass(frozen=True, slots=True)
class ReceptacleSpec:
    """A receptacle, e.g. ``ReceptacleSpec("cabinet 2", "cabinet", True)``; each stands at its own location."""

    name: str
    rtype: str
    openable: bool
    start_open: bool = False
    """Open at the start (an ``(opened r)`` fact of an imported problem)."""
    location: str | None = None
    """The location it stands at when several receptacles share one (an imported problem's location id);
    None: a location of its own."""
    pddl_id: str | None = None
    """Its PDDL id in an imported file; None: the id the exporter gives it (:func:`pddl_ids`)."""


@dataclass(frozen=True, slots=True)
class ObjectSpec:
    """An object and the receptacle it starts in, e.g. ``ObjectSpec("cup 1", "cup", "countertop 1")``."""

    name: str
    otype: str
    location: str
    properties: frozenset[str] | None = None
    """Its ALFWorld property facts (names in :data:`PROPERTIES`); None: those of its type (:func:`type_properties`)."""
    state: frozenset[str] = frozenset()
    """Initial state facts (names in :data:`STATE_FLAGS`)."""
    pddl_id: str | None = None
    """Its PDDL id in an imported file (TextWorld lists contents in id order); None: the exporter's id."""

    def property_set(self) -> frozenset[str]:
        return self.properties if self.properties is not None else type_properties(self.otype)


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """The goal: ALFWorld task type, target object type and (except for ``look_at_obj_in_light``) receptacle type.

    ``text`` is the task sentence (one of ALFWorld's templates, drawn by the generator, or an imported file's);
    None gives the first template. ``toggle_type`` is the lamp type a look-in-light goal names (None: any lamp).
    """

    task_type: str
    obj_type: str
    recep_type: str | None
    text: str | None = None
    toggle_type: str | None = None

    @property
    def goal_text(self) -> str:
        if self.text is not None:
            return self.text
        return GOAL_TEMPLATES[self.task_type][0].format(
            obj=self.obj_type, recep=self.recep_type, toggle=self.toggle_type or "desklamp"
        )


@dataclass(frozen=True, slots=True)
class GameSpec:
    """A game: room, receptacles, objects with start locations, task, and ALFWorld's containment facts.

    This is everything the TextWorld exporter needs to write the equivalent ALFWorld ``game.tw-pddl``, and what
    the importer reads out of one (:meth:`World.from_tw_pddl`).
    """

    seed: int
    room: str
    receptacles: tuple[ReceptacleSpec, ...]
    objects: tuple[ObjectSpec, ...]
    task: TaskSpec
    can_contain: tuple[tuple[str, str], ...] | None = None
    """The game's ``(canContain RType OType)`` facts as (receptacle type, object type) pairs; None: ALFWorld's
    table (:data:`CAN_CONTAIN`) for the types of the game."""
    start: str | None = None
    """The receptacle at whose location the agent starts (an imported problem's ``atLocation``; of several there,
    the first by name); None: the middle of the room."""

    @property
    def goal_text(self) -> str:
        return self.task.goal_text

    def containment(self) -> frozenset[tuple[str, str]]:
        """The (receptacle type, object type) pairs this game's canContain facts allow, for its own types."""
        if self.can_contain is not None:
            return frozenset(self.can_contain)
        otypes = {o.otype for o in self.objects} | {self.task.obj_type}
        rtypes = {r.rtype for r in self.receptacles} | ({self.task.recep_type} - {None})
        return frozenset(
            (rt, ot)
            for rt in rtypes
            for ot in otypes
            if ot in CAN_CONTAIN.get(rt, ())  # type: ignore[arg-type]
        )

    def object_properties(self, name: str) -> dict[str, bool]:
        """ALFWorld's per-object property facts (pickupable, cleanable, …, receptacle_object) for the named object."""
        props = next(o for o in self.objects if o.name == name).property_set()
        return {p: p in props for p in PROPERTIES}

    def object_ids(self) -> dict[str, str]:
        """Object name -> PDDL id (the spec's own ids where given, else the exporter's)."""
        default = pddl_ids([(o.name, o.otype) for o in self.objects if o.pddl_id is None])
        return {o.name: o.pddl_id or default[o.name] for o in self.objects}

    def receptacle_ids(self) -> dict[str, str]:
        """Receptacle name -> PDDL id (the spec's own ids where given, else the exporter's)."""
        default = pddl_ids([(r.name, r.rtype) for r in self.receptacles if r.pddl_id is None])
        return {r.name: r.pddl_id or default[r.name] for r in self.receptacles}


# ---------------------------------------------------------------------------------------------- texts


def _listing(names: list[str], article: str = "a ") -> str:
    """TextWorld's list rendering: "a x", "a x, and a y", "a x, a y, and a z", or "nothing"."""
    if not names:
        return "nothing"
    items = [article + n for n in names]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


# ---------------------------------------------------------------------------------------------- the world


_TABLES_BY_SPEC: dict[int, tuple[GameSpec, dict]] = {}
_MAX_CACHED_SPECS = 256


class World:
    """One play-through of a :class:`GameSpec` with ALFWorld's transitions (``alfred.pddl``) and texts.

    The admissible table maps each command to (verb, object index, receptacle index), -1 where absent.
    ``step(command)`` applies an admissible command (anything else answers "Nothing happens." and changes
    nothing but the step counter) and returns ``(observation, won)``. Receptacle contents are kept in PDDL id
    order, the order in which TextWorld lists them.
    """

    # Built from the spec once and never changed: copies share them.
    _SHARED = (
        "spec",
        "_rnames",
        "_rtypes",
        "_ropenable",
        "_onames",
        "_otypes",
        "_orank",
        "_rlisting",
        "_pick",
        "_cleanable",
        "_heatable",
        "_coolable",
        "_toggleable",
        "_sliceable",
        "_recobj",
        "_knife",
        "_can",
        "_goto_cmds",
        "_goto_sorted",
        "_goto_actions",
        "_goal_objs",
        "_goal_receps",
        "_members",
        "_ridx",
        "_oidx",
        "_action_cache",
    )
    _FLAGS = (
        "opened",
        "clean",
        "hot",
        "cool",
        "wet",
        "toggled",
        "sliced",
    )  # per-object/receptacle state lists
    __slots__ = (
        *_SHARED,
        "loc",
        "held",
        "where",
        "contents",
        *_FLAGS,
        "steps",
        "_adm",
        "_adm_list",
        "_adm_actions",
    )

    def __init__(self, spec: GameSpec) -> None:
        hit = _TABLES_BY_SPEC.get(id(spec))
        if hit is not None and hit[0] is spec:  # the env builds a World per episode: reuse the spec's tables
            for name, value in hit[1].items():
                setattr(self, name, value)
        else:
            self._build_tables(spec)
            if len(_TABLES_BY_SPEC) >= _MAX_CACHED_SPECS:
                _TABLES_BY_SPEC.clear()
            # the spec is kept alive with its tables, so its id cannot be reused while cached
            _TABLES_BY_SPEC[id(spec)] = (spec, {name: getattr(self, name) for name in World._SHARED})
        self.reset()

    def _build_tables(self, spec: GameSpec) -> None:
        """The read-only tables derived from the spec (``_SHARED``): names, flags, containment, command tables."""
        self.spec = spec
        self._rnames = [r.name for r in spec.receptacles]
        self._rtypes = [r.rtype for r in spec.receptacles]
        self._ropenable = [r.openable for r in spec.receptacles]
        self._onames = [o.name for o in spec.objects]
        self._otypes = [o.otype for o in spec.objects]
        self._ridx = {n: i for i, n in enumerate(self._rnames)}
        self._oidx = {n: i for i, n in enumerate(self._onames)}
        if len(self._ridx) != len(self._rnames) or len(self._oidx) != len(self._onames):
            raise WorldError("receptacle and object names of a game must be unique")
        oids, rids = spec.object_ids(), spec.receptacle_ids()
        self._orank = [oids[n] for n in self._onames]
        self._rlisting = sorted(self._rnames, key=rids.__getitem__)
        props = [o.property_set() for o in spec.objects]
        self._pick = ["pickupable" in p for p in props]
        self._cleanable = ["cleanable" in p for p in props]
        self._heatable = ["heatable" in p for p in props]
        self._coolable = ["coolable" in p for p in props]
        self._toggleable = ["toggleable" in p for p in props]
        self._sliceable = ["sliceable" in p for p in props]
        self._recobj = ["receptacle_object" in p for p in props]
        self._knife = [t in KNIFE_TYPES for t in self._otypes]
        self._can = spec.containment()
        # Structured actions by (command, object state flags): shared by copies, read-only once built.
        self._action_cache: dict[tuple, dict] = {}
        n_r = len(self._rnames)
        # Receptacles sharing a location (ALFWorld's stacked drawers): members[i] = all at i's location, id order.
        place = [r.location or f"own location {i}" for i, r in enumerate(spec.receptacles)]
        rank = {n: k for k, n in enumerate(self._rlisting)}
        self._members = [
            sorted((j for j in range(n_r) if place[j] == place[i]), key=lambda j: rank[self._rnames[j]])
            for i in range(n_r)
        ]
        # "go to X" is admissible for every receptacle not at the agent's location (index n_r = the middle).
        self._goto_cmds = [
            {
                f"go to {self._rnames[j]}": ("goto", -1, j)
                for j in range(n_r)
                if i == n_r or j not in self._members[i]
            }
            for i in range(n_r + 1)
        ]
        self._goto_sorted = [sorted(g) for g in self._goto_cmds]
        task = spec.task  # what the goal test reads: the objects and receptacles of the goal types
        self._goal_objs = [o for o, t in enumerate(self._otypes) if t == task.obj_type]
        self._goal_receps = frozenset(r for r, t in enumerate(self._rtypes) if t == task.recep_type)
        self._goto_actions: list[list[dict] | None] = [None] * (n_r + 1)  # built on first use, shared

    @classmethod
    def from_spec(cls, spec: GameSpec) -> World:
        return cls(spec)

    @classmethod
    def from_tw_pddl(cls, path: str | Path, *, alfworld_logic: bool = False) -> World:
        """Import an ALFWorld ``game.tw-pddl`` file (:func:`envs.household.textworld_ref.load_game_file`); raises
        :class:`~synthesis.errors.WorldError` naming the first construct the native engine does not support."""
        from scars.envs.household.textworld_ref import load_game_file

        return cls(load_game_file(path, alfworld_logic=alfworld_logic))

    # ------------------------------------------------------------------ state

    def reset(self) -> str:
        """Put the world back in its initial state; returns the intro text."""
        spec = self.spec
        self.loc = self._ridx[spec.start] if spec.start is not None else -1  # -1: the middle of the room
        self.held = -1
        self.contents: list[list[int]] = [[] for _ in self._rnames]
        self.where: list[int] = []
        for i, o in enumerate(spec.objects):
            if o.location not in self._ridx:
                raise WorldError(f"object {o.name!r} starts in unknown receptacle {o.location!r}")
            r = self._ridx[o.location]
            self.where.append(r)
            self.contents[r].append(i)
        rank = self._orank
        for c in self.contents:
            c.sort(key=rank.__getitem__)
        self.opened = [r.start_open for r in spec.receptacles]
        self.clean = ["is_clean" in o.state for o in spec.objects]
        self.hot = ["is_hot" in o.state for o in spec.objects]
        self.cool = ["is_cool" in o.state for o in spec.objects]
        self.wet = [False] * len(self._onames)
        self.toggled = ["is_toggled" in o.state for o in spec.objects]
        self.sliced = ["is_sliced" in o.state for o in spec.objects]
        self.steps = 0
        self._adm = None
        self._adm_list = None
        self._adm_actions = None
        return f"{WELCOME}\n\n{self._look(intro=True)}\n\nYour task is to: {spec.goal_text}."

    def copy(self) -> World:
        """An independent copy sharing the immutable spec (used by the expert to simulate plans)."""
        other = object.__new__(World)
        for name in World._SHARED:
            setattr(other, name, getattr(self, name))
        other.loc = self.loc
        other.held = self.held
        other.where = list(self.where)
        other.contents = [list(c) for c in self.contents]
        for name in World._FLAGS:
            setattr(other, name, list(getattr(self, name)))
        other.steps = self.steps
        other._adm = self._adm
        other._adm_list = self._adm_list
        other._adm_actions = self._adm_actions
        return other

    def is_at(self, recep: str) -> bool:
        """Does the agent stand at ``recep``'s location (where ``go to recep`` is not admissible)?"""
        return self.loc >= 0 and self._ridx[recep] in self._members[self.loc]

    def can_hold(self, recep: str, otype: str) -> bool:
        """Do this game's canContain facts let receptacle ``recep`` hold an object of type ``otype``?"""
        return (self._rtypes[self._ridx[recep]], otype) in self._can

    # ------------------------------------------------------------------ admissible commands

    def _entry(self, command: str) -> tuple[str, int, int] | None:
        """(verb, object, receptacle) of an admissible command, None if it is not admissible here."""
        entry = self._goto_cmds[self.loc].get(command)
        return entry if entry is not None else self._admissible().get(command)

    def _admissible(self) -> dict[str, tuple[str, int, int]]:
        """The admissible commands other than "go to ..." (those are fixed per location: ``_goto_cmds``)."""
        if self._adm is not None:
            return self._adm
        loc, held = self.loc, self.held
        adm: dict[str, tuple[str, int, int]] = {}
        adm["inventory"] = ("inventory", -1, -1)
        adm["look"] = ("look", -1, -1)
        adm["help"] = ("help", -1, -1)
        if held >= 0:
            adm[f"examine {self._onames[held]}"] = ("examine", held, -1)
        if loc >= 0:
            onames = self._onames
            for r in self._members[loc]:  # every receptacle at the agent's location (usually just one)
                rname, rtype = self._rnames[r], self._rtypes[r]
                adm[f"examine {rname}"] = ("examine", -1, r)
                visible = True
                if self._ropenable[r]:
                    if self.opened[r]:
                        adm[f"close {rname}"] = ("close", -1, r)
                    else:
                        adm[f"open {rname}"] = ("open", -1, r)
                        visible = False
                here = self.contents[r]
                if held < 0:
                    if visible:
                        pick = self._pick
                        for o in here:
                            if pick[o]:
                                adm[f"take {onames[o]} from {rname}"] = ("take", o, r)
                else:
                    hname, htype = onames[held], self._otypes[held]
                    if visible and (rtype, htype) in self._can:
                        adm[f"move {hname} to {rname}"] = ("move", held, r)
                    if rtype in CLEANING_TYPES and self._cleanable[held]:
                        adm[f"clean {hname} with {rname}"] = ("clean", held, r)
                    elif rtype in HEATING_TYPES and self._heatable[held]:
                        adm[f"heat {hname} with {rname}"] = ("heat", held, r)
                    elif rtype in COOLING_TYPES and self._coolable[held]:
                        adm[f"cool {hname} with {rname}"] = ("cool", held, r)
                    if self._knife[held]:
                        # alfred.pddl SliceObject: the object only has to be at this location (even in a closed box)
                        sliceable = self._sliceable
                        for o in here:
                            if sliceable[o]:
                                adm[f"slice {onames[o]} with {hname}"] = ("slice", o, r)
                toggleable = self._toggleable
                for o in here:
                    if toggleable[o]:
                        adm[f"use {onames[o]}"] = ("use", o, r)
        self._adm = adm
        others = sorted(adm)
        cut = bisect_left(others, "go to ")  # every "go to" command sorts in one block at this point
        self._adm_list = others[:cut] + self._goto_sorted[loc] + others[cut:]
        self._adm_actions = None
        return adm

    def admissible_commands(self) -> list[str]:
        """The admissible commands in this state, sorted (a fresh list the caller may keep)."""
        self._admissible()
        return list(self._adm_list)  # type: ignore[arg-type]

    def is_admissible(self, command: str) -> bool:
        return self._entry(command) is not None

    # ------------------------------------------------------------------ structured views

    def _object_args(self, o: int) -> dict[str, Value]:
        return {
            "obj": self._onames[o],
            "obj_type": self._otypes[o],
            "is_clean": self.clean[o],
            "is_hot": self.hot[o],
            "is_cool": self.cool[o],
            "is_wet": self.wet[o],
        }

    def action_dict(self, command: str) -> dict | None:
        """The structured form ``{"kind": "env", "name": verb, "args": {...}, "text": command}`` of an admissible
        command (what ``synthesis.dsl.Action.from_dict`` reads), or None if the command is not admissible here."""
        entry = self._entry(command)
        if entry is None:
            return None
        verb, o, r = entry
        args: dict[str, Value] = {}
        if o >= 0:
            args = self._object_args(o)
        if verb == "slice":
            args["tool"] = self._onames[self.held]
        if r >= 0:
            args["recep"] = self._rnames[r]
            args["recep_type"] = self._rtypes[r]
        return {"kind": "env", "name": verb, "args": args, "text": command}

    def admissible_actions(self) -> list[dict]:
        """Structured forms of every admissible command, in the order of :meth:`admissible_commands`.

        The dicts are cached until the state changes and shared between calls: treat them as read-only.
        """
        adm = self._admissible()
        if self._adm_actions is None:
            loc = self.loc
            gotos = self._goto_actions[loc]
            if gotos is None:
                gotos = self._goto_actions[loc] = [self.action_dict(c) for c in self._goto_sorted[loc]]  # type: ignore[misc]
            cache, before, after = self._action_cache, [], []
            clean, hot, cool, wet = self.clean, self.hot, self.cool, self.wet
            for c in sorted(adm):
                o = adm[c][1]
                key = (c, clean[o], hot[o], cool[o], wet[o]) if o >= 0 else c
                d = cache.get(key)
                if d is None:
                    d = cache[key] = self.action_dict(c)  # type: ignore[assignment]
                (before if c < "go to " else after).append(d)
            self._adm_actions = before + gotos + after
        return list(self._adm_actions)

    def context(self) -> dict[str, Value]:
        """The flat context q that guards read: location, held object and its state, the task, the step."""
        loc, held, task = self.loc, self.held, self.spec.task
        q: dict[str, Value] = {
            "room": self.spec.room,
            "location": self._rnames[loc] if loc >= 0 else NOWHERE,
            "location_type": self._rtypes[loc] if loc >= 0 else NOWHERE,
            "location_open": bool(loc >= 0 and self.opened[loc]),
            "held_object": self._onames[held] if held >= 0 else NOWHERE,
            "held_type": self._otypes[held] if held >= 0 else NOWHERE,
            "held_is_clean": held >= 0 and self.clean[held],
            "held_is_hot": held >= 0 and self.hot[held],
            "held_is_cool": held >= 0 and self.cool[held],
            "held_is_wet": held >= 0 and self.wet[held],
            "task_type": task.task_type,
            "target_obj_type": task.obj_type,
            "target_recep_type": task.recep_type or NOWHERE,
            "step": self.steps,
        }
        return q

    # ------------------------------------------------------------------ texts

    def _receptacle_text(self, r: int) -> str:
        name = self._rnames[r]
        if self._ropenable[r]:
            if not self.opened[r]:
                return f"The {name} is closed."
            return (
                f"The {name} is open. In it, you see {_listing([self._onames[o] for o in self.contents[r]])}."
            )
        return f"On the {name}, you see {_listing([self._onames[o] for o in self.contents[r]])}."

    def _look(self, intro: bool = False) -> str:
        if self.loc < 0:
            # Only the intro lists the receptacles: TextWorld's ``look`` command at the start location binds no
            # receptacle there and lists "nothing" (measured against the engine by the differential test).
            seen = _listing(self._rlisting) if intro else "nothing"
            return f"You are in the middle of a room. Looking quickly around you, you see {seen}."
        # TextWorld lists every receptacle at the location, in id order, without articles
        facing = [self._rnames[r] for r in self._members[self.loc]]
        return f"You are facing the {_listing(facing, article='')}. Next to it, you see nothing."

    def _examine_object(self, o: int) -> str:
        """alfred.twl2 ``examineObject.feedback``: the first matching condition wins."""
        name = self._onames[o]
        if self._recobj[o]:
            # inReceptacleObject is never set (the actions that would set it are commented out in alfred.pddl)
            return f"This is a normal {name}. In it, you see nothing."
        clean, hot, cool, sliced = self.clean[o], self.hot[o], self.cool[o], self.sliced[o]
        if sliced:
            if clean and hot:
                return f"This is a hot and clean sliced {name}."
            if clean and cool:
                return f"This is a cool and clean sliced {name}."
            if clean:
                return f"This is a clean sliced {name}."
            if hot:
                return f"This is a hot sliced {name}."
            if cool:
                return f"This is a cool sliced {name}."
        if clean and hot:
            return f"This is a hot and clean {name}."
        if clean and cool:
            return f"This is a cool and clean {name}."
        if hot:
            return f"This is a hot {name}."
        if clean:
            return f"This is a clean {name}."
        if cool:
            return f"This is a cold {name}."
        if self._toggleable[o]:
            return f"This {name} is {'on' if self.toggled[o] else 'off'}."
        if sliced and self._sliceable[o]:
            return f"This is a sliced {name}."
        return f"There's nothing special about {name}."

    # ------------------------------------------------------------------ transitions

    def step(self, command: str) -> tuple[str, bool]:
        """Apply one command; returns (observation, won). Inadmissible commands answer "Nothing happens."."""
        self.steps += 1
        entry = self._entry(command)
        if entry is None:
            return NOTHING_HAPPENS, self.won()
        verb, o, r = entry
        if verb == "goto":
            self.loc = r
            obs = f"You arrive at {self._rnames[r]}. {self._receptacle_text(r)}"
        elif verb == "take":
            self.contents[r].remove(o)
            self.where[o] = -1
            self.held = o
            obs = f"You pick up the {self._onames[o]} from the {self._rnames[r]}."
        elif verb == "move":
            insort(self.contents[r], o, key=self._orank.__getitem__)
            self.where[o] = r
            self.held = -1
            self.wet[o] = False  # put down to dry (the native-only flag, see the module docstring)
            obs = f"You move the {self._onames[o]} to the {self._rnames[r]}."
        elif verb == "open":
            self.opened[r] = True
            obs = f"You open the {self._rnames[r]}. {self._receptacle_text(r)}"
        elif verb == "close":
            self.opened[r] = False
            obs = f"You close the {self._rnames[r]}."
        elif verb == "clean":
            self.clean[o] = True
            self.wet[o] = True
            obs = f"You clean the {self._onames[o]} using the {self._rnames[r]}."
        elif verb == "heat":
            self.hot[o] = True
            self.cool[o] = False
            obs = f"You heat the {self._onames[o]} using the {self._rnames[r]}."
        elif verb == "cool":
            self.cool[o] = True
            self.hot[o] = False
            obs = f"You cool the {self._onames[o]} using the {self._rnames[r]}."
        elif verb == "slice":
            self.sliced[o] = True
            obs = f"You sliced the {self._onames[o]} with the {self._onames[self.held]}."
        elif verb == "use":
            self.toggled[o] = True  # alfred.pddl ToggleObject sets isToggled and never clears it
            obs = f"You turn on the {self._onames[o]}."
        elif verb == "examine":
            obs = self._examine_object(o) if o >= 0 else self._receptacle_text(r)
            return obs, self.won()  # no state change: the admissible cache stays valid
        elif verb == "inventory":
            obs = (
                f"You are carrying: a {self._onames[self.held]}."
                if self.held >= 0
                else "You are not carrying anything."
            )
            return obs, self.won()
        elif verb == "help":
            return HELP_TEXT, self.won()
        else:  # look
            return self._look(), self.won()
        self._adm = None
        return obs, self.won()

    # ------------------------------------------------------------------ goal

    def won(self) -> bool:
        """ALFWorld's goal conditions per task type (the PDDL goal of the game, ``goal_library.gdict``)."""
        task = self.spec.task
        tt, otype, otypes = task.task_type, task.obj_type, self._otypes
        if tt == "look_at_obj_in_light":
            if self.held < 0 or otypes[self.held] != otype or self.loc < 0:
                return False
            lamp = task.toggle_type
            return any(
                self._toggleable[o] and self.toggled[o] and (lamp is None or otypes[o] == lamp)
                for r in self._members[self.loc]
                for o in self.contents[r]
            )
        where, goal_receps = self.where, self._goal_receps
        if tt == "pick_two_obj_and_place":
            placed = [where[o] for o in self._goal_objs if where[o] in goal_receps]
            return len(placed) > len(set(placed))  # two of them in the same receptacle of the goal type
        state, able = {
            "pick_clean_then_place_in_recep": (self.clean, self._cleanable),
            "pick_heat_then_place_in_recep": (self.hot, self._heatable),
            "pick_cool_then_place_in_recep": (self.cool, self._coolable),
        }.get(tt, (None, None))
        for o in self._goal_objs:
            if where[o] in goal_receps and (state is None or (state[o] and able[o])):
                return True
        return False

    # ------------------------------------------------------------------ queries used by the expert and generator

    def receptacles_of_type(self, rtype: str) -> list[str]:
        return [n for n, t in zip(self._rnames, self._rtypes, strict=True) if t == rtype]

    def objects_of_type(self, otype: str) -> list[str]:
        return [n for n, t in zip(self._onames, self._otypes, strict=True) if t == otype]

    def location_of(self, obj: str) -> str | None:
        """The receptacle holding ``obj``, or None while the agent holds it."""
        r = self.where[self._oidx[obj]]
        return self._rnames[r] if r >= 0 else None

    def object_state(self, obj: str) -> dict[str, bool]:
        """The state flags of ``obj``: is_clean, is_hot, is_cool, is_wet."""
        o = self._oidx[obj]
        return {
            "is_clean": self.clean[o],
            "is_hot": self.hot[o],
            "is_cool": self.cool[o],
            "is_wet": self.wet[o],
        }

    def held_object(self) -> str | None:
        return self._onames[self.held] if self.held >= 0 else None

    def current_location(self) -> str | None:
        return self._rnames[self.loc] if self.loc >= 0 else None

    def receptacle_type(self, name: str) -> str:
        return self._rtypes[self._ridx[name]]

    def object_type(self, name: str) -> str:
        return self._otypes[self._oidx[name]]

    def is_open(self, recep: str) -> bool:
        r = self._ridx[recep]
        return (not self._ropenable[r]) or self.opened[r]

    def is_openable(self, recep: str) -> bool:
        return self._ropenable[self._ridx[recep]]

    @property
    def receptacle_names(self) -> tuple[str, ...]:
        return tuple(self._rnames)
