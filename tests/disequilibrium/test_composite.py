"""Composite d_t = sigmoid(wᵀz), τ validation against the attainable range, z_C, and the per-step monitor."""

from __future__ import annotations

import math

import pytest

from scars.disequilibrium.composite import (
    DisequilibriumConfig,
    DisequilibriumMonitor,
    Signals,
    StepRecord,
    composite,
)
from scars.disequilibrium.contradiction import ContradictionWindow, core_contradiction
from scars.disequilibrium.trustgate import Punishment, TrustGate
from scars.synthesis.dsl.ast import Action, And, Compare, ForbidEnvAction, Named, Rule
from scars.synthesis.errors import ConfigError

# H: never put anything into the sink basin with the "move" verb.
NO_SINK = Rule(
    And((Named("action_is", "move"), Compare("action.recep", "==", "sinkbasin 1"))), ForbidEnvAction("move")
)
TO_SINK = Action.env("move", obj="cup 1", recep="sinkbasin 1")
TO_SHELF = Action.env("move", obj="cup 1", recep="shelf 1")
SAY = Action("text", "say", text="hello")


def test_paper_formula_and_its_range():
    cfg = DisequilibriumConfig(weights=(0.4, 0.3, 0.2, 0.1), tau=0.6)
    assert composite(Signals(), cfg) == pytest.approx(0.5)
    assert composite(Signals(1, 1, 1, 1), cfg) == pytest.approx(1 / (1 + math.exp(-1)))  # 0.731
    assert composite(Signals(z_v=1.0), cfg) == pytest.approx(1 / (1 + math.exp(-0.4)))
    assert cfg.d_range == pytest.approx((0.5, 0.7310585786))


@pytest.mark.parametrize("tau, words", [(0.9, "never be crossed"), (0.4, "always be crossed")])
def test_tau_outside_paper_range_is_a_clear_error(tau, words):
    with pytest.raises(ConfigError, match=r"\[0\.5000, 0\.7311\)") as info:
        DisequilibriumConfig(tau=tau)
    assert words in str(info.value) and "SPEC §3" in str(info.value) and "gain/bias" in str(info.value)


def test_gain_bias_option_stretches_the_range():
    cfg = DisequilibriumConfig(tau=0.9, gain=8.0, bias=-4.0)  # range [σ(−4), σ(4)] = [0.018, 0.982]
    assert composite(Signals(), cfg) == pytest.approx(1 / (1 + math.exp(4)))
    assert composite(Signals(1, 1, 1, 1), cfg) > 0.9
    with pytest.raises(ConfigError, match="gain"):
        DisequilibriumConfig(gain=0.0)


@pytest.mark.parametrize(
    "weights, match",
    [((0.5, 0.5, 0.5, 0.0), "sum to 1"), ((1.2, -0.2, 0, 0), "outside \\[0, 1\\]"), ((0.5, 0.5), "4 values")],
)
def test_weight_validation(weights, match):
    with pytest.raises(ConfigError, match=match):
        DisequilibriumConfig(weights=weights)


def test_signals_validated_and_config_frozen():
    with pytest.raises(ConfigError, match="z_R"):
        Signals(z_r=1.5)
    with pytest.raises(AttributeError):
        DisequilibriumConfig().tau = 0.6  # type: ignore[misc]


def test_core_contradiction_share_over_control_actions():
    q = {"location": "kitchen"}
    pairs = [(q, TO_SINK), (q, TO_SHELF), (q, SAY), (q, TO_SINK), (q, TO_SHELF)]
    assert core_contradiction([NO_SINK], pairs) == pytest.approx(2 / 4)  # text is not a control action
    assert core_contradiction([NO_SINK], [(q, SAY)]) == 0.0
    window = ContradictionWindow([NO_SINK], window=2)
    assert [window.push(q, a) for a in (TO_SINK, TO_SHELF, SAY, TO_SHELF)] == [1.0, 0.5, 0.5, 0.0]
    with pytest.raises(ConfigError, match="window"):
        ContradictionWindow([NO_SINK], window=0)


def test_a_proposal_h_forbids_nothing_of_adds_zero_wherever_it_has_control_mass():
    """The caller's all-False row (most decisions) gives what evaluating H gives: 0 where the proposal puts mass on
    control actions, nothing where it puts none (text only, or zero mass)."""
    q = {"location": "kitchen"}
    for proposal in (
        ((TO_SHELF, 0.5), (SAY, 0.5)),
        ((SAY, 1.0),),
        ((TO_SHELF, 0.0), (SAY, 1.0)),
        ((TO_SHELF, 1 / 3), (TO_SHELF, 1 / 3), (SAY, 1 / 3)),
        (),
    ):
        told, evaluated = ContradictionWindow([NO_SINK], window=3), ContradictionWindow([NO_SINK], window=3)
        for _ in range(2):
            told._flags.append(1.0)  # an earlier decision H did forbid
            evaluated._flags.append(1.0)
            assert told.push_proposal(q, proposal, (False,) * len(proposal)) == evaluated.push_proposal(
                q, proposal
            )
            assert list(told._flags) == list(evaluated._flags)


class RejectAll:
    def judge(self, punished_action, context):
        return True


def test_monitor_readings():
    cfg = DisequilibriumConfig(weights=(0.4, 0.3, 0.2, 0.1), tau=0.58, imprint_size=1, style_window=1)
    monitor = DisequilibriumMonitor(
        cfg,
        agent_id="me",
        core=[NO_SINK],
        trust_gate=TrustGate(RejectAll()),
        imprint=["I think we might wait."],
    )
    calm = monitor.observe(StepRecord(0, {"t": 0}, TO_SHELF, output="I think we might wait a little."))
    assert calm.z.z_v == 0.0 and calm.z.z_c == 0.0 and not calm.crossed
    fail = monitor.observe(
        StepRecord(
            1, {"t": 1}, TO_SINK, events=({"type": "rule_violation", "rule": "H"},), output="I think so."
        )
    )
    # z_V = 1 and z_C = 1/2 (one of two control actions hits H): wᵀz ≥ 0.4 + 0.1 -> d ≥ σ(0.5) = 0.622 > τ
    assert fail.z.z_v == 1.0 and fail.z.z_c == 0.5 and fail.crossed and fail.onset
    assert fail.verdict.handler == "rule_violation"
    again = monitor.observe(StepRecord(2, {"t": 2}, TO_SINK, events=({"type": "violation"},)))
    assert again.crossed and not again.onset  # still above τ: not a new onset
    punished = monitor.observe(
        StepRecord(
            3,
            {"t": 3},
            TO_SHELF,
            punishments=(Punishment("p", "me", 3, TO_SHELF), Punishment("q", "x", 3, TO_SHELF)),
        )
    )
    assert punished.z.z_r == pytest.approx(0.25) and punished.trust.n_punishments == 1
    row = punished.as_row()
    assert set(row) >= {"z_V", "z_R", "z_C", "z_I", "d", "crossed"}


def test_monitor_identity_drift_uses_first_outputs_as_imprint():
    monitor = DisequilibriumMonitor(DisequilibriumConfig(imprint_size=2, style_window=2))
    calm = "I think we should perhaps take a little less, maybe nine tons."
    r0 = monitor.observe(StepRecord(0, output=calm))
    r1 = monitor.observe(StepRecord(1, output=calm))
    assert r0.z.z_i == r1.z.z_i == 0.0 and monitor.imprint == (calm, calm)
    same = monitor.observe(StepRecord(2, output=calm))
    assert same.z.z_i == pytest.approx(0.0, abs=1e-12)
    shout = monitor.observe(StepRecord(3, output="HARVEST EVERYTHING! NOW! PUNISH THEM ALL!"))
    assert shout.z.z_i > 0.05
