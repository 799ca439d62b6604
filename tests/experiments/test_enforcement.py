"""The enforcement invariant (``experiments.enforcement``) against faults injected the way a bug would arrive: an
index entry dropped, a guard widened in the compiled index only, a masked action executed by the loop. The check
reads the ledger's rows and the DSL's reference semantics, so none of these faults reaches its data."""

from __future__ import annotations

import numpy as np
import pytest

import scars.experiments.loop as loop
from scars.agents.runtime.control import ControlPlane
from scars.experiments.config import Tier1Config
from scars.experiments.tier1 import run_tier1
from scars.synthesis.dsl import Compare, Rule
from scars.synthesis.dsl.ast import And

RUN = {"method": "scars", "episodes": 8, "seed": 0, "search_iterations": 30}


def _run(tmp_path, **kw):
    return run_tier1(Tier1Config(**{**RUN, **kw}), tmp_path).summary


def test_a_clean_run_passes_for_scars_and_a_baseline(tmp_path):
    for method in ("scars", "reflexion"):
        s = _run(tmp_path / method, method=method)
        assert s["enforcement_ok"] is True and s["enforcement_violations"] == 0
        assert s["enforcement_decisions"] == s["steps"] > 0


def test_a_scar_dropped_from_the_compiled_index_is_caught(tmp_path, monkeypatch):
    """The scar stays listed (ids and JSON agree, plane = ledger is green) but its index entries are gone."""
    original = ControlPlane._index

    def dropping(self, rule_id, rule, *, until_step, expires_at_step):
        if rule_id.startswith("core:") or until_step is not None:
            original(self, rule_id, rule, until_step=until_step, expires_at_step=expires_at_step)

    monkeypatch.setattr(ControlPlane, "_index", dropping)
    s = _run(tmp_path)
    assert s["scars_admitted"] > 0
    assert s["enforcement_ok"] is False and "do not mask" not in str(s["enforcement_first"]["what"])
    assert "the ledger's rules mask it, the controller did not" in str(s["enforcement_first"]["what"])
    # Prop. 1 sees it too (an owed failure's action is on the table again) and names the decision
    assert s["prop1_ok"] is False and s["prop1"]["first"]["t"] is not None


def test_a_guard_widened_in_the_index_only_is_caught(tmp_path, monkeypatch):
    """Every scar is indexed under a weaker guard (its first conjunct only): the plane masks more than the ledger."""
    original = ControlPlane._index

    def widening(self, rule_id, rule, *, until_step, expires_at_step):
        if not rule_id.startswith("core:") and until_step is None and isinstance(rule.guard, And):
            rule = Rule(rule.guard.operands[0], rule.mask)
        elif not rule_id.startswith("core:") and until_step is None:
            rule = Rule(Compare("step", ">=", 0), rule.mask)
        original(self, rule_id, rule, until_step=until_step, expires_at_step=expires_at_step)

    monkeypatch.setattr(ControlPlane, "_index", widening)
    s = _run(tmp_path)
    assert s["enforcement_ok"] is False
    assert "do not mask it, the controller masked" in str(s["enforcement_first"]["what"])


def test_a_masked_action_executed_by_the_loop_is_caught(tmp_path, monkeypatch):
    """Every third decision where something is masked, the sampler picks a masked (probability-0) action."""
    calls = {"n": 0}
    real = loop.sample_action

    def leaky(probs, rng):
        probs = np.asarray(probs)
        if (probs == 0).any() and probs.sum() > 0:
            calls["n"] += 1
            if calls["n"] % 3 == 0:
                return int(np.flatnonzero(probs == 0)[0])
        return real(probs, rng)

    monkeypatch.setattr(loop, "sample_action", leaky)
    s = _run(tmp_path, episodes=16)
    assert calls["n"] >= 3
    assert s["enforcement_ok"] is False and "was executed" in str(s["enforcement_first"]["what"])
    # a covered repeat followed (seed 0, 16 episodes: the run needs enough masked decisions for one to leak and a
    # repeat to follow it): Prop. 1 fails and names that decision
    assert s["rvr_covered"] > 0 and s["prop1_ok"] is False
    assert s["prop1"]["first"]["t"] == s["prop1_first_covered_repeat_t"]


@pytest.mark.parametrize("ablation", ["text_reflection_scar", "soft_bias_only"])
def test_the_ablations_that_do_not_hard_mask_their_scars_are_checked_for_what_they_claim(tmp_path, ablation):
    s = _run(tmp_path, ablation=ablation)
    assert s["enforcement_ok"] is True


def test_a_repeat_in_a_covered_spell_is_named_for_prop1():
    """``rvr_covered > 0`` fails Prop. 1 (tier 1's summary); the metric names the decision of the first such repeat."""
    import pandas as pd

    from scars.experiments.metrics import repeat_violation_rate

    steps = pd.DataFrame(
        {
            "episode": [0, 0, 1, 1],
            "t": [0, 1, 2, 3],
            "violated_rules": ["r", "", "", "r"],
            "exposed_rules": ["r", "", "r", "r"],
            "covered_rules": ["", "", "r", "r"],
        }
    )
    rvr = repeat_violation_rate(steps)
    assert rvr["rvr_covered"] == 1.0 and rvr["first_covered_repeat_t"] == 3
    clean = steps.assign(violated_rules=["r", "", "", ""])
    assert repeat_violation_rate(clean)["first_covered_repeat_t"] is None
