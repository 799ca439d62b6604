"""``aquifer_v0``: arena C of the paper's tier 3 — farms pumping a shared aquifer (SPEC §7 tier 3).

## Description

|I| farms (4) draw irrigation water from one aquifer for T seasons (10). The aquifer stores at most 60 megalitres;
what is left after pumping recharges by half (×1.5) each season, capped at the capacity, and the aquifer runs dry
when less than 6 megalitres are left after pumping. After pumping, a council meets (each farm says one templated
sentence; a quota proposed or supported by a strict majority is agreed); then each farm may fine any others, which
lowers their standing.

On the surface nothing here is the commons arena of tiers 1–2 (arenas A and B): another resource, other tool names
(``pump``/``idle``/``speak``/``fine``/``waive``), other context and observation names (``aquifer_level``,
``safe_yield_share``, ``standing``, ``season``, ``stage``), other agent ids (``farm_i``), other wording and other
dynamics parameters. Underneath it *is* the same kind of world — a renewable common-pool resource with sanctions —
which is what tier 3 asks: can what an agent learned in A or B carry over through the abstract vocabulary the
worlds' cards declare (``envs.vocabulary``), and only through it. So the physics is honestly reused: the season is
one month of ``envs.commons`` (GovSim's dynamics, with the parameters above and the ``groundwater`` wording), and this
module renames every surface name both ways (``SURFACE``; the renaming is a bijection, tested).

## Stages, spaces, rewards, episode end

As in ``commons_v0`` with the names of ``SURFACE``: stage 0 ``pumping`` (``action["pump"]``), 1 ``council``
(``action["message"]``, ``action["quota"]``, ``action["about"]``), 2 ``fines`` (``action["fine"]``, MultiBinary).
``info["admissible_actions"]`` lists the stage's choices (``pump`` with ``volume``, ``idle``, ``speak``,
``fine`` with ``farm``, ``waive``); ``to_env_action`` maps one back. Reward: the water pumped, minus fine costs.
Terminated at the end of a season in which the aquifer ran dry; truncated after season T.

## Arguments

``parallel_env(render_mode=None, **params)``: the commons engine's parameters (``capacity``, ``growth_factor``,
``collapse_threshold``, ``num_agents``, ``num_months``, ``allocation``, ``max_request``, ``punishment_severity``,
``punishment_cost``, …) override ``DEFAULTS``; bad values raise ``CommonsConfigError`` naming the value.

## Version history

- v0: initial version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils import parallel_to_aec, wrappers

from scars.envs.commons.commons_v0 import CommonsActionError, CommonsParallelEnv, make_config
from scars.synthesis.dsl.ast import FALLBACK_ACTIONS

DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "capacity": 60,
        "growth_factor": 1.5,
        "collapse_threshold": 6,
        "num_agents": 4,
        "num_months": 10,
        "punishment_severity": 15.0,
    }
)
"""Arena C's dynamics parameters (A and B use GovSim's: capacity 100, doubling, C = 5, 5 agents, 12 months)."""

ENGINE_SCENARIO = "groundwater"
ENGINE_ARENA = "A"  # fines are on: the engine's punishment phase under C's names


def _bijection(pairs: Mapping[str, str]) -> tuple[Mapping[str, str], Mapping[str, str]]:
    forward = dict(pairs)
    backward = {v: k for k, v in forward.items()}
    if len(backward) != len(forward):
        raise ValueError(f"a renaming must be one-to-one: {forward}")
    return MappingProxyType(forward), MappingProxyType(backward)


CONTEXT, _CONTEXT_BACK = _bijection(
    {
        "pool_resource_level": "aquifer_level",
        "pool_capacity": "aquifer_capacity",
        "max_request": "max_draw",
        "sustainable_catch": "safe_yield",
        "sustainable_share": "safe_yield_share",
        "month": "season",
        "num_months": "num_seasons",
        "phase": "stage",
        "num_agents": "num_farms",
        "agreed_limit": "quota",
        "has_agreed_limit": "has_quota",
        "collapsed": "dried_up",
        "punishment_enabled": "fines_enabled",
        "own_request": "own_draw",
        "own_catch": "own_pumped",
        "agent_index": "farm_index",
        "karma": "standing",
        "karma_drop": "standing_drop",
        "times_punished": "times_fined",
    }
)
"""Engine context key → arena C's key. The engine's ``scenario``, ``arena`` and ``resource`` items are dropped."""
_DROPPED_CONTEXT = frozenset({"scenario", "arena", "resource"})

OBSERVATION, _OBSERVATION_BACK = _bijection(
    {
        "phase": "stage",
        "month": "season",
        "pool": "level",
        "sustainable_catch": "safe_yield",
        "catches": "pumped",
        "karma": "standing",
        "messages": "messages",
        "agreed_limit": "quota",
        "punished_by": "fined_by",
        "own_index": "own_index",
    }
)
ACTION_FIELDS, _ACTION_FIELDS_BACK = _bijection(
    {"harvest": "pump", "message": "message", "limit": "quota", "about": "about", "punish": "fine"}
)
STAGES, _STAGES_BACK = _bijection({"harvest": "pumping", "discussion": "council", "punishment": "fines"})
TOOLS, _TOOLS_BACK = _bijection(
    {"harvest": "pump", "rest": "idle", "say": "speak", "punish": "fine", "no_punish": "waive"}
)
ARGS, _ARGS_BACK = _bijection(
    {"amount": "volume", "target": "farm", "intent": "intent", "limit": "quota", "about": "about"}
)
INTENTS, _INTENTS_BACK = _bijection(
    {
        "silent": "silent",
        "propose_limit": "propose_quota",
        "support_limit": "support_quota",
        "accuse": "accuse",
        "reassure": "reassure",
    }
)
SURFACE: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "context": CONTEXT,
        "observation": OBSERVATION,
        "action_fields": ACTION_FIELDS,
        "stages": STAGES,
        "tools": TOOLS,
        "args": ARGS,
        "intents": INTENTS,
    }
)
"""Every renaming from the engine's names to arena C's, by kind (each one-to-one)."""

_ENGINE_AGENT = re.compile(r"\bagent_(\d+)\b")
_FARM = re.compile(r"farm_(\d+)")


def farm_id(engine_agent: str) -> str:
    return _ENGINE_AGENT.sub(r"farm_\1", engine_agent)


def engine_agent_id(farm: str) -> str:
    return re.sub(r"\bfarm_(\d+)\b", r"agent_\1", farm)


def _surface_value(key: str, value: Any) -> Any:
    if key == "phase" and isinstance(value, str):
        return STAGES[value]
    if isinstance(value, str):
        return farm_id(value)
    return value


def surface_context(info: Mapping[str, Any]) -> dict[str, Any]:
    """The flat scalar items of an engine ``info`` under arena C's names (non-scalar extras are not included)."""
    out = {}
    for key, value in info.items():
        if key in CONTEXT:
            out[CONTEXT[key]] = _surface_value(key, value)
    return out


def surface_action_choice(choice: Mapping[str, Any]) -> dict[str, Any]:
    """An engine admissible-action dict under arena C's names (tool, arguments, intents and its text)."""
    name = choice["name"]
    args = {}
    for key, value in dict(choice.get("args", {})).items():
        if key == "intent":
            value = INTENTS[value]
        elif isinstance(value, str):
            value = farm_id(value)
        args[ARGS[key]] = value
    text = farm_id(str(choice.get("text", "")))
    if name == "punish":
        text = f"fine {args['farm']}"
    elif name == "no_punish":
        text = "waive all fines"
    elif name == "rest":
        text = "keep the pump off this season"
    return {"kind": choice["kind"], "name": TOOLS[name], "args": args, "text": text}


def engine_action_choice(choice: Mapping[str, Any]) -> dict[str, Any]:
    """Arena C's action dict (an admissible choice or a ``synthesis.dsl.Action.to_dict()``) in engine names."""
    name = choice.get("name")
    if name in FALLBACK_ACTIONS:
        return {"kind": choice.get("kind", "fallback"), "name": name, "args": {}}
    if name not in _TOOLS_BACK:
        raise CommonsActionError(
            f"cannot map {dict(choice)!r} to an aquifer action; known names: {', '.join(_TOOLS_BACK)} and the "
            f"fallbacks {', '.join(sorted(FALLBACK_ACTIONS))}"
        )
    args = {}
    for key, value in dict(choice.get("args", {})).items():
        if key not in _ARGS_BACK:
            raise CommonsActionError(
                f"aquifer action {name!r} has no argument {key!r}; known: {', '.join(_ARGS_BACK)}"
            )
        if key == "intent":
            value = _INTENTS_BACK.get(value, value)
        elif key == "farm" and not (isinstance(value, str) and _FARM.fullmatch(value)):
            raise CommonsActionError(
                f"aquifer action {name!r}: farm = {value!r:.60} is not a farm id (farm_0, …)"
            )
        elif isinstance(value, str):
            value = engine_agent_id(value)
        args[_ARGS_BACK[key]] = value
    return {"kind": choice.get("kind", "tool"), "name": _TOOLS_BACK[name], "args": args}


def engine_observation(observation: Mapping[str, Any]) -> dict[str, Any]:
    """An arena-C observation in the engine's names (what the commons' scripted populations read)."""
    return {_OBSERVATION_BACK[k]: v for k, v in observation.items()}


def engine_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """An arena-C ``info`` in the engine's names (scalar context and the stage's admissible actions)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key in _CONTEXT_BACK:
            engine_key = _CONTEXT_BACK[key]
            if engine_key == "phase":
                value = _STAGES_BACK[value]
            out[engine_key] = value
    out["admissible_actions"] = [engine_action_choice(c) for c in info.get("admissible_actions", ())]
    return out


def surface_engine_action(action: Mapping[str, Any]) -> dict[str, Any]:
    """An action of the engine's space (as the commons' scripted populations return it) in arena C's fields."""
    return {ACTION_FIELDS[k]: v for k, v in action.items()}


class AquiferParallelEnv(ParallelEnv):
    """Arena C as a PettingZoo ``ParallelEnv`` (module docstring): the commons engine under C's surface."""

    metadata = {"render_modes": ["ansi", "human"], "name": "aquifer_v0", "is_parallelizable": True}

    def __init__(self, render_mode: str | None = None, **params: Any) -> None:
        forbidden = {"scenario", "arena"} & set(params)
        if forbidden:
            raise CommonsActionError(
                f"arena C fixes its wording and social rules; {sorted(forbidden)} cannot be set"
            )
        self.config = make_config(**(dict(DEFAULTS) | params), scenario=ENGINE_SCENARIO, arena=ENGINE_ARENA)
        self.engine = CommonsParallelEnv(self.config, render_mode=None)
        self.render_mode = render_mode
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise CommonsActionError(
                f"render_mode={render_mode!r} is unknown; allowed: None, {', '.join(self.metadata['render_modes'])}"
            )
        self.possible_agents = [farm_id(a) for a in self.engine.possible_agents]
        self.agents: list[str] = []
        self._status: dict[str, Any] = {}
        any_agent = self.engine.possible_agents[0]
        self._observation_space = spaces.Dict(
            {OBSERVATION[k]: s for k, s in self.engine.observation_space(any_agent).spaces.items()}
        )
        self._action_space = spaces.Dict(
            {ACTION_FIELDS[k]: s for k, s in self.engine.action_space(any_agent).spaces.items()}
        )

    @property
    def dynamics(self):
        return self.config.dynamics

    def observation_space(self, agent: str) -> spaces.Dict:
        self.engine.observation_space(engine_agent_id(agent))  # validates the id
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Dict:
        self.engine.action_space(engine_agent_id(agent))
        return self._action_space

    def _out(self, engine_dict: Mapping[str, Any]) -> dict[str, Any]:
        return {farm_id(a): v for a, v in engine_dict.items()}

    def _observations(self, observations: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        return {farm_id(a): {OBSERVATION[k]: v for k, v in o.items()} for a, o in observations.items()}

    def _infos(self, infos: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        out = {}
        for a, info in infos.items():
            item = surface_context(info)
            item["basin"] = "aquifer"
            item["admissible_actions"] = [surface_action_choice(c) for c in info["admissible_actions"]]
            item["fines"] = [
                {
                    "fined_by": farm_id(r["punisher"]),
                    "farm": farm_id(r["target"]),
                    "season": r["month"],
                    "fined_draw": r["target_request"],
                    "level_before": r["stock_before"],
                    "farms": r["group_size"],
                    "root": farm_id(r["punisher_root"]),
                    "standing_drop": r["karma_drop"],
                }
                for r in info["punishments"]
            ]
            item["messages"] = [
                {
                    "sender": farm_id(m["sender"]),
                    "kind": INTENTS.get(m["kind"], m["kind"]),
                    "text": farm_id(m["text"]),
                }
                for m in info["messages"]
            ]
            item["water_report"] = farm_id(info["mayor_report"])
            item["pumping_report"] = farm_id(info.get("harvest_report", ""))
            out[farm_id(a)] = item
        return out

    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, infos = self.engine.reset(seed=seed, options=options)
        self._status = surface_context(next(iter(infos.values())))
        self.agents = [farm_id(a) for a in self.engine.agents]
        return self._observations(observations), self._infos(infos)

    def to_env_action(self, choice: Mapping[str, Any]) -> dict[str, Any]:
        """One of arena C's admissible-action dicts (or a DSL ``Action.to_dict()``) as an action of this space."""
        return surface_engine_action(self.engine.to_env_action(engine_action_choice(choice)))

    def step(self, actions: Mapping[str, Any]):
        if not isinstance(actions, Mapping):
            raise CommonsActionError(
                f"step() takes a dict from farm id to action, got {type(actions).__name__}: {actions!r:.200}"
            )
        # arena C's own names only, and a malformed step is refused whole (nothing is applied), as in the other
        # worlds: an engine id (agent_0) or an engine field (harvest, limit, punish) is not arena C's
        engine_actions = {}
        for farm, action in actions.items():
            if not isinstance(farm, str) or not _FARM.fullmatch(farm):
                raise CommonsActionError(
                    f"step(): {farm!r:.60} is not one of arena C's farm ids ({', '.join(self.possible_agents)})"
                )
            if isinstance(action, Mapping):
                unknown = [k for k in action if not isinstance(k, str) or k not in _ACTION_FIELDS_BACK]
                if unknown:
                    raise CommonsActionError(
                        f"step(): the action of {farm} has field(s) {unknown!r:.80}; arena C's action fields are "
                        f"{', '.join(_ACTION_FIELDS_BACK)}"
                    )
                action = {_ACTION_FIELDS_BACK[k]: v for k, v in action.items()}
            engine_actions[engine_agent_id(farm)] = action
        observations, rewards, terminated, truncated, infos = self.engine.step(engine_actions)
        self._status = surface_context(next(iter(infos.values())))
        self.agents = [farm_id(a) for a in self.engine.agents]
        out = (
            self._observations(observations),
            self._out(rewards),
            self._out(terminated),
            self._out(truncated),
            self._infos(infos),
        )
        if self.render_mode == "human":
            print(self.render())
        return out

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        q = self._status
        if not q:
            return "[aquifer] not started: call reset()"
        stage = q["stage"] if self.agents else "over"
        return (
            f"[aquifer] season {q['season']}/{q['num_seasons']}, stage {stage}: the aquifer stores "
            f"{q['aquifer_level']} of {q['aquifer_capacity']} megalitres."
        )

    def close(self) -> None:
        """Nothing to release."""
        self.engine.close()


def parallel_env(render_mode: str | None = None, **params: Any) -> AquiferParallelEnv:
    """Arena C as a PettingZoo ``ParallelEnv``; ``params`` override ``DEFAULTS``."""
    return AquiferParallelEnv(render_mode=render_mode, **params)


def raw_env(render_mode: str | None = None, **params: Any):
    """The AEC form (PettingZoo's ``parallel_to_aec`` conversion of ``parallel_env``)."""
    return parallel_to_aec(parallel_env(render_mode=render_mode, **params))


def env(render_mode: str | None = None, **params: Any):
    """The AEC form with PettingZoo's order-enforcing wrapper, as PettingZoo environments ship it."""
    return wrappers.OrderEnforcingWrapper(raw_env(render_mode=render_mode, **params))
