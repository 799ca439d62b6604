"""Sweep specs (any config field of a tier, validated), grid expansion, value parsing, TOML specs and the seeded
bootstrap aggregation (SPEC §8; experiments/sweep.py, experiments/tiers.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from scars.experiments.stats import bootstrap_ci
from scars.experiments.sweep_spec import SweepError, SweepSpec, expand, load_spec, parse_values
from scars.experiments.sweep_tables import aggregate_runs
from scars.experiments.tiers import get_tier
from scars.synthesis.errors import ConfigError


def test_grid_is_the_cross_product_minus_ablations_of_baselines():
    spec = SweepSpec(grid={"method": ["scars", "rag"], "ablation": ["none", "no_mdl"], "seed": [0, 1]})
    names = [t.run_name for t in expand(spec)]
    assert names == [
        "tier1-scars-s0",
        "tier1-scars-s1",
        "tier1-scars-no_mdl-s0",
        "tier1-scars-no_mdl-s1",
        "tier1-rag-s0",
        "tier1-rag-s1",
    ]
    assert [t.label for t in expand(spec)][::2] == ["scars", "scars:no_mdl", "rag"]


def test_any_config_field_can_be_swept_and_shows_in_the_label():
    spec = SweepSpec(grid={"tau": [0.55, 0.6], "seed": [0, 1]}, fixed={"method": "rag", "episodes": 3})
    trials = expand(spec)
    assert [t.label for t in trials] == ["rag tau=0.55", "rag tau=0.55", "rag tau=0.6", "rag tau=0.6"]
    assert len({t.run_name for t in trials}) == 4
    assert all(t.config.episodes == 3 and t.config.method == "rag" for t in trials)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"grid": {"methd": ["scars"]}}, "'methd'"),
        ({"grid": {"seed": [0]}, "fixed": {"episode": 3}}, "'episode'"),
        ({"grid": {"seed": [0, 0]}}, "twice"),
        ({"grid": {"seed": []}}, "no values"),
        ({"grid": {"seed": [0]}, "fixed": {"seed": 1}}, "both swept and fixed"),
        ({"grid": {"method": ["nope"]}}, "'nope'"),
        ({"grid": {"tau": [0.9]}}, "tau"),
        ({"grid": {"seed": [0]}, "name": "a b"}, "name"),
        ({"grid": {"seed": [0]}, "tier": "tier9"}, "'tier9'"),
        ({"grid": {"seed": [0]}, "bootstrap_samples": 5}, "bootstrap_samples"),
    ],
)
def test_a_bad_spec_is_one_error_naming_the_value(kwargs, named):
    with pytest.raises(ConfigError, match=named):
        SweepSpec(**kwargs)


def test_an_unknown_field_lists_the_allowed_ones():
    with pytest.raises(ConfigError) as err:
        SweepSpec(grid={"temprature": [0.5]})
    for field in dataclasses.fields(get_tier("tier1").config):
        assert field.name in str(err.value)


def test_parse_values_takes_the_fields_type():
    assert parse_values("tier1", "seed=0-2,7", many=True) == ("seed", (0, 1, 2, 7))
    assert parse_values("tier1", "tau=0.6", many=False) == ("tau", (0.6,))
    assert parse_values("tier1", "alfworld-logic=true", many=False) == ("alfworld_logic", (True,))
    assert parse_values("tier1", "method=scars,rag", many=True) == ("method", ("scars", "rag"))
    for bad, named in (("seed=x", "'x'"), ("tau=nan", "finite"), ("seed", "FIELD=VALUE"), ("sed=1", "'sed'")):
        with pytest.raises(ConfigError, match=named):
            parse_values("tier1", bad, many=True)


def test_load_spec_reads_toml_and_refuses_unknown_keys(tmp_path):
    good = tmp_path / "s.toml"
    good.write_text(
        'name = "abl"\n[grid]\nmethod = ["scars"]\nseed = [0, 1]\n[fixed]\nepisodes = 2\n'
        "[tune]\nmax_failures = 1\n[wandb]\nenabled = true\nproject = 'p'\n"
    )
    spec = load_spec(good)
    assert spec.name == "abl" and spec.grid == {"method": ("scars",), "seed": (0, 1)}
    assert (
        spec.fixed == {"episodes": 2} and spec.max_failures == 1 and spec.wandb and spec.wandb_project == "p"
    )
    bad = tmp_path / "b.toml"
    bad.write_text("[grid]\nseed = [0]\n[tune]\nretries = 3\n")
    with pytest.raises(SweepError, match="'retries'"):
        load_spec(bad)
    bad.write_text("grid = [")
    with pytest.raises(SweepError, match="TOML"):
        load_spec(bad)


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
    from scars.experiments.sweep_tables import pooled_runs

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
