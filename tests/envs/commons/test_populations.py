"""Scripted populations, the population spec, the rollout's seeding, and the scenario/arena registries."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scars.envs.commons import commons_v0
from scars.envs.commons.dynamics import CommonsConfigError
from scars.envs.commons.populations import BEHAVIOURS, parse_population
from scars.envs.commons.rollout import build_population, run_episode, run_episodes
from scars.envs.commons.scenarios import ARENAS, SCENARIOS, get_arena, get_scenario


def test_population_spec_parses_in_agent_order_with_coalition_roots():
    pop = parse_population("coop:2,malicious:3")
    assert pop.kinds == ("coop", "coop", "malicious", "malicious", "malicious")
    assert pop.roots == ("agent_0", "agent_1", "coalition_0", "coalition_0", "coalition_0")
    assert pop.target == 0 and all(b.target == 0 for b in pop.behaviours if b.kind == "malicious")
    assert parse_population("greedy,coop:4").kinds == ("greedy",) + ("coop",) * 4


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (
            "coop:4,pirate:1",
            r"unknown population kind 'pirate'.*allowed: coop, greedy, noisy, retaliator, malicious",
        ),
        ("coop:0", r"count '0' for 'coop'"),
        ("malicious:5", "nobody for them to target"),
    ],
)
def test_bad_population_specs_are_config_errors(spec, match):
    with pytest.raises(CommonsConfigError, match=match):
        parse_population(spec)


def test_population_size_must_match_the_env():
    with pytest.raises(CommonsConfigError, match="num_agents=4 does not match population"):
        run_episode(population="coop:5", num_agents=4)


def test_every_behaviour_speaks_and_acts_inside_the_action_space():
    spec = ",".join(f"{k}:1" for k in BEHAVIOURS if k != "malicious") + ",malicious:1"
    pop = parse_population(spec)
    env = commons_v0.parallel_env(num_agents=pop.size, agent_roots=pop.roots)
    obs, infos = env.reset(seed=0)
    rng = np.random.default_rng(0)
    states = {a: b.initial_state() for a, b in zip(env.possible_agents, pop.behaviours, strict=True)}
    spoke = set()
    while env.agents:
        actions = {}
        for a, b in zip(env.possible_agents, pop.behaviours, strict=True):
            actions[a], states[a] = b.step(obs[a], infos[a], states[a], rng)
            full = {"harvest": 0, "message": 0, "limit": 0, "about": 0, "punish": np.zeros(pop.size, np.int8)}
            assert env.action_space(a).contains(full | actions[a]), (b.kind, actions[a])
        obs, _, _, _, infos = env.step(actions)
        spoke |= {m["sender"] for m in infos["agent_0"]["messages"]}
    assert states["agent_0"].months_seen >= 1
    assert spoke >= {"agent_0", "agent_1", "agent_3", "agent_4"}  # all but the unprovoked retaliator


def test_retaliator_punishes_whoever_punished_it():
    record = run_episode(population="retaliator:1,malicious:1,coop:3", seed=0)
    by_month = {m.month: {(p.punisher, p.target) for p in m.punishments} for m in record.months}
    assert ("agent_1", "agent_0") in by_month[1]
    assert ("agent_0", "agent_1") in by_month[2]  # retaliation comes one punishment phase later


def test_runs_are_seeded_and_reproducible():
    a = run_episodes(runs=3, seed=11, population="coop:3,noisy:2")
    b = run_episodes(runs=3, seed=11, population="coop:3,noisy:2")
    assert a == b
    assert (
        len({tuple(m.harvest.requests for m in r.months) for r in a}) > 1
    )  # the runs differ from each other
    with pytest.raises(CommonsConfigError, match="runs=0"):
        run_episodes(runs=0)


def test_registries_resolve_are_read_only_and_used():
    assert set(SCENARIOS) == {"fishery", "pasture", "pollution", "groundwater"} and set(ARENAS) == {
        "A",
        "B",
        "malicious",
    }
    for name, scenario in SCENARIOS.items():
        assert get_scenario(name) is scenario and scenario.name == name
        assert dataclasses.is_dataclass(scenario)
        with pytest.raises(dataclasses.FrozenInstanceError):
            scenario.place = "sea"  # type: ignore[misc]
    for name, arena in ARENAS.items():
        assert get_arena(name) is arena and arena.name == name
        assert build_population(name, None).spec == arena.default_population  # every default parses
    assert len({s.place for s in SCENARIOS.values()}) == len(SCENARIOS)  # nothing duplicated
    with pytest.raises(TypeError):
        SCENARIOS["forest"] = SCENARIOS["fishery"]  # type: ignore[index]
    assert get_arena("malicious").coalition_root == "coalition_0" and not get_arena("B").punishment
