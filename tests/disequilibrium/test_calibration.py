"""Grid-search calibration of w and τ on labelled trajectories where the right answer is known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from scars.disequilibrium.calibration import LabelledStep, calibrate, simplex_grid
from scars.disequilibrium.composite import Signals, composite
from scars.synthesis.errors import ConfigError


def _trajectories(rng: np.random.Generator, n_traj: int, length: int, make):
    return [[make(rng) for _ in range(length)] for _ in range(n_traj)]


def test_simplex_grid():
    grid = simplex_grid(4)
    assert len(grid) == math.comb(4 + 3, 3) == 35
    assert np.allclose(grid.sum(axis=1), 1.0) and grid.min() >= 0
    assert len({tuple(r) for r in grid}) == 35
    with pytest.raises(ConfigError, match="k must be"):
        simplex_grid(0)


def test_failures_only_recovers_alpha_one():
    def step(rng):
        failed = bool(rng.random() < 0.3)
        z = Signals(float(failed), *rng.uniform(0, 0.6, size=3))
        return LabelledStep(z, failed)

    data = _trajectories(np.random.default_rng(0), 10, 40, step)
    result = calibrate(data, grid_k=10)
    assert result.weights == (1.0, 0.0, 0.0, 0.0)
    assert result.f1 == 1.0 and result.margin == pytest.approx(0.5)
    assert result.tau == pytest.approx(1 / (1 + math.exp(-0.5)))  # midpoint of the gap between 0 and 1
    cfg = result.config()
    assert all((composite(s.z, cfg) > cfg.tau) == s.accommodate for t in data for s in t)


def test_social_and_contradiction_together_recover_equal_beta_gamma():
    # Accommodate exactly when BOTH a verified karma drop and a contradiction with H are high; one alone is noise.
    def step(rng):
        kind = rng.integers(4)  # 0: both high, 1: only z_R, 2: only z_C, 3: neither
        z_r = 0.8 if kind in (0, 1) else 0.1
        z_c = 0.8 if kind in (0, 2) else 0.1
        return LabelledStep(Signals(rng.uniform(0, 0.3), z_r, z_c, rng.uniform(0, 0.3)), kind == 0)

    frame = pd.DataFrame(
        [
            {"z_V": s.z.z_v, "z_R": s.z.z_r, "z_C": s.z.z_c, "z_I": s.z.z_i, "accommodate": s.accommodate}
            for t in _trajectories(np.random.default_rng(1), 8, 50, step)
            for s in t
        ]
    )
    result = calibrate(frame, grid_k=10)
    assert result.weights == (0.0, 0.5, 0.5, 0.0)
    assert result.f1 == 1.0 and result.n_steps == 400
    assert result.grid_points == 286


def test_noisy_labels_give_f1_below_one_and_gain_bias_carry_over():
    def step(rng):
        failed = bool(rng.random() < 0.5)
        label = failed if rng.random() < 0.9 else not failed  # 10% label noise
        return LabelledStep(Signals(float(failed), 0.0, 0.0, 0.0), label)

    result = calibrate(_trajectories(np.random.default_rng(2), 5, 40, step), grid_k=4, gain=6.0, bias=-3.0)
    assert 0.8 < result.f1 < 1.0
    cfg = result.config()
    assert (cfg.gain, cfg.bias, cfg.weights) == (6.0, -3.0, result.weights)
    assert cfg.d_range[0] <= cfg.tau < cfg.d_range[1]


def test_calibration_input_errors():
    with pytest.raises(ConfigError, match="at least one step labelled"):
        calibrate([[LabelledStep(Signals(), False)]])
    with pytest.raises(ConfigError, match="lacks columns"):
        calibrate(pd.DataFrame({"z_V": [1.0], "accommodate": [True]}))
    with pytest.raises(ConfigError, match="at least one labelled step"):
        calibrate([])
