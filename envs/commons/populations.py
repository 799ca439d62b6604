"""Scripted agent populations for the commons arena, so it runs with no LLM (SPEC §7 tier 2).

Every behaviour follows one interface, with the state passed in and out explicitly (Melting Pot's policy style):
``initial_state()`` and ``step(observation, info, state, rng) -> (action, state)``, where the action is a dict of
``commons_v0``'s action space (only the current phase's field is needed) and ``rng`` is the one seeded generator
the caller passes down.

=============  ============================================================================================
kind           behaviour
=============  ============================================================================================
``coop``       requests ⌊f(t)/n⌋ (or the agreed limit if lower); proposes ⌊f(t)/n⌋ as the limit; punishes
               every agent whose reported catch exceeded the month's sustainable share (justified sanctions).
``greedy``     requests ⌈greed·h(t)⌉ (30% of the pool by default); reassures; never punishes.
``noisy``      a cooperator whose request is off by a uniform integer in [−spread, spread]; supports the limit;
               punishes like ``coop`` and, by mistake, each other agent with probability ``error_rate``.
``retaliator`` harvests like ``coop``; accuses and punishes whoever punished it in the last punishment phase.
``malicious``  harvests sustainably; every month accuses and punishes one target, whatever it harvested. The
               malicious agents share one provenance root (a colluding coalition).
=============  ============================================================================================
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from scars.envs.commons.commons_v0 import ACCUSE, HARVEST, PROPOSE_LIMIT, REASSURE, SILENT, SUPPORT_LIMIT
from scars.envs.commons.dynamics import CommonsConfigError

Action = dict[str, Any]


@dataclass(frozen=True)
class AgentState:
    """A scripted agent's memory between steps."""

    months_seen: int = 0


_DIGITS = re.compile(r"[0-9]+")
"""A count as typed: ASCII digits only (``str.isdigit`` also takes "²", which ``int`` refuses)."""


class Behaviour(Protocol):
    kind: str

    def initial_state(self) -> AgentState: ...

    def step(
        self,
        observation: Mapping[str, Any],
        info: Mapping[str, Any],
        state: AgentState,
        rng: np.random.Generator,
    ) -> tuple[Action, AgentState]: ...


def _sustainable_request(observation: Mapping[str, Any], info: Mapping[str, Any]) -> int:
    share = math.floor(info["sustainable_share"])
    limit = int(observation["agreed_limit"])
    return min(share if limit < 0 else min(share, limit), info["max_request"])


def _over_harvesters(observation: Mapping[str, Any], info: Mapping[str, Any]) -> np.ndarray:
    """Agents whose reported catch this month exceeded f(t)/n (a catch above it means the request was too)."""
    over = np.asarray(observation["catches"]) > info["sustainable_share"]
    over[int(observation["own_index"])] = False
    return over.astype(np.int8)


def _advance(state: AgentState, observation: Mapping[str, Any]) -> AgentState:
    return AgentState(state.months_seen + 1) if observation["phase"] == HARVEST else state


@dataclass(frozen=True)
class Cooperator:
    kind: str = "coop"

    def initial_state(self) -> AgentState:
        return AgentState()

    def step(self, observation, info, state, rng):
        phase = observation["phase"]
        if phase == HARVEST:
            action: Action = {"harvest": _sustainable_request(observation, info)}
        elif phase == 1:
            limit = min(math.floor(info["sustainable_share"]), info["max_request"])
            action = {"message": PROPOSE_LIMIT, "limit": limit, "about": 0}
        else:
            action = {"punish": _over_harvesters(observation, info)}
        return action, _advance(state, observation)


@dataclass(frozen=True)
class Greedy:
    greed: float = 0.3
    """Fraction of the current pool requested each month."""
    kind: str = "greedy"

    def initial_state(self) -> AgentState:
        return AgentState()

    def step(self, observation, info, state, rng):
        phase = observation["phase"]
        n = len(observation["catches"])
        if phase == HARVEST:
            action: Action = {
                "harvest": min(math.ceil(self.greed * int(observation["pool"])), info["max_request"])
            }
        elif phase == 1:
            action = {"message": REASSURE, "limit": 0, "about": 0}
        else:
            action = {"punish": np.zeros(n, dtype=np.int8)}
        return action, _advance(state, observation)


@dataclass(frozen=True)
class Noisy:
    spread: int = 3
    error_rate: float = 0.05
    kind: str = "noisy"

    def initial_state(self) -> AgentState:
        return AgentState()

    def step(self, observation, info, state, rng):
        phase = observation["phase"]
        if phase == HARVEST:
            noise = int(rng.integers(-self.spread, self.spread + 1))
            action: Action = {
                "harvest": min(max(0, _sustainable_request(observation, info) + noise), info["max_request"])
            }
        elif phase == 1:
            action = {"message": SUPPORT_LIMIT, "limit": 0, "about": 0}
        else:
            mistakes = (rng.random(len(observation["catches"])) < self.error_rate).astype(np.int8)
            mistakes[int(observation["own_index"])] = 0
            action = {"punish": _over_harvesters(observation, info) | mistakes}
        return action, _advance(state, observation)


@dataclass(frozen=True)
class Retaliator:
    kind: str = "retaliator"

    def initial_state(self) -> AgentState:
        return AgentState()

    def step(self, observation, info, state, rng):
        phase = observation["phase"]
        punishers = np.asarray(observation["punished_by"], dtype=np.int8)
        if phase == HARVEST:
            action: Action = {"harvest": _sustainable_request(observation, info)}
        elif phase == 1:
            who = np.flatnonzero(punishers)
            action = (
                {"message": ACCUSE, "limit": 0, "about": int(who[0])}
                if who.size
                else {"message": SILENT, "limit": 0, "about": 0}
            )
        else:
            action = {"punish": punishers.copy()}
        return action, _advance(state, observation)


@dataclass(frozen=True)
class MaliciousPunisher:
    target: int = 0
    """Index of the agent the coalition punishes every month."""
    kind: str = "malicious"

    def initial_state(self) -> AgentState:
        return AgentState()

    def step(self, observation, info, state, rng):
        phase = observation["phase"]
        if phase == HARVEST:
            action: Action = {"harvest": _sustainable_request(observation, info)}
        elif phase == 1:
            action = {"message": ACCUSE, "limit": 0, "about": self.target}
        else:
            vec = np.zeros(len(observation["catches"]), dtype=np.int8)
            if self.target != int(observation["own_index"]):
                vec[self.target] = 1
            action = {"punish": vec}
        return action, _advance(state, observation)


BEHAVIOURS: Mapping[str, type] = {
    "coop": Cooperator,
    "greedy": Greedy,
    "noisy": Noisy,
    "retaliator": Retaliator,
    "malicious": MaliciousPunisher,
}


@dataclass(frozen=True)
class Population:
    """A named mix of scripted agents, in agent order, with each agent's provenance root."""

    spec: str
    kinds: tuple[str, ...]
    behaviours: tuple[Behaviour, ...]
    roots: tuple[str, ...]
    """``agent_i`` for independent agents; the coalition's id for every malicious agent."""
    target: int | None
    """The malicious coalition's target (``None`` without malicious agents)."""

    @property
    def size(self) -> int:
        return len(self.kinds)


def parse_population(
    spec: str, *, target: int | None = None, coalition_root: str = "coalition_0"
) -> Population:
    """Parse ``"coop:4,greedy:1"`` (kind:count pairs, in agent order) into a ``Population``.

    Malicious agents punish ``target`` (default: the first non-malicious agent) and share ``coalition_root``.
    """
    kinds: list[str] = []
    for part in spec.split(","):
        name, sep, count = part.strip().partition(":")
        if name not in BEHAVIOURS:
            raise CommonsConfigError(
                f"unknown population kind {name!r} in {spec!r}; allowed: {', '.join(BEHAVIOURS)}"
            )
        if not sep:
            count = "1"
        if not _DIGITS.fullmatch(count) or int(count) < 1:
            raise CommonsConfigError(f"count {count!r} for {name!r} in {spec!r} must be a positive integer")
        kinds.extend([name] * int(count))
    malicious = [i for i, k in enumerate(kinds) if k == "malicious"]
    if malicious:
        if target is None:
            honest = [i for i, k in enumerate(kinds) if k != "malicious"]
            if not honest:
                raise CommonsConfigError(
                    f"population {spec!r} has malicious agents but nobody for them to target"
                )
            target = honest[0]
        if not 0 <= target < len(kinds) or kinds[target] == "malicious":
            raise CommonsConfigError(
                f"malicious target {target!r} must be the index of a non-malicious agent in {spec!r}"
            )
    else:
        target = None
    behaviours = tuple(
        MaliciousPunisher(target=target) if k == "malicious" else BEHAVIOURS[k]()  # type: ignore[arg-type]
        for k in kinds
    )
    roots = tuple(coalition_root if k == "malicious" else f"agent_{i}" for i, k in enumerate(kinds))
    return Population(spec, tuple(kinds), behaviours, roots, target)
