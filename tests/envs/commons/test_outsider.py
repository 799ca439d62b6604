"""GovSim's outsider-insertion variant: a group of four that a fifth seat joins mid-run (``outsider_month``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test

from scars.envs.commons import commons_v0
from scars.envs.commons.dynamics import CommonsConfigError, DynamicsConfig, harvest_month
from scars.envs.commons.metrics import episode_metrics, month_table, over_usage
from scars.envs.commons.norms import NormVerifier


def _quiet(**kw):
    return {"harvest": 0, "message": 0, "limit": 0, "about": 0, "punish": np.zeros(5, dtype=np.int8)} | kw


def _month(env, harvest: dict[str, int], punish: dict[str, np.ndarray] | None = None):
    """Play one whole month (harvest, discussion, punishment) with the given requests; returns the last step."""
    env.step({a: _quiet(harvest=harvest.get(a, 0)) for a in env.agents})
    env.step({a: _quiet() for a in env.agents})
    return env.step({a: _quiet(punish=(punish or {}).get(a, np.zeros(5, dtype=np.int8))) for a in env.agents})


@pytest.mark.parametrize("arena", ["A", "B", "malicious"])
def test_parallel_api_test_passes_with_an_agent_that_joins(arena):
    # max_request 2 keeps the pool alive, so the outsider joins within the test's cycles
    env = commons_v0.parallel_env(arena=arena, outsider_month=2, max_request=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=200)


def test_aec_form_passes_api_test_with_an_agent_that_joins():
    api_test(commons_v0.env(arena="A", outsider_month=2, max_request=2), num_cycles=100)


def test_the_outsider_joins_at_its_month_and_the_share_divides_by_the_group():
    env = commons_v0.parallel_env(outsider_month=3)
    obs, infos = env.reset(seed=0)
    assert env.outsider == "agent_4" and env.agents == ["agent_0", "agent_1", "agent_2", "agent_3"]
    assert "agent_4" not in obs and "agent_4" not in infos
    q = infos["agent_0"]
    assert q["num_agents"] == 4 and q["sustainable_share"] == 12.5  # f = 50 shared by four
    with pytest.raises(commons_v0.CommonsActionError, match="not live"):
        env.step({a: _quiet() for a in [*env.agents, "agent_4"]})
    env.step({a: _quiet(harvest=12) for a in env.agents})
    infos = env.step({a: _quiet() for a in env.agents})[4]
    targets = {a["args"].get("target") for a in infos["agent_0"]["admissible_actions"]}
    assert "agent_4" not in targets  # nobody punishes a seat that is not in the group
    assert "agent_4" not in infos["agent_0"]["mayor_report"]
    # punishing the absent seat is ignored, like self-punishment
    obs, rew, _, _, infos = env.step(
        {a: _quiet(punish=np.array([0, 0, 0, 0, 1], dtype=np.int8)) for a in env.agents}
    )
    assert infos["agent_0"]["punishments"] == [] and "agent_4" not in obs
    month1 = env.history[0].harvest
    assert month1.present == (True, True, True, True, False) and month1.group_size == 4
    assert month1.catches == (12, 12, 12, 12, 0)
    obs, rew, term, trunc, infos = _month(env, {})  # month 2 ends: the outsider joins in that step
    assert env.agents[-1] == "agent_4" and "agent_4" in obs and rew["agent_4"] == 0.0
    assert term["agent_4"] is False and trunc["agent_4"] is False
    assert infos["agent_4"]["num_agents"] == 5 and infos["agent_4"]["sustainable_share"] == pytest.approx(
        10.0
    )
    assert obs["agent_4"]["month"] == 3
    obs, _, _, _, infos = env.step({a: _quiet(harvest=10) for a in env.agents})
    assert "agent_4 caught 10 tons of fish." in infos["agent_0"]["mayor_report"]
    assert (
        infos["agent_4"]["harvest_report"] == "agent_4 wanted to catch 10 tons of fish, and caught 10 tons."
    )


def test_the_norm_verifier_and_punishment_records_use_the_month_s_group():
    env = commons_v0.parallel_env(outsider_month=3)
    env.reset(seed=0)
    hit3 = np.array([0, 0, 0, 1, 0], dtype=np.int8)
    # month 1: agent_3 takes 12 (within 50/4 = 12.5); agents 0 and 1 punish it anyway
    _, _, _, _, infos = _month(env, {"agent_3": 12}, {"agent_0": hit3, "agent_1": hit3})
    records = infos["agent_3"]["punishments"]
    assert records and all(r["group_size"] == 4 for r in records)
    judged = NormVerifier(env.config.dynamics).judge_punishments(env.history[0].punishments)
    # a verifier that divided by all five seats (share 10) would call these justified
    assert not any(v.justified for v in judged)
    _month(env, {})
    # month 3, five in the group: the same request of 12 now breaks the norm (share 10)
    _, _, _, _, infos = _month(env, {"agent_3": 12}, {"agent_0": hit3})
    assert infos["agent_3"]["punishments"][0]["group_size"] == 5
    assert NormVerifier(env.config.dynamics).judge_punishments(env.history[2].punishments)[0].justified


def test_over_usage_counts_seat_months_of_the_group_only():
    # two months of four (share 12.5), one of five (share 10); the outsider's empty seat is not a seat-month
    catches = np.array([[13, 12, 12, 12, 0], [20, 0, 0, 0, 0], [11, 10, 10, 10, 11]])
    o = over_usage(catches, [12.5, 12.5, 10.0], 3, [4, 4, 5])
    assert o == pytest.approx(4 / 13)
    assert over_usage(catches, [12.5, 12.5, 10.0], 3) == pytest.approx(
        4 / 15
    )  # a fixed-group reading differs
    assert np.isnan(over_usage(catches, [12.5, 12.5, 10.0], 0, [4, 4, 5]))  # undefined, not 0


def test_episode_metrics_of_an_outsider_run():
    env = commons_v0.parallel_env(outsider_month=2, num_months=3)
    env.reset(seed=0)
    _month(env, {"agent_0": 13})  # 13 > 50/4
    _month(env, {"agent_4": 20})  # the outsider's first month
    _month(env, {})
    record = env.episode_record()
    table = month_table(record)
    assert table["group_size"].tolist() == [4, 5, 5]
    assert table["sustainable_share"].tolist()[0] == pytest.approx(12.5)
    m = episode_metrics(record)
    assert m["over_usage"] == pytest.approx(2 / 14) and m["group_size_final"] == 5


def test_a_collapse_before_the_outsider_joins_leaves_it_out_of_equality():
    env = commons_v0.parallel_env(outsider_month=3)
    env.reset(seed=0)
    _month(env, {a: 24 for a in ("agent_0", "agent_1", "agent_2", "agent_3")})  # 96 of 100: collapse
    assert env.agents == []
    m = episode_metrics(env.episode_record())
    assert m["equality"] == pytest.approx(1.0)  # four equal catches; the absent seat's 0 would make it 0.8
    assert m["survival_time"] == 1 and m["over_usage"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        (
            {"outsider_month": 1},
            r"outsider_month=1 is out of range; allowed: None or an integer in \[2, 12\]",
        ),
        ({"outsider_month": 13}, r"outsider_month=13 is out of range"),
        ({"outsider_month": True}, r"outsider_month=True is out of range"),
        ({"outsider_month": 2, "num_agents": 1, "agent_roots": None}, r"needs num_agents >= 2"),
    ],
)
def test_bad_outsider_month_names_the_value_and_the_allowed_range(params, match):
    with pytest.raises(CommonsConfigError, match=match):
        commons_v0.parallel_env(**params)


def test_harvest_month_refuses_a_request_from_a_seat_not_in_the_group():
    cfg = DynamicsConfig()
    rng = np.random.default_rng(0)
    present = (True, True, True, True, False)
    assert harvest_month(100, [10, 10, 10, 10, 0], cfg, rng, present).group_size == 4
    with pytest.raises(CommonsConfigError, match=r"seats \[4\] are not in the group"):
        harvest_month(100, [10, 10, 10, 10, 3], cfg, rng, present)


def test_a_what_if_is_judged_against_the_share_the_context_states():
    from scars.envs.commons.adapter import CommonsAdapter
    from scars.synthesis.dsl import Action

    env = commons_v0.parallel_env(outsider_month=3)
    _, infos = env.reset(seed=0)
    adapter = CommonsAdapter(env, "agent_0")
    q = commons_v0.context_of(infos["agent_0"])
    harvest_12 = Action.tool("harvest", amount=12)
    assert adapter.check(q, harvest_12) == ()  # within 50/4 in a group of four
    # extraction changes one variable at a time: the share the context states is what the norm judges against
    assert adapter.check(q | {"num_agents": 5}, harvest_12) == ()  # share still 12.5 as stated
    assert [v.rule_id for v in adapter.check(q | {"sustainable_share": 10.0}, harvest_12)] == ["over_harvest"]
    # without the stated share: the level and the group, the arena's full group when that is dropped too
    no_share = {k: v for k, v in q.items() if k != "sustainable_share"}
    assert adapter.check(no_share, harvest_12) == ()  # 50/4
    dropped = {k: v for k, v in no_share.items() if k != "num_agents"}
    assert [v.rule_id for v in adapter.check(dropped, harvest_12)] == ["over_harvest"]  # 50/5 = 10 < 12
