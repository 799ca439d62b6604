"""The Ray executor gives the same per-run summaries as in-process for the same seeds (STYLE: same seed, same
results — locally and on Ray). Uses the shared ``ray_session`` fixture."""

from __future__ import annotations

import pandas as pd
from rich.console import Console

from experiments.sweep import SweepConfig, run_sweep

GRID = dict(
    methods=("static_persona", "reflexion"), seeds=(0, 1), episodes=2, schedule="smoke", name="ray-vs-local"
)


def _without_timing(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns if "seconds" in c])


def test_ray_sweep_matches_inprocess(ray_session, tmp_path):
    local = run_sweep(SweepConfig(**GRID), tmp_path / "local", console=Console(quiet=True))
    on_ray = run_sweep(SweepConfig(**GRID, executor="ray"), tmp_path / "ray", console=Console(quiet=True))
    assert on_ray.failed == () and on_ray.ran == local.ran
    assert ray_session.is_initialized(), "the sweep must not shut down a Ray session it did not start"
    pd.testing.assert_frame_equal(_without_timing(on_ray.runs), _without_timing(local.runs))
    pd.testing.assert_frame_equal(on_ray.aggregate, local.aggregate)
    for name in on_ray.ran:
        # the driver wrote each run's tables from what the Ray task returned
        steps_ray = pd.read_parquet(tmp_path / "ray" / "runs" / name / "steps.parquet")
        steps_local = pd.read_parquet(tmp_path / "local" / "runs" / name / "steps.parquet")
        pd.testing.assert_frame_equal(steps_ray, steps_local)


def test_a_run_failing_on_ray_is_recorded(ray_session, tmp_path):
    cfg = SweepConfig(methods=("static_persona",), seeds=(0, 1), episodes=2, schedule="smoke", executor="ray")
    from experiments.tier1 import run_tier1

    def fail_seed_1(cfg, out, progress=None):
        # defined here so that cloudpickle ships it by value (Ray workers cannot import a test module)
        if cfg.seed == 1:
            raise RuntimeError("seed 1 is cursed")
        return run_tier1(cfg, out, progress=progress)

    result = run_sweep(cfg, tmp_path, run_fn=fail_seed_1, console=Console(quiet=True))
    assert result.failed == ("tier1-smoke-static_persona-s1",)
    assert "seed 1 is cursed" in (tmp_path / "runs" / result.failed[0] / "error.txt").read_text()
    assert (tmp_path / "runs" / "tier1-smoke-static_persona-s0" / "summary.json").exists()
