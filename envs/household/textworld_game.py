"""The real ALFWorld engine as the reference for the native household world (SPEC §7 tier 1, §9).

:class:`TextWorldGame` plays any ``.tw-pddl`` file (an exported one or a real ALFWorld game) through TextWorld's
PDDL engine with ALFWorld's ``AlfredDemangler`` names, and exposes what the native
:class:`~envs.household.world.World` exposes: observation, admissible commands, structured admissible actions,
the flat context q that rule guards read, and ``won``.

TextWorld is an optional extra (``pip install 'scars-testbed[textworld]'`` plus ``pip install --no-deps alfworld``);
it is imported only when a game is played, and its absence raises :class:`TextWorldMissing` saying what to install.
The facts the native engine relies on (naming, listing order, texts, admissibility) are measured against this
engine by ``tests/envs/household/test_textworld_differential.py`` and ``test_alfworld_lockstep.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scars.envs.household.game_file import (
    INSTALL_HINT,
    TextWorldMissing,
    load_game_file,
    parse_task_text,
    spec_from_dict,
)
from scars.envs.household.spec import NOWHERE, GameSpec
from scars.synthesis.dsl.ast import Value
from scars.synthesis.errors import WorldError


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


# ---------------------------------------------------------------------------------------------- playing


_VERB_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), v)
    for p, v in (
        (r"^go to (?P<recep>.+)$", "goto"),
        (r"^open (?P<recep>.+)$", "open"),
        (r"^close (?P<recep>.+)$", "close"),
        (r"^take (?P<obj>.+) from (?P<recep>.+)$", "take"),
        (r"^move (?P<obj>.+) to (?P<recep>.+)$", "move"),
        (r"^put (?P<obj>.+) in/on (?P<recep>.+)$", "move"),  # the pre-0.4 grammar's PutObject
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
    here: tuple[str, ...] = ()
    """Every receptacle at the agent's location."""


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
            imported: GameSpec | None = load_game_file(path)
        except WorldError:
            try:
                imported = load_game_file(path, alfworld_logic=True)
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
        self._types: dict[str, str] = {}  # shown name -> type, from the objectType/receptacleType facts
        self.steps = 0

    # ------------------------------------------------------------------ engine state

    def _type_of(self, name: str) -> str:
        """The type of a shown name, as the problem's objectType/receptacleType facts say ("bathtubbasin 1" may be
        a sinkbasin); the name's stem where no fact does."""
        return self._types.get(name) or _type_of(name)

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
            elif n in ("objecttype", "receptacletype") and args[0] not in self._types:
                self._types[args[0]] = args[1][: -len("type")] if args[1].endswith("type") else args[1]
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
            here=tuple(here_all),
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

    def facts(self) -> list[Any]:
        """TextWorld's PDDL facts of the current state, with shown names (what ALFWorld's hand-coded expert reads)."""
        return list(self._state["facts"])

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
            "obj_type": self._type_of(obj),
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
                    args = {"recep": thing, "recep_type": self._type_of(thing)}
            elif verb == "slice":
                args = self._object_args(groups["obj"])
                args["tool"] = groups["tool"]
                holder = self._holder(groups["obj"])
                if holder is not None:
                    args["recep"], args["recep_type"] = holder, self._type_of(holder)
            else:
                if groups.get("obj"):
                    args = self._object_args(groups["obj"])
                recep = groups.get("recep") or (self._holder(groups["obj"]) if verb == "use" else None)
                if recep:
                    args["recep"], args["recep_type"] = recep, self._type_of(recep)
            return {"kind": "env", "name": verb, "args": args, "text": command}
        raise WorldError(f"TextWorld admitted a command of unknown form: {command!r}")

    def _holder(self, obj: str) -> str | None:
        """The receptacle holding ``obj`` here (for use/slice, whose commands name no receptacle): the one the agent
        went to if it holds ``obj``, else the first by name; the agent's receptacle when none here holds it."""
        f = self._facts
        assert f is not None
        holders = [r for r in f.here if obj in f.contents.get(r, ())]
        if f.location in holders or not holders:
            return f.location
        return min(holders)

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
            "location_type": self._type_of(loc) if loc is not None else NOWHERE,
            "location_open": bool(loc is not None and loc in f.opened),
            "held_object": held if held is not None else NOWHERE,
            "held_type": self._type_of(held) if held is not None else NOWHERE,
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


__all__ = [
    "INSTALL_HINT",
    "TextWorldGame",
    "TextWorldMissing",
    "canonical_observation",
    "textworld_available",
]
