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


def _replan_setup(masked_first: bool, window=()):
    """Three actions; the model's habit is action 0 (prior 1), its compliant alternative action 1 (0.6). The
    controller masks action 0 when ``masked_first``; ``window`` is the method's context."""
    from scars.agents.runtime.control import Governed
    from scars.envs.api import Decision
    from scars.synthesis.dsl import Action

    actions = (
        Action.env("clean", "clean cup 1 with sinkbasin 1", obj="cup 1", recep="sinkbasin 1"),
        Action.env("clean", "clean cup 1 with bathtubbasin 1", obj="cup 1", recep="bathtubbasin 1"),
        Action.env("go", "go to fridge 1", recep="fridge 1"),
    )
    decision = Decision("obs", "clean a cup", "t", {"step": 0}, actions, t=0, episode=0, step=0)
    masked = np.array([masked_first, False, False])

    class Method:
        def window(self, d):
            return window

        def memory_texts(self, d):
            return [it.text for it in window]

        def govern(self, d, logits):
            lg = np.where(masked, -np.inf, np.asarray(logits, dtype=np.float64))
            p = np.exp(lg - lg.max())
            return Governed(lg, p / p.sum(), masked, ((0, ("r",)),) if masked_first else (), None)

    return decision, Method()


@pytest.mark.parametrize(
    ("masked_first", "told", "reason"), [(True, False, "mask"), (False, True, "text"), (False, False, "")]
)
def test_the_model_replans_around_what_it_decided_not_to_do(masked_first, told, reason):
    """One mechanism: a step the controller masked, or one the context talked the model out of, triggers the
    re-plan hook with what was declined; the step records why. Nothing declined, no re-plan."""
    from scars.agents.policies import ContextItem, SimulatedLM
    from scars.experiments.loop import decide

    window = (ContextItem("rule", "Do not clean cup 1 with sinkbasin 1.", polarity=-1),) if told else ()
    decision, method = _replan_setup(masked_first, window)
    seen = []

    def replan(d, declined):
        seen.append(declined)
        return np.array([0.0, 0.0, 1.0])  # the re-planned route: go to the fridge

    step = decide(
        SimulatedLM(),
        method,
        decision,
        np.array([1.0, 0.6, 0.0]),
        (),
        np.random.default_rng(0),
        replan=replan,
    )
    assert step.replan == reason
    if not reason:
        assert seen == [] and step.inp.replan_prior is None
        return
    (declined,) = seen
    assert declined.reason == reason
    assert declined.masked == ((0,) if masked_first else ()) and declined.talked_out == ((0,) if told else ())
    assert step.inp.replan_prior is not None and int(np.argmax(step.logits)) == 2  # it follows the new route


def test_replan_competence_mixes_the_route_into_the_habit():
    from scars.agents.policies import PolicyInput, SimulatedLM, SimulatedLMConfig
    from scars.synthesis.errors import ConfigError

    decision, _ = _replan_setup(False)
    habit, route = np.array([1.0, 0.6, 0.0]), np.array([0.0, 0.0, 1.0])
    inp = PolicyInput("", "t", {}, decision.actions, (), habit, (), route)
    for c in (0.0, 0.5, 1.0):
        lm = SimulatedLM(SimulatedLMConfig(replan_competence=c))
        assert np.allclose(lm.prior(inp), (1 - c) * habit + c * route)
    assert int(np.argmax(SimulatedLM(SimulatedLMConfig(replan_competence=0.0)).logits(inp, None))) == 0
    assert int(np.argmax(SimulatedLM(SimulatedLMConfig(replan_competence=1.0)).logits(inp, None))) == 2
    with pytest.raises(ConfigError, match="replan_competence"):
        SimulatedLMConfig(replan_competence=1.5)
