"""Tier-3 metrics: identity continuity, trajectory individuation, off-failure drift across domains (paper §6.3).

Pure functions over what happened; no agent, no world. Every rate carries its n; an undefined value is None.

* **Style continuity** — JS divergence (bits, in [0, 1]) between the style distribution of an agent's utterances in
  arena C and (a) its own initial imprint (its first ``IMPRINT_SIZE`` utterances in its training arena, as z_I does),
  (b) everything it said in its training arena. ``disequilibrium.style`` defines p_style and JS.
* **Task-behaviour continuity** — the *decision profile* on the abstract vocabulary (``envs.vocabulary``): for every
  decision at which the agent could extract from the shared resource, x = resource level / capacity and
  y = the amount it extracted / the fair share at that level (0 when it abstained; 1 = exactly its fair share). The
  profile is the mean y in each of ``LEVEL_BINS`` bins of x; the continuity distance between two profiles is the
  mean |Δ| over the bins both visited (None when they share none). The words differ between worlds; x and y do not.
* **Trajectory individuation** — a scikit-learn classifier (standardised logistic regression) reads features of
  each agent's arena-C trajectory and attributes its history (trained in A or in B). Accuracy is held out *by seed*
  (every fold leaves whole seeds out: the A- and B-trained agents of a seed are never split), pooled over folds with
  a seed-clustered bootstrap interval (``experiments.stats``) and a permutation test (scikit-learn's
  ``permutation_test_score`` with the same folds). With identical histories it must be at chance; with clearly
  different ones high — tests check both.
* **Off-failure drift across domains** — the guarantee monitor's Prop. 3 measurement (``experiments.guarantees``) on
  the arena-C decisions that are off-failure for each carried scar: mean TV(π_S, π_{S∖σ}) against sqrt(ε/2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix
from sklearn.model_selection import GroupKFold, permutation_test_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from scars.disequilibrium.style import STYLE_CATEGORIES, js_divergence, style_distribution
from scars.envs.api import WorldCard
from scars.experiments.stats import pooled_ratio
from scars.synthesis.dsl import Action, Value

IMPRINT_SIZE = 5
"""Utterances that make the initial imprint y_0 (the same number z_I uses)."""
LEVEL_BINS: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0 + 1e-9)
"""Edges of the resource-level bins (level / capacity) of the decision profile."""
HISTORIES: tuple[str, ...] = ("A", "B")


# --------------------------------------------------------------------------------------------- style continuity
def style_continuity(
    utterances_c: Sequence[str], utterances_training: Sequence[str], imprint_size: int = IMPRINT_SIZE
) -> dict[str, Any]:
    """JS(p_style(C) ‖ imprint) and JS(p_style(C) ‖ training arena), with the numbers of utterances behind each."""
    imprint = list(utterances_training[:imprint_size])
    defined = bool(utterances_c) and bool(imprint)
    return {
        "js_imprint": js_divergence(style_distribution(utterances_c), style_distribution(imprint))
        if defined
        else None,
        "js_training": (
            js_divergence(style_distribution(utterances_c), style_distribution(utterances_training))
            if utterances_c and utterances_training
            else None
        ),
        "n_c": len(utterances_c),
        "n_training": len(utterances_training),
        "n_imprint": len(imprint),
    }


# --------------------------------------------------------------------------------------- the decision profile
def _feature_named(card: WorldCard, abstract: str) -> str | None:
    names = [f for f, a in card.variables.items() if a == abstract]
    return names[0] if len(names) == 1 else None


def extraction_point(
    context: Mapping[str, Value], actions: Sequence[Action], chosen: Action, card: WorldCard
):
    """(level / capacity, amount / fair share) of one decision, read through ``card``'s abstract vocabulary; None
    when the decision offered no extraction (another phase) or the world does not declare the variables."""
    extracting = card.classes.get("extraction", frozenset())
    if not any(a.kind == "tool" and a.name in extracting for a in actions):
        return None
    level_key = _feature_named(card, "resource_level")
    capacity_key = _feature_named(card, "resource_capacity")
    share_key = _feature_named(card, "fair_share")
    amount_feature = _feature_named(card, "extraction_amount")
    if None in (level_key, capacity_key, share_key, amount_feature):
        return None
    level, capacity, share = context.get(level_key), context.get(capacity_key), context.get(share_key)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (level, capacity, share)):
        return None
    if capacity <= 0 or share <= 0:
        return None
    amount = 0.0
    if chosen.kind == "tool" and chosen.name in extracting:
        value = chosen.arg(amount_feature.removeprefix("action."))
        amount = float(value) if isinstance(value, int | float) else 0.0
    return float(level) / float(capacity), amount / float(share)


@dataclass(frozen=True)
class Profile:
    """Mean extraction (in fair shares) per resource-level bin, with the decisions behind each bin."""

    means: tuple[float | None, ...]
    counts: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"bins": list(LEVEL_BINS), "mean_extraction": list(self.means), "n": list(self.counts)}


def decision_profile(points: Iterable[tuple[float, float]]) -> Profile:
    """The decision profile of a set of (level fraction, extraction in fair shares) points (module docstring)."""
    sums = np.zeros(len(LEVEL_BINS) - 1)
    counts = np.zeros(len(LEVEL_BINS) - 1, dtype=int)
    for x, y in points:
        i = int(np.clip(np.searchsorted(LEVEL_BINS, x, side="right") - 1, 0, len(counts) - 1))
        sums[i] += y
        counts[i] += 1
    means = tuple(float(s / c) if c else None for s, c in zip(sums, counts, strict=True))
    return Profile(means, tuple(int(c) for c in counts))


def profile_distance(p: Profile, q: Profile) -> dict[str, Any]:
    """Mean |Δ extraction| over the level bins both profiles visited (None when they share none), and how many."""
    diffs = [abs(a - b) for a, b in zip(p.means, q.means, strict=True) if a is not None and b is not None]
    return {"distance": float(np.mean(diffs)) if diffs else None, "shared_bins": len(diffs)}


def mean_with_ci(values: Sequence[float | None], rng: np.random.Generator) -> dict[str, Any]:
    """Mean of per-seed values with a seed-clustered 95% bootstrap interval; None values are left out and counted."""
    defined = [float(v) for v in values if v is not None and math.isfinite(v)]
    interval = pooled_ratio(defined, [1.0] * len(defined), rng)
    return {
        "mean": interval.estimate,
        "ci": None if interval.low is None else [interval.low, interval.high],
        "n": len(defined),
        "undefined": len(values) - len(defined),
    }


# ------------------------------------------------------------------------------------ trajectory individuation
FEATURE_NAMES: tuple[str, ...] = (
    *(f"extraction_bin_{i}" for i in range(len(LEVEL_BINS) - 1)),
    "extraction_mean",
    "extraction_sd",
    "abstain_rate",
    "masked_rate",
    "sanction_rate",
    *(f"style_{c}" for c in STYLE_CATEGORIES),
)


def trajectory_features(
    points: Sequence[tuple[float, float]],
    *,
    masked_decisions: int,
    decisions: int,
    sanctions: int,
    sanction_opportunities: int,
    utterances: Sequence[str],
) -> np.ndarray:
    """The fixed-length feature vector of one arena-C trajectory (``FEATURE_NAMES``): the decision profile (bins
    never visited take the trajectory's mean), the spread of its extraction, how often it abstained, how often its
    controller masked something, how often it sanctioned when it could, and its style distribution."""
    ys = np.array([y for _, y in points], dtype=float)
    overall = float(ys.mean()) if len(ys) else 0.0
    profile = decision_profile(points)
    bins = [overall if m is None else m for m in profile.means]
    return np.array(
        [
            *bins,
            overall,
            float(ys.std()) if len(ys) else 0.0,
            float((ys == 0).mean()) if len(ys) else 0.0,
            masked_decisions / decisions if decisions else 0.0,
            sanctions / sanction_opportunities if sanction_opportunities else 0.0,
            *style_distribution(utterances),
        ],
        dtype=float,
    )


def _classifier():
    return make_pipeline(StandardScaler(), LogisticRegression(solver="liblinear", max_iter=1000))


def individuation(
    features: np.ndarray,
    histories: Sequence[str],
    seeds: Sequence[int],
    *,
    permutations: int = 200,
    random_state: int = 0,
    folds: int = 5,
) -> dict[str, Any]:
    """Held-out-by-seed accuracy of attributing each arena-C trajectory's history (module docstring).

    ``features``: one row per trajectory; ``histories``: its label (``A``/``B``); ``seeds``: its seed (the fold
    group). Returns accuracy with its seed-clustered CI and n, the permutation p-value, chance level (the majority
    share) and the confusion matrix (rows: true history, columns: predicted, in ``HISTORIES`` order). Fewer than two
    seeds or one history only: every figure is None.
    """
    X = np.asarray(features, dtype=float)
    y = np.array([HISTORIES.index(h) for h in histories])
    groups = np.asarray(seeds)
    n_groups = len(set(groups.tolist()))
    out: dict[str, Any] = {
        "n_trajectories": len(y),
        "n_seeds": n_groups,
        "chance": float(max(np.mean(y == 0), np.mean(y == 1))) if len(y) else None,
    }
    if n_groups < 2 or len(set(y.tolist())) < 2:
        return out | {"accuracy": None, "ci": None, "p_value": None, "confusion": None, "folds": 0}
    cv = GroupKFold(n_splits=min(folds, n_groups))
    predicted = np.empty_like(y)
    for train, test in cv.split(X, y, groups):
        model = _classifier().fit(X[train], y[train])
        predicted[test] = model.predict(X[test])
    correct = predicted == y
    per_seed = sorted(set(groups.tolist()))
    numerators = [float(correct[groups == s].sum()) for s in per_seed]
    denominators = [float((groups == s).sum()) for s in per_seed]
    interval = pooled_ratio(numerators, denominators, np.random.default_rng(random_state))
    _, _, p_value = permutation_test_score(
        _classifier(),
        X,
        y,
        groups=groups,
        cv=cv,
        n_permutations=permutations,
        random_state=random_state,
        scoring="accuracy",
    )
    return out | {
        "accuracy": interval.estimate,
        "ci": None if interval.low is None else [interval.low, interval.high],
        "correct": int(correct.sum()),
        "p_value": float(p_value),
        "permutations": permutations,
        "confusion": confusion_matrix(y, predicted, labels=[0, 1]).tolist(),
        "folds": cv.get_n_splits(),
    }


# -------------------------------------------------------------------------------- off-failure drift in arena C
def drift_against_bound(per_scar: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Pool the guarantee monitor's Prop. 3 measurements (``GuaranteeMonitor.summary()["prop3"]["per_scar"]``) of
    one or more arena-C runs: scars measured (with any off-failure decision), decisions behind them, the largest mean
    TV, the tightest bound sqrt(ε/2) among them, and how many exceed their bound. None when nothing was measured."""
    measured = [v for v in per_scar.values() if v.get("mean_tv") is not None]
    exceeds = [v for v in measured if v["mean_tv"] > v["bound"] + 1e-9]
    return {
        "scars_measured": len(measured),
        "decisions": int(sum(v["n"] for v in measured)),
        "max_mean_tv": max((v["mean_tv"] for v in measured), default=None),
        "mean_tv": float(np.mean([v["mean_tv"] for v in measured])) if measured else None,
        "bound": min((v["bound"] for v in measured), default=None),
        "exceeds_bound": len(exceeds) if measured else None,
        "ok": (not exceeds) if measured else None,
    }
