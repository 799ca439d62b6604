"""Issue 41 items 1 and 7 on the RL views: an action outside ``Discrete(K)`` is one clear error (Gymnasium's
``Discrete.contains``, no coercion); the views record their arguments as Gymnasium's own wrappers do, are registered
(``gym.make("scars/HouseholdRL-v0")``), pass ``check_env`` as a user builds them, and a vector env hands out the lean
info unless told otherwise."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import scars.envs.household  # noqa: F401  (registers scars/Household-v0)
import scars.envs.rl  # noqa: F401  (registers scars/HouseholdRL-v0)
from scars.envs.commons import commons_v0
from scars.envs.rl import LEAN_INFO, HouseholdRLView, ResourceRLView, make_household_view, slot_index
from scars.synthesis.errors import WorldError

REFUSED = [
    None,
    "x",
    "3",
    float("nan"),
    float("inf"),
    2.7,
    2.0,
    np.float64(3.0),
    np.array(3.0),
    np.array([1, 2]),
    np.array([3]),
    -1,
    np.int64(-1),
    40,
    2**80,
    True,
    np.bool_(True),
    1 + 0j,
]
"""Not in ``Discrete(40)``: each is refused by name (``True``: a bool is a mask passed by mistake, refused although
``Discrete.contains`` takes it as 1)."""
ACCEPTED = [3, np.int64(3), np.int8(3), np.uint16(3), np.array(3), np.array(3, dtype=np.int32)]


@pytest.mark.parametrize("action", REFUSED, ids=repr)
def test_the_household_view_refuses_an_action_outside_its_space(action):
    view = make_household_view()
    view.reset(seed=0)
    before = view.household.world.steps
    with pytest.raises(
        WorldError, match=r"action .* is outside Discrete\(40\): an action is an integer in 0\.\.39"
    ):
        view.step(action)
    assert view.household.world.steps == before  # nothing was played


@pytest.mark.parametrize("action", ACCEPTED, ids=repr)
def test_integer_scalars_and_0d_integer_arrays_are_slots(action):
    view = make_household_view()
    view.reset(seed=0)
    command = view.commands()[3]
    *_, info = view.step(action)
    assert info["command"] == command
    assert (
        slot_index(action, spaces.Discrete(40)) == 3 and type(slot_index(action, spaces.Discrete(40))) is int
    )


def test_the_check_agrees_with_discrete_contains_except_for_bools():
    space = spaces.Discrete(40)
    for action in [*REFUSED, *ACCEPTED]:
        if isinstance(action, bool | np.bool_) or (type(action) is int and action >= 2**63):
            continue  # a bool: refused on purpose; 2**80: Discrete.contains raises OverflowError on it
        try:
            slot_index(action, space)
            ours = True
        except WorldError:
            ours = False
        assert ours == space.contains(action), action


@pytest.mark.parametrize("action", [None, 2.7, "3", np.array([1, 2]), -1, "N"], ids=repr)
def test_the_resource_view_refuses_an_action_outside_its_space(action):
    view = ResourceRLView(commons_v0.parallel_env(arena="A"))
    view.reset(seed=0)
    action = view.num_slots if isinstance(action, str) and action == "N" else action
    actions = dict.fromkeys(view.agents, 0)
    actions["agent_1"] = action
    with pytest.raises(WorldError, match=rf"action .* of 'agent_1' is outside Discrete\({view.num_slots}\)"):
        view.step(actions)


def _quiet_check(env) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped")
        check_env(env, skip_render_check=True)


def test_check_env_passes_on_the_view_of_a_made_household():
    view = HouseholdRLView(gym.make("scars/Household-v0"), shaping=0.1, dict_obs=True)
    _quiet_check(view)
    remade = view.spec.make()  # recreated from its spec: the wrapper's arguments were recorded
    assert isinstance(remade, HouseholdRLView) and remade.shaping == 0.1 and remade.dict_obs


def test_gym_make_reaches_the_household_view_by_id():
    env = gym.make("scars/HouseholdRL-v0", shaping=0.05, max_steps=20)
    view = env.get_wrapper_attr("household")
    assert view.config.max_steps == 20 and env.get_wrapper_attr("shaping") == 0.05
    assert env.action_space == spaces.Discrete(40)
    _quiet_check(env)
    remade = env.spec.make()
    assert remade.get_wrapper_attr("shaping") == 0.05
    assert sum(isinstance(e, HouseholdRLView) for e in _chain(remade)) == 1  # recreated, not wrapped twice


def _chain(env):
    while True:
        yield env
        if not isinstance(env, gym.Wrapper):
            return
        env = env.env


def test_a_vector_env_of_views_hands_out_the_lean_info_unless_told():
    lean = gym.make_vec("scars/HouseholdRL-v0", num_envs=2)
    lean.reset(seed=0)
    *_, info = lean.step(np.zeros(2, dtype=np.int64))
    assert {k for k in info if not k.startswith("_")} == set(LEAN_INFO)
    assert info["action_mask"].shape == (2, 40)
    lean.close()
    full = gym.make_vec("scars/HouseholdRL-v0", num_envs=2, lean_info=False)
    full.reset(seed=0)
    *_, info = full.step(np.zeros(2, dtype=np.int64))
    assert {"context", "admissible_actions", "command", "world_reward", *LEAN_INFO} <= set(info)
    full.close()
    with pytest.raises(WorldError, match="num_envs must be a positive integer, got 0"):
        gym.make_vec("scars/HouseholdRL-v0", num_envs=0)


def test_every_name_envs_rl_exports_resolves():
    """The package loads its modules when a name is first read (so that ``envs.rl.view`` stays world-free): every
    exported name must resolve, and nothing else."""
    rl = scars.envs.rl
    assert sorted(rl.__all__) == sorted(rl._EXPORTS)
    for name in rl.__all__:
        assert getattr(rl, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'HouseholdView'"):
        rl.HouseholdView  # noqa: B018
