"""The household world as a learner sees it: ``Discrete(K)`` over the admissible commands, masks, numbers (issue 29).

``HouseholdRLView(env)`` wraps ``scars/Household-v0`` (a :class:`~envs.household.env.HouseholdEnv`, or
``gym.make`` of it) as a standard Gymnasium ``Wrapper``.

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
and ``world_reward``; with ``lean_info=True`` only those and ``violations`` and ``won`` (``LEAN_INFO``) — what a
vectorised learner needs, at a fraction of a vector env's cost of merging infos.
"""

from __future__ import annotations

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
LEAN_INFO: tuple[str, ...] = ("violations", "won", "world_reward", "shaping", "command", "action_mask")
"""The info keys a ``lean_info`` view hands out."""
_MAX_CACHED_SLOTS = 50_000
_VERB = {v: i for i, v in enumerate(VERBS)}
_G, _S = len(GLOBAL_FEATURES), len(SLOT_FEATURES)
_VERB_ROWS = [
    np.eye(1, _S, 1 + v, dtype=np.float32)[0] + np.eye(1, _S, 0, dtype=np.float32)[0]
    for v in range(len(VERBS))
]
"""Per verb: a slot row with ``valid`` and the verb's one-hot set (the rest filled per action)."""
_TASK = {t: i for i, t in enumerate(TASK_TYPES)}


def observation_layout(max_actions: int = MAX_ACTIONS) -> tuple[str, ...]:
    """The name of every entry of the observation vector, in order (``slot<i>:<feature>`` for the slots)."""
    return (*GLOBAL_FEATURES, *(f"slot{i}:{f}" for i in range(max_actions) for f in SLOT_FEATURES))


class HouseholdRLView(gym.Wrapper):
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
        super().__init__(env)
        if not isinstance(env.unwrapped, HouseholdEnv):
            raise WorldError(f"HouseholdRLView wraps scars/Household-v0, got {type(env.unwrapped).__name__}")
        if isinstance(max_actions, bool) or not isinstance(max_actions, int) or max_actions < 1:
            raise WorldError(f"max_actions must be a positive integer, got {max_actions!r}")
        if not (isinstance(shaping, int | float) and np.isfinite(shaping) and shaping >= 0):
            raise WorldError(f"shaping must be a finite number >= 0, got {shaping!r}")
        if not 0.0 <= gamma <= 1.0:
            raise WorldError(f"gamma must be in [0, 1], got {gamma!r}")
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
        self._actions: list[dict] = []
        self._info: dict[str, Any] = {}
        self._text = ""
        self._visited: set[str] = set()
        self._target_seen: set[str] = set()
        self._potential = 0.0
        self._t = 0
        self._slots: dict[int, tuple[dict, tuple, tuple, np.ndarray]] = {}
        self._rows: list[np.ndarray] = []

    # ------------------------------------------------------------------ what a shield reads

    def commands(self) -> list[str]:
        """The command in each filled slot, in slot order."""
        return [d["text"] for d in self._actions]

    def slot_actions(self) -> tuple[Action, ...]:
        """The structured action in each filled slot, in slot order."""
        return tuple(Action.from_dict(d) for d in self._actions)

    def action_masks(self) -> np.ndarray:
        """sb3-contrib's mask: True on the slots that hold an admissible command."""
        mask = np.zeros(self.max_actions, dtype=bool)
        mask[: len(self._actions)] = True
        return mask

    def decision(self) -> Decision:
        """The current decision as every method sees it (``envs.api.Decision``), its actions in slot order."""
        d = self.adapter.decision(self._text, {**self._info, "admissible_actions": self._actions}, t=self._t)
        return d

    @property
    def last_info(self) -> Mapping[str, Any]:
        """The info of the latest reset or step (the world's, with the view's entries)."""
        return self._info

    # ------------------------------------------------------------------ encoding

    def _slot(self, d: dict, q: Mapping[str, Any]) -> tuple[tuple, np.ndarray]:
        """(slot-order key, static slot features) of one admissible action, cached: the world hands out the same
        dict objects while an object's state flags are unchanged, and the features depend only on the dict and the
        task (checked on every hit)."""
        task = (q["task_type"], q["target_obj_type"], q["target_recep_type"])
        hit = self._slots.get(id(d))
        if hit is not None and hit[0] is d and hit[1] == task:
            return hit[2], hit[3]
        args = d["args"]
        target_obj, target_recep = task[1], task[2]
        appliance = APPLIANCES.get(str(task[0]), frozenset())
        otype, rtype = args.get("obj_type"), args.get("recep_type")
        verb = _VERB.get(d["name"], 0)
        features = (
            otype == target_obj,
            rtype == target_recep,
            rtype in appliance,
            otype in LIGHT_TYPES,
            bool(args.get("is_clean")),
            bool(args.get("is_hot")),
            bool(args.get("is_cool")),
            bool(args.get("is_wet")),
        )
        row = _VERB_ROWS[verb].copy()
        row[1 + len(VERBS) : 1 + len(VERBS) + 8] = features
        key = (-(features[0] + features[1] + features[2]), verb, d["text"])
        if len(self._slots) > _MAX_CACHED_SLOTS:
            self._slots.clear()
        self._slots[id(d)] = (
            d,
            task,
            key,
            row,
        )  # the dict is kept alive with its entry: its id is not reused
        return key, row

    def _order(self, actions: list[dict], q: Mapping[str, Any]) -> None:
        """Sort the admissible actions into slot order; keep their static feature rows beside them."""
        if len(actions) > self.max_actions:
            raise WorldError(
                f"{len(actions)} admissible commands exceed max_actions={self.max_actions}; raise max_actions"
            )
        entries = sorted(((*self._slot(d, q), d) for d in actions), key=lambda e: e[0])
        self._actions = [e[2] for e in entries]
        self._rows = [e[1] for e in entries]

    def _remember(self, q: Mapping[str, Any]) -> None:
        """The view's memory of the episode: receptacles visited, and where an object of the task's type was seen."""
        location = q["location"]
        if location != NOWHERE:
            self._visited.add(str(location))
            target = q["target_obj_type"]
            here = {
                d["args"]["recep"]
                for d in self._actions
                if d["name"] == "take" and d["args"].get("obj_type") == target
            }
            if not here and q["location_open"]:
                self._target_seen.discard(str(location))
            self._target_seen |= here

    def _encode(self) -> np.ndarray | dict[str, np.ndarray]:
        q = self._info["context"]
        k = self.max_actions
        x = np.zeros(_G + _S * k, dtype=np.float32)
        task = str(q["task_type"])
        target_obj, target_recep = q["target_obj_type"], q["target_recep_type"]
        appliance = APPLIANCES.get(task, frozenset())
        x[_TASK[task]] = 1.0
        g = len(TASK_TYPES)
        x[g] = min(1.0, float(q["step"]) / self.household.config.max_steps)
        holding = q["held_type"] != NOWHERE
        x[g + 1] = holding
        x[g + 2] = holding and q["held_type"] == target_obj
        x[g + 3 : g + 7] = (q["held_is_clean"], q["held_is_hot"], q["held_is_cool"], q["held_is_wet"])
        x[g + 7] = q["location_type"] == target_recep
        x[g + 8] = q["location_type"] in appliance
        x[g + 9] = bool(q["location_open"])
        x[g + 10] = len(self._actions) / k
        actions = self._actions
        if actions:
            rows = x[_G : _G + _S * len(actions)].reshape(len(actions), _S)
            rows[:] = self._rows
            visited, seen = self._visited, self._target_seen
            if visited or seen:
                for i, d in enumerate(actions):
                    if d["name"] == "goto":
                        recep = d["args"]["recep"]
                        rows[i, _S - 2] = recep in visited
                        rows[i, _S - 1] = recep in seen
        if self.dict_obs:
            return {"observations": x, "action_mask": self.action_masks().astype(np.int8)}
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
        self._order(info["admissible_actions"], info["context"])
        self._info = info
        self._remember(info["context"])
        info["action_mask"] = self.action_masks()

    def _public(self, info: dict[str, Any]) -> dict[str, Any]:
        """The info handed out: the world's whole info, or with ``lean_info`` only ``LEAN_INFO`` (a vector env merges
        every key of every env's info each step: the structured actions and the context cost more than the step)."""
        return {k: info[k] for k in LEAN_INFO if k in info} if self.lean_info else info

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        text, info = self.env.reset(seed=seed, options=options)
        self._visited, self._target_seen = set(), set()
        self._t = 0 if seed is not None else self._t
        self._take(text, info)
        self._potential = -self.shaping * self._distance() if self.shaping else 0.0
        return self._encode(), self._public(info)

    def step(self, action: Any):
        index = int(action)
        if not 0 <= index < self.max_actions:
            raise WorldError(f"action {action!r} is outside Discrete({self.max_actions})")
        command = self._actions[index]["text"] if index < len(self._actions) else ""
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


def make_household_view(**kwargs: Any) -> HouseholdRLView:
    """A fresh ``scars/Household-v0`` in a ``HouseholdRLView``: ``kwargs`` are the view's (``max_actions``,
    ``shaping``, ``gamma``, ``dict_obs``) and the world's (``HouseholdConfig`` fields)."""
    view_keys = ("max_actions", "shaping", "gamma", "dict_obs", "lean_info")
    view = {k: kwargs.pop(k) for k in view_keys if k in kwargs}
    return HouseholdRLView(HouseholdEnv(**kwargs), **view)
