"""What a shield reads from a single-agent RL view (``HouseholdRLView`` implements it; ``agents.shield`` uses it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from scars.envs.api import Decision, WorldAdapter


@runtime_checkable
class MaskedView(Protocol):
    """A Gymnasium env with ``Discrete(K)`` actions whose slots are the decision's actions, in order."""

    adapter: WorldAdapter
    """The world as agents see it: its card (core schema H), its verdicts, its verifier (behind the protocol)."""
    dict_obs: bool
    """Observations are ``Dict(observations, action_mask)`` (RLlib's convention) rather than a plain vector."""

    def decision(self) -> Decision:
        """The current decision; ``decision().actions[i]`` is the action slot ``i`` plays."""
        ...

    def action_masks(self) -> np.ndarray:
        """True on the slots that hold an admissible action."""
        ...

    @property
    def last_info(self) -> Mapping[str, Any]:
        """The latest reset's or step's ``info``."""
        ...
