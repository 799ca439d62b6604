"""The one agent interface the experiment loops call, for the scars agent and every baseline (paper §3, §6.1).

Per decision the loop (1) builds the agent's context window (``window``), (2) asks the policy for base logits π_0
and lets the agent ``govern`` them (scars mask at the controller; every method's controller enforces the world's
core schema H), (3) samples, (4) steps the world, and (5) reports what happened (``observe``, with the world's
``Feedback``). A world-version change is announced with ``on_world_version``; episodes are bracketed by
``begin_episode`` / ``end_episode``. ``stats`` is read once at the end; ``close`` always runs.

Methods are registered by name (``agents.registry.register_method``); a new one is one decorated factory.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from scars.agents.policies.base import ContextItem
from scars.agents.runtime.control import Governed
from scars.agents.runtime.store import SchemaStore
from scars.disequilibrium.composite import Reading
from scars.envs.api import Decision, Feedback


@runtime_checkable
class Agent(Protocol):
    """A memory method acting in a world through a base policy (module docstring)."""

    name: str

    def begin_episode(self, decision: Decision) -> None:
        """A new episode starts at ``decision`` (its task, and the rules in force for methods told them)."""
        ...

    def window(self, decision: Decision) -> tuple[ContextItem, ...]:
        """The context window the policy reads at this decision (persona, memories, reflections, skills, rules)."""
        ...

    def govern(self, decision: Decision, logits: np.ndarray) -> Governed:
        """π_S from the base logits π_0 over ``decision.actions`` (masked actions get probability exactly 0)."""
        ...

    def observe(self, feedback: Feedback) -> Reading | None:
        """What happened; returns the disequilibrium reading of this step when the method computes one."""
        ...

    def on_world_version(self, version: str, *, t: int) -> None:
        """The world changed version before decision ``t`` (scope retirement, §4.5)."""
        ...

    def end_episode(self, won: bool) -> None: ...

    def memory_texts(self, decision: Decision) -> list[str]:
        """The memory in context right now (what the description-complexity metric counts)."""
        ...

    def scar_ids(self) -> tuple[str, ...]:
        """Ids of the synthesised rules the controller enforces now (empty for methods without scars)."""
        ...

    def self_schema(self) -> SchemaStore | None:
        """The agent's self-schema (ledger and control plane) for audits and guarantee checks, or None. Readers
        never write to it."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
