"""The OpenAI-compatible backend against a REAL server: llama-cpp-python's (``python -m llama_cpp.server``, the
optional extra ``llamacpp``), started and stopped here on loopback, serving a random GPT-2 written here and exported
to GGUF (``experiments.models``). Random weights: the test is about the protocol — prompt log-probs by echo in score
mode, a GBNF grammar over the unmasked commands in generate mode, the server checks — not about competence."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from scars.agents.policies import PolicyInput
from scars.agents.policies.hf import HFPolicy
from scars.agents.policies.openai_server import OpenAICompatiblePolicy, ServerError
from scars.experiments.config import Tier1Config
from scars.experiments.models import export_gguf, write_random_causal_lm
from scars.experiments.tier1 import run_tier1
from scars.synthesis.dsl import Action
from support.extras import require_extra

pytestmark = pytest.mark.slow

ACTIONS = (
    Action.env("clean", "clean cup 1 with sinkbasin 1"),
    Action.env("clean", "clean cup 1 with bathtubbasin 1"),
    Action.env("go", "go to fridge 1"),
    Action.env("take", "take apple 1 from countertop 2"),
)


def _inp():
    return PolicyInput(
        "You are in the kitchen. On the countertop 2 you see an apple 1.", "clean a cup", {}, ACTIONS
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _require_extras() -> None:
    """The extras this test needs (``support.extras``: a failure where ``.ci/run`` requires them)."""
    for module, extra in (("torch", "hf"), ("llama_cpp.server.app", "llamacpp"), ("gguf", "llamacpp")):
        require_extra(module, extra)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    _require_extras()
    folder = write_random_causal_lm(tmp_path_factory.mktemp("lm") / "tiny", layers=2, width=64)
    gguf_file = export_gguf(folder, folder.parent / "tiny.gguf")
    port = _free_port()
    log = (folder.parent / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf_file),
            "--model_alias",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "1024",
            "--logits_all",
            "true",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.close()
                    raise RuntimeError(
                        f"llama-cpp-python's server did not start: {(folder.parent / 'server.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.5)
        yield url, str(folder)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_score_mode_on_llama_cpp_matches_the_same_model_in_transformers(served):
    """The server's echoed log-probs of each command equal the log-likelihood the HF backend computes for the same
    weights (given BOS + prompt, as llama.cpp prepends BOS): the protocol, the offsets and the GGUF export agree."""
    url, folder = served
    policy = OpenAICompatiblePolicy(url, "tiny")
    assert policy.batched_prompts is False  # llama-cpp-python takes one prompt per request: sent concurrently
    scores = policy.logits(_inp(), np.random.default_rng(0))
    assert scores.shape == (len(ACTIONS),) and np.all(np.isfinite(scores)) and np.all(scores < 0)
    hf = HFPolicy.from_pretrained(folder)
    from scars.agents.policies.base import build_prompt

    prompt = [hf.tokenizer.bos_token_id, *hf.tokenizer(build_prompt(_inp()))["input_ids"]]
    expected = hf.score_commands(prompt, [hf._command_ids(a.text) for a in ACTIONS])
    np.testing.assert_allclose(scores, expected, atol=2e-2)


def test_generate_mode_on_llama_cpp_never_writes_a_masked_command(served):
    url, _ = served
    policy = OpenAICompatiblePolicy(url, "tiny", policy_mode="generate")
    assert policy.choice_param == "grammar"  # detected: llama-cpp-python's owned_by is "me"
    free = policy.generate(_inp(), [False] * len(ACTIONS))
    assert free.constrained and free.text.strip() == ACTIONS[free.index].text
    masked = [i == free.index for i in range(len(ACTIONS))]
    for _ in range(len(ACTIONS) - 1):  # mask what it wrote, again and again: it must write another command
        written = policy.generate(_inp(), masked)
        assert not masked[written.index]
        masked[written.index] = True


def test_a_model_the_server_does_not_serve_is_named(served):
    url, _ = served
    with pytest.raises(ServerError, match="'gpt-4o' is not served .* it serves: tiny"):
        OpenAICompatiblePolicy(url, "gpt-4o")


def test_tier1_on_llama_cpp_in_both_modes(served, tmp_path):
    url, _ = served
    common = dict(
        method="static_persona",
        episodes=1,
        schedule="smoke",
        max_steps=3,
        backend="openai",
        server_url=url,
        server_model="tiny",
    )
    score = run_tier1(Tier1Config(**common), tmp_path / "s").summary
    assert score["policy_mode"] == "score" and score["steps"] > 0
    generate = run_tier1(Tier1Config(policy_mode="generate", **common), tmp_path / "g").summary
    assert generate["policy_mode"] == "generate" and generate["generate_mask_ok"] is True
    assert generate["constrained_decisions"] == generate["steps"] - generate["fallback_steps"] > 0
