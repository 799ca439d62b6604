"""The shared-resource arenas as learners see them: flat ``Discrete`` actions with masks, ``Box`` observations.

``ResourceRLView(env)`` is a PettingZoo ``BaseParallelWrapper`` over the commons arena (``commons_v0``) or arena C
(``aquifer_v0``), for multi-agent learners (RLlib's ``ParallelPettingZooEnv``, SuperSuit's wrappers).

## Actions
``Discrete(N)`` per agent, ``N`` the longest admissible list of any phase: slot ``i`` is the i-th entry of the phase's
``info["admissible_actions"]`` (harvest: rest, then 1, 2, … units; discussion: silent, support, reassure, propose
0…, accuse each other agent; punishment: punish nobody, then punish each other agent). Punishment is an action of its
own phase. ``action_mask(agent)`` is True on the slots the current phase fills (also in
``observation["action_mask"]`` and ``info["action_mask"]``); a slot beyond them plays the world's do-nothing
fallback a⊥ (``no_op``: harvest nothing, say nothing, punish nobody). ``slot_actions(agent)`` gives the structured
``synthesis.dsl.Action`` of each slot (what a shield reads).

## Observations
``Dict(observations=Box(0, 1, (D,), float32), action_mask=Box(0, 1, (N,), int8))`` (RLlib's masking
convention). The vector (``observation_layout(n)``): the phase (one-hot over harvest, discussion, punishment), the
month / T, the stock / capacity, f(t) / capacity, every agent's last catch / capacity, every agent's karma rescaled to
[0, 1], every agent's latest message as (kind / 4, limit / max request, about / (n − 1)), the agreed limit / max
request and whether there is one, who punished this agent (0/1 each) and the agent's own index (one-hot). In arena C
the same quantities under their own names (the engine's observation, ``aquifer_v0.engine_observation``). Left out:
the messages' text, the mayor's report and the punishment records' provenance.

Rewards, terminations and the episode's end are the arena's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper

from scars.envs.aquifer.adapter import AquiferAdapter
from scars.envs.aquifer.aquifer_v0 import AquiferParallelEnv, engine_observation
from scars.envs.commons.adapter import CommonsAdapter
from scars.envs.commons.commons_v0 import MESSAGE_KINDS, PHASES, CommonsParallelEnv
from scars.envs.rl.view import SeatAdapter, slot_index
from scars.synthesis.dsl import Action
from scars.synthesis.errors import WorldError

FALLBACK = {"kind": "fallback", "name": "no_op", "args": {}, "text": ""}


def observation_layout(n: int) -> tuple[str, ...]:
    """The name of every entry of the observation vector for ``n`` seats, in order."""
    return (
        *(f"phase={p}" for p in PHASES),
        "month_fraction",
        "stock_fraction",
        "sustainable_fraction",
        *(f"catch[{i}]" for i in range(n)),
        *(f"karma[{i}]" for i in range(n)),
        *(f"message[{i}]:{part}" for i in range(n) for part in ("kind", "limit", "about")),
        "agreed_limit_fraction",
        "has_agreed_limit",
        *(f"punished_by[{i}]" for i in range(n)),
        *(f"own_index={i}" for i in range(n)),
    )


class ResourceRLView(BaseParallelWrapper):
    """A commons or aquifer arena with ``Discrete`` masked actions and ``Box`` observations (module docstring)."""

    def __init__(self, env: ParallelEnv) -> None:
        super().__init__(env)
        engine = env.unwrapped
        if isinstance(engine, AquiferParallelEnv):
            self._engine, self._to_engine = engine.engine, engine_observation
        elif isinstance(engine, CommonsParallelEnv):
            self._engine, self._to_engine = engine, dict
        else:
            raise WorldError(f"ResourceRLView wraps commons_v0 or aquifer_v0, got {type(engine).__name__}")
        dyn = self._engine.config.dynamics
        self._n, self._capacity, self._limit, self._months = (
            dyn.num_agents,
            dyn.capacity,
            dyn.request_limit,
            dyn.num_months,
        )
        cfg = self._engine.config
        self._karma = (cfg.karma_min, cfg.karma_initial)
        self.num_slots = self._engine.max_admissible
        self._action_space = spaces.Discrete(self.num_slots)
        self._observation_space = spaces.Dict(
            {
                "observations": spaces.Box(0.0, 1.0, (len(observation_layout(self._n)),), np.float32),
                "action_mask": spaces.Box(0, 1, (self.num_slots,), np.int8),
            }
        )
        self._admissible: dict[str, list[dict]] = {}
        self.possible_agents = list(env.possible_agents)
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Dict:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_space

    # ------------------------------------------------------------------ what a shield reads

    def action_mask(self, agent: str) -> np.ndarray:
        """True on the slots the agent's current phase fills."""
        mask = np.zeros(self.num_slots, dtype=bool)
        mask[: len(self._admissible.get(agent, ()))] = True
        return mask

    def slot_actions(self, agent: str) -> tuple[Action, ...]:
        return tuple(Action.from_dict(d) for d in self._admissible.get(agent, ()))

    # ------------------------------------------------------------------ encoding

    def _encode(self, agent: str, observation: Mapping[str, Any]) -> dict[str, np.ndarray]:
        o = self._to_engine(observation)
        n, cap, limit = self._n, float(self._capacity), float(max(1, self._limit))
        low, high = self._karma
        span = (high - low) or 1.0
        phase = np.zeros(len(PHASES), dtype=np.float32)
        phase[int(o["phase"])] = 1.0
        messages = np.asarray(o["messages"], dtype=np.float32).reshape(n, 3)
        messages = messages / np.array([len(MESSAGE_KINDS) - 1, limit, max(1, n - 1)], dtype=np.float32)
        agreed = int(o["agreed_limit"])
        own = np.zeros(n, dtype=np.float32)
        own[int(o["own_index"])] = 1.0
        x = np.concatenate(
            [
                phase,
                [int(o["month"]) / self._months, int(o["pool"]) / cap, int(o["sustainable_catch"]) / cap],
                np.asarray(o["catches"], dtype=np.float32) / cap,
                (np.asarray(o["karma"], dtype=np.float32) - low) / span,
                messages.ravel(),
                [max(agreed, 0) / limit, float(agreed >= 0)],
                np.asarray(o["punished_by"], dtype=np.float32),
                own,
            ]
        ).astype(np.float32)
        return {
            "observations": np.clip(x, 0.0, 1.0),
            "action_mask": self.action_mask(agent).astype(np.int8),
        }

    def _take(self, observations: Mapping[str, Any], infos: dict[str, dict]) -> dict[str, dict]:
        self._admissible = {a: list(info["admissible_actions"]) for a, info in infos.items()}
        for a, info in infos.items():
            info["action_mask"] = self.action_mask(a)
        return {a: self._encode(a, o) for a, o in observations.items()}

    # ------------------------------------------------------------------ PettingZoo API

    def reset(self, seed: int | None = None, options: dict | None = None):
        observations, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        return self._take(observations, infos), infos

    def command(self, agent: str, slot: Any) -> dict[str, Any]:
        """The arena action slot ``slot`` plays for ``agent`` (a⊥ beyond the filled slots); a slot outside
        ``Discrete(N)`` is refused (``envs.rl.view.slot_index``)."""
        slot = slot_index(slot, self._action_space, who=agent)
        admissible = self._admissible.get(agent, ())
        choice = admissible[slot] if slot < len(admissible) else FALLBACK
        return self.env.to_env_action(choice)

    def seat_adapters(self, *, overuse_verdicts: bool = True) -> dict[str, SeatAdapter]:
        """Each seat's world adapter (``envs.api.WorldAdapter``: its card, decisions, verdicts), what a shield builds
        its decisions with; ``overuse_verdicts``: the verifier also reports a request above the sustainable share."""
        arena = self.env.unwrapped
        make = AquiferAdapter if isinstance(arena, AquiferParallelEnv) else CommonsAdapter
        return {a: make(arena, a, overuse_verdicts=overuse_verdicts) for a in self.possible_agents}

    def step(self, actions: Mapping[str, Any]):
        arena = {a: self.command(a, slot) for a, slot in actions.items()}
        observations, rewards, terminated, truncated, infos = self.env.step(arena)
        self.agents = list(self.env.agents)
        return self._take(observations, infos), rewards, terminated, truncated, infos
