"""What the text baselines share (paper §6.1 baselines; SPEC §7): ``MemoryMechanism``, a no-memory ``Agent``.

A text baseline only builds the policy's context window; its controller enforces the world's core schema H and
nothing else (H is the human-written baseline every method's controller gets; the scars agent adds S_t to it).
Everything a baseline learns comes from ``Feedback``: what the agent did and what the world's verifier said about
that action — never from the world's hidden rule definitions (Static Persona is the exception by design: it is
*given* the rules in force, as the world's text, ``Decision.rules_in_force``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from scars.agents.policies.base import ContextItem
from scars.agents.runtime.control import ControlPlane, Governed
from scars.agents.text import count_tokens
from scars.disequilibrium.composite import Reading
from scars.envs.api import Decision, Feedback, WorldCard

MEMORY_FILE = "memory.json"
"""The file a persistent text memory is saved in between runs (``MemoryMechanism.memory_state`` as JSON), next to
where a scars agent keeps its ledger."""


class MemoryMechanism:
    """The ``Agent`` with no memory: persona only, H enforced. Baselines override what they change."""

    name = "none"

    def __init__(self, card: WorldCard) -> None:
        self.card = card
        self.core_plane = ControlPlane(core=card.core, classes=card.classes, fallback="no_op")
        self.task, self.task_type, self.rules_in_force = "", "", ()

    def begin_episode(self, decision: Decision) -> None:
        self.task, self.task_type = decision.task, decision.task_type
        self.rules_in_force = decision.rules_in_force

    def persona(self) -> ContextItem:
        return ContextItem("persona", self.card.persona)

    def window(self, decision: Decision) -> tuple[ContextItem, ...]:
        return (self.persona(),)

    def govern(self, decision: Decision, logits: np.ndarray) -> Governed:
        return self.core_plane.govern(decision.context, decision.actions, logits, decision.t)

    def observe(self, feedback: Feedback) -> Reading | None:
        return None

    def on_world_version(self, version: str, *, t: int) -> None:
        """Text memories have no scope: a world-version change leaves them as they are."""

    def end_episode(self, won: bool) -> None:
        """Called once per episode after its last step."""

    def memory_texts(self, decision: Decision) -> list[str]:
        return [it.text for it in self.window(decision) if it.kind != "persona"]

    def scar_ids(self) -> tuple[str, ...]:
        return ()

    def self_schema(self) -> None:
        return None  # a text memory has no self-schema

    def stats(self) -> dict[str, Any]:
        return {}

    def memory_state(self) -> dict[str, Any]:
        """What this memory carries into another world or run (JSON-ready; ``load_memory_state`` reads it back).
        The mechanism with no memory carries nothing."""
        return {}

    def load_memory_state(self, state: Mapping[str, Any]) -> None:
        """Start from a carried memory (``memory_state`` of the same method); nothing to load without memory."""

    def close(self) -> None:
        """Nothing to release."""


def memory_tokens(agent: Any, decision: Decision) -> int:
    """Tokens of active memory in context (one offline tokenizer for every method: ``agents.text``)."""
    return sum(count_tokens(t) for t in agent.memory_texts(decision))


def describe_failure(feedback: Feedback) -> str:
    """Template text of a verified failure (what the embedded backend writes where an LLM would write prose)."""
    why = "; ".join(v.message for v in feedback.verdicts) or "it did not help"
    return f"When I did '{feedback.action.text or feedback.action.name}', it broke a safety rule ({why})."


def context_query(decision: Decision, card: WorldCard) -> str:
    """The retrieval query of a text memory: the task, the salient context values, the observation."""
    salient = " ".join(str(decision.context[k]) for k in card.salient_keys if k in decision.context)
    return f"{decision.task} {salient} {decision.observation}"
