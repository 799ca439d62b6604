"""Tier-3 metrics (``experiments.identity``): each can fail — identical histories give chance, different ones high."""

from __future__ import annotations

import numpy as np
import pytest

from scars.envs.aquifer import aquifer_v0
from scars.envs.aquifer.adapter import AquiferAdapter
from scars.envs.commons import commons_v0
from scars.envs.commons.adapter import CommonsAdapter
from scars.experiments.identity import (
    FEATURE_NAMES,
    decision_profile,
    drift_against_bound,
    extraction_point,
    individuation,
    mean_with_ci,
    profile_distance,
    style_continuity,
    trajectory_features,
)
from scars.synthesis.dsl import Action


def test_style_continuity_is_zero_for_the_same_voice_and_large_for_another():
    calm = ["I will take my share and no more."] * 8
    shout = ["TAKE IT ALL NOW!", "Why wait?", "More! More!"] * 3
    same = style_continuity(calm, calm)
    assert same["js_imprint"] == pytest.approx(0.0) and same["js_training"] == pytest.approx(0.0)
    other = style_continuity(shout, calm)
    assert other["js_imprint"] > 0.2 and other["n_c"] == 9 and other["n_imprint"] == 5
    assert style_continuity([], calm)["js_imprint"] is None


def test_extraction_points_read_both_worlds_through_the_abstract_vocabulary():
    a = CommonsAdapter(commons_v0.parallel_env(), "agent_0")
    env = aquifer_v0.parallel_env()
    c = AquiferAdapter(env, "farm_0")
    obs, infos = env.reset(seed=0)
    d = c.decision(obs["farm_0"], infos["farm_0"], t=0)
    # a fair share in C at full level is 5 megalitres; in A at full stock 10 tons: both are y = 1
    assert extraction_point(d.context, d.actions, Action.tool("pump", volume=5), c.card) == (1.0, 1.0)
    a_obs, a_infos = a.env.reset(seed=0)
    ad = a.decision(a_obs["agent_0"], a_infos["agent_0"], t=0)
    assert extraction_point(ad.context, ad.actions, Action.tool("harvest", amount=10), a.card) == (1.0, 1.0)
    assert extraction_point(ad.context, ad.actions, Action.env("rest"), a.card) == (1.0, 0.0)
    # another phase (no extraction offered): no point
    talk = (Action.from_dict({"kind": "text", "name": "say", "args": {"intent": "silent"}}),)
    assert extraction_point(ad.context, talk, talk[0], a.card) is None


def test_profile_distance_is_zero_for_equal_behaviour_and_undefined_without_shared_bins():
    p = decision_profile([(0.9, 1.0), (0.6, 1.0), (0.3, 0.5)])
    assert p.counts == (0, 1, 1, 1)
    assert profile_distance(p, p) == {"distance": 0.0, "shared_bins": 3}
    q = decision_profile([(0.9, 2.0), (0.6, 1.0)])
    assert profile_distance(p, q) == {"distance": 0.5, "shared_bins": 2}
    assert profile_distance(decision_profile([(0.1, 1.0)]), q)["distance"] is None


def test_mean_with_ci_counts_the_undefined_values():
    out = mean_with_ci([0.2, None, 0.4, 0.3, 0.3, 0.3], np.random.default_rng(0))
    assert out["mean"] == pytest.approx(0.3) and out["n"] == 5 and out["undefined"] == 1
    assert out["ci"][0] <= 0.3 <= out["ci"][1]
    assert mean_with_ci([None], np.random.default_rng(0))["mean"] is None


def _features(rng, shift: float):
    points = [(rng.uniform(0, 1), max(0.0, rng.normal(1.0 + shift, 0.2))) for _ in range(20)]
    return trajectory_features(
        points,
        masked_decisions=3,
        decisions=30,
        sanctions=1,
        sanction_opportunities=10,
        utterances=["I wait."],
    )


def test_identical_histories_give_chance_accuracy():
    rng = np.random.default_rng(0)
    rows, labels, seeds = [], [], []
    for seed in range(12):
        x = _features(rng, 0.0)
        for history in ("A", "B"):  # the same trajectory whatever the history
            rows.append(x)
            labels.append(history)
            seeds.append(seed)
    out = individuation(np.array(rows), labels, seeds, permutations=50)
    assert out["accuracy"] == pytest.approx(0.5, abs=0.15)
    assert out["p_value"] > 0.05
    assert len(FEATURE_NAMES) == len(rows[0])


def test_clearly_different_histories_give_high_accuracy():
    rng = np.random.default_rng(1)
    rows, labels, seeds = [], [], []
    for seed in range(12):
        for history, shift in (("A", 0.0), ("B", 1.5)):
            rows.append(_features(rng, shift))
            labels.append(history)
            seeds.append(seed)
    out = individuation(np.array(rows), labels, seeds, permutations=50)
    assert out["accuracy"] >= 0.9 and out["p_value"] < 0.05
    assert out["ci"][0] > 0.5
    assert np.trace(np.array(out["confusion"])) == out["correct"]
    assert out["n_trajectories"] == 24 and out["n_seeds"] == 12


def test_individuation_is_undefined_with_one_seed():
    out = individuation(np.zeros((2, 3)), ["A", "B"], [0, 0])
    assert out["accuracy"] is None and out["p_value"] is None


def test_drift_against_bound_pools_and_flags_an_excess():
    ok = {"s1": {"mean_tv": 0.01, "bound": 0.1, "n": 10}, "s2": {"mean_tv": None, "bound": 0.1, "n": 0}}
    assert drift_against_bound(ok) | {} == drift_against_bound(ok)
    assert drift_against_bound(ok)["ok"] is True and drift_against_bound(ok)["scars_measured"] == 1
    bad = ok | {"s3": {"mean_tv": 0.5, "bound": 0.1, "n": 4}}
    assert drift_against_bound(bad)["ok"] is False and drift_against_bound(bad)["exceeds_bound"] == 1
    assert drift_against_bound({})["ok"] is None
