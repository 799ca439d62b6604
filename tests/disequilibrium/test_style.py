"""z_I: style distribution and Jensen–Shannon divergence (SPEC §3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scars.disequilibrium.style import (
    STYLE_CATEGORIES,
    identity_drift,
    js_divergence,
    style_counts,
    style_distribution,
)
from scars.synthesis.errors import ConfigError


def _counts(text: str) -> dict[str, float]:
    return {k: v for k, v in zip(STYLE_CATEGORIES, style_counts(text), strict=True) if v}


def test_style_counts_hand_example():
    # "I might clean the cup, maybe." -> tokens: i(first_person) might(hedge) clean(content) the(function)
    # cup(content) maybe(hedge); one sentence of 6 tokens (len_medium), declarative (not an imperative start);
    # punctuation: one comma, one stop.
    assert _counts("I might clean the cup, maybe.") == {
        "first_person": 1,
        "hedge": 2,
        "content": 2,
        "function": 1,
        "len_medium": 1,
        "mood_declarative": 1,
        "punct_comma": 1,
        "punct_stop": 1,
    }


def test_style_counts_moods_and_in_word_apostrophe():
    counts = _counts("Don't wash it! Why not? Take the plate.")
    # "don't" is a negation token and its apostrophe is not punctuation.
    assert counts["negation"] == 2 and "punct_bracket" not in counts
    assert counts["mood_exclaim"] == 1 and counts["mood_question"] == 1 and counts["mood_imperative"] == 1
    assert counts["len_short"] == 3


def test_js_known_value_on_hand_example():
    # p = (1, 0), q = (0, 1): disjoint supports -> exactly 1 bit.
    assert js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)
    # p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4).
    # KL(p‖m) = ½log2(½/¾) + ½log2(½/¼) = ½(log2(2/3) + 1); KL(q‖m) = log2(4/3).
    expected = 0.5 * (0.5 * (math.log2(2 / 3) + 1)) + 0.5 * math.log2(4 / 3)
    assert js_divergence([0.5, 0.5], [1.0, 0.0]) == pytest.approx(expected)
    assert expected == pytest.approx(0.31127812445913283)


probability_vectors = st.lists(st.floats(0.0, 10.0), min_size=3, max_size=3).filter(lambda v: sum(v) > 1e-3)


@settings(max_examples=200, deadline=None)
@given(probability_vectors, probability_vectors)
def test_js_properties(a, b):
    p = np.array(a) / sum(a)
    q = np.array(b) / sum(b)
    value = js_divergence(p, q)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(js_divergence(q, p), abs=1e-12)  # symmetric
    assert js_divergence(p, p) == pytest.approx(0.0, abs=1e-12)  # 0 for identical


def test_js_rejects_non_distributions():
    with pytest.raises(ConfigError, match="sum to 1"):
        js_divergence([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(ConfigError, match="same support"):
        js_divergence([1.0], [0.5, 0.5])
    with pytest.raises(ConfigError, match="non-negative"):
        js_divergence([1.5, -0.5], [0.5, 0.5])


def test_identity_drift_orders_styles():
    imprint = [
        "I think we should probably harvest a little less this month, perhaps ten tons.",
        "Maybe I could take a bit less; I'd rather keep the lake healthy.",
    ]
    same_voice = ["I think I might take nine tons, perhaps fewer if we agree."]
    other_voice = ["TAKE EVERYTHING NOW! HARVEST! HARVEST! PUNISH THEM!"]
    assert identity_drift(imprint, imprint) == pytest.approx(0.0, abs=1e-12)
    assert identity_drift(same_voice, imprint) < identity_drift(other_voice, imprint)
    assert 0.0 < identity_drift(other_voice, imprint) <= 1.0


def test_style_distribution_is_smoothed_and_normalised():
    p = style_distribution("")
    assert p.sum() == pytest.approx(1.0)
    assert np.allclose(p, 1 / len(STYLE_CATEGORIES))  # no style events: uniform
    assert np.all(style_distribution("Go.") > 0)
    with pytest.raises(ConfigError, match="smoothing"):
        style_distribution("x", smoothing=0)
    with pytest.raises(ConfigError, match="smoothing"):
        style_distribution("x", smoothing=1.5)
    # the same voice at any volume has the same distribution
    assert np.allclose(style_distribution(["I might go."] * 3), style_distribution("I might go."))


def test_the_monitors_fast_js_equals_the_validated_one():
    from scars.disequilibrium.style import js_divergence, smoothed_js, style_distribution

    p = style_distribution(["I will go to the fridge.", "I must not open it; no!"])
    q = style_distribution(["Maybe we could try? Perhaps."])
    assert smoothed_js(p, q) == pytest.approx(js_divergence(p, q), abs=1e-12)
    assert smoothed_js(p, p) == pytest.approx(0.0, abs=1e-12)
