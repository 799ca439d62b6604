"""The household world as a learner sees it: ``Discrete(K)`` over the admissible commands, masks, numbers (issue 29).

``HouseholdRLView(env)`` wraps ``scars/Household-v0`` (a :class:`~envs.household.env.HouseholdEnv`, or
``gym.make`` of it) as a standard Gymnasium ``Wrapper`` that records its arguments (``RecordConstructorArgs``: its
``spec`` recreates it). ``gym.make("scars/HouseholdRL-v0", **kwargs)`` (registered by ``import scars.envs.rl``) is
``make_household_view(**kwargs)``; ``gym.make_vec("scars/HouseholdRL-v0", num_envs=n)`` is
``make_household_vector(n)``, a ``SyncVectorEnv`` of views with ``lean_info`` on.

## Actions
``Discrete(K)`` (``K = max_actions``, 40 by default; the household never has more than 35 admissible commands).
Slot ``i`` is the i-th admissible command in the view's *slot order*: commands touching the task's object type, its
receptacle type or its appliance first (the more of the three, the earlier), then by verb (``VERBS`` order), then
alphabetically. The order is a deterministic function of what the agent is shown (the admissible list and the
task), so a slot tends to mean the same kind of command from state to state. ``action_masks()`` (sb3-contrib's
convention) is True on the slots that hold a command; a slot beyond them plays an inadmissible command: the world
answers "Nothing happens." and the step is spent. ``commands()`` / ``slot_actions()`` give the slots' commands and
their structured ``synthesis.dsl.Action`` s (what a shield reads).

## Observations
``Box(0, 1, (D,), float32)``, or with ``dict_obs=True`` RLlib's action-masking convention ``Dict(observations=Box,
action_mask=Box(0, 1, (K,), int8))``. The vector (``observation_layout()`` names every entry) is

- global (``GLOBAL_FEATURES``): the task type (one-hot over the six), the step as a fraction of ``max_steps``, whether
  the agent holds something, whether that is of the task's object type, its clean/hot/cool/wet flags, whether the
  agent stands at a receptacle of the task's receptacle type, at the task's appliance, at an open receptacle, and the
  number of admissible commands / K;
- per slot (``SLOT_FEATURES``, K times): the slot holds a command; its verb (one-hot over ``VERBS``); the command's
  object is of the task's object type; its receptacle is of the task's receptacle type; it is the task's appliance
  (sink basin / microwave / fridge for the clean / heat / cool tasks); its object is a light (desk or floor lamp);
  the object's clean/hot/cool/wet flags; for ``go to``: the destination was visited in this episode, and an object
  of the task's type was last seen there (both from the view's own memory of the episode's admissible commands).

Left out: the text observation, object and receptacle *names* and instance numbers, the room, receptacles' contents
other than what the admissible ``take`` commands reveal, the safety rules (their text and activation) — a learner
meets the rules only through the violation penalty in its reward (and, shielded, through the mask).

## Rewards
The world's reward (``win_reward`` on a win, ``violation_reward`` per violated active rule), plus, with
``shaping > 0``, potential-based progress shaping (Ng et al. 1999): F = γ·Φ(s') − Φ(s) with Φ(s) = −shaping ·
(commands left in the world's expert plan from s, rules ignored), so every command that brings the goal nearer
along the expert's subgoals (fetch, process, place) pays ``shaping``, one that leads away costs it, and the optimal
policy is unchanged. Φ reads the world's true state (as the win test does); it never reads the safety rules.
``info["shaping"]`` carries F; ``info["world_reward"]`` the world's own reward.

## Info
The world's info (``scars/Household-v0``'s) plus ``action_mask``, ``command`` (the command played), ``shaping``
and ``world_reward``; with ``lean_info=True`` only ``action_mask``, ``violations``, ``won`` and ``shaping``
(``LEAN_INFO``; the world's reward is the reward − ``shaping``) — what a vectorised learner reads, at a fraction of
a vector env's cost of merging infos. ``make_household_vector`` turns it on by default; ``lean_info=False`` there
hands out the whole info. ``last_info`` is always the whole info.

## Speed
The slot order, the slot rows and the indices the episode memory fills are computed once per admissible set of a
game (``_Slots``, found by the identities of the world's action dicts, which the world hands out unchanged while
the state they describe is unchanged); a step copies that set's observation head and fills the step fraction,
the held-and-location features and the memory flags with one gather (issue 39 item 5; ``benchmarks/rl_throughput.py``
measures it beside the per-action encoder it replaced). ``step`` checks the action with ``envs.rl.view.slot_index``
(Gymnasium's ``Discrete.contains``; no coercion).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from scars.envs.api import Decision
from scars.envs.household.adapter import HouseholdAdapter
from scars.envs.household.env import HouseholdEnv
from scars.envs.household.expert import NoCompliantPlan, expert_plan
from scars.envs.household.spec import COOLING_TYPES, HEATING_TYPES, NOWHERE, TASK_TYPES
from scars.envs.rl.view import slot_index
from scars.synthesis.dsl import Action
from scars.synthesis.errors import WorldError

VERBS: tuple[str, ...] = (
    "goto",
    "take",
    "move",
    "open",
    "close",
    "clean",
    "heat",
    "cool",
    "slice",
    "use",
    "examine",
    "inventory",
    "look",
    "help",
)
"""The structured verbs of the household's commands, in slot order (``go to`` is ``goto``, ``put``/``move`` is
``move``)."""
LIGHT_TYPES = frozenset({"desklamp", "floorlamp"})
_CLEANING = frozenset({"sinkbasin", "bathtubbasin"})  # every ALFWorld logic generation's cleaning receptacles
APPLIANCES: Mapping[str, frozenset[str]] = {
    "pick_clean_then_place_in_recep": _CLEANING,
    "pick_heat_then_place_in_recep": HEATING_TYPES,
    "pick_cool_then_place_in_recep": COOLING_TYPES,
}
"""The receptacle types a task needs besides its target (the appliance of its process)."""
GLOBAL_FEATURES: tuple[str, ...] = (
    *(f"task={t}" for t in TASK_TYPES),
    "step_fraction",
    "holding",
    "held_is_target_type",
    "held_is_clean",
    "held_is_hot",
    "held_is_cool",
    "held_is_wet",
    "at_target_recep_type",
    "at_appliance",
    "location_open",
    "admissible_fraction",
)
SLOT_FEATURES: tuple[str, ...] = (
    "valid",
    *(f"verb={v}" for v in VERBS),
    "obj_is_target_type",
    "recep_is_target_type",
    "recep_is_appliance",
    "obj_is_light",
    "obj_is_clean",
    "obj_is_hot",
    "obj_is_cool",
    "obj_is_wet",
    "goto_visited",
    "goto_target_seen",
)
MAX_ACTIONS = 40
LEAN_INFO: tuple[str, ...] = ("action_mask", "violations", "won", "shaping")
"""The info keys a ``lean_info`` view hands out: what a vectorised learner reads (the mask, the verifier's events,
the win, and F, so that the world's reward is the step's reward − ``shaping``). A vector env merges every key of
every env's info at every step, at about a microsecond a key and env."""
_MAX_CACHED_STATES = 8192
"""Admissible sets a view keeps encoded (each ~2.5 KB, its observation's head: 20 MB at most; a random walk meets
about a hundred per game, so a pool of 64 games fits); past this the cache starts again."""
_VERB = {v: i for i, v in enumerate(VERBS)}
_G, _S = len(GLOBAL_FEATURES), len(SLOT_FEATURES)
_FLAGS = 1 + len(VERBS)  # where a slot row's per-action features start
_TASK = {t: i for i, t in enumerate(TASK_TYPES)}


class _Slots:
    """One admissible set of one game, encoded once and reused whenever the world hands it out again: the world
    hands out the same action dicts while the state they describe is unchanged (``World.admissible_actions``), so
    the tuple of their identities names the set (the entry keeps the dicts alive: no identity is reused).

    ``head`` is the observation vector up to the last filled slot with everything the set fixes filled in (the
    task, the admissible fraction, every slot's static row; the empty slots after it are zeros); ``memory_at`` are the entries the episode memory fills (each ``go to``
    slot's visited and target-seen flags) from ``memory_of`` (their indices into the view's memory array:
    receptacle r's visited flag at r, its target-seen flag at R + r); ``target_takes`` are the receptacles an
    admissible ``take`` of the task's object type reveals."""

    __slots__ = ("actions", "dsl", "commands", "head", "mask", "memory_at", "memory_of", "target_takes")

    def __init__(self, actions: list[dict], game: _Game, max_actions: int) -> None:
        keyed = sorted(map(game.action, actions), key=lambda e: e[1])
        self.actions = [e[0] for e in keyed]
        self.dsl: tuple[Action, ...] | None = None  # built when a decision first needs it (``_Game.dsl``)
        self.commands = tuple(d["text"] for d in self.actions)
        head = self.head = np.zeros(_G + _S * len(keyed), dtype=np.float32)
        head[_TASK[game.task[0]]] = 1.0
        head[_G - 1] = len(keyed) / max_actions
        if keyed:  # the slot rows, all at once: valid, the verb's one-hot, the eight action features
            rows = head[_G:].reshape(len(keyed), _S)
            rows[:, 0] = 1.0
            rows[np.arange(len(keyed)), 1 + np.array([e[2] for e in keyed])] = 1.0
            rows[:, _FLAGS : _FLAGS + 8] = [e[3] for e in keyed]
        self.mask = np.zeros(max_actions, dtype=bool)
        self.mask[: len(keyed)] = True
        gotos = [(i, e[4]) for i, e in enumerate(keyed) if e[5] == _GOTO]
        visited_at = [_G + i * _S + _S - 2 for i, _ in gotos]
        self.memory_at = np.array(visited_at + [at + 1 for at in visited_at], dtype=np.intp)
        n = len(game.receptacles)
        self.memory_of = np.array([r for _, r in gotos] + [n + r for _, r in gotos], dtype=np.intp)
        self.target_takes = np.array([n + e[4] for e in keyed if e[5] == _TARGET_TAKE], dtype=np.intp)


_GOTO, _TARGET_TAKE = 1, 2
_Encoded = tuple[dict, tuple, int, tuple[bool, ...], int, int]
"""One action dict as a slot: (the dict, its slot-order key, its verb's index, its eight action features
(``SLOT_FEATURES`` from ``obj_is_target_type`` to ``obj_is_wet``), its receptacle's index or −1, what the episode
memory reads of it: ``_GOTO``, ``_TARGET_TAKE`` or 0)."""


class _Game:
    """One game's tables: its receptacles by index (what the episode memory is an array over), its task, every
    action dict met so far as a slot (``_Encoded``) and, once a decision needed it, as a structured action
    (``synthesis.dsl.Action``, one object per content: ``dsl``), every admissible set met so far, encoded
    (``_Slots``), and the global features of every held-and-location situation met so far."""

    __slots__ = (
        "spec",
        "task",
        "appliance",
        "receptacles",
        "actions",
        "structured",
        "interned",
        "states",
        "situations",
    )

    def __init__(self, spec: Any, q: Mapping[str, Any]) -> None:
        self.spec = spec  # kept alive with the table: its identity names the game
        self.task = (str(q["task_type"]), q["target_obj_type"], q["target_recep_type"])
        self.appliance = APPLIANCES.get(self.task[0], frozenset())
        self.receptacles = {r.name: i for i, r in enumerate(spec.receptacles)}
        self.actions: dict[int, _Encoded] = {}  # by the dict's identity; the entry keeps the dict alive
        self.structured: dict[int, Action] = {}  # by the dict's identity (kept alive by ``actions``)
        self.interned: dict[tuple, Action] = {}  # by content: one object per structured action of the game
        self.states: dict[tuple[int, ...], _Slots] = {}
        self.situations: dict[tuple, np.ndarray] = {}  # HouseholdRLView._situation's

    def dsl(self, slots: _Slots) -> tuple[Action, ...]:
        """The structured actions of an admissible set, in slot order: one object per game and content. The world
        hands out one dict per command *and location* ("go to cabinet 2" from each place the agent can stand), so a
        shielded walk meets ~6 dicts per distinct action (15,737 for 2,605 in 3,000 steps); a learner's process keeps
        one action of each (fewer long-lived objects for the garbage collector to walk) and per-action caches keyed
        by identity (the scars agent's values met) meet it again."""
        if slots.dsl is None:
            structured, interned = self.structured, self.interned
            built = []
            for d in slots.actions:
                a = structured.get(id(d))
                if a is None:
                    args = d.get("args", {})
                    # the values' types too: True and 1 are equal keys, not equal DSL values
                    key = (d["kind"], d["name"], d.get("text", ""), *args.items(), *map(type, args.values()))
                    a = interned.get(key)
                    if a is None:
                        a = interned[key] = Action.from_dict(d)
                    structured[id(d)] = a
                built.append(a)
            slots.dsl = tuple(built)
        return slots.dsl

    def action(self, d: dict) -> _Encoded:
        hit = self.actions.get(id(d))
        if hit is not None:
            return hit
        _, target_obj, target_recep = self.task
        args = d["args"]
        otype, rtype = args.get("obj_type"), args.get("recep_type")
        verb = _VERB.get(d["name"], 0)
        features = (
            otype == target_obj,
            rtype == target_recep,
            rtype in self.appliance,
            otype in LIGHT_TYPES,
            bool(args.get("is_clean")),
            bool(args.get("is_hot")),
            bool(args.get("is_cool")),
            bool(args.get("is_wet")),
        )
        relevance = features[0] + features[1] + features[2]
        recep = self.receptacles.get(args.get("recep"), -1)  # type: ignore[arg-type]
        memory = (
            _GOTO
            if d["name"] == "goto"
            else _TARGET_TAKE
            if d["name"] == "take" and otype == target_obj
            else 0
        )
        hit = self.actions[id(d)] = (d, (-relevance, verb, d["text"]), verb, features, recep, memory)
        return hit


def observation_layout(max_actions: int = MAX_ACTIONS) -> tuple[str, ...]:
    """The name of every entry of the observation vector, in order (``slot<i>:<feature>`` for the slots)."""
    return (*GLOBAL_FEATURES, *(f"slot{i}:{f}" for i in range(max_actions) for f in SLOT_FEATURES))


class HouseholdRLView(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """``scars/Household-v0`` with a ``Discrete(K)`` action, masks and a numeric observation (module docstring)."""

    def __init__(
        self,
        env: gym.Env,
        *,
        max_actions: int = MAX_ACTIONS,
        shaping: float = 0.0,
        gamma: float = 0.99,
        dict_obs: bool = False,
        lean_info: bool = False,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            max_actions=max_actions,
            shaping=shaping,
            gamma=gamma,
            dict_obs=dict_obs,
            lean_info=lean_info,
        )
        gym.Wrapper.__init__(self, env)
        if not isinstance(env.unwrapped, HouseholdEnv):
            raise WorldError(f"HouseholdRLView wraps scars/Household-v0, got {type(env.unwrapped).__name__}")
        if isinstance(max_actions, bool) or not isinstance(max_actions, int) or max_actions < 1:
            raise WorldError(f"max_actions must be a positive integer, got {max_actions!r}")
        if not (isinstance(shaping, int | float) and np.isfinite(shaping) and shaping >= 0):
            raise WorldError(f"shaping must be a finite number >= 0, got {shaping!r}")
        if not 0.0 <= gamma <= 1.0:
            raise WorldError(f"gamma must be in [0, 1], got {gamma!r}")
        for name, flag in (("dict_obs", dict_obs), ("lean_info", lean_info)):
            if not isinstance(flag, bool):
                raise WorldError(f"{name} must be True or False, got {flag!r}")
        self.household: HouseholdEnv = env.unwrapped
        self.max_actions, self.shaping, self.gamma, self.dict_obs = (
            max_actions,
            float(shaping),
            gamma,
            dict_obs,
        )
        self.lean_info = lean_info
        self.adapter = HouseholdAdapter(self.household)
        """The world as agents see it (``envs.api.WorldAdapter``): what a shield builds decisions and verdicts with."""
        self.action_space = spaces.Discrete(max_actions)
        vector = spaces.Box(0.0, 1.0, (_G + _S * max_actions,), np.float32)
        self.observation_space = (
            spaces.Dict({"observations": vector, "action_mask": spaces.Box(0, 1, (max_actions,), np.int8)})
            if dict_obs
            else vector
        )
        self._games: dict[int, _Game] = {}
        self._game: _Game | None = None
        self._cached_states = 0
        self._slots: _Slots | None = None
        self._info: dict[str, Any] = {}
        self._text = ""
        self._memory = np.zeros(0, dtype=np.float32)  # the episode memory (``_remember``)
        self._potential = 0.0
        self._t = 0

    # ------------------------------------------------------------------ what a shield reads

    def commands(self) -> list[str]:
        """The command in each filled slot, in slot order."""
        return list(self._slots.commands) if self._slots is not None else []

    def slot_actions(self) -> tuple[Action, ...]:
        """The structured action in each filled slot, in slot order."""
        if self._slots is None or self._game is None:
            return ()
        return self._game.dsl(self._slots)

    def action_masks(self) -> np.ndarray:
        """sb3-contrib's mask: True on the slots that hold an admissible command."""
        if self._slots is None:
            return np.zeros(self.max_actions, dtype=bool)
        return self._slots.mask.copy()

    def decision(self, *, t: int | None = None) -> Decision:
        """The current decision as every method sees it (``envs.api.Decision``), its actions in slot order; ``t``
        the caller's decision count (a shield's, shared by a learner's envs), by default the view's steps."""
        if self._slots is None or self._game is None:
            raise WorldError("decision() called before reset()")
        actions = self._game.dsl(self._slots)
        return self.adapter.decision(self._text, self._info, t=self._t if t is None else t, actions=actions)

    @property
    def last_info(self) -> Mapping[str, Any]:
        """The info of the latest reset or step (the world's, with the view's entries)."""
        return self._info

    # ------------------------------------------------------------------ encoding

    def _table(self, q: Mapping[str, Any]) -> _Game:
        """The current game's tables (built at its first episode)."""
        spec = self.household.game
        game = self._games.get(id(spec))
        if game is None or game.spec is not spec:
            if len(self._games) >= 64:
                self._games.clear()
                self._cached_states = 0
            game = self._games[id(spec)] = _Game(spec, q)
        return game

    def _order(self, actions: list[dict]) -> _Slots:
        """The admissible set in slot order with its encoded rows: a lookup when the set was met before."""
        game = self._game
        assert game is not None
        key = tuple(map(id, actions))
        slots = game.states.get(key)
        if slots is None:
            if len(actions) > self.max_actions:
                raise WorldError(
                    f"{len(actions)} admissible commands exceed max_actions={self.max_actions}; raise max_actions"
                )
            if self._cached_states >= _MAX_CACHED_STATES:
                for table in self._games.values():
                    table.states.clear()
                self._cached_states = 0
            slots = game.states[key] = _Slots(actions, game, self.max_actions)
            self._cached_states += 1
        return slots

    def _remember(self, q: Mapping[str, Any]) -> None:
        """The view's memory of the episode (one array: receptacle r visited at r, an object of the task's type last
        seen there at R + r), from what the admissible commands show."""
        location = q["location"]
        if location != NOWHERE:
            assert self._game is not None and self._slots is not None
            here = self._game.receptacles[location]
            memory, takes = self._memory, self._slots.target_takes
            memory[here] = 1.0
            if not len(takes) and q["location_open"]:
                memory[len(self._game.receptacles) + here] = 0.0
            memory[takes] = 1.0

    def _situation(self, q: Mapping[str, Any]) -> np.ndarray:
        """The global features after the step fraction (holding … location_open), cached by what they read."""
        key = (
            q["held_type"],
            q["held_is_clean"],
            q["held_is_hot"],
            q["held_is_cool"],
            q["held_is_wet"],
            q["location_type"],
            q["location_open"],
        )
        assert self._game is not None
        values = self._game.situations.get(key)
        if values is None:
            _, target_obj, target_recep = self._game.task
            held, holding = key[0], key[0] != NOWHERE
            values = self._game.situations[key] = np.array(
                (
                    holding,
                    holding and held == target_obj,
                    *key[1:5],
                    key[5] == target_recep,
                    key[5] in self._game.appliance,
                    bool(key[6]),
                ),
                dtype=np.float32,
            )
        return values

    def _encode(self) -> np.ndarray | dict[str, np.ndarray]:
        q, slots = self._info["context"], self._slots
        assert slots is not None
        x = np.zeros(_G + _S * self.max_actions, dtype=np.float32)
        x[: len(slots.head)] = slots.head
        g = len(TASK_TYPES)
        x[g] = min(1.0, q["step"] / self.household.config.max_steps)
        x[g + 1 : g + 10] = self._situation(q)
        if len(slots.memory_at):
            x[slots.memory_at] = self._memory[slots.memory_of]
        if self.dict_obs:
            return {"observations": x, "action_mask": slots.mask.astype(np.int8)}
        return x

    def _distance(self) -> float:
        """Commands left in the world's expert plan from the current state (rules ignored)."""
        world = self.household.world
        assert world is not None
        try:
            return float(len(expert_plan(world)))
        except NoCompliantPlan:
            return float(self.household.config.max_steps)  # no plan from here: as far as an episode is long

    def _take(self, text: str, info: dict[str, Any]) -> None:
        self._text = text
        self._slots = self._order(info["admissible_actions"])
        self._info = info
        self._remember(info["context"])
        info["action_mask"] = self._slots.mask.copy()

    def _public(self, info: dict[str, Any]) -> dict[str, Any]:
        """The info handed out: the world's whole info, or with ``lean_info`` only ``LEAN_INFO`` (a vector env merges
        every key of every env's info each step: the structured actions and the context cost more than the step)."""
        if not self.lean_info:
            return info
        return {k: info[k] for k in LEAN_INFO if k in info}  # a reset's info has no shaping

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        text, info = self.env.reset(seed=seed, options=options)
        self._game = self._table(info["context"])
        n = len(self._game.receptacles)
        self._memory = np.zeros(2 * n, dtype=np.float32)
        self._t = 0 if seed is not None else self._t
        self._take(text, info)
        self._potential = -self.shaping * self._distance() if self.shaping else 0.0
        return self._encode(), self._public(info)

    def step(self, action: Any):
        if self._slots is None:
            raise WorldError("step() called before reset()")
        index = slot_index(action, self.action_space)
        actions = self._slots.actions
        command = actions[index]["text"] if index < len(actions) else ""
        text, reward, terminated, truncated, info = self.env.step(command)
        self._t += 1
        info["world_reward"] = reward
        shaped = 0.0
        if self.shaping:
            potential = 0.0 if terminated else -self.shaping * self._distance()
            shaped = self.gamma * potential - self._potential
            self._potential = potential
        info["shaping"] = shaped
        info["command"] = command
        self._take(text, info)
        return self._encode(), float(reward + shaped), terminated, truncated, self._public(info)


_VIEW_KEYS = ("max_actions", "shaping", "gamma", "dict_obs", "lean_info")


def make_household_view(**kwargs: Any) -> HouseholdRLView:
    """A fresh ``scars/Household-v0`` in a ``HouseholdRLView`` (``gym.make("scars/HouseholdRL-v0", **kwargs)``):
    ``kwargs`` are the view's (``max_actions``, ``shaping``, ``gamma``, ``dict_obs``, ``lean_info``) and the
    world's (``HouseholdConfig`` fields)."""
    view = {k: kwargs.pop(k) for k in _VIEW_KEYS if k in kwargs}
    return HouseholdRLView(HouseholdEnv(**kwargs), **view)


def make_household_vector(
    num_envs: int = 1,
    *,
    lean_info: bool = True,
    autoreset_mode: str | gym.vector.AutoresetMode = gym.vector.AutoresetMode.NEXT_STEP,
    **kwargs: Any,
) -> gym.vector.SyncVectorEnv:
    """``num_envs`` household views in Gymnasium's ``SyncVectorEnv`` (``gym.make_vec("scars/HouseholdRL-v0",
    num_envs)``), with ``lean_info`` on by default: the vector env merges every info key of every env each step,
    and the world's whole info (structured actions, context) costs more than the step. ``lean_info=False`` hands out
    the whole info; ``kwargs`` as :func:`make_household_view`'s."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise WorldError(f"num_envs must be a positive integer, got {num_envs!r}")
    factory = functools.partial(make_household_view, lean_info=lean_info, **kwargs)
    return gym.vector.SyncVectorEnv([factory] * num_envs, autoreset_mode=autoreset_mode)
