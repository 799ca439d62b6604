"""``experiments.train``: a tiny MaskablePPO run writes a replayable run folder, resumes from its checkpoint, and its
curves carry CIs over seeds; the config's checks. The RLlib learners are exercised in the slow tests."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from scars.experiments.config import TrainConfig
from scars.experiments.metrics import QUALITY_CLASSES
from scars.synthesis.errors import ConfigError
from support.extras import require_extra

TINY = dict(
    timesteps=256,
    num_envs=2,
    n_steps=64,
    batch_size=64,
    n_epochs=1,
    eval_episodes=3,
    checkpoint_every=128,
    max_steps=12,
    search_iterations=20,
)


def _rows(folder):
    with (folder / "episodes.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    require_extra("sb3_contrib", "rl")
    from scars.experiments.train import run_training

    out = tmp_path_factory.mktemp("train") / "seed0"
    cfg = TrainConfig(**TINY, shield="scars")
    return cfg, out, run_training(cfg, out, echo=lambda *_: None)


def test_a_run_folder_holds_everything_a_reader_needs(tiny_run):
    cfg, out, summary = tiny_run
    for name in ("config.json", "episodes.csv", "summary.json", "provenance.json", "ledger.jsonl"):
        assert (out / name).is_file(), name
    assert sorted(p.name for p in (out / "checkpoints").iterdir())[-1] == "step-000000256.zip"
    rows = _rows(out)
    assert rows and list(rows[0]) == [
        "episode",
        "timesteps",
        "return",
        "world_return",
        "success",
        "violations",
        "cumulative_violations",
        "length",
        "masked",
    ]
    cumulative = [int(r["cumulative_violations"]) for r in rows]
    assert cumulative == sorted(cumulative)
    assert summary["evaluation"]["n"] == 3 and set(summary["evaluation"]) == {
        "n",
        "policy",
        "policy_greedy",
        "random",
    }
    assert summary["training"]["episodes"] == len(rows)
    assert json.loads((out / "config.json").read_text()) == cfg.to_dict()
    assert summary["verifier_calls"] == 0  # the scars shield never asked the verifier
    quality = summary["scar_quality"]  # each learned scar against the rules it was told it broke, on probes
    assert quality["probes"] > 0 and set(quality["counts"]) == set(QUALITY_CLASSES)
    for scar in quality["scars"]:
        assert scar["precision"] is None or 0.0 <= scar["precision"] <= 1.0


def test_the_shields_rule_set_is_measured_at_every_decision_of_training(tiny_run):
    """Issue 40: the scars shield's rule set in force against the household's rules in force, clustered by training
    episode (the finished ones and those under way at the end), with n, in summary.json."""
    cfg, out, summary = tiny_run
    rule_set = summary["rule_set"]
    episodes = summary["training"]["episodes"]
    assert episodes <= rule_set["decisions"]["episodes"] <= episodes + cfg.num_envs
    assert rule_set["probes"]["probes"] == summary["scar_quality"]["probes"] > 0
    assert len(rule_set["probes"]["by_episode"]) == rule_set["decisions"]["episodes"]
    for key in ("rule_set_recall_probes", "rule_set_unsafe_decisions", "rule_set_masked_decisions"):
        assert key in summary and key in json.loads((out / "summary.json").read_text())
    assert rule_set["decisions"]["tasks_lost_to_scars"] <= episodes


def test_the_recorded_config_replays_the_same_numbers(tiny_run, tmp_path):
    from scars.experiments.train import run_training

    cfg, out, summary = tiny_run
    again = run_training(
        TrainConfig(**json.loads((out / "config.json").read_text())), tmp_path / "r", echo=lambda *_: None
    )
    assert _rows(tmp_path / "r") == _rows(out)
    assert again["evaluation"] == summary["evaluation"] and again["scar_quality"] == summary["scar_quality"]


def test_resume_continues_from_the_latest_checkpoint(tmp_path):
    require_extra("sb3_contrib", "rl")
    from scars.experiments.train import run_training

    out = tmp_path / "seed0"
    run_training(TrainConfig(**TINY), out, echo=lambda *_: None)
    before = _rows(out)
    said = []
    summary = run_training(TrainConfig(**{**TINY, "timesteps": 512}), out, resume=True, echo=said.append)
    assert any("resumed from" in s and "step-000000256.zip" in s for s in said)
    after = _rows(out)
    assert after[: len(before)] == before and len(after) > len(before)
    assert int(after[-1]["episode"]) == len(after)
    assert summary["timesteps"] == 512


def test_curves_have_a_mean_and_a_ci_over_seeds(tiny_run, tmp_path):
    from scars.experiments.train import curve_frame, plot_curves

    _, out, _ = tiny_run
    frame = curve_frame({"scars": [out, out]}, bins=4)["scars"]
    assert frame["n"][0] == 2 and len(frame["t"]) == 4
    assert list(frame["cumulative_violations"]) == sorted(frame["cumulative_violations"])
    assert plot_curves({"scars": [out]}, tmp_path / "c.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"learner": "dqn"}, "learner = 'dqn'"),
        ({"world": "commons"}, "learner 'rllib-ppo'"),
        ({"timesteps": 0}, "timesteps = 0"),
        ({"gamma": 1.5}, "gamma"),
        ({"task_type": "cook"}, "task_type = 'cook'"),
        ({"address": "ray://x:10001"}, "rllib-ppo"),
        ({"batch_size": 4096}, "batch_size = 4096 must be <= n_steps × num_envs = 1024"),
    ],
)
def test_bad_configs_are_one_clear_error(fields, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig(**fields)


@pytest.mark.slow
def test_masked_ppo_with_shaping_beats_the_random_masked_policy(tmp_path):
    """Issue 29's bar: MaskablePPO with progress shaping, a CI-sized budget, success >= 0.3 on 100 held-out games
    and clearly above the random masked policy's (its interval above the random policy's)."""
    require_extra("sb3_contrib", "rl")
    from scars.experiments.train import run_training

    cfg = TrainConfig(
        task_type="pick_and_place_simple", timesteps=24000, shield="none", seed=0, eval_episodes=100
    )
    evaluation = run_training(cfg, tmp_path / "run", echo=print)["evaluation"]
    policy, random = evaluation["policy"], evaluation["random"]
    print("policy", policy, "random", random)
    assert policy["success"] >= 0.3
    assert policy["success_ci"][0] > random["success_ci"][1]


@pytest.mark.slow
def test_the_scars_shield_cuts_cumulative_violations_during_training(tmp_path):
    """Paired over seeds 0-2 (the same games, the same learner initialisation): cumulative violations during training
    with the scars shield against no shield; the paired bootstrap interval of the difference excludes 0."""
    require_extra("sb3_contrib", "rl")
    from scars.experiments.stats import paired_difference
    from scars.experiments.train import run_training

    cumulative: dict[str, list[float]] = {"none": [], "scars": []}
    for seed in (0, 1, 2):
        for shield in cumulative:
            cfg = TrainConfig(
                task_type="look_at_obj_in_light", timesteps=6000, shield=shield, seed=seed, eval_episodes=10
            )
            summary = run_training(cfg, tmp_path / f"{shield}-{seed}", echo=lambda *_: None)
            cumulative[shield].append(summary["training"]["cumulative_violations"])
    print(cumulative)
    ones = [1.0, 1.0, 1.0]
    diff = paired_difference(
        (cumulative["scars"], ones), (cumulative["none"], ones), np.random.default_rng(0)
    )
    assert all(s < n for s, n in zip(cumulative["scars"], cumulative["none"], strict=True))
    assert diff.high is not None and diff.high < 0


@pytest.mark.slow
def test_rllib_ppo_trains_the_household_and_the_commons_with_five_seats(tmp_path):
    require_extra("ray.rllib", "rl")
    require_extra("torch", "rl")
    from scars.experiments.train import run_training

    household = TrainConfig(
        learner="rllib-ppo",
        timesteps=600,
        n_steps=64,
        num_envs=4,
        eval_episodes=3,
        checkpoint_every=300,
        shield="scars",
    )
    summary = run_training(household, tmp_path / "household", echo=print)
    assert summary["evaluation"]["n"] == 3 and summary["training"]["episodes"] > 0
    assert any(p.name.startswith("step-") for p in (tmp_path / "household" / "checkpoints").iterdir())
    assert summary["rule_set"]["decisions"]["episodes"] >= summary["training"]["episodes"]  # issue 40
    commons = TrainConfig(
        learner="rllib-ppo",
        world="commons",
        timesteps=300,
        n_steps=32,
        num_envs=4,
        eval_episodes=2,
        checkpoint_every=300,
        batch_size=64,
        shield="scars",
    )
    summary = run_training(commons, tmp_path / "commons", echo=print)
    suite = summary["govsim"]
    assert suite["n"] == 2 and {"survival_rate", "efficiency", "equality", "over_usage"} <= set(suite)
    assert {f"gain_agent_{i}" for i in range(5)} <= set(suite)  # five learning seats
    assert sorted(summary["scars"]) == [f"agent_{i}" for i in range(5)]  # one shield per seat
    assert (tmp_path / "commons" / "ledger-agent_0.jsonl").is_file()
