"""The commons and aquifer RL views: PettingZoo's parallel API test, masks per phase, slots, the encoding."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from scars.envs.aquifer import aquifer_v0
from scars.envs.commons import commons_v0
from scars.envs.rl import ResourceRLView, resource_layout
from scars.synthesis.errors import WorldError

WORLDS = {
    "commons-A": lambda: commons_v0.parallel_env(arena="A"),
    "commons-B": lambda: commons_v0.parallel_env(arena="B"),
    "aquifer": aquifer_v0.parallel_env,
}


@pytest.mark.parametrize("world", sorted(WORLDS))
def test_parallel_api_test_passes(world):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(ResourceRLView(WORLDS[world]()), num_cycles=100)


@pytest.mark.parametrize("world", sorted(WORLDS))
def test_masks_follow_the_phase_and_slots_play_the_admissible_actions(world):
    view = ResourceRLView(WORLDS[world]())
    obs, infos = view.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(30):
        if not view.agents:
            obs, infos = view.reset()
        for agent in view.agents:
            admissible = infos[agent]["admissible_actions"]
            mask = view.action_mask(agent)
            assert mask.sum() == len(admissible) and mask[: len(admissible)].all()
            assert np.array_equal(obs[agent]["action_mask"], mask.astype(np.int8))
            assert [a.name for a in view.slot_actions(agent)] == [d["name"] for d in admissible]
            assert view.observation_space(agent)["observations"].contains(obs[agent]["observations"])
        actions = {a: int(rng.choice(np.flatnonzero(view.action_mask(a)))) for a in view.agents}
        obs, _, _, _, infos = view.step(actions)


def test_a_harvest_slot_requests_its_amount_and_an_empty_slot_is_the_fallback():
    view = ResourceRLView(commons_v0.parallel_env(arena="A"))
    view.reset(seed=1)
    agents = list(view.agents)
    assert view.command(agents[0], 3) == {"harvest": 3}
    view.step(dict.fromkeys(agents, 1))  # to the discussion, whose list is shorter than the harvest's
    empty = view.num_slots - 1
    assert not view.action_mask(agents[0])[empty]
    assert view.command(agents[0], empty)["message"] == 0  # a⊥: say nothing
    assert view.command(agents[0], 0) == {"message": 0, "limit": 0, "about": 0}  # slot 0: silent
    with pytest.raises(WorldError, match="outside Discrete"):
        view.command(agents[0], view.num_slots)


def test_the_observation_is_the_documented_layout():
    view = ResourceRLView(commons_v0.parallel_env(arena="A"))
    obs, _ = view.reset(seed=2)
    layout = resource_layout(5)
    x = dict(zip(layout, obs["agent_3"]["observations"].tolist(), strict=True))
    assert x["phase=harvest"] == 1.0 and x["own_index=3"] == 1.0 and x["stock_fraction"] == 1.0
    assert x["month_fraction"] == pytest.approx(1 / 12) and x["has_agreed_limit"] == 0.0


def test_rllib_wraps_the_view_as_a_multi_agent_env():
    pytest.importorskip("ray.rllib")
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    env = ParallelPettingZooEnv(ResourceRLView(commons_v0.parallel_env(arena="A")))
    obs, _ = env.reset(seed=0)
    assert sorted(obs) == [f"agent_{i}" for i in range(5)]
    _, rewards, terminated, _, _ = env.step(dict.fromkeys(obs, 2))
    assert set(rewards.values()) == {2.0} and terminated["__all__"] is False


def test_other_worlds_are_refused():
    from scars.envs.rl.household import HouseholdRLView  # a Gymnasium env, not a resource arena

    with pytest.raises(WorldError, match="commons_v0 or aquifer_v0"):
        ResourceRLView(HouseholdRLView)  # type: ignore[arg-type]
