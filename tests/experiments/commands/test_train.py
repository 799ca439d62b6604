"""``scars train`` and ``scars train-curves`` from the command line: seeds into OUT/seed<k>/, curves, replay, resume."""

from __future__ import annotations

import json

from click.testing import CliRunner

from scars.experiments.cli import main
from support.extras import require_extra

TINY = [
    "--timesteps",
    "128",
    "--num-envs",
    "2",
    "--n-steps",
    "32",
    "--batch-size",
    "32",
    "--n-epochs",
    "1",
    "--eval-episodes",
    "2",
    "--checkpoint-every",
    "64",
    "--max-steps",
    "10",
]


def test_train_writes_one_run_per_seed_and_the_curves(tmp_path):
    require_extra("sb3_contrib", "rl")
    out = tmp_path / "runs"
    result = CliRunner().invoke(
        main, ["train", *TINY, "--shield", "blocklist", "--seeds", "0-1", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "seed 1: success" in result.output and "n=2 held-out games" in result.output
    for seed in (0, 1):
        config = json.loads((out / f"seed{seed}" / "config.json").read_text())
        assert config["seed"] == seed and config["shield"] == "blocklist"
    assert (out / "curves.png").stat().st_size > 1000
    # replay one seed from its recorded config, and overlay both in one figure
    again = tmp_path / "again"
    result = CliRunner().invoke(
        main, ["train", "--config", str(out / "seed1" / "config.json"), "--out", str(again)]
    )
    assert result.exit_code == 0, result.output
    assert (again / "seed1" / "episodes.csv").read_text() == (out / "seed1" / "episodes.csv").read_text()
    figure = tmp_path / "both.png"
    result = CliRunner().invoke(main, ["train-curves", str(out), str(again), "--out", str(figure)])
    assert result.exit_code == 0, result.output
    curves = json.loads(figure.with_suffix(".json").read_text())
    assert list(curves) == ["blocklist"] and curves["blocklist"]["n"] == [3]
    # resume: continue seed 0 to twice the steps, from its checkpoint
    result = CliRunner().invoke(
        main, ["train", *TINY[2:], "--timesteps", "256", "--seeds", "0", "--resume", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "resumed from" in result.output
    assert json.loads((out / "seed0" / "summary.json").read_text())["timesteps"] >= 256
