"""The native tier-1 household world: ALFWorld's semantics without the TextWorld engine (SPEC §7 tier 1, §9).

The state, the transitions and the texts follow ALFWorld's PDDL domain (``alfred.pddl``) and text grammar
(``alfred.twl2``): the same receptacle and object type names, the same command grammar (``go to``, ``open``,
``close``, ``take X from Y``, ``move X to Y``, ``examine``, ``use``, ``heat/clean/cool X with Y``, ``slice X with
K``, ``inventory``, ``look``, ``help``), the same feedback sentences and "Nothing happens." for anything
inadmissible. Its data — which receptacle type holds which object type (``canContain``), the per-object property
and receptacle-object flags, the type vocabulary and the task sentences — are ALFWorld's own tables
(``alfworld_tables.json``, see :mod:`envs.household.alfworld_data`); a game may carry its own facts instead (an
imported ALFWorld file). Receptacle contents are listed in PDDL id order, as TextWorld lists them. An imported game
plays under its own ALFWorld logic generation (:data:`~envs.household.spec.LOGICS`: the pre-0.4 grammar says "put X
in/on Y" and "You arrive at loc 12.", and has no ``help``), and keeps the problem's facts as TextWorld's PDDL state
does: an object may be in several receptacles or none, at locations other than its receptacle's (SliceObject reads
``objectAtLocation``), and a pickup leaves a ``not_inreceptacle`` fact that ``look`` lists "next to it".

Beyond ALFWorld the world tracks one extra, text-invisible state flag, ``is_wet``: cleaning an object makes it wet,
and it dries once it has been put down on (or in) any receptacle. It exists so that the paper's rule "no wet
dishware straight into the cabinet" (§6.1) has a meaning; it never changes an observation, an admissible command
or a goal, so the world stays observationally equal to ALFWorld's engine.

A :class:`~envs.household.spec.GameSpec` is the frozen description of a game (what the generator draws, what the
exporter writes and what the importer reads); a :class:`World` is one mutable play-through of it. Admissible commands are recomputed only after a state
change and cached, so a random admissible walk runs tens of thousands of steps per second.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from pathlib import Path

from scars.envs.household.game_file import load_game_file
from scars.envs.household.spec import (
    CAN_CONTAIN,
    CLEANING_TYPES,
    COOLING_TYPES,
    HEATING_TYPES,
    KNIFE_TYPES,
    LOGICS,
    NOWHERE,
    OBJECT_CLASSES,
    OBJECT_TYPES,
    RECEPTACLE_TYPES,
    ROOM_KINDS,
    TASK_TYPES,
    GameSpec,
    ObjectSpec,
    ReceptacleSpec,
    TaskSpec,
    check_task_type,
)
from scars.synthesis.dsl.ast import Value
from scars.synthesis.errors import WorldError

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
        "_logic",
        "_clean_types",
        "_rloc",
        "_rarrive",
        "_start_loc",
        "_loc_members",
        "_inner",
        "_oat0",
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
        "at",
        "taken",
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
        if spec.logic not in LOGICS:
            raise WorldError(f"unknown ALFWorld logic {spec.logic!r}; allowed: {', '.join(LOGICS)}")
        self._logic = LOGICS[spec.logic]
        self._clean_types = self._logic.cleaning_types
        self._can = spec.containment()
        # Structured actions by (command, object state flags): shared by copies, read-only once built.
        self._action_cache: dict[tuple, dict] = {}
        n_r = len(self._rnames)
        # Locations: receptacles sharing one (ALFWorld's stacked drawers), objects' own locations, the start.
        place = [r.location or f"own location {i}" for i, r in enumerate(spec.receptacles)]
        locs: dict[str, int] = {}
        self._rloc = [locs.setdefault(p, len(locs)) for p in place]
        self._rarrive = [
            (r.location_name or r.name) if self._logic.arrive_at_location else r.name
            for r in spec.receptacles
        ]
        self._start_loc = self._rloc[self._ridx[spec.start]] if spec.start is not None else len(locs)
        locs.setdefault(" the start", self._start_loc)
        for o in spec.objects:
            for p in o.at or ():
                locs.setdefault(p, len(locs))
        rank = {n: k for k, n in enumerate(self._rlisting)}
        self._loc_members = [
            sorted((j for j in range(n_r) if self._rloc[j] == li), key=lambda j: rank[self._rnames[j]])
            for li in range(len(locs))
        ]
        self._members = [self._loc_members[self._rloc[i]] for i in range(n_r)]
        for o in spec.objects:
            for r in o.receptacles:
                if r not in self._ridx:
                    raise WorldError(f"object {o.name!r} starts in unknown receptacle {r!r}")
        self._oat0 = [
            frozenset(self._rloc[self._ridx[r]] for r in o.receptacles)
            if o.at is None
            else frozenset(locs[p] for p in o.at)
            for o in spec.objects
        ]
        inner: dict[str, list[str]] = {}
        for o in sorted(spec.objects, key=lambda o: oids[o.name]):
            # TextWorld lists an object inside each object a fact names, except inside itself (measured)
            for outer in dict.fromkeys(o.in_objects):
                if outer != o.name:
                    inner.setdefault(outer, []).append(o.name)
        self._inner = [inner.get(n, []) for n in self._onames]
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
        """Import an ALFWorld ``game.tw-pddl`` file (:func:`envs.household.game_file.load_game_file`); raises
        :class:`~synthesis.errors.WorldError` naming the first construct the native engine does not support."""
        return cls(load_game_file(path, alfworld_logic=alfworld_logic))

    # ------------------------------------------------------------------ state

    def reset(self) -> str:
        """Put the world back in its initial state; returns the intro text."""
        spec = self.spec
        self.loc = self._ridx[spec.start] if spec.start is not None else -1  # -1: the middle of the room
        self.held = -1
        contents: list[list[int]] = [[] for _ in self._rnames]
        # the receptacles each object is in (inReceptacle facts), its locations (objectAtLocation facts) and each
        # receptacle's objects, as immutable values replaced on change, so that a copy (the expert makes many)
        # copies only the lists
        self.where: list[tuple[int, ...]] = []
        for i, o in enumerate(spec.objects):
            self.where.append(tuple(dict.fromkeys(self._ridx[r] for r in o.receptacles)))  # a set, in order
            for r in self.where[-1]:
                contents[r].append(i)
        self.at: list[frozenset[int]] = list(self._oat0)
        self.taken: set[tuple[int, int]] = (
            set()
        )  # (object, receptacle) of the not_inreceptacle facts TextWorld keeps
        rank = self._orank
        self.contents: list[tuple[int, ...]] = [tuple(sorted(c, key=rank.__getitem__)) for c in contents]
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
        other.contents = list(self.contents)
        other.at = list(self.at)
        other.taken = set(self.taken)
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
        if self._logic.has_help:
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
                        adm[self._logic.put_command.format(o=hname, r=rname)] = ("move", held, r)
                    if rtype in self._clean_types and self._cleanable[held]:
                        adm[f"clean {hname} with {rname}"] = ("clean", held, r)
                    elif rtype in HEATING_TYPES and self._heatable[held]:
                        adm[f"heat {hname} with {rname}"] = ("heat", held, r)
                    elif rtype in COOLING_TYPES and self._coolable[held]:
                        adm[f"cool {hname} with {rname}"] = ("cool", held, r)
                toggleable = self._toggleable
                for o in here:
                    if toggleable[o]:
                        adm[f"use {onames[o]}"] = ("use", o, self._holder(o, loc))
            if held >= 0 and self._knife[held]:
                # alfred.pddl SliceObject: the object only has to be at this location (objectAtLocation: even in
                # a closed box, or in no receptacle at all)
                hname, sliceable, at = self._onames[held], self._sliceable, self.at
                aloc = self._rloc[loc]
                for o in range(len(onames)):
                    if sliceable[o] and aloc in at[o]:
                        adm[f"slice {onames[o]} with {hname}"] = ("slice", o, self._holder(o, loc))
        self._adm = adm
        others = sorted(adm)
        cut = bisect_left(others, "go to ")  # every "go to" command sorts in one block at this point
        self._adm_list = others[:cut] + self._goto_sorted[loc] + others[cut:]
        self._adm_actions = None
        return adm

    def _holder(self, o: int, loc: int) -> int:
        """The receptacle a use/slice command's structured form names (its text names none): of the receptacles at
        the agent's location holding ``o``, the one the agent went to, else the first by name; else the agent's."""
        holders = [r for r in self._members[loc] if r in self.where[o]]
        if loc in holders or not holders:
            return loc
        return min(holders, key=self._rnames.__getitem__)

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
        here = self._members[self.loc]
        facing = [self._rnames[r] for r in here]
        return f"You are facing the {_listing(facing, article='')}. Next to it, you see {_listing(self._floor(here))}."

    def _floor(self, here: list[int]) -> list[str]:
        """alfred.twl2 ``list_objects_on_the_floor``: one entry per (object at this location, receptacle here) with
        a ``not_inreceptacle`` fact — TextWorld keeps the negated fact a PickupObject leaves — in id order."""
        if not self.taken:
            return []
        aloc, at, taken = self._rloc[here[0]], self.at, self.taken
        return [
            self._onames[o]
            for o in sorted(range(len(self._onames)), key=self._orank.__getitem__)
            if aloc in at[o]
            for r in here
            if (o, r) in taken
        ]

    def _examine_object(self, o: int) -> str:
        """alfred.twl2 ``examineObject.feedback``: the first matching condition wins."""
        name = self._onames[o]
        if self._recobj[o]:
            # only an imported problem's initial inReceptacleObject facts (the actions that would change them are
            # commented out in alfred.pddl)
            return f"This is a normal {name}. In it, you see {_listing(self._inner[o])}."
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
            obs = f"You arrive at {self._rarrive[r]}. {self._receptacle_text(r)}"
        elif verb == "take":
            # alfred.pddl PickupObject: out of this receptacle (not others it is also in), not at this location
            self.contents[r] = tuple(x for x in self.contents[r] if x != o)  # an object is in r once
            self.where[o] = tuple(x for x in self.where[o] if x != r)
            self.at[o] = self.at[o] - {self._rloc[r]}
            self.taken.add((o, r))
            self.held = o
            obs = f"You pick up the {self._onames[o]} from the {self._rnames[r]}."
        elif verb == "move":
            # facts are a set: an object still in r (it started in two receptacles) is in it once
            if r not in self.where[o]:
                here = list(self.contents[r])
                insort(here, o, key=self._orank.__getitem__)
                self.contents[r] = tuple(here)
                self.where[o] = (*self.where[o], r)
            self.at[o] = self.at[o] | {self._rloc[r]}
            self.taken.discard((o, r))
            self.held = -1
            self.wet[o] = False  # put down to dry (the native-only flag, see the module docstring)
            obs = self._logic.put_feedback.format(o=self._onames[o], r=self._rnames[r])
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
        where, goal_receps, goal_objs = self.where, self._goal_receps, self._goal_objs
        if task.sliced:  # the <task>_slice goals: (sliceable ?o) (isSliced ?o) as well
            goal_objs = [o for o in goal_objs if self._sliceable[o] and self.sliced[o]]
        if tt == "pick_two_obj_and_place":
            placed = [r for o in goal_objs for r in where[o] if r in goal_receps]
            return len(placed) > len(set(placed))  # two of them in the same receptacle of the goal type
        state, able = {
            "pick_clean_then_place_in_recep": (self.clean, self._cleanable),
            "pick_heat_then_place_in_recep": (self.hot, self._heatable),
            "pick_cool_then_place_in_recep": (self.cool, self._coolable),
        }.get(tt, (None, None))
        for o in goal_objs:
            if (state is None or (state[o] and able[o])) and any(r in goal_receps for r in where[o]):
                return True
        return False

    # ------------------------------------------------------------------ queries used by the expert and generator

    def receptacles_of_type(self, rtype: str) -> list[str]:
        return [n for n, t in zip(self._rnames, self._rtypes, strict=True) if t == rtype]

    def objects_of_type(self, otype: str) -> list[str]:
        return [n for n, t in zip(self._onames, self._otypes, strict=True) if t == otype]

    def location_of(self, obj: str) -> str | None:
        """The first receptacle ``obj`` is in, or None when it is in none (held, or never in one)."""
        where = self.where[self._oidx[obj]]
        return self._rnames[where[0]] if where else None

    def is_in(self, obj: str, recep: str) -> bool:
        """Is ``obj`` in ``recep`` (an object may be in several receptacles at once)?"""
        return self._ridx[recep] in self.where[self._oidx[obj]]

    def put_command(self, obj: str, recep: str) -> str:
        """The command that puts ``obj`` in/on ``recep`` in this game's grammar ("move X to Y" or "put X in/on Y")."""
        return self._logic.put_command.format(o=obj, r=recep)

    @property
    def cleaning_types(self) -> frozenset[str]:
        """The receptacle types this game's CleanObject accepts (its ALFWorld logic generation)."""
        return self._clean_types

    def object_state(self, obj: str) -> dict[str, bool]:
        """The state flags of ``obj``: is_clean, is_hot, is_cool, is_wet, is_sliced."""
        o = self._oidx[obj]
        return {
            "is_clean": self.clean[o],
            "is_hot": self.hot[o],
            "is_cool": self.cool[o],
            "is_wet": self.wet[o],
            "is_sliced": self.sliced[o],
        }

    def knives(self) -> list[str]:
        """The objects a slice command can be made with (``KNIFE_TYPES``: alfred.pddl's SliceObject), by name."""
        return [n for n, k in zip(self._onames, self._knife, strict=True) if k]

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


__all__ = [
    "CAN_CONTAIN",
    "CLEANING_TYPES",
    "COOLING_TYPES",
    "HEATING_TYPES",
    "HELP_TEXT",
    "NOTHING_HAPPENS",
    "NOWHERE",
    "OBJECT_CLASSES",
    "OBJECT_TYPES",
    "RECEPTACLE_TYPES",
    "ROOM_KINDS",
    "TASK_TYPES",
    "WELCOME",
    "GameSpec",
    "ObjectSpec",
    "ReceptacleSpec",
    "TaskSpec",
    "World",
    "check_task_type",
]
