"""What a shield reads from an RL view, and the one check of an action every view and shield makes.

``MaskedView`` (``HouseholdRLView`` implements it) and ``SeatedView`` (``ResourceRLView``) are what
``agents.shield`` reads; ``SeatAdapter`` is what it needs of each seat's world adapter. This module imports no world
(``import scars.envs.rl.view`` loads ``envs.api`` only), so a shield built on it names none (issue 41 item 9).

``slot_index(action, space)`` is the action check of ``HouseholdRLView.step``, ``ResourceRLView.step``,
``ScarShield.step`` and ``ParallelScarShield.step`` (issue 41 item 1): Gymnasium's ``Discrete.contains`` — a Python
int, a numpy integer or a 0-d integer array, inside the space — and nothing else: no ``int()`` of a float or a
string, no fallback. A bool is refused too (``Discrete.contains`` takes ``True`` as 1; an action that is a bool is a
mask passed by mistake).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces

from scars.envs.api import Decision, WorldAdapter
from scars.synthesis.dsl import Action
from scars.synthesis.errors import WorldError


def slot_index(action: Any, space: spaces.Discrete, *, who: str = "") -> int:
    """The slot ``action`` names, as a Python int, if ``space`` contains it; else one ``WorldError`` naming the value
    and the space (``who``: whose action, for a multi-agent step)."""
    value: int | None = None
    if type(action) is int:  # the common cases first (a step costs microseconds): an int, a numpy integer
        value = action
    elif (
        isinstance(action, np.integer | np.ndarray)
        and action.shape == ()
        and action.dtype.kind in "iu"
        or isinstance(action, int)
        and not isinstance(action, bool)
    ):
        value = int(action)
    low, high = int(space.start), int(space.start) + int(space.n)
    if value is None or not low <= value < high:
        of = f" of {who!r}" if who else ""
        raise WorldError(
            f"action {action!r}{of} is outside {space}: an action is an integer in {low}..{high - 1} "
            "(a Python int, a numpy integer or a 0-d integer array)"
        )
    return value


@runtime_checkable
class MaskedView(Protocol):
    """A Gymnasium env with ``Discrete(K)`` actions whose slots are the decision's actions, in order."""

    adapter: WorldAdapter
    """The world as agents see it: its card (core schema H), its verdicts, its verifier (behind the protocol)."""
    dict_obs: bool
    """Observations are ``Dict(observations, action_mask)`` (RLlib's convention) rather than a plain vector."""

    def decision(self, *, t: int | None = None) -> Decision:
        """The current decision; ``decision().actions[i]`` is the action slot ``i`` plays; ``t`` the decision count
        to stamp it with (by default the view's own)."""
        ...

    def action_masks(self) -> np.ndarray:
        """True on the slots that hold an admissible action."""
        ...

    @property
    def last_info(self) -> Mapping[str, Any]:
        """The latest reset's or step's ``info``."""
        ...


@runtime_checkable
class SeatAdapter(WorldAdapter, Protocol):
    """A seat's world adapter in a multi-agent arena: a ``WorldAdapter`` told when a new episode starts."""

    def reset(self, episode: int) -> None:
        """A new episode (``episode`` counts them from 0) starts: forget the last one's per-episode state."""
        ...


@runtime_checkable
class SeatedView(Protocol):
    """A PettingZoo parallel env with ``Discrete`` masked actions per seat whose slots are the seat's admissible
    actions, in order (``ResourceRLView``)."""

    possible_agents: list[str]
    agents: list[str]

    def action_space(self, agent: str) -> spaces.Discrete:
        """The seat's ``Discrete(N)``."""
        ...

    def action_mask(self, agent: str) -> np.ndarray:
        """True on the slots the seat's current phase fills."""
        ...

    def slot_actions(self, agent: str) -> tuple[Action, ...]:
        """The structured action of each filled slot."""
        ...

    def seat_adapters(self, *, overuse_verdicts: bool = True) -> dict[str, SeatAdapter]:
        """Each seat's world adapter (``overuse_verdicts``: the verifier also reports a request above the
        sustainable share — what a shield learns from)."""
        ...
