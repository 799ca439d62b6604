"""RL views of every world: standard Gymnasium / PettingZoo wrappers with flat discrete actions, action masks and
numeric observations, for the learners researchers use (sb3-contrib's MaskablePPO, RLlib's PPO; issue 29).

``HouseholdRLView`` (``envs.rl.household``): ``scars/Household-v0`` as ``Discrete(K)`` over the admissible commands,
``action_masks()``, a documented numeric observation (optionally a ``Dict`` with ``action_mask``) and optional
potential-based progress shaping along the world's expert plan. ``ResourceRLView`` (``envs.rl.resource``): the
commons and aquifer arenas as PettingZoo parallel envs with ``Discrete`` masked actions and ``Box`` observations.

Importing this package registers ``scars/HouseholdRL-v0`` with Gymnasium (``gym.make("scars/HouseholdRL-v0",
**kwargs)`` is ``make_household_view(**kwargs)``; ``gym.make_vec("scars/HouseholdRL-v0", num_envs=n)`` is
``make_household_vector(n)``, lean info by default; with ``vectorization_mode="sync"`` or ``"async"`` Gymnasium
builds each env with ``gym.make`` instead, so pass ``lean_info=True`` there) and loads no world: the names below load their module when first
read, so ``envs.rl.view`` (what a shield reads) stays world-free. A PettingZoo env cannot be registered with Gymnasium
(``gym.make`` accepts ``gymnasium.Env`` s only): ``ResourceRLView`` is built as PettingZoo's envs are,
``ResourceRLView(commons_v0.parallel_env(...))``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gymnasium.envs.registration import register, registry

if TYPE_CHECKING:  # what the lazy names are, for type checkers
    from scars.envs.rl.household import (
        GLOBAL_FEATURES,
        LEAN_INFO,
        MAX_ACTIONS,
        SLOT_FEATURES,
        VERBS,
        HouseholdRLView,
        make_household_vector,
        make_household_view,
    )
    from scars.envs.rl.household import observation_layout as household_layout
    from scars.envs.rl.resource import ResourceRLView
    from scars.envs.rl.resource import observation_layout as resource_layout
    from scars.envs.rl.view import MaskedView, SeatAdapter, SeatedView, slot_index

_EXPORTS: dict[str, tuple[str, str]] = {
    "GLOBAL_FEATURES": ("household", "GLOBAL_FEATURES"),
    "LEAN_INFO": ("household", "LEAN_INFO"),
    "MAX_ACTIONS": ("household", "MAX_ACTIONS"),
    "SLOT_FEATURES": ("household", "SLOT_FEATURES"),
    "VERBS": ("household", "VERBS"),
    "HouseholdRLView": ("household", "HouseholdRLView"),
    "make_household_view": ("household", "make_household_view"),
    "make_household_vector": ("household", "make_household_vector"),
    "household_layout": ("household", "observation_layout"),
    "ResourceRLView": ("resource", "ResourceRLView"),
    "resource_layout": ("resource", "observation_layout"),
    "MaskedView": ("view", "MaskedView"),
    "SeatAdapter": ("view", "SeatAdapter"),
    "SeatedView": ("view", "SeatedView"),
    "slot_index": ("view", "slot_index"),
}

__all__ = [
    "GLOBAL_FEATURES",
    "LEAN_INFO",
    "MAX_ACTIONS",
    "SLOT_FEATURES",
    "VERBS",
    "HouseholdRLView",
    "MaskedView",
    "ResourceRLView",
    "SeatAdapter",
    "SeatedView",
    "household_layout",
    "make_household_vector",
    "make_household_view",
    "resource_layout",
    "slot_index",
]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{target[0]}"), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if "scars/HouseholdRL-v0" not in registry:
    register(
        id="scars/HouseholdRL-v0",
        entry_point="scars.envs.rl.household:make_household_view",
        vector_entry_point="scars.envs.rl.household:make_household_vector",
    )
