"""Tier 1 driven by a real model server (a local OpenAI-compatible server the test starts) and the LLM-written
parts of the baselines and ablations: Reflexion's reflections and the LLM-only Patch."""

from __future__ import annotations

import pytest

from scars.agents.rule_writer import llm_patch, patch_prompt
from scars.envs.household.adapter import household_card
from scars.experiments.config import Tier1Config
from scars.experiments.tier1 import run_tier1
from scars.synthesis import build_dataset, extract_fragment
from scars.synthesis.dsl import Action
from scars.synthesis.fragments import RecordedStep
from support.openai_server import Handler, serve


@pytest.fixture(scope="module")
def server():
    with serve() as url:
        yield url


def _microwave_failure():
    heat = Action.env(
        "heat", "heat apple 1 with microwave 1", obj="apple 1", obj_type="apple", recep="microwave 1"
    )
    other = Action.env(
        "heat", "heat apple 1 with microwave 2", obj="apple 1", obj_type="apple", recep="microwave 2"
    )
    step = RecordedStep(
        {"location": "microwave 1", "world_version": 0}, (heat, other), (1.0, 0.5), 0, True, 0, 3
    )

    def verifier(q, a):
        return a.name == "heat" and a.arg("recep") == "microwave 1" and q.get("world_version", 0) == 0

    fragment = extract_fragment(step, verifier, theta="microwave_1_broken")
    return build_dataset([step], verifier, fragment), fragment


@pytest.mark.parametrize(
    "reply, admitted",
    [
        (
            'Sure.\nif action.recep == "microwave 1" and world_version == 0 then forbid_env_action("heat")\n',
            True,
        ),
        ("I would rather not write rules.", False),
    ],
)
def test_llm_only_patch_parses_scores_and_replay_checks_the_models_rule(reply, admitted):
    data, fragment = _microwave_failure()
    prompts = []
    card = household_card()
    result = llm_patch(lambda p: prompts.append(p) or reply, card)(data, fragment, (), (), None, _search())
    assert prompts == [patch_prompt(fragment, card)] and "forbid_env_action" in prompts[0]
    assert "action.recep_type" in prompts[0]  # the world's own features come from its card
    assert result.admitted is admitted and result.nodes_expanded == 1
    if admitted:
        assert result.replay.passed and "microwave 1" in result.text


def _search():
    from scars.synthesis import SearchConfig

    return SearchConfig()


def test_tier1_on_a_model_server_with_llm_written_reflections(tmp_path, server):
    common = dict(
        episodes=2, schedule="smoke", backend="openai", server_url=server, server_model="toy", max_steps=12
    )
    Handler.requests.clear()
    result = run_tier1(Tier1Config(method="reflexion", **common), tmp_path / "r")
    s = result.summary
    assert s["steps"] > 0 and s["episodes"] == 2
    scored = [b for path, b in Handler.requests if path == "/v1/completions" and b["echo"]]
    texts = [t for b in scored for t in ([b["prompt"]] if isinstance(b["prompt"], str) else b["prompt"])]
    texts = [
        t for t in texts if t.startswith("System:")
    ]  # not the backend's capability probes at construction
    # every decision scored its admissible commands on the server, each distinct text once (no text sent twice)
    assert len(texts) == len(set(texts)) and len(set(texts)) >= s["steps"]
    # the toy model cannot finish a task in 12 steps: each lost trial gets a reflection the model wrote
    assert s["success_rate"] == 0.0
    asked = [b for path, b in Handler.requests if path == "/v1/chat/completions"]
    assert len([b for b in asked if "reflect" in b["messages"][-1]["content"]]) == 2
    assert result.steps["memory_tokens"].iloc[-1] > 0


def test_a_model_backend_writes_the_llm_only_patch(tmp_path):
    from scars.agents.registry import METHODS, MethodSpec
    from scars.agents.rule_writer import direct_patch
    from scars.envs.household.adapter import HouseholdAdapter
    from scars.envs.household.env import HouseholdEnv

    class Model:
        name, writes_text = "toy", True

        def write_text(self, prompt):
            return 'if action.recep == "microwave 1" then forbid_env_action("heat")'

    class NoText(Model):
        writes_text = False

    world = HouseholdAdapter(HouseholdEnv())
    settings = {"ablation": "llm_only_patch"}
    agent = METHODS.get("scars")(MethodSpec(world, Model(), tmp_path, 0, settings))
    data, fragment = _microwave_failure()
    assert agent.direct_synthesiser is not direct_patch
    assert agent.direct_synthesiser(data, fragment, (), (), None, _search()).nodes_expanded == 1
    agent.close()
    embedded = METHODS.get("scars")(MethodSpec(world, NoText(), tmp_path / "e", 0, settings))
    assert embedded.direct_synthesiser is direct_patch
    embedded.close()


def test_tier1_generate_mode_on_a_model_server(tmp_path, server):
    """Generate mode: the server is sent only the unmasked commands (structured_outputs choice) at every decision."""
    cfg = Tier1Config(
        method="static_persona",
        episodes=1,
        schedule="smoke",
        backend="openai",
        server_url=server,
        server_model="toy",
        max_steps=6,
        policy_mode="generate",
    )
    Handler.requests.clear()
    s = run_tier1(cfg, tmp_path / "g").summary
    asked = [b for path, b in Handler.requests if path == "/v1/completions" and "structured_outputs" in b]
    assert (
        s["policy_mode"] == "generate"
        and s["generated_decisions"] == len(asked) == s["steps"] - s["fallback_steps"]
    )
    assert s["constrained_decisions"] == s["generated_decisions"] and s["generate_mask_ok"] is True
    assert not [b for path, b in Handler.requests if b is not None and b.get("echo")]  # nothing scored


def test_the_api_key_comes_from_the_environment_and_is_never_written(tmp_path, server):
    from click.testing import CliRunner

    from scars.experiments.cli import main

    Handler.key = "sk-secret-123"
    try:
        out = tmp_path / "run"
        argv = [
            "run", "tier1", "--backend", "openai", "--server-url", server, "--server-model", "toy",
            "--method", "static_persona", "--episodes", "1", "--schedule", "smoke", "--max-steps", "2", "--out", str(out),
        ]  # fmt: skip
        refused = CliRunner().invoke(main, argv, env={"OPENAI_API_KEY": ""})
        assert refused.exit_code == 2 and "refused the API key" in refused.stderr and not out.exists()
        result = CliRunner().invoke(main, argv, env={"OPENAI_API_KEY": "sk-secret-123"})
        assert result.exit_code == 0, result.output
        written = "".join(p.read_text(errors="ignore") for p in out.rglob("*") if p.is_file())
        assert "sk-secret-123" not in written and '"api_key": "<set>"' in (out / "config.json").read_text()
    finally:
        Handler.key = ""
