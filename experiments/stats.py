"""Intervals from pooled counts with a cluster bootstrap, and paired differences (issue: statistics with n).

A rate such as RVR is a ratio of counts (repeats / re-exposures) pooled over *clusters* — the episodes of a run,
or the runs (seeds) of a sweep — whose steps are not independent. Its interval resamples whole clusters with
replacement and recomputes the pooled ratio (percentile bootstrap). A comparison of two methods run on the same
clusters (the same games, the same seeds) resamples the cluster indices *jointly* and reports the paired
difference of the two pooled ratios. Fewer than ``FEW_CLUSTERS`` clusters: the interval is reported and flagged.
Undefined ratios (no denominator) are None, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FEW_CLUSTERS = 5
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A pooled ratio with its cluster-bootstrap interval: n clusters, the pooled numerator and denominator."""

    estimate: float | None
    low: float | None
    high: float | None
    clusters: int
    numerator: float
    denominator: float

    @property
    def few_clusters(self) -> bool:
        return self.clusters < FEW_CLUSTERS

    def to_json(self) -> dict:
        return {
            "estimate": self.estimate,
            "ci": None if self.low is None else [self.low, self.high],
            "clusters": self.clusters,
            "numerator": self.numerator,
            "denominator": self.denominator,
            "few_clusters": self.few_clusters,
        }


def _quantiles(values: np.ndarray) -> tuple[float | None, float | None]:
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None, None
    lo, hi = np.quantile(values, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(lo), float(hi)


def _ratios(num: np.ndarray, den: np.ndarray, index: np.ndarray) -> np.ndarray:
    n, d = num[index].sum(axis=1), den[index].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > 0, n / np.where(d > 0, d, 1), np.nan)


def pooled_ratio(
    numerator: Sequence[float], denominator: Sequence[float], rng: np.random.Generator, samples: int = 2000
) -> Interval:
    """Σ numerator / Σ denominator over clusters, with a percentile cluster-bootstrap interval."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    k = len(num)
    total_den = float(den.sum())
    estimate = float(num.sum() / total_den) if total_den > 0 else None
    if k < 2 or estimate is None:
        return Interval(estimate, None, None, k, float(num.sum()), total_den)
    lo, hi = _quantiles(_ratios(num, den, rng.integers(0, k, size=(samples, k))))
    return Interval(estimate, lo, hi, k, float(num.sum()), total_den)


def paired_difference(
    a: tuple[Sequence[float], Sequence[float]],
    b: tuple[Sequence[float], Sequence[float]],
    rng: np.random.Generator,
    samples: int = 2000,
) -> Interval:
    """ratio(a) − ratio(b) on the same clusters (index i is the same game / seed for both), jointly resampled."""
    num_a, den_a = (np.asarray(x, dtype=float) for x in a)
    num_b, den_b = (np.asarray(x, dtype=float) for x in b)
    if len(num_a) != len(num_b):
        raise ValueError(f"paired clusters differ in number: {len(num_a)} vs {len(num_b)}")
    k = len(num_a)
    ra = num_a.sum() / den_a.sum() if den_a.sum() > 0 else None
    rb = num_b.sum() / den_b.sum() if den_b.sum() > 0 else None
    estimate = None if ra is None or rb is None else float(ra - rb)
    if k < 2 or estimate is None:
        return Interval(estimate, None, None, k, float("nan"), float("nan"))
    index = rng.integers(0, k, size=(samples, k))
    lo, hi = _quantiles(_ratios(num_a, den_a, index) - _ratios(num_b, den_b, index))
    return Interval(estimate, lo, hi, k, float("nan"), float("nan"))


def bootstrap_ci(
    values: Sequence[float], rng: np.random.Generator, samples: int = 2000
) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean: ``pooled_ratio`` over clusters of weight 1 (the same resampling and
    the same quantiles as every other interval here); (NaN, NaN) for fewer than 2 values."""
    values = np.asarray(values, dtype=float)
    interval = pooled_ratio(values, np.ones(len(values)), rng, samples)
    if interval.low is None or interval.high is None:
        return float("nan"), float("nan")
    return interval.low, interval.high
