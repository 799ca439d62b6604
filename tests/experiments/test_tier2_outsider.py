"""Tier 2 in GovSim's outsider variant: learning seats in a group of four that a fifth seat joins mid-run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from scars.envs.commons.adapter import OUTSIDER_PERSONA, CommonsAdapter
from scars.envs.commons.commons_v0 import parallel_env
from scars.envs.commons.dynamics import DynamicsConfig
from scars.experiments.commons_run import run_tier2
from scars.experiments.commons_seats import STATE_FILE, load_carried, seat_kinds
from scars.experiments.commons_summary import inappropriate_scars
from scars.experiments.config import Tier2Config
from scars.synthesis.dsl import parse_rule
from scars.synthesis.errors import ConfigError

FAST = {"months": 5, "search_iterations": 40, "runs": 2}


def test_a_homogeneous_outsider_run_counts_each_seat_only_while_it_is_in_the_group(tmp_path):
    cfg = Tier2Config(method="scars", outsider_month=3, **FAST)
    result = run_tier2(cfg, tmp_path / "run")
    steps, runs, s = result.steps, result.runs, result.summary
    outsider = steps[steps["seat"] == "agent_4"]
    assert not outsider.empty and outsider["month"].min() == 3  # it acts from its month on, never before
    early = steps[(steps["month"] < 3) & (steps["phase"] == "harvest")]
    assert (
        early["share"] == early["pool"].map(lambda h: (h - -(-h // 2)) / 4)
    ).all()  # f(h)/4 before it joins
    months = result.months
    assert months.groupby("run")["group_size"].apply(list).map(lambda g: g[:2] == [4, 4]).all()
    for row, (_, ms) in zip(runs.itertuples(), months.groupby("run"), strict=True):
        assert row.seat_months == ms["group_size"].sum()  # Σ|I(t)| over the months played
        assert row.learner_seat_months == row.seat_months  # every seat learns
        assert row.outsider_seat_months == (ms["group_size"] == 5).sum()
    assert s["outsider_month"] == 3 and s["outsider_over_usage"] is not None
    assert 0.0 <= s["outsider_over_usage"] <= 1.0 and s["learning_seats"] == 5
    # the outsider has the outsider's habits: it over-harvests more than the incumbents once it is in
    late = steps[(steps["month"] >= 3) & (steps["phase"] == "harvest")]
    print(
        f"over-harvest rate from month 3: outsider {late[late['seat'] == 'agent_4']['over'].mean():.2f}, "
        f"incumbents {late[late['seat'] != 'agent_4']['over'].mean():.2f}"
    )


def test_in_the_focal_set_up_the_outsider_is_a_scripted_greedy_seat():
    kinds, _, _ = seat_kinds(Tier2Config(setup="focal", outsider_month=4))
    assert kinds == ("learner", "coop", "coop", "greedy", "greedy")  # arena A's default, its last seat greedy
    kinds, _, _ = seat_kinds(Tier2Config(setup="focal", outsider_month=4, population="coop:4,noisy:1"))
    assert kinds[-1] == "noisy"  # an explicit population is used as given


def test_a_focal_learner_among_cooperators_with_a_greedy_outsider(tmp_path):
    result = run_tier2(Tier2Config(method="reflexion", setup="focal", outsider_month=2, **FAST), tmp_path)
    s = result.summary
    assert s["outsider_over_usage"] == pytest.approx(
        1.0
    )  # the scripted greedy outsider takes 30% of the pool
    assert s["learning_seats"] == 1 and set(result.steps["seat"]) == {"agent_0"}


def test_the_outsider_seat_has_the_outsider_persona():
    env = parallel_env(outsider_month=4)
    assert CommonsAdapter(env, "agent_4").card.persona == OUTSIDER_PERSONA
    assert CommonsAdapter(env, "agent_0").card.persona != OUTSIDER_PERSONA


def test_inappropriate_scars_are_judged_at_every_group_size_of_the_run():
    dyn = DynamicsConfig()
    template = {"phase": "harvest", "pool_resource_level": 100}
    cap_11 = parse_rule('if action.amount > 11 then forbid_tool_call("harvest")')
    # fair at five: ⌊50/5⌋ = 10 is allowed; at four ⌊50/4⌋ = 12 is the fair share and 12 is forbidden
    assert inappropriate_scars([cap_11], template, dyn, {}) == []
    assert len(inappropriate_scars([cap_11], template, dyn, {}, (4, 5))) == 1


def test_the_config_refuses_an_outsider_month_beyond_the_run():
    with pytest.raises(ConfigError, match=r"outsider_month = 6 must be 0 \(off\) or a month in \[2, 5\]"):
        Tier2Config(outsider_month=6, months=5)


def test_a_learning_outsider_arrives_new_in_every_run_by_default(tmp_path):
    out = tmp_path / "fresh"
    result = run_tier2(Tier2Config(method="scars", outsider_month=2, **FAST), out)
    steps = result.steps
    newcomers = steps[steps["seat"] == "agent_4"]
    assert set(newcomers["incarnation"]) == {"agent_4/run_0", "agent_4/run_1"}
    assert newcomers.groupby("incarnation")["t"].min().tolist() == [0, 0]  # no clock, no memory carried over
    assert (out / "agent_4" / "run_0" / "ledger.sqlite").is_file()
    assert (out / "agent_4" / "run_1" / "ledger.sqlite").is_file()
    assert {"agent_4/run_0", "agent_4/run_1", "agent_0"} <= set(result.summary["per_seat"])
    manifest = json.loads((out / STATE_FILE).read_text())
    assert [s["fresh"] for s in manifest["seats"]] == [False] * 4 + [True]
    kept = run_tier2(
        Tier2Config(method="scars", outsider_month=2, outsider_fresh=False, **FAST), tmp_path / "kept"
    )
    assert set(kept.steps["incarnation"]) == {f"agent_{i}" for i in range(5)}
    assert (tmp_path / "kept" / "agent_4" / "ledger.sqlite").is_file()


def test_a_transfer_never_carries_a_fresh_outsider(tmp_path):
    source = tmp_path / "a"
    run_tier2(Tier2Config(method="rag", outsider_month=2, **FAST), source)
    carried = load_carried(Tier2Config(method="rag", outsider_month=2, transfer_from=str(source), **FAST))
    assert sorted(carried) == [f"agent_{i}" for i in range(4)]  # the newcomer arrives new in B too
    with pytest.raises(ConfigError, match="agent_4 was a fresh outsider there"):
        load_carried(
            Tier2Config(
                method="rag", outsider_month=2, outsider_fresh=False, transfer_from=str(source), **FAST
            )
        )


def test_the_outsider_study_pairs_each_run_with_and_without_the_newcomer(tmp_path):
    from scars.experiments.tier2_studies import run_outsider

    base = Tier2Config(runs=2, months=5, search_iterations=40)
    table = run_outsider(base, ("scars", "rag"), (0,), 3, tmp_path)
    assert list(table["method"]) == ["scars", "rag"] and set(table["n_runs"]) == {2}
    runs = pd.read_parquet(tmp_path / "outsider_runs.parquet")
    without, with_ = runs[runs["outsider"] == "without"], runs[runs["outsider"] == "with"]
    assert (without["outsider_seat_months"] == 0).all() and (with_["outsider_seat_months"] > 0).any()
    scars = table.iloc[0]
    assert scars["outsider_over_usage"]["denominator"] == scars["outsider_seat_months"] > 0
    assert scars["scars_admitted"] >= 1 and pd.isna(
        table.iloc[1]["scars_admitted"]
    )  # a baseline has no schema
    text = (tmp_path / "outsider.md").read_text()
    assert "| rag | 2 |" in text and text.count("nan") == 0 and (tmp_path / "outsider.png").is_file()
