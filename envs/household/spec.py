"""The description of a household game: ALFWorld's vocabulary, its logic generations and the frozen specs.

A :class:`GameSpec` is what the generator draws (:mod:`envs.household.generator`), what the game-file writer
exports and what the importer reads out of an ALFWorld ``game.tw-pddl`` (:mod:`envs.household.game_file`); a
:class:`~envs.household.world.World` plays one. The vocabulary — which receptacle type holds which object type
(``canContain``), the per-object property and receptacle-object flags, the type names and task sentences — is
ALFWorld's own tables (``alfworld_tables.json``, see :mod:`envs.household.alfworld_data`); :data:`LOGICS` names
what differs between the generations of ALFWorld's PDDL domain and text grammar that its game files carry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from scars.envs.household.alfworld_data import TASKS, load_tables
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

SLICED_GOAL_TEMPLATES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {t: tuple(v) for t, v in _TABLES["goal_templates_sliced"].items()}
)
"""The sentences of each task's sliced variant (``gdict[task + '_slice']``), for the tasks that have a well-formed
one (:data:`~envs.household.alfworld_data.SLICED_TASKS`)."""

NOWHERE = "none"  # the context value of location/held fields when there is none


def check_task_type(task_type: str) -> str:
    """Return ``task_type`` if it is one of ALFWorld's six, else raise :class:`WorldError` naming the allowed ones."""
    if task_type not in TASK_TYPES:
        raise WorldError(f"unknown task type {task_type!r}; allowed: {', '.join(TASK_TYPES)}")
    return task_type


@dataclass(frozen=True, slots=True)
class Logic:
    """What differs between the generations of ALFWorld's PDDL domain (``alfred.pddl``) and grammar
    (``alfred.twl2``) that ALFWorld's game files carry."""

    put_command: str
    """The PutObject template, with ``{o}`` and ``{r}``."""
    put_feedback: str
    """The PutObject feedback sentence, with ``{o}`` and ``{r}``."""
    has_help: bool
    """Whether the domain has the ``help`` action."""
    cleaning_types: frozenset[str]
    """The receptacle types CleanObject accepts."""
    arrive_at_location: bool
    """Whether GotoLocation's feedback names the location ("You arrive at loc 12.") instead of the receptacle."""


LOGICS: Mapping[str, Logic] = MappingProxyType(
    {
        # alfworld 0.4 (data/alfred.pddl, data/alfred.twl2 of the 0.4.x releases)
        "0.4": Logic(
            "move {o} to {r}", "You move the {o} to the {r}.", True, frozenset({"sinkbasin"}), False
        ),
        # the releases before 0.4, which wrote ALFWorld's json_2.1.1 game files
        "pre-0.4": Logic(
            "put {o} in/on {r}",
            "You put the {o} in/on the {r}.",
            False,
            frozenset({"sink", "sinkbasin"}),
            True,
        ),
    }
)
"""The ALFWorld logic generations the native engine implements, by name (``GameSpec.logic``)."""


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
        m = _NAME.fullmatch(name)
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


_NAME = re.compile(r"([a-z]+) ([1-9][0-9]*)")  # matched whole: "pan 3\n" is not a name


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
    location_name: str | None = None
    """Its location's shown name ("loc 12", ALFWorld's demangled location id), which the pre-0.4 grammar says on
    arrival ("You arrive at loc 12."); None: the receptacle's own name is said (alfworld 0.4's grammar)."""


@dataclass(frozen=True, slots=True)
class ObjectSpec:
    """An object and the receptacle it starts in, e.g. ``ObjectSpec("cup 1", "cup", "countertop 1")``.

    An imported ALFWorld problem may put an object in several receptacles at once (``also_in``: AI2-THOR's
    overlapping surfaces), in none (``location`` None: a window, a chair), inside receptacle objects
    (``in_objects``) or at locations other than its receptacle's (``at``): the engine keeps all of these facts as
    TextWorld's PDDL state does.
    """

    name: str
    otype: str
    location: str | None
    properties: frozenset[str] | None = None
    """Its ALFWorld property facts (names in :data:`PROPERTIES`); None: those of its type (:func:`type_properties`)."""
    state: frozenset[str] = frozenset()
    """Initial state facts (names in :data:`STATE_FLAGS`)."""
    pddl_id: str | None = None
    """Its PDDL id in an imported file (TextWorld lists contents in id order); None: the exporter's id."""
    also_in: tuple[str, ...] = ()
    """Further receptacles it starts in (``(inReceptacle o r)`` facts beyond the first)."""
    at: tuple[str, ...] | None = None
    """Its ``objectAtLocation`` location ids; None: the locations of the receptacles it is in."""
    in_objects: tuple[str, ...] = ()
    """The receptacle objects it starts inside (``(inReceptacleObject o outer)`` facts: "In it, you see ..."); a
    problem may list one object inside several, or inside itself."""

    @property
    def receptacles(self) -> tuple[str, ...]:
        """Every receptacle it starts in (none for an object in no receptacle)."""
        return ((self.location,) if self.location is not None else ()) + self.also_in

    def property_set(self) -> frozenset[str]:
        return self.properties if self.properties is not None else type_properties(self.otype)


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """The goal: ALFWorld task type, target object type and (except for ``look_at_obj_in_light``) receptacle type.

    ``text`` is the task sentence (one of ALFWorld's templates, drawn by the generator, or an imported file's);
    None gives the first template. ``toggle_type`` is the lamp type a look-in-light goal names (None: any lamp).
    ``sliced``: the task's sliced variant (ALFWorld's ``<task>_slice`` goals, :data:`SLICED_GOAL_TEMPLATES`): the
    goal object must be sliceable and sliced.
    """

    task_type: str
    obj_type: str
    recep_type: str | None
    text: str | None = None
    toggle_type: str | None = None
    sliced: bool = False

    def __post_init__(self) -> None:
        if self.sliced and self.task_type not in SLICED_GOAL_TEMPLATES:
            raise WorldError(
                f"task {self.task_type!r} has no sliced variant; sliced tasks: {', '.join(SLICED_GOAL_TEMPLATES)}"
            )

    @property
    def goal_text(self) -> str:
        if self.text is not None:
            return self.text
        templates = SLICED_GOAL_TEMPLATES if self.sliced else GOAL_TEMPLATES
        return templates[self.task_type][0].format(
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
    logic: str = "0.4"
    """The ALFWorld domain and grammar generation the game is played under (a key of :data:`LOGICS`)."""

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
