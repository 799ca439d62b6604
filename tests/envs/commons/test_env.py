"""commons_v0 as a PettingZoo ParallelEnv: conformance, determinism, phases, provenance, DSL context."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test

from scars.envs.commons import commons_v0
from scars.envs.commons.commons_v0 import DISCUSSION, HARVEST, PUNISHMENT, CommonsActionError, context_of
from scars.envs.commons.dynamics import CommonsConfigError
from scars.envs.commons.scenarios import ARENAS, SCENARIOS
from scars.synthesis.dsl.ast import Action, And, Compare, ForbidToolCall, Named, Rule
from scars.synthesis.dsl.semantics import fires, masked_set
from scars.synthesis.errors import ConfigError

COMBOS = list(itertools.product(sorted(SCENARIOS), list(ARENAS), ("stochastic", "proportional")))


@pytest.mark.parametrize(("scenario", "arena", "allocation"), COMBOS)
def test_parallel_api_test_passes_without_warnings(scenario, arena, allocation):
    env = commons_v0.parallel_env(scenario=scenario, arena=arena, allocation=allocation)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=200)


def test_aec_form_passes_api_test():
    api_test(commons_v0.env(arena="A"), num_cycles=100)


def _play_random(env, seed: int, steps: int):
    """Sample actions from seeded action spaces; return everything the env returned, normalised for comparison."""
    for i, a in enumerate(env.possible_agents):
        env.action_space(a).seed(seed + i)
    trace = []
    obs, infos = env.reset(seed=seed)
    trace.append((_norm(obs), _norm(infos)))
    for _ in range(steps):
        if not env.agents:
            obs, infos = env.reset()
            trace.append(("reset", _norm(obs), _norm(infos)))
            continue
        actions = {a: env.action_space(a).sample() for a in env.agents}
        trace.append(tuple(_norm(x) for x in env.step(actions)))
    return trace


def _norm(x):
    if isinstance(x, dict):
        # admissible_actions are static per agent and phase (tested on their own); skipping them keeps this fast
        return {k: _norm(v) for k, v in x.items() if k != "admissible_actions"}
    if isinstance(x, list | tuple):
        return [_norm(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x


@pytest.mark.parametrize("arena", list(ARENAS))
def test_same_seed_same_whole_episodes_for_many_steps(arena):
    # PettingZoo's parallel_seed_test compares one step; this compares 300 steps spanning several episodes.
    first = _play_random(commons_v0.parallel_env(arena=arena), seed=7, steps=300)
    second = _play_random(commons_v0.parallel_env(arena=arena), seed=7, steps=300)
    assert sum(1 for t in first if t[0] == "reset") >= 2  # several whole episodes were compared
    assert first == second
    other = _play_random(commons_v0.parallel_env(arena=arena), seed=8, steps=300)
    assert first != other


def test_observations_stay_in_space_and_spaces_are_cached():
    env = commons_v0.parallel_env(arena="A")
    obs, _ = env.reset(seed=0)
    for a in env.possible_agents:
        assert env.observation_space(a) is env.observation_space(a)
        assert env.action_space(a) is env.action_space(a)
        env.action_space(a).seed(0)
    while env.agents:
        for a, o in obs.items():
            assert env.observation_space(a).contains(o), (a, o)
        obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    for a, o in obs.items():
        assert env.observation_space(a).contains(o)


def test_month_has_harvest_discussion_punishment_phases_in_arena_a_and_no_punishment_in_b():
    for arena, expected in (
        ("A", [HARVEST, DISCUSSION, PUNISHMENT, HARVEST]),
        ("B", [HARVEST, DISCUSSION, HARVEST]),
    ):
        env = commons_v0.parallel_env(arena=arena)
        obs, _ = env.reset(seed=0)
        phases = [obs["agent_0"]["phase"]]
        quiet = {"harvest": 10, "message": 0, "limit": 0, "about": 0, "punish": np.zeros(5, dtype=np.int8)}
        for _ in range(len(expected) - 1):
            obs, *_ = env.step(dict.fromkeys(env.agents, quiet))
            phases.append(obs["agent_0"]["phase"])
        assert phases == expected
        assert obs["agent_0"]["month"] == 2


def _quiet(n=5, **over):
    return {"harvest": 0, "message": 0, "limit": 0, "about": 0, "punish": np.zeros(n, dtype=np.int8)} | over


def test_harvest_observe_discuss_punish_month_with_provenance_and_karma():
    env = commons_v0.parallel_env(
        arena="A", punishment_severity=7.0, punishment_cost=2.0, agent_roots=("r0",) * 2 + ("r2", "r3", "r4")
    )
    env.reset(seed=1)
    obs, rew, *_, infos = env.step({a: _quiet(harvest=30 if a == "agent_4" else 10) for a in env.agents})
    # observe: every catch is reported; 70 of 100 taken, nobody over-subscribed, so requests are granted in full
    assert obs["agent_0"]["catches"].tolist() == [10, 10, 10, 10, 30]
    assert obs["agent_0"]["pool"] == 30
    assert rew == {"agent_0": 10.0, "agent_1": 10.0, "agent_2": 10.0, "agent_3": 10.0, "agent_4": 30.0}
    assert "agent_4 caught 30 tons of fish." in infos["agent_0"]["mayor_report"]
    # discussion: three proposals of 10 and one support make a strict majority
    talk = {a: _quiet(message=1, limit=10) for a in ("agent_0", "agent_1", "agent_2")}
    talk |= {"agent_3": _quiet(message=2), "agent_4": _quiet(message=4)}
    obs, rew, *_, infos = env.step(talk)
    assert obs["agent_4"]["agreed_limit"] == 10 and infos["agent_4"]["agreed_limit"] == 10
    assert [m["sender"] for m in infos["agent_2"]["messages"]] == list(env.possible_agents)
    # punishment: agents 0 and 1 punish agent 4; agent 4 punishes itself (ignored)
    hit4 = np.array([0, 0, 0, 0, 1], dtype=np.int8)
    acts = {a: _quiet() for a in env.agents} | {
        "agent_0": _quiet(punish=hit4),
        "agent_1": _quiet(punish=hit4),
    }
    acts["agent_4"] = _quiet(punish=hit4)
    obs, rew, term, trunc, infos = env.step(acts)
    assert rew["agent_0"] == -2.0 and rew["agent_4"] == 0.0
    assert obs["agent_4"]["punished_by"].tolist() == [1, 1, 0, 0, 0]
    assert obs["agent_4"]["karma"][4] == pytest.approx(100 - 14)
    assert infos["agent_4"]["karma_drop"] == 14.0 and infos["agent_4"]["times_punished"] == 2
    prov = infos["agent_3"]["punishments"]  # public: every agent sees every punishment's provenance
    assert prov == [
        {
            "punisher": p,
            "target": "agent_4",
            "month": 1,
            "target_action": "harvest",
            "target_request": 30,
            "target_catch": 30,
            "stock_before": 100,
            "group_size": 5,
            "punisher_root": "r0",
            "karma_drop": 7.0,
            "cost": 2.0,
        }
        for p in ("agent_0", "agent_1")
    ]
    assert obs["agent_0"]["month"] == 2 and obs["agent_0"]["pool"] == 60  # 30 left, doubled
    assert not any(term.values()) and not any(trunc.values())


def test_info_context_is_flat_and_identifier_like():
    env = commons_v0.parallel_env()
    _, infos = env.reset(seed=0)
    q = context_of(infos["agent_2"])
    assert q["pool_resource_level"] == 100 and q["sustainable_share"] == 10.0 and q["month"] == 1
    for key, value in q.items():
        assert key.isidentifier(), key
        assert isinstance(value, int | float | str | bool), (key, value)
    assert set(infos["agent_2"]) - set(q) == {
        "admissible_actions",
        "punishments",
        "messages",
        "mayor_report",
        "harvest_report",
    }


def test_scar_from_the_paper_governs_harvest_through_admissible_actions():
    # if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")
    scar = Rule(
        And((Compare("pool_resource_level", "<", 20), Named("tool_is", "harvest"))), ForbidToolCall("harvest")
    )
    env = commons_v0.parallel_env(initial_stock=16)
    _, infos = env.reset(seed=0)
    q = context_of(infos["agent_0"])
    actions = [Action.from_dict(d) for d in infos["agent_0"]["admissible_actions"]]
    masked = masked_set([scar], q, actions)
    assert {a.name for a in masked} == {"harvest"} and len(
        masked
    ) == 100  # amounts 1..100; "rest" stays allowed
    rest = next(a for a in actions if a.name == "rest")
    assert not fires(scar, q, rest)
    assert env.to_env_action(rest.to_dict()) == {"harvest": 0}
    _, infos = commons_v0.parallel_env().reset(seed=0)  # full pool: the scar does not fire
    assert not masked_set(
        [scar],
        context_of(infos["agent_0"]),
        [Action.from_dict(d) for d in infos["agent_0"]["admissible_actions"]],
    )


def test_admissible_actions_map_back_to_env_actions_in_every_phase():
    env = commons_v0.parallel_env()
    _, infos = env.reset(seed=0)
    for phase in (HARVEST, DISCUSSION, PUNISHMENT):
        choices = infos["agent_1"]["admissible_actions"]
        assert all(Action.from_dict(d).to_dict()["name"] == d["name"] for d in choices)
        actions = {a: env.to_env_action(infos[a]["admissible_actions"][-1]) for a in env.agents}
        if phase == PUNISHMENT:
            assert actions["agent_1"]["punish"].tolist() == [0, 0, 0, 0, 1]
            assert all(d["args"]["target"] != "agent_1" for d in choices if d["name"] == "punish")
        _, _, _, _, infos = env.step(actions)
    assert env.to_env_action({"kind": "fallback", "name": "no_op"})["harvest"] == 0


def test_collapse_terminates_after_the_month_and_horizon_truncates():
    env = commons_v0.parallel_env(arena="A")
    env.reset(seed=0)
    env.step({a: _quiet(harvest=30) for a in env.agents})  # 150 requested from 100: nothing left
    _, _, term, trunc, infos = env.step({a: _quiet() for a in env.agents})
    assert not any(term.values()) and infos["agent_0"]["collapsed"]  # discussion still runs
    _, _, term, trunc, _ = env.step({a: _quiet() for a in env.agents})
    assert all(term.values()) and not any(trunc.values()) and env.agents == []
    env = commons_v0.parallel_env(arena="B", num_months=2)
    env.reset(seed=0)
    for _ in range(3):
        env.step({a: _quiet(harvest=10) for a in env.agents})
    _, _, term, trunc, _ = env.step({a: _quiet() for a in env.agents})
    assert all(trunc.values()) and not any(term.values())
    assert [m.month for m in env.history] == [1, 2]
    with pytest.raises(CommonsActionError, match="finished episode"):
        env.step({})


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"capacity": 0}, r"capacity=0 is out of range; allowed: \[1, 1000000\]"),
        ({"growth_factor": 0.5}, r"growth_factor=0.5 is out of range"),
        ({"initial_stock": 101}, r"initial_stock=101 is out of range; allowed: \[0, 100\]"),
        ({"allocation": "fair"}, r"allocation='fair' is unknown; allowed: stochastic, proportional"),
        ({"num_months": 2.5}, r"num_months must be an integer"),
        ({"arena": "C"}, r"unknown arena 'C'; allowed: A, B, malicious"),
        ({"scenario": "forest"}, r"unknown scenario 'forest'"),
        ({"karma_min": 200.0}, r"karma_min=200.0 must not exceed karma_initial"),
        ({"agent_roots": ("x",)}, r"agent_roots=\('x',\) must hold 5"),
        ({"lake": 1}, r"unknown commons parameter\(s\) \['lake'\]"),
    ],
)
def test_bad_configuration_names_the_value_and_the_allowed_range(params, match):
    with pytest.raises(CommonsConfigError, match=match) as err:
        commons_v0.parallel_env(**params)
    assert isinstance(err.value, ConfigError)


def test_bad_actions_are_typed_errors():
    env = commons_v0.parallel_env()
    env.reset(seed=0)
    with pytest.raises(CommonsActionError, match=r"no action for live agent\(s\) \['agent_4'\]"):
        env.step({a: _quiet() for a in env.agents[:4]})
    with pytest.raises(
        CommonsActionError, match=r"action\['harvest'\]=101 is out of range; allowed: \[0, 100\]"
    ):
        env.step({a: _quiet(harvest=101) for a in env.agents})
    with pytest.raises(CommonsActionError, match="needs the field 'harvest'"):
        env.step({a: {} for a in env.agents})
    with pytest.raises(CommonsActionError, match="unknown agent"):
        env.action_space("agent_9")


def test_render_ansi_describes_the_pool_in_the_scenarios_wording():
    env = commons_v0.parallel_env(scenario="pollution", render_mode="ansi")
    env.reset(seed=0)
    env.step({a: _quiet(harvest=5) for a in env.agents})
    text = env.render()
    assert "The river is 75% unpolluted" in text and "agent_0 produced 5 widgets" in text


def _snapshot(env) -> tuple:
    """Everything a step may change, comparable."""
    return (
        env._phase,
        env._month,
        env._stock,
        tuple(env._karma),
        tuple(env._last_drop),
        env._punishments,
        env._punished_by.tobytes(),
        tuple(env._month_rewards),
        len(env._history),
        tuple(env.agents),
    )


def _to_punishment_phase(env) -> None:
    env.reset(seed=3)
    env.step({a: _quiet(harvest=5) for a in env.agents})
    env.step({a: _quiet() for a in env.agents})
    assert env._phase == PUNISHMENT


def test_a_malformed_punishment_vector_changes_nothing_and_a_corrected_retry_punishes_once():
    """Issue 13: agent_3's vector is bad; agents 0–2 (processed before it) must not have punished anyone yet."""
    env = commons_v0.parallel_env(arena="A")
    _to_punishment_phase(env)
    n = len(env.possible_agents)
    target = np.zeros(n, dtype=np.int8)
    target[4] = 1
    bad = {a: {"punish": target.copy()} for a in env.agents}
    for malformed in ([1, 0], np.full(n, 2), "all", None, np.array(["1"] * n), [[1] * n] * 2):
        bad["agent_3"] = {"punish": malformed}
        before = _snapshot(env)
        with pytest.raises(CommonsActionError, match="agent_3"):
            env.step(bad)
        assert _snapshot(env) == before, malformed
    bad["agent_3"] = {"punish": target.copy()}
    env.step(bad)
    severity = env.config.punishment_severity
    assert env._karma[4] == pytest.approx(
        env.config.karma_initial - 4 * severity
    )  # four punishers, once each


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (None, "takes a dict from agent name to action, got NoneType"),
        ([1, 2, 3], "takes a dict from agent name to action, got list"),
        ("harvest", "takes a dict"),
    ],
)
def test_step_with_a_non_mapping_is_a_typed_error(actions, match):
    env = commons_v0.parallel_env()
    env.reset(seed=0)
    before = _snapshot(env)
    with pytest.raises(CommonsActionError, match=match):
        env.step(actions)
    assert _snapshot(env) == before


def test_an_action_for_an_unknown_agent_is_an_error_not_ignored():
    env = commons_v0.parallel_env()
    env.reset(seed=0)
    actions = {a: _quiet(harvest=1) for a in env.agents} | {"agent_99": _quiet(harvest=1)}
    before = _snapshot(env)
    with pytest.raises(CommonsActionError, match=r"agent_99.*not live"):
        env.step(actions)
    assert _snapshot(env) == before
    env.step({a: _quiet(harvest=1) for a in env.agents})  # the same step without it goes through


@pytest.mark.parametrize("phase", [HARVEST, DISCUSSION])
def test_a_bad_action_in_any_phase_leaves_the_state_unchanged(phase):
    env = commons_v0.parallel_env(arena="A")
    env.reset(seed=1)
    if phase == DISCUSSION:
        env.step({a: _quiet(harvest=2) for a in env.agents})
    actions = {a: _quiet(harvest=3, message=1, limit=4) for a in env.agents}
    actions["agent_2"] = {"harvest": -1, "message": 9, "limit": 999}
    before = _snapshot(env)
    with pytest.raises(CommonsActionError, match="agent_2"):
        env.step(actions)
    assert _snapshot(env) == before
