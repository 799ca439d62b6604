"""RL views of every world: standard Gymnasium / PettingZoo wrappers with flat discrete actions, action masks and
numeric observations, for the learners researchers use (sb3-contrib's MaskablePPO, RLlib's PPO; issue 29).

``HouseholdRLView`` (``envs.rl.household``): ``scars/Household-v0`` as ``Discrete(K)`` over the admissible commands,
``action_masks()``, a documented numeric observation (optionally a ``Dict`` with ``action_mask``) and optional
potential-based progress shaping along the world's expert plan. ``ResourceRLView`` (``envs.rl.resource``): the
commons and aquifer arenas as PettingZoo parallel envs with ``Discrete`` masked actions and ``Box`` observations.
"""

from scars.envs.rl.household import (
    GLOBAL_FEATURES,
    MAX_ACTIONS,
    SLOT_FEATURES,
    VERBS,
    HouseholdRLView,
    make_household_view,
)
from scars.envs.rl.household import observation_layout as household_layout
from scars.envs.rl.resource import ResourceRLView
from scars.envs.rl.resource import observation_layout as resource_layout
from scars.envs.rl.view import MaskedView

__all__ = [
    "GLOBAL_FEATURES",
    "MAX_ACTIONS",
    "SLOT_FEATURES",
    "VERBS",
    "HouseholdRLView",
    "MaskedView",
    "ResourceRLView",
    "household_layout",
    "make_household_view",
    "resource_layout",
]
