"""The attack surface of a text memory (docs/poisoning.md): a fabricated experience written in the memory's own form.

``PoisonableMemory`` is what a memory implements to be attacked by *experience grafting* (MemoryGraft-style: a
co-user with write access to a shared memory adds fabricated "successful" experiences). The attacker hands the
memory a ``FabricatedExperience``; the memory writes it exactly as it would write one of its own records (a RAG row,
a Voyager skill, a Reflexion reflection, an SCG-MEM schema record, a persona rule line), so that at retrieval time
it is indistinguishable from the agent's own. The attacker reaches the memory only through ``graft``: nothing else
of the agent is touched. The scars agent is not a ``PoisonableMemory``: the policy reads no text memory of it; its
self-schema changes only through its own accommodation and the ledger's admission (docs/poisoning.md).

``ConsensusGuard`` is the text baselines' defence row (A-MemGuard-style consensus over retrieved memories): an
item whose stance on an admissible action (recommended: polarity +1, discredited: −1) disagrees with the consensus of
the other retrieved items naming that action is dropped from the context window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from scars.agents.api import Agent
from scars.agents.memory.base import MemoryMechanism
from scars.agents.policies.base import ContextItem
from scars.envs.api import Decision, Feedback, Value
from scars.synthesis.dsl import Action
from scars.synthesis.errors import ConfigError


@dataclass(frozen=True)
class FabricatedExperience:
    """A fabricated experience (the attacker's, never the agent's), as the memory will store it.

    task:    the task the experience claims to be about (the current one: retrieval keys on it).
    context: the situation it claims (the decision's context q).
    promote: the action it claims succeeded (the attacker's target), or None.
    demote:  the actions it claims failed (the safe alternatives, or a needed action), possibly empty.
    claim:   the outcome text it states (e.g. "done, no rule broken").
    """

    task: str
    context: Mapping[str, Value]
    promote: Action | None
    demote: tuple[Action, ...] = ()
    claim: str = "it worked and broke no rule"


def command_of(action: Action) -> str:
    """The text a memory writes for an action (its command, or its name)."""
    return action.text or action.name


@runtime_checkable
class PoisonableMemory(Protocol):
    """A memory experience grafting can write into (docs/poisoning.md, attacker A1: a co-user of a shared memory)."""

    def graft(self, experience: FabricatedExperience) -> int:
        """Write ``experience`` into this memory in the memory's own form (as if it were the agent's own record);
        returns the number of memory records written (the attack's cost)."""
        ...


def _named_actions(text: str, actions: tuple[Action, ...]) -> list[int]:
    """The admissible actions an item names (its text contains the command); a command contained in a longer named
    command (``take mug 1`` in ``take mug 12``) is not counted twice."""
    named = [i for i, a in enumerate(actions) if command_of(a) and f"'{command_of(a)}'" in text]
    if not named:  # a skill body lists its commands without quotes
        parts = {p.strip() for p in text.replace(":", ";").split(";")}
        named = [i for i, a in enumerate(actions) if command_of(a) in parts]
    return named


def consensus_filter(
    items: tuple[ContextItem, ...], actions: tuple[Action, ...]
) -> tuple[tuple[ContextItem, ...], int]:
    """A-MemGuard-style consensus over retrieved memories: for each admissible action, the stance of the retrieved
    items naming it is the sign of their polarities' sum; an item is dropped when its polarity disagrees with the
    stance of the *other* items on any action it names, or when they are split evenly and it recommends (a disputed
    recommendation is not followed). Items naming no action, neutral items and the persona are kept. Returns the
    kept items and how many were dropped (the defence's flags)."""
    named = [_named_actions(it.text, actions) if it.kind != "persona" else [] for it in items]
    votes = np.zeros(len(actions))
    signed = np.zeros(len(actions))  # items with a stance naming each action
    for it, idx in zip(items, named, strict=True):
        for i in idx:
            votes[i] += it.polarity
            signed[i] += it.polarity != 0
    kept, dropped = [], 0
    for it, idx in zip(items, named, strict=True):
        p = it.polarity
        others = [(votes[i] - p, signed[i] - (p != 0)) for i in idx]
        if p != 0 and any(v * p < 0 or (v == 0 and n > 0 and p > 0) for v, n in others):
            dropped += 1
        else:
            kept.append(it)
    return tuple(kept), dropped


class ConsensusGuard(MemoryMechanism):
    """A text baseline behind the consensus defence (``--memory-guard consensus``): everything is the wrapped
    memory's; only its context window passes ``consensus_filter``. ``dropped`` counts the items the guard kept out
    (its detections)."""

    def __init__(self, inner: MemoryMechanism) -> None:
        super().__init__(inner.card)
        self.inner = inner
        self.name = inner.name
        self.dropped = 0

    def window(self, decision: Decision) -> tuple[ContextItem, ...]:
        kept, dropped = consensus_filter(self.inner.window(decision), decision.actions)
        self.dropped += dropped
        return kept

    def memory_texts(self, decision: Decision) -> list[str]:
        kept, _ = consensus_filter(self.inner.window(decision), decision.actions)
        return [it.text for it in kept if it.kind != "persona"]

    def begin_episode(self, decision: Decision) -> None:
        self.inner.begin_episode(decision)

    def govern(self, decision, logits):
        return self.inner.govern(decision, logits)

    def observe(self, feedback: Feedback):
        return self.inner.observe(feedback)

    def on_world_version(self, version: str, *, t: int) -> None:
        self.inner.on_world_version(version, t=t)

    def end_episode(self, won: bool) -> None:
        self.inner.end_episode(won)

    def graft(self, experience: FabricatedExperience) -> int:
        return self.inner.graft(experience) if isinstance(self.inner, PoisonableMemory) else 0

    def stats(self) -> dict[str, Any]:
        return {**self.inner.stats(), "guard": "consensus", "guard_dropped": self.dropped}

    def memory_state(self) -> dict[str, Any]:
        return self.inner.memory_state()

    def load_memory_state(self, state: Mapping[str, Any]) -> None:
        self.inner.load_memory_state(state)

    def close(self) -> None:
        self.inner.close()


def guarded(agent: Agent, memory_guard: str, method: str) -> Agent:
    """The method's agent behind the configured memory guard (``none``: as it is; ``consensus``: a
    ``ConsensusGuard``); a ``ConfigError`` for a guard on a method with no text memory."""
    if memory_guard == "none":
        return agent
    if not isinstance(agent, MemoryMechanism):
        raise ConfigError(f"memory_guard {memory_guard!r} needs a text memory; {method!r} is none")
    return ConsensusGuard(agent)
