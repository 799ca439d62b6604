"""Arena C (``aquifer_v0``): PettingZoo conformance, determinism, a surface unrelated to arenas A/B, its adapter."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test

from scars.envs.api import WorldAdapter
from scars.envs.aquifer import aquifer_v0
from scars.envs.aquifer.adapter import AquiferAdapter
from scars.envs.aquifer.aquifer_v0 import SURFACE, engine_action_choice, engine_info, engine_observation
from scars.envs.commons import commons_v0
from scars.envs.commons.adapter import CommonsAdapter
from scars.envs.commons.commons_v0 import CommonsActionError
from scars.envs.commons.populations import parse_population
from scars.synthesis.dsl import Action


def test_parallel_api_test_passes_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(aquifer_v0.parallel_env(), num_cycles=200)


def test_aec_form_passes_api_test():
    api_test(aquifer_v0.env(), num_cycles=100)


def _trace(seed: int, steps: int = 60):
    env = aquifer_v0.parallel_env()
    for i, a in enumerate(env.possible_agents):
        env.action_space(a).seed(seed + i)
    obs, infos = env.reset(seed=seed)
    out = []
    for _ in range(steps):
        if not env.agents:
            obs, infos = env.reset()
        actions = {a: env.action_space(a).sample() for a in env.agents}
        obs, rew, term, trunc, infos = env.step(actions)
        out.append(
            (sorted(rew.items()), [(a, sorted((k, str(v)) for k, v in o.items())) for a, o in obs.items()])
        )
    return out


def test_same_seed_same_episode_for_many_steps():
    assert _trace(3) == _trace(3)
    assert _trace(3) != _trace(4)


def test_every_surface_name_differs_from_the_commons_arena():
    env, commons = aquifer_v0.parallel_env(), commons_v0.parallel_env()
    _, infos = env.reset(seed=0)
    _, c_infos = commons.reset(seed=0)
    farm, agent = env.possible_agents[0], commons.possible_agents[0]
    assert not set(env.possible_agents) & set(commons.possible_agents)
    assert not (set(infos[farm]) - {"admissible_actions", "messages"}) & set(c_infos[agent])
    assert not set(env.observation_space(farm).spaces) - {"messages", "own_index"} & set(
        commons.observation_space(agent).spaces
    )
    names = {c["name"] for c in infos[farm]["admissible_actions"]}
    assert names == {"pump", "idle"} and not names & {c["name"] for c in c_infos[agent]["admissible_actions"]}
    for table in SURFACE.values():  # each renaming is one-to-one
        assert len(set(table.values())) == len(table)
    # other dynamics: capacity, recharge, farms, seasons
    assert (env.dynamics.capacity, env.dynamics.growth_factor, env.dynamics.num_agents) == (60, 1.5, 4)
    assert (commons.config.dynamics.capacity, commons.config.dynamics.num_agents) == (100, 5)


def test_admissible_actions_map_back_in_every_stage_and_bad_names_are_typed_errors():
    env = aquifer_v0.parallel_env()
    _, infos = env.reset(seed=1)
    seen = set()
    while env.agents:
        farm = env.agents[0]
        stage = infos[farm]["stage"]
        seen.add(stage)
        for choice in infos[farm]["admissible_actions"]:
            action = env.to_env_action(choice)
            assert set(action) <= set(env.action_space(farm).spaces)
        actions = {a: env.to_env_action(infos[a]["admissible_actions"][0]) for a in env.agents}
        _, _, _, _, infos = env.step(actions)
    assert seen == {"pumping", "council", "fines"}
    with pytest.raises(CommonsActionError, match="known names"):
        env.to_env_action({"name": "harvest", "args": {"amount": 3}})
    with pytest.raises(CommonsActionError, match="cannot be set"):
        aquifer_v0.parallel_env(scenario="fishery")


def test_commons_scripted_populations_play_arena_c_through_the_renaming():
    env = aquifer_v0.parallel_env()
    behaviours = parse_population("coop:3,greedy:1").behaviours
    states = [b.initial_state() for b in behaviours]
    rng = np.random.default_rng(0)
    obs, infos = env.reset(seed=0)
    steps = 0
    while env.agents:
        actions = {}
        for i, farm in enumerate(env.agents):
            action, states[i] = behaviours[i].step(
                engine_observation(obs[farm]), engine_info(infos[farm]), states[i], rng
            )
            actions[farm] = aquifer_v0.surface_engine_action(action)
        obs, _, _, _, infos = env.step(actions)
        steps += 1
    assert steps >= 3


def test_adapter_is_a_world_adapter_with_c_names_verdicts_and_fines():
    env = aquifer_v0.parallel_env()
    adapter = AquiferAdapter(env, "farm_0")
    assert isinstance(adapter, WorldAdapter)
    obs, infos = env.reset(seed=0)
    d = adapter.decision(obs["farm_0"], infos["farm_0"], t=0)
    assert "aquifer" in d.observation and "megalitres" in d.observation
    assert "harvest" not in d.observation and "pool" not in d.observation
    q = dict(d.context)
    assert adapter.check(q, Action.tool("pump", volume=6)) and not adapter.check(
        q, Action.tool("pump", volume=5)
    )
    # everyone over-draws: the aquifer runs dry and the over-drawing farm gets a verdict; then farm_1 fines farm_0
    actions = {
        a: env.to_env_action({"kind": "tool", "name": "pump", "args": {"volume": 15}}) for a in env.agents
    }
    adapter.command(d, Action.tool("pump", volume=15))
    obs, _, _, _, infos = env.step(actions)
    assert [v.rule_id for v in adapter.verdicts(infos["farm_0"])] == ["aquifer_dry"]
    talk = {
        a: env.to_env_action({"kind": "text", "name": "speak", "args": {"intent": "silent"}})
        for a in env.agents
    }
    obs, _, _, _, infos = env.step(talk)
    fines = {a: env.to_env_action({"kind": "env", "name": "waive"}) for a in env.agents}
    fines["farm_1"] = env.to_env_action({"kind": "tool", "name": "fine", "args": {"farm": "farm_0"}})
    obs, _, _, _, infos = env.step(fines)
    (p,) = adapter.punishments(infos["farm_0"])
    assert (p.punisher, p.target, p.punished_action.name) == ("farm_1", "farm_0", "pump")
    assert adapter.norm_verifier.judge(p.punished_action, p.context) is True
    assert adapter.punishments(infos["farm_0"]) == ()  # each fine is reported once
    adapter.reset(1)  # a new episode: season numbers repeat, fines are reported afresh
    assert len(adapter.punishments(infos["farm_0"])) == 1


def test_overuse_verdicts_report_an_over_draw_at_once():
    env = aquifer_v0.parallel_env()
    adapter = AquiferAdapter(env, "farm_0", overuse_verdicts=True)
    obs, infos = env.reset(seed=0)
    d = adapter.decision(obs["farm_0"], infos["farm_0"], t=0)
    actions = {
        a: env.to_env_action({"kind": "tool", "name": "pump", "args": {"volume": 5}}) for a in env.agents
    }
    actions["farm_0"] = adapter.command(d, Action.tool("pump", volume=8))
    obs, _, _, _, infos = env.step(actions)
    assert [v.rule_id for v in adapter.verdicts(infos["farm_0"])] == ["over_draw"]
    assert (
        AquiferAdapter(env, "farm_0").verdicts(infos["farm_0"]) == ()
    )  # by default only a dry-up is a verdict


def test_engine_choice_translation_round_trips():
    env = aquifer_v0.parallel_env()
    _, infos = env.reset(seed=0)
    for choice in infos["farm_2"]["admissible_actions"]:
        back = engine_action_choice(choice)
        assert back["name"] in {"harvest", "rest"}
    assert isinstance(CommonsAdapter(commons_v0.parallel_env(), "agent_0").card.variables, dict)


@pytest.mark.parametrize(
    ("actions", "words"),
    [
        ({"farm_0": {"harvest": 5}}, "field(s) ['harvest']"),
        ({"farm_0": {"pump": 5, "limit": 10}}, "field(s) ['limit']"),
        ({"farm_0": {"punish": [0, 1, 0, 0]}}, "field(s) ['punish']"),
        ({"agent_0": {"pump": 5}}, "'agent_0' is not one of arena C's farm ids"),
        ({"farm_0": {"pump": 5}, "agent_0": {"pump": 50}}, "'agent_0' is not one of arena C's farm ids"),
        ({0: {"pump": 5}}, "0 is not one of arena C's farm ids"),
        ({"farm_0": {5: 1}}, "field(s) [5]"),
    ],
)
def test_arena_c_takes_its_own_names_only_and_refuses_a_malformed_step_whole(actions, words):
    """Issue 28 item 5: arena A's names and ids are not arena C's; nothing of a refused step is applied."""
    env, fresh = aquifer_v0.parallel_env(), aquifer_v0.parallel_env()
    env.reset(seed=0)
    fresh.reset(seed=0)
    with pytest.raises(CommonsActionError) as info:
        env.step(actions)
    assert words in str(info.value)
    # nothing of the refused step was applied: the arena goes on exactly as one that never saw it
    valid = {a: {"pump": 1} for a in env.agents}
    stepped, expected = env.step(valid), fresh.step(valid)
    assert repr(stepped[:4]) == repr(expected[:4])
    assert set(stepped[0]) == {f"farm_{i}" for i in range(4)}


def test_an_action_naming_an_engine_id_as_the_fined_farm_is_refused():
    with pytest.raises(CommonsActionError, match="farm = 'agent_1' is not a farm id"):
        engine_action_choice({"kind": "tool", "name": "fine", "args": {"farm": "agent_1"}})
