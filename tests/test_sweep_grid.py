"""Sweep grid expansion, config validation, seed parsing and the seeded bootstrap (SPEC §8; experiments/sweep.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments.sweep import (
    SweepConfig,
    SweepError,
    aggregate_runs,
    bootstrap_ci,
    expand_grid,
    parse_names,
    parse_seeds,
)
from synthesis.errors import ConfigError


def test_grid_is_methods_times_scars_ablations_times_seeds():
    cfg = SweepConfig(
        methods=("scars", "rag", "reflexion"),
        ablations=("no_mdl", "soft_bias_only"),
        seeds=(0, 1, 2),
        episodes=4,
    )
    grid = expand_grid(cfg)
    # scars: none + 2 ablations; baselines: none only → (3 + 1 + 1) × 3 seeds
    assert len(grid) == 15
    assert len({c.run_name for c in grid}) == 15
    assert {(c.method, c.ablation) for c in grid} == {
        ("scars", "none"),
        ("scars", "no_mdl"),
        ("scars", "soft_bias_only"),
        ("rag", "none"),
        ("reflexion", "none"),
    }
    assert [c.seed for c in grid[:3]] == [0, 1, 2]
    assert all(c.episodes == 4 and c.schedule == "paper" and c.executor == "inprocess" for c in grid)
    # the full scars agent comes first, ablations in the order asked, then the baselines
    assert [c.ablation for c in grid if c.seed == 0] == ["none", "no_mdl", "soft_bias_only", "none", "none"]


def test_none_is_always_run_for_scars_and_not_duplicated():
    cfg = SweepConfig(methods=("scars",), ablations=("none", "no_mdl"), seeds=(3,))
    assert [c.ablation for c in expand_grid(cfg)] == ["none", "no_mdl"]
    assert [c.ablation for c in expand_grid(SweepConfig(methods=("scars",), seeds=(3,)))] == ["none"]


def test_lists_become_tuples_and_the_config_is_frozen():
    cfg = SweepConfig(methods=["rag"], seeds=[np.int64(2)])
    assert cfg.methods == ("rag",) and cfg.seeds == (2,) and type(cfg.seeds[0]) is int
    hash(cfg)
    with pytest.raises(AttributeError):
        cfg.episodes = 3


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"methods": ("rag", "gpt")}, "'gpt'"),
        ({"methods": ()}, "methods"),
        ({"seeds": ()}, "seeds"),
        ({"seeds": (0, -1)}, "-1"),
        ({"seeds": (1, 1)}, "1"),
        ({"methods": ("rag", "rag")}, "'rag'"),
        ({"ablations": ("no_gc",)}, "'no_gc'"),
        ({"methods": ("rag",), "ablations": ("no_mdl",)}, "'no_mdl'"),
        ({"executor": "slurm"}, "'slurm'"),
        ({"ray_address": "auto"}, "'auto'"),
        ({"episodes": 0}, "episodes"),
        ({"schedule": "weekly"}, "'weekly'"),
        ({"name": "my sweep"}, "'my sweep'"),
        ({"bootstrap_samples": 10}, "10"),
    ],
)
def test_validation_names_the_bad_value(kwargs, named):
    with pytest.raises(ConfigError, match=named.replace("(", r"\(")):
        SweepConfig(**kwargs)


def test_sweep_error_is_a_config_error():
    assert issubclass(SweepError, ConfigError)


def test_parse_seeds():
    assert parse_seeds("0-4") == (0, 1, 2, 3, 4)
    assert parse_seeds("0,3,7-9") == (0, 3, 7, 8, 9)
    assert parse_seeds(" 5 ") == (5,)
    for bad in ("", "a", "4-1", "1-", "-3"):
        with pytest.raises(SweepError, match="seeds"):
            parse_seeds(bad)


def test_parse_names():
    methods = ("scars", "rag")
    assert parse_names("rag, scars", methods, "method") == ("rag", "scars")
    assert parse_names("all", methods, "method") == methods
    with pytest.raises(SweepError, match="'ragg'"):
        parse_names("ragg", methods, "method")


def test_bootstrap_ci_is_seeded_brackets_the_mean_and_needs_two_values():
    x = np.array([0.1, 0.4, 0.2, 0.9, 0.5])
    lo, hi = bootstrap_ci(x, np.random.default_rng(0))
    assert lo < x.mean() < hi
    assert x.min() <= lo and hi <= x.max()
    assert (lo, hi) == bootstrap_ci(x, np.random.default_rng(0))
    assert bootstrap_ci(np.array([3.0, 3.0]), np.random.default_rng(1)) == (3.0, 3.0)
    assert all(np.isnan(bootstrap_ci(np.array([0.5]), np.random.default_rng(0))))


def test_bootstrap_ci_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(123)
    hits = 0
    trials = 400
    for _ in range(trials):
        lo, hi = bootstrap_ci(rng.normal(1.0, 1.0, size=30), rng, samples=1000)
        hits += lo <= 1.0 <= hi
    # the percentile bootstrap under-covers slightly at n=30; a broken CI (e.g. the wrong quantiles) lands far away
    assert 0.88 <= hits / trials <= 0.99


def test_aggregate_skips_failed_runs_and_undefined_values_and_is_independent_of_other_groups():
    runs = pd.DataFrame(
        {
            "label": ["rag", "rag", "rag", "scars", "scars"],
            "method": ["rag", "rag", "rag", "scars", "scars"],
            "ablation": ["none"] * 5,
            "status": ["ok", "resumed", "failed", "ok", "ok"],
            "success_rate": [1.0, 0.5, np.nan, 0.25, 0.75],
            "rvr": [0.2, np.nan, np.nan, 0.0, 0.0],
        }
    )
    agg = aggregate_runs(runs, metrics=("success_rate", "rvr")).set_index("label")
    assert agg.loc["rag", "runs"] == 3 and agg.loc["rag", "failed"] == 1
    assert agg.loc["rag", "success_rate_n"] == 2 and agg.loc["rag", "success_rate_mean"] == 0.75
    assert agg.loc["rag", "rvr_n"] == 1 and np.isnan(agg.loc["rag", "rvr_ci_low"])
    assert agg.loc["scars", "rvr_ci_low"] == agg.loc["scars", "rvr_ci_high"] == 0.0
    alone = aggregate_runs(runs[runs["label"] == "scars"], metrics=("success_rate", "rvr")).set_index("label")
    assert alone.loc["scars", "success_rate_ci_low"] == agg.loc["scars", "success_rate_ci_low"]
    other_seed = aggregate_runs(runs, seed=1, metrics=("success_rate",)).set_index("label")
    assert other_seed.loc["scars", "success_rate_mean"] == agg.loc["scars", "success_rate_mean"]


def test_pooled_counts_count_undefined_runs_and_pair_on_common_seeds():
    from experiments.sweep import pooled_runs

    runs = pd.DataFrame(
        {
            "label": ["scars"] * 3 + ["rag"] * 3,
            "status": ["ok"] * 6,
            "seed": [0, 1, 2, 0, 1, 2],
            "repeat_violations": [0, 1, 0, 3, 0, 2],
            "reexposures": [5, 5, 0, 6, 0, 4],
            "success_rate": [1.0, 0.5, 1.0, 0.5, 1.0, 1.0],
            "episodes": [2, 2, 2, 2, 2, 2],
        }
    )
    pooled = pooled_runs(runs, samples=500).set_index("label")
    assert pooled.loc["scars", "rvr_pooled"] == pytest.approx(1 / 10)  # pooled counts, not a mean of rates
    assert pooled.loc["rag", "rvr_pooled"] == pytest.approx(5 / 10)
    assert pooled.loc["scars", "rvr_undefined_runs"] == 1 and pooled.loc["rag", "rvr_undefined_runs"] == 1
    assert (
        pooled.loc["rag", "rvr_diff_vs_scars"] == pytest.approx(0.4)
        and pooled.loc["rag", "rvr_paired_seeds"] == 3
    )
    assert bool(pooled.loc["rag", "rvr_pooled_few_runs"])  # three runs: flagged
    lo, hi = pooled.loc["rag", "rvr_pooled_ci_low"], pooled.loc["rag", "rvr_pooled_ci_high"]
    assert lo <= 0.5 <= hi
