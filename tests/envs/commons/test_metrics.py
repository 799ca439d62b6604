"""GovSim §2.4 metrics against hand-computed examples (the arithmetic is written next to each check)."""

from __future__ import annotations

import numpy as np
import pytest

from scars.envs.commons import metrics
from scars.envs.commons.rollout import run_episode

# Two agents, three months played, GovSim horizon T = 12 and f(0) = 50 (so T·f(0) = 600).
# h(t) = 100, 60, 20; f(t) = 50, 30, 10, so the per-agent share f(t)/|I| = 25, 15, 5.
STOCKS = [100, 60, 20]
F = [50, 30, 10]
CATCHES = np.array([[10, 50], [6, 18], [2, 6]])


def test_survival_time_is_the_last_month_that_began_above_c():
    assert metrics.survival_time(STOCKS, 5) == 3  # h(3) = 20 > 5
    assert metrics.survival_time([100, 4], 5) == 1  # h(2) = 4 ≤ 5
    assert metrics.survival_time([100], 5) == 1  # collapse in the first month: GovSim reports 1
    assert metrics.survival_time([3], 5) == 0


def test_survival_rate_is_the_share_of_runs_reaching_t():
    assert metrics.survival_rate([12, 12, 5, 1], 12) == 0.5  # 2 of 4 runs reached m = T = 12


def test_gain_efficiency_equality_over_usage_cooperative_yield_by_hand():
    R = metrics.gains(CATCHES)
    assert R.tolist() == [18, 74]  # 10+6+2, 50+18+6
    # u = 1 − max(0, 600 − 92)/600 = 92/600
    assert metrics.efficiency(92, 12, 50) == pytest.approx(92 / 600)
    # Gini = (|18−74| + |74−18|) / (2·2·92) = 112/368
    assert metrics.gini(R) == pytest.approx(112 / 368)
    assert metrics.equality(R) == pytest.approx(1 - 112 / 368)
    # r > f(t)/|I|: 10>25 no, 50>25 yes; 6>15 no, 18>15 yes; 2>5 no, 6>5 yes → 3 of |I|·m = 2·3 = 6
    assert metrics.over_usage(CATCHES, [f / 2 for f in F], 3) == pytest.approx(0.5)
    # Σ_t min(Σ_i r, f(t)) = min(60,50) + min(24,30) + min(8,10) = 50 + 24 + 8 = 82, over T·f(0) = 600
    assert metrics.cooperative_yield(CATCHES, F, 12, 50) == pytest.approx(82 / 600)


def test_efficiency_is_capped_at_one_and_gini_of_nothing_is_zero():
    assert metrics.efficiency(700, 12, 50) == 1.0  # 1 − max(0, 600 − 700)/600
    assert metrics.gini([0, 0, 0]) == 0.0
    assert metrics.gini([0, 0, 9]) == pytest.approx(2 / 3)  # (9·4)/(2·3·9) = 36/54


def test_five_sustainable_cooperators_score_perfectly():
    # Each takes 10 of 100 every month: the stock stays at 100, R_i = 120, Σ R = 600 = T·f(0).
    row = metrics.episode_metrics(run_episode(population="coop:5", seed=0))
    assert row["survival_time"] == 12 and row["survived"]
    assert row["total_gain"] == 600 and row["efficiency"] == 1.0 and row["equality"] == 1.0
    assert row["over_usage"] == 0.0 and row["cooperative_yield"] == 1.0 and row["punishments"] == 0


def test_five_greedy_agents_collapse_in_month_one():
    # Each requests ⌈0.3·100⌉ = 30; proportionally each gets 100·30/150 = 20 and the pool is emptied.
    record = run_episode(population="greedy:5", seed=0, allocation="proportional")
    row = metrics.episode_metrics(record)
    assert row["survival_time"] == 1 and not row["survived"]
    assert row["total_gain"] == 100 and row["efficiency"] == pytest.approx(100 / 600)
    assert row["equality"] == 1.0
    assert row["over_usage"] == 1.0  # all 5 catches of 20 exceed 10, over |I|·m = 5
    assert row["cooperative_yield"] == pytest.approx(50 / 600)  # min(100, 50) over 600


def test_karma_trajectories_and_summary():
    records = [run_episode(arena="malicious", seed=s) for s in range(2)]
    karma = metrics.karma_trajectories(records[0])
    # three colluders punish agent_0 by 10 each per month: 100 → 70 → 40 → 10 → 0 (floored)
    assert karma["agent_0"].tolist()[:5] == [100, 70, 40, 10, 0]
    assert (karma["agent_1"] == 100).all()
    s = metrics.summary(records)
    assert s["runs"] == 2 and s["survival_rate"] == 1.0
    assert s["punishments"] == 36 and s["justified_punishments"] == 0 and s["punishment_roots"] == 1
