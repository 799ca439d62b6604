"""Tier 1 in both policy modes with a real (randomly initialised) causal LM written to a local folder: in generate
mode the logits processor governs every decision the model writes, and the per-step check that no written command
is masked fires when a writer ignores the mask."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the 'hf' extra (torch, transformers) is not installed")
pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

from scars.agents.policies import generation_logits  # noqa: E402
from scars.agents.policies.embedded import SimulatedLM, SimulatedLMConfig  # noqa: E402
from scars.experiments.config import Tier1Config  # noqa: E402
from scars.experiments.models import write_random_causal_lm  # noqa: E402
from scars.experiments.tier1 import run_tier1  # noqa: E402
from scars.synthesis.errors import ConfigError  # noqa: E402
from support.writers import MaskIgnoringWriter  # noqa: E402


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    return str(write_random_causal_lm(tmp_path_factory.mktemp("lm") / "tiny", layers=1, width=32))


def _cfg(model_folder, mode, **kw):
    return Tier1Config(
        backend="hf",
        model_path=model_folder,
        policy_mode=mode,
        episodes=1,
        schedule="smoke",
        max_steps=5,
        search_iterations=20,
        **kw,
    )


def test_generate_mode_uses_the_logits_processor_on_every_decision(tmp_path, model_folder):
    result = run_tier1(_cfg(model_folder, "generate"), tmp_path / "g")
    s, steps = result.summary, result.steps
    assert s["policy_mode"] == "generate"
    written = s["steps"] - s["fallback_steps"]
    assert s["generated_decisions"] == s["constrained_decisions"] == written > 0
    assert s["generated_masked_steps"] == 0 and s["generate_mask_ok"] is True
    assert not steps["generated_masked"].any()


def test_score_mode_records_its_mode_and_no_generation(tmp_path, model_folder):
    s = run_tier1(_cfg(model_folder, "score"), tmp_path / "s").summary
    assert s["policy_mode"] == "score" and s["steps"] > 0
    assert s["generated_decisions"] is None and s["generate_mask_ok"] is None


def test_the_per_step_check_fires_when_a_writer_ignores_the_mask(tmp_path, model_folder):
    writer = MaskIgnoringWriter()
    cfg = Tier1Config(
        backend="hf",
        model_path=model_folder,
        policy_mode="generate",
        episodes=6,
        schedule="smoke",
        max_steps=12,
    )
    result = run_tier1(cfg, tmp_path / "f", policy=writer)
    s, steps = result.summary, result.steps
    assert writer.masked_written  # the controller masked something the writer then wrote
    assert s["generated_masked_steps"] == len(writer.masked_written) and s["generate_mask_ok"] is False
    assert s["constrained_decisions"] == 0
    # the controller still governs: a masked command the model wrote is not the command executed
    executed = steps.loc[steps["generated_masked"], "command"].tolist()
    assert len(executed) == len(writer.masked_written)
    assert all(e != w for e, w in zip(executed, writer.masked_written, strict=True))


def test_a_backend_that_cannot_write_is_refused_in_generate_mode(tmp_path, model_folder):
    with pytest.raises(ConfigError, match="cannot write its command"):
        run_tier1(_cfg(model_folder, "generate"), tmp_path / "x", policy=SimulatedLM(SimulatedLMConfig()))
    assert not (tmp_path / "x").exists()


def test_generation_logits_put_the_written_command_first():
    logits = generation_logits(3, 1)
    assert logits[1] == 0.0 and (logits[[0, 2]] < -10).all()


def test_the_model_command_writes_a_loadable_local_model_folder(tmp_path):
    from click.testing import CliRunner

    from scars.agents.policies.hf import HFPolicy
    from scars.experiments.cli import main

    out = tmp_path / "lm"
    result = CliRunner().invoke(
        main, ["model", "random", "--out", str(out), "--layers", "1", "--width", "16"]
    )
    assert result.exit_code == 0, result.output
    policy = HFPolicy.from_pretrained(str(out))
    assert sum(p.numel() for p in policy.model.parameters()) > 0 and policy.tokenizer.eos_token_id is not None


def test_tier2_and_tier3_run_generate_mode_with_the_mask_told_first(tmp_path, model_folder):
    """Both policy modes run in tiers 2 and 3 too: in generate mode every learning seat's action is written under
    the scars mask (no written action is ever masked), and the summary records the mode and the counts."""
    from scars.experiments.commons_run import run_tier2
    from scars.experiments.config import Tier2Config
    from scars.experiments.tier3 import Tier3Config, run_tier3

    hf = {"backend": "hf", "model_path": model_folder, "policy_mode": "generate", "search_iterations": 20}
    s = run_tier2(Tier2Config(method="scars", setup="focal", runs=1, months=2, **hf), tmp_path / "t2").summary
    assert s["policy_mode"] == "generate" and s["generated_decisions"] > 0
    assert s["generated_masked_steps"] == 0 and s["generate_mask_ok"] is True
    assert s["constrained_decisions"] == s["generated_decisions"]
    t3 = Tier3Config(
        method="rag", seeds=(0, 1), train_runs=1, train_months=2, episodes_c=1, seasons_c=2, **hf
    )
    result = run_tier3(t3, tmp_path / "t3")  # the per-step check raises if a masked action were written
    assert len(result.agents) == 4
    with pytest.raises(ConfigError, match="generate"):
        Tier2Config(policy_mode="generate")  # the embedded simulated LM only scores


def test_the_tier2_and_tier3_generate_checks_fire_when_a_writer_ignores_the_mask(tmp_path):
    """The per-step check of generate mode can fail in tiers 2 and 3 too: a writer that writes what the controller
    masks (H forbids requests above 20 from the first month) turns ``generate_mask_ok`` False in tiers 2 and 3."""
    from scars.agents.registry import BACKENDS
    from scars.experiments.commons_run import run_tier2
    from scars.experiments.config import Tier2Config
    from scars.experiments.tier3 import Tier3Config, run_tier3

    if "mask_ignoring_for_test" not in BACKENDS:
        BACKENDS.register("mask_ignoring_for_test")(lambda settings: MaskIgnoringWriter())
    faulty = {"backend": "mask_ignoring_for_test", "policy_mode": "generate", "search_iterations": 20}
    s = run_tier2(
        Tier2Config(method="rag", setup="focal", runs=1, months=2, **faulty), tmp_path / "t2"
    ).summary
    assert s["generated_masked_steps"] > 0 and s["generate_mask_ok"] is False
    t3 = Tier3Config(
        method="rag", seeds=(0, 1), train_runs=1, train_months=2, episodes_c=1, seasons_c=2, **faulty
    )
    result = run_tier3(t3, tmp_path / "t3")  # recorded, as in every tier (experiments.loop), not raised
    assert result.summary["generate_mask_ok"] is False and result.summary["generated_masked_steps"] > 0
    assert result.steps["generated_masked"].any()
