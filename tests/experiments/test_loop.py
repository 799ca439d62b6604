"""One decision step for every tier (``experiments.loop``): no tier module governs, samples or observes on its own,
and what happens when a model writes a command the controller masks is decided once — the same in all three tiers."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scars.agents.registry import BACKENDS, register_backend
from scars.experiments.config import Tier1Config, Tier2Config, Tier3Config
from scars.experiments.tier1 import run_tier1
from scars.experiments.tier2 import run_tier2_to_dir
from scars.experiments.tier3 import run_tier3
from support.writers import MaskIgnoringWriter

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
DECISION_CALLS = {"govern", "sample_action", "base_policy_step", "generate", "utter", "observe", "window"}
"""What belongs to the decision step: a tier module calling any of these has a decision step of its own."""


def decision_step_calls(source: str) -> list[str]:
    """Calls of the decision step's parts, and constructions of ``Feedback``, in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name in DECISION_CALLS or name == "Feedback":
                found.append(f"{name}(…) at line {node.lineno}")
    return found


def tier_modules() -> list[Path]:
    return sorted(p for p in EXPERIMENTS.glob("*.py") if p.stem.startswith("tier") or p.stem == "commons_run")


def test_the_check_fires_on_a_tier_that_decides_on_its_own():
    own = "def loop(agent, d, logits, rng):\n    g = agent.govern(d, logits)\n    return sample_action(g.probs, rng)\n"
    assert len(decision_step_calls(own)) == 2
    assert decision_step_calls("choice = decide(policy, agent, d, prior, keys, rng)\n") == []


def test_no_tier_module_has_a_decision_step_of_its_own():
    found = {p.name: calls for p in tier_modules() if (calls := decision_step_calls(p.read_text()))}
    assert found == {}
    assert "def decide(" in (EXPERIMENTS / "loop.py").read_text()


def test_no_tier_imports_another_tier():
    """Tiers share the loop (``experiments.loop``) and the commons runner (``experiments.commons_run``), never each
    other's modules."""
    tiers = {p.stem for p in EXPERIMENTS.glob("tier[0-9].py")}
    offenders = []
    for path in (p for p in EXPERIMENTS.glob("tier*.py") if p.stem[4:5].isdigit()):
        own = path.stem.split("_")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported = node.module.removeprefix("scars.experiments.").split(".")[0]
                if imported in tiers and imported != own:
                    offenders.append(f"{path.name} imports {node.module}")
    assert offenders == []


if "mask_ignorer_for_test" not in BACKENDS:
    register_backend("mask_ignorer_for_test")(lambda settings: MaskIgnoringWriter())


def test_a_written_masked_command_is_recorded_and_never_executed_in_every_tier(tmp_path):
    kw = {"backend": "mask_ignorer_for_test", "policy_mode": "generate"}
    one = run_tier1(
        Tier1Config(method="scars", episodes=12, seed=0, search_iterations=30, **kw), tmp_path / "t1"
    )
    s1 = one.steps
    assert s1["generated_masked"].any() and one.summary["generate_mask_ok"] is False
    # the executed command of a masked-writing step is never the written (masked) one: the choice was resampled
    written_masked = s1[s1["generated_masked"]]
    assert (written_masked["n_masked"] > 0).all()

    summary2 = run_tier2_to_dir(
        Tier2Config(method="scars", setup="focal", runs=1, months=3, search_iterations=30, **kw),
        tmp_path / "t2",
    )
    s2 = pd.read_parquet(tmp_path / "t2" / "steps.parquet")
    assert s2["generated_masked"].any() and summary2["generate_mask_ok"] is False

    result3 = run_tier3(
        Tier3Config(
            method="scars",
            seeds=(0, 1),
            train_runs=1,
            train_months=3,
            episodes_c=1,
            seasons_c=3,
            search_iterations=30,
            **kw,
        ),
        tmp_path / "t3",
    )
    assert result3.steps["generated_masked"].any()  # tier 3 records it too (it used to raise)


@pytest.mark.parametrize("fallback_everything", [False, True])
def test_decide_never_executes_a_masked_written_command(fallback_everything):
    """``decide`` against a controller that masks the written command (and, in the second case, every command): the
    executed action is unmasked, or the fallback a⊥."""
    from scars.agents.policies import PolicyInput  # noqa: F401  (the input decide builds)
    from scars.agents.runtime.control import Governed
    from scars.envs.api import Decision
    from scars.experiments.loop import decide
    from scars.synthesis.dsl import Action

    actions = tuple(Action.env("go", f"go to shelf {i}", recep=f"shelf {i}") for i in range(3))
    decision = Decision("obs", "task", "t", {"step": 0}, actions, t=0, episode=0, step=0)
    masked = np.array([True, True, True] if fallback_everything else [True, False, False])

    class Controller:
        def window(self, d):
            return ()

        def memory_texts(self, d):
            return ()

        def govern(self, d, logits):
            if fallback_everything:
                return Governed(np.full(3, -np.inf), np.zeros(3), masked, (), Action("fallback", "no_op"))
            probs = np.where(masked, 0.0, 1.0)
            return Governed(np.where(masked, -np.inf, 0.0), probs / probs.sum(), masked, ((0, ("r",)),), None)

    step = decide(
        MaskIgnoringWriter(),
        Controller(),
        decision,
        np.zeros(3),
        (),
        np.random.default_rng(0),
        generate=True,
    )
    if fallback_everything:
        assert step.fallback and step.action.kind == "fallback" and step.written is None
    else:
        assert step.generated_masked and step.written.index == 0
        assert step.chosen in (1, 2) and not masked[step.chosen]
