"""Grid-search calibration of w = [α, β, γ, δ] and τ on labelled validation trajectories (paper §3.2).

Each validation step carries its signal vector z and a label: ``accommodate`` = True when the step should trigger
accommodation. For every w on the simplex grid {w : w_j ∈ {0, 1/k, …, 1}, Σ w = 1} (``simplex_grid(k)``, C(k+3, 3)
points), the best τ is found exactly: predictions are d > τ, so only the gaps between consecutive distinct d values
matter; every gap's midpoint (and the bottom of the attainable range, "cross on any signal") is tried.

Criterion: maximise F1 of the "accommodate" class. Ties are broken by the larger margin — the smallest distance, in
wᵀz units, between τ's pre-image and any validation score — which prefers the weights that separate the classes
most robustly; remaining ties go to the first grid point (grid order is deterministic). Returns a frozen
``CalibrationResult``; ``result.config(base)`` builds the ``DisequilibriumConfig`` to use.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from scars.disequilibrium.composite import (
    SIGNAL_NAMES,
    DisequilibriumConfig,
    Signals,
    attainable_range,
    sigmoid,
)
from scars.synthesis.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class LabelledStep:
    z: Signals
    accommodate: bool


@dataclass(frozen=True, slots=True)
class CalibrationResult:
    weights: tuple[float, float, float, float]
    tau: float
    f1: float
    precision: float
    recall: float
    margin: float
    n_steps: int
    n_positive: int
    grid_points: int
    gain: float
    bias: float

    def config(self, base: DisequilibriumConfig | None = None) -> DisequilibriumConfig:
        """``base`` (default config if None) with the calibrated weights and τ (and this gain/bias)."""
        base = base if base is not None else DisequilibriumConfig()
        return replace(base, weights=self.weights, tau=self.tau, gain=self.gain, bias=self.bias)


def simplex_grid(k: int) -> np.ndarray:
    """All w ∈ {0, 1/k, …, 1}⁴ with Σ w = 1, in lexicographic order of their integer numerators."""
    if k < 1:
        raise ConfigError(f"simplex grid resolution k must be ≥ 1 (step 1/k), got {k}")
    rows = [
        (a, b, c, k - a - b - c) for a, b, c in itertools.product(range(k + 1), repeat=3) if a + b + c <= k
    ]
    return np.array(rows, dtype=float) / k


def _as_frame(data: pd.DataFrame | Iterable[Iterable[LabelledStep]]) -> tuple[np.ndarray, np.ndarray]:
    pd = sys.modules.get("pandas")  # a DataFrame exists only once pandas is loaded: no import for the check
    if pd is not None and isinstance(data, pd.DataFrame):
        missing = [c for c in (*SIGNAL_NAMES, "accommodate") if c not in data.columns]
        if missing:
            raise ConfigError(
                f"calibration frame lacks columns {missing}; needs {[*SIGNAL_NAMES, 'accommodate']}"
            )
        z = data[list(SIGNAL_NAMES)].to_numpy(dtype=float)
        y = data["accommodate"].to_numpy(dtype=bool)
    else:
        steps = [s for trajectory in data for s in trajectory]
        z = np.array([s.z.as_tuple() for s in steps], dtype=float).reshape(-1, 4)
        y = np.array([s.accommodate for s in steps], dtype=bool)
    if len(y) == 0:
        raise ConfigError("calibration needs at least one labelled step, got none")
    if not y.any():
        raise ConfigError(
            "calibration needs at least one step labelled accommodate=True (F1 is undefined otherwise)"
        )
    if np.any((z < 0) | (z > 1)) or not np.all(np.isfinite(z)):
        raise ConfigError("every signal must lie in [0, 1]")
    return z, y


def _best_cut(scores: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float, float]:
    """Best threshold t on s = wᵀz ∈ [0, 1] for predictions s > t. Returns (f1, precision, recall, t, margin).

    Candidates: the midpoint of every gap between consecutive distinct scores, and t = 0 (the bottom of the
    attainable range) below the lowest score when that score is positive.
    """
    s = -np.sort(-scores, kind="stable")
    order = np.argsort(-scores, kind="stable")
    y_sorted = y[order]
    tp = np.cumsum(y_sorted)
    fp = np.cumsum(~y_sorted)
    nxt = np.append(s[1:], 0.0)  # the score just below each cut; 0 below the last one
    # A cut after position i is realisable when the next score is strictly lower (the last one: when s > 0).
    valid = s > nxt
    t = np.where(np.arange(len(s)) < len(s) - 1, 0.5 * (s + nxt), 0.0)
    margin = np.where(np.arange(len(s)) < len(s) - 1, 0.5 * (s - nxt), s)
    precision = tp / (tp + fp)
    recall = tp / max(int(y.sum()), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(tp > 0, 2 * precision * recall / (precision + recall), 0.0)
    if not valid.any():
        return 0.0, 0.0, 0.0, 0.0, 0.0  # every score is 0: nothing can ever cross
    f1_valid = np.where(valid, f1, -1.0)
    top = f1_valid.max()
    candidates = np.flatnonzero(np.isclose(f1_valid, top, rtol=0, atol=1e-12))
    i = int(candidates[np.argmax(margin[candidates])])
    return float(f1[i]), float(precision[i]), float(recall[i]), float(t[i]), float(margin[i])


def calibrate(
    data: pd.DataFrame | Iterable[Sequence[LabelledStep]],
    *,
    grid_k: int = 10,
    gain: float = 1.0,
    bias: float = 0.0,
) -> CalibrationResult:
    """Grid search of w on the simplex (step 1/grid_k) and exact τ per w, maximising F1 (module docstring)."""
    if not (math.isfinite(gain) and gain > 0):
        raise ConfigError(f"gain must be a finite number > 0, got {gain!r}")
    z, y = _as_frame(data)
    grid = simplex_grid(grid_k)
    scores = z @ grid.T  # (steps, grid points): wᵀz for every candidate w
    best: tuple | None = None
    for j, w in enumerate(grid):
        f1, precision, recall, t, margin = _best_cut(scores[:, j], y)
        key = (f1, margin)
        if best is None or key > best[0]:  # strict: earlier grid points win exact ties
            best = (key, j, w, f1, precision, recall, t, margin)
    assert best is not None  # the grid is never empty
    _, _, w, f1, precision, recall, t, margin = best
    tau = float(sigmoid(gain * t + bias))
    lo, hi = attainable_range(gain, bias)
    tau = min(max(tau, lo), math.nextafter(hi, lo))  # keep τ valid under float round-off
    return CalibrationResult(
        weights=tuple(float(x) for x in w),  # type: ignore[arg-type]
        tau=tau,
        f1=f1,
        precision=precision,
        recall=recall,
        margin=margin,
        n_steps=len(y),
        n_positive=int(y.sum()),
        grid_points=len(grid),
        gain=float(gain),
        bias=float(bias),
    )
