"""``experiments.train``: a tiny MaskablePPO run writes a replayable run folder, resumes from its checkpoint, and its
curves carry CIs over seeds; the config's checks. The RLlib learners are exercised in the slow tests."""

from __future__ import annotations

import csv
import json

import pytest

from scars.experiments.config import TrainConfig
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
    assert rows and list(rows[0]) == ["episode", "timesteps", "return", "world_return", "success", "violations",
                                      "cumulative_violations", "length", "masked"]
    cumulative = [int(r["cumulative_violations"]) for r in rows]
    assert cumulative == sorted(cumulative)
    assert summary["evaluation"]["n"] == 3 and set(summary["evaluation"]) == {"n", "policy", "random"}
    assert summary["training"]["episodes"] == len(rows)
    assert json.loads((out / "config.json").read_text()) == cfg.to_dict()
    assert summary["verifier_calls"] == 0  # the scars shield never asked the verifier


def test_the_recorded_config_replays_the_same_numbers(tiny_run, tmp_path):
    from scars.experiments.train import run_training

    cfg, out, summary = tiny_run
    again = run_training(TrainConfig(**json.loads((out / "config.json").read_text())), tmp_path / "r", echo=lambda *_: None)
    assert _rows(tmp_path / "r") == _rows(out)
    assert again["evaluation"] == summary["evaluation"] and again["scars"] == summary["scars"]


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
        ({"world": "commons", "learner": "rllib-ppo", "shield": "scars"}, "single-agent"),
        ({"timesteps": 0}, "timesteps = 0"),
        ({"gamma": 1.5}, "gamma"),
        ({"task_type": "cook"}, "task_type = 'cook'"),
        ({"address": "ray://x:10001"}, "rllib-ppo"),
    ],
)
def test_bad_configs_are_one_clear_error(fields, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig(**fields)
