"""Identity drift z_I: Jensen–Shannon divergence between style distributions (paper §3.2, SPEC §3).

    z_I = JS( p_style(·|y_t) ‖ p_style(·|y_0) )

The paper leaves p_style open; this module fixes it. A text is read as three streams of style events, and every
event falls into exactly one category of ``STYLE_CATEGORIES`` (a fixed, ordered set, so distributions of different
texts live on the same support):

* **tokens** (words, lower-cased, split on anything that is not a letter, digit or apostrophe) — each token goes to
  the first class it belongs to: ``first_person`` (I, me, my, we, …), ``second_person`` (you, your, …),
  ``hedge`` (maybe, perhaps, might, probably, …), ``negation`` (not, no, never, n't-forms), ``function`` (closed-class
  words: articles, prepositions, auxiliaries, conjunctions), else ``content``;
* **sentences** (split after ``.``, ``!``, ``?`` or a line break) — each sentence counts once for its length bucket
  (``len_short`` ≤ 5 tokens, ``len_medium`` 6–15, ``len_long`` 16–30, ``len_very_long`` > 30) and once for its mood:
  ``mood_question`` (ends in ``?``), ``mood_exclaim`` (ends in ``!``), ``mood_imperative`` (first token is a bare
  command verb from ``IMPERATIVE_VERBS`` or "please"), else ``mood_declarative``;
* **punctuation** — each character in ``, ; : . ! ? - – — ( ) " '`` (apostrophes inside words excluded) counts in
  one of ``punct_comma`` (, ;), ``punct_colon`` (:), ``punct_stop`` (.), ``punct_question`` (?), ``punct_exclaim``
  (!), ``punct_dash`` (- – —), ``punct_bracket`` (( ) " ').

p_style(·|y) pools the counts of all texts in y, normalises them to frequencies f, and mixes in the uniform
distribution u over the categories: p = (1 − ε)·f + ε·u with ε = ``STYLE_SMOOTHING`` = 0.05 (u alone when y has no
style events). The mixture keeps every probability positive, so the divergence is finite, and — unlike additive
count smoothing — does not depend on how much text there is: the same voice at any volume has divergence 0.

JS uses base-2 logarithms, so 0 ≤ JS ≤ 1 (0 iff the distributions are equal; symmetric).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

from scars.synthesis.errors import ConfigError

TOKEN_CLASSES: tuple[str, ...] = ("first_person", "second_person", "hedge", "negation", "function", "content")
LENGTH_BUCKETS: tuple[str, ...] = ("len_short", "len_medium", "len_long", "len_very_long")
MOODS: tuple[str, ...] = ("mood_declarative", "mood_question", "mood_exclaim", "mood_imperative")
PUNCTUATION_CLASSES: tuple[str, ...] = (
    "punct_comma",
    "punct_colon",
    "punct_stop",
    "punct_question",
    "punct_exclaim",
    "punct_dash",
    "punct_bracket",
)
STYLE_CATEGORIES: tuple[str, ...] = TOKEN_CLASSES + LENGTH_BUCKETS + MOODS + PUNCTUATION_CLASSES
STYLE_SMOOTHING: float = 0.05

FIRST_PERSON = frozenset("i me my mine myself we us our ours ourselves i'm i've i'd i'll we're we've".split())
SECOND_PERSON = frozenset("you your yours yourself yourselves you're you've you'll you'd".split())
HEDGES = frozenset(
    "maybe perhaps might possibly probably likely unlikely seems seem seemed apparently arguably "
    "somewhat roughly approximately could guess suppose presumably".split()
)
NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor cannot can't don't doesn't didn't won't wouldn't "
    "shouldn't isn't aren't wasn't weren't haven't hasn't hadn't".split()
)
FUNCTION_WORDS = frozenset(
    "a an the of to in on at by for with from into onto over under about as than then and or but if so "
    "because while though although is are was were be been being am do does did have has had will would "
    "shall should can may must this that these those it its there here which who whom whose what when "
    "where how all any each some".split()
)
IMPERATIVE_VERBS = frozenset(
    "please do don't go take put move make stop use let give get open close clean wash check try keep "
    "send run follow tell show find bring leave avoid harvest punish remember note consider".split()
)

_PUNCTUATION_CLASS: dict[str, str] = {
    ",": "punct_comma",
    ";": "punct_comma",
    ":": "punct_colon",
    ".": "punct_stop",
    "?": "punct_question",
    "!": "punct_exclaim",
    "-": "punct_dash",
    "–": "punct_dash",
    "—": "punct_dash",
    "(": "punct_bracket",
    ")": "punct_bracket",
    '"': "punct_bracket",
    "'": "punct_bracket",
}
_INDEX: dict[str, int] = {name: i for i, name in enumerate(STYLE_CATEGORIES)}
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENTENCE_RE = re.compile(r"[^.!?\n]+[.!?]*")
# An apostrophe between two letters is part of a word ("don't"), not punctuation.
_IN_WORD_APOSTROPHE = re.compile(r"(?<=[A-Za-z])'(?=[A-Za-z])")


def _token_class(token: str) -> str:
    if token in FIRST_PERSON:
        return "first_person"
    if token in SECOND_PERSON:
        return "second_person"
    if token in HEDGES:
        return "hedge"
    if token in NEGATIONS or token.endswith("n't"):
        return "negation"
    if token in FUNCTION_WORDS:
        return "function"
    return "content"


def _length_bucket(n_tokens: int) -> str:
    if n_tokens <= 5:
        return "len_short"
    if n_tokens <= 15:
        return "len_medium"
    if n_tokens <= 30:
        return "len_long"
    return "len_very_long"


def style_counts(text: str) -> np.ndarray:
    """Raw counts of the style events of one text over ``STYLE_CATEGORIES`` (module docstring)."""
    counts = np.zeros(len(STYLE_CATEGORIES), dtype=float)
    for sentence in _SENTENCE_RE.findall(text):
        tokens = _TOKEN_RE.findall(sentence.lower())
        if not tokens:
            continue
        for token in tokens:
            counts[_INDEX[_token_class(token)]] += 1
        counts[_INDEX[_length_bucket(len(tokens))]] += 1
        stripped = sentence.rstrip()
        if stripped.endswith("?"):
            mood = "mood_question"
        elif stripped.endswith("!"):
            mood = "mood_exclaim"
        elif tokens[0] in IMPERATIVE_VERBS:
            mood = "mood_imperative"
        else:
            mood = "mood_declarative"
        counts[_INDEX[mood]] += 1
    for char in _IN_WORD_APOSTROPHE.sub("", text):
        category = _PUNCTUATION_CLASS.get(char)
        if category is not None:
            counts[_INDEX[category]] += 1
    return counts


def style_distribution(texts: str | Iterable[str], smoothing: float = STYLE_SMOOTHING) -> np.ndarray:
    """p_style(·|y) = (1 − ε)·(pooled style frequencies of ``texts``) + ε·uniform, ε = ``smoothing`` (sums to 1)."""
    if not 0 < smoothing <= 1:
        raise ConfigError(f"style smoothing ε must be in (0, 1] (it keeps JS finite), got {smoothing!r}")
    if isinstance(texts, str):
        texts = (texts,)
    counts = np.zeros(len(STYLE_CATEGORIES))
    for text in texts:
        counts += style_counts(text)
    return smoothed(counts, smoothing)


def smoothed(counts: np.ndarray, smoothing: float = STYLE_SMOOTHING) -> np.ndarray:
    """Pooled style counts → p_style: (1 − ε)·frequencies + ε·uniform (uniform when there are no events)."""
    uniform = np.full(len(STYLE_CATEGORIES), 1.0 / len(STYLE_CATEGORIES))
    total = counts.sum()
    if total == 0:
        return uniform
    return (1.0 - smoothing) * counts / total + smoothing * uniform


def _as_distribution(p: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(p, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ConfigError(f"{name} must be a non-empty 1-D probability vector, got shape {arr.shape}")
    if np.any(arr < 0) or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name} must be finite and non-negative, got {arr.tolist()}")
    total = arr.sum()
    if not np.isclose(total, 1.0, atol=1e-9):
        raise ConfigError(f"{name} must sum to 1, sums to {total!r}")
    return arr


def js_divergence(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> float:
    """Jensen–Shannon divergence in bits: ½KL(p‖m) + ½KL(q‖m), m = ½(p+q). In [0, 1]; 0 iff p = q; symmetric."""
    p_arr = _as_distribution(p, "p")
    q_arr = _as_distribution(q, "q")
    if p_arr.shape != q_arr.shape:
        raise ConfigError(f"p and q must have the same support, got sizes {p_arr.size} and {q_arr.size}")
    m = 0.5 * (p_arr + q_arr)

    def kl_to_m(x: np.ndarray) -> float:
        support = (x > 0) & (m > 0)  # 0·log 0 = 0; m is 0 only if ½x underflows (negligible mass)
        return float(np.sum(x[support] * np.log2(x[support] / m[support])))

    value = 0.5 * kl_to_m(p_arr) + 0.5 * kl_to_m(q_arr)
    return float(min(1.0, max(0.0, value)))  # clip float round-off only


def smoothed_js(p: np.ndarray, q: np.ndarray) -> float:
    """JS in bits of two *smoothed* style distributions (every entry > 0, as ``smoothed`` makes them): the same
    number as ``js_divergence`` without its input validation, for the per-step monitor."""
    m = 0.5 * (p + q)
    value = 0.5 * float(np.dot(p, np.log2(p / m))) + 0.5 * float(np.dot(q, np.log2(q / m)))
    return min(1.0, max(0.0, value))


def identity_drift(
    recent: Iterable[str], imprint: Iterable[str], smoothing: float = STYLE_SMOOTHING
) -> float:
    """z_I: JS between the style distribution of recent outputs and that of the initial imprint y_0."""
    return js_divergence(style_distribution(recent, smoothing), style_distribution(imprint, smoothing))
