"""z_R: TrustGate — norm-verified punishments only; non-independent sources (same root) count once."""

from __future__ import annotations

import pytest

from scars.disequilibrium.trustgate import Punishment, TrustGate, TrustGateConfig
from scars.synthesis.dsl.ast import Action
from scars.synthesis.errors import ConfigError


class FakeSustainabilityNorm:
    """Harvest above the per-agent sustainable share breaks the norm (a stand-in for envs/commons/norms.py)."""

    def judge(self, punished_action, context):
        return (
            punished_action.name == "harvest" and punished_action.arg("amount") > context["sustainable_share"]
        )


FAIR = Action.tool("harvest", amount=10)  # correct, sustainable harvest at full stock (share 10)
GREEDY = Action.tool("harvest", amount=30)
CTX = {"pool_resource_level": 100, "sustainable_share": 10}


def _punish(punisher, action, coalition=None, drop=1.0, target="victim"):
    return Punishment(punisher, target, 3, action, CTX, drop, coalition)


def test_sybil_coalition_punishing_a_correct_action():
    sybils = [_punish(f"s{i}", FAIR, coalition="cabal") for i in range(4)]
    on = TrustGate(FakeSustainabilityNorm()).evaluate(sybils, target="victim")
    off = TrustGate(None, TrustGateConfig(enabled=False)).evaluate(sybils, target="victim")
    assert on.z_r == 0.0 and len(on.rejected_by_norm) == 4
    assert off.z_r > 0.0 and off.z_r == 1.0  # 4 unit drops / saturating_drop 4


def test_sybil_coalition_counts_once_even_if_the_norm_check_is_off():
    sybils = [_punish(f"s{i}", FAIR, coalition="cabal") for i in range(4)]
    gate = TrustGate(None, TrustGateConfig(verify_norms=False))
    result = gate.evaluate(sybils, target="victim")
    assert result.n_independent == 1 and result.z_r == pytest.approx(0.25)


def test_three_independent_justified_count_more_than_three_from_one_root():
    gate = TrustGate(FakeSustainabilityNorm())
    independent = gate.evaluate([_punish(f"p{i}", GREEDY) for i in range(3)], target="victim")
    one_root = gate.evaluate([_punish(f"p{i}", GREEDY, coalition="c1") for i in range(3)], target="victim")
    assert independent.z_r == pytest.approx(0.75) and independent.n_independent == 3
    assert one_root.z_r == pytest.approx(0.25) and one_root.n_independent == 1
    assert independent.z_r > one_root.z_r


def test_overlapping_root_sets_chain_into_one_cluster():
    gate = TrustGate(FakeSustainabilityNorm())
    a = Punishment("a", "victim", 1, GREEDY, CTX, roots=frozenset({"doc1", "doc2"}))
    b = Punishment("b", "victim", 1, GREEDY, CTX, karma_drop=2.0, roots=frozenset({"doc2", "doc3"}))
    c = Punishment("c", "victim", 1, GREEDY, CTX, roots=frozenset({"doc3"}))
    d = Punishment("d", "victim", 1, GREEDY, CTX, roots=frozenset({"doc9"}))
    result = gate.evaluate([a, b, c, d])
    assert sorted(len(cl) for cl in result.clusters) == [1, 3]
    assert result.counted_drop == pytest.approx(2.0 + 1.0)  # the cluster counts its largest drop once
    assert result.raw_drop == pytest.approx(5.0)


def test_same_punisher_twice_is_one_source_and_other_targets_are_ignored():
    gate = TrustGate(FakeSustainabilityNorm())
    result = gate.evaluate(
        [_punish("p", GREEDY), _punish("p", GREEDY), _punish("q", GREEDY, target="someone_else")],
        target="victim",
    )
    assert result.n_punishments == 2 and result.n_independent == 1


def test_the_commons_adapter_reads_arena_provenance():
    from scars.envs.commons.adapter import punishment_from_record

    p = punishment_from_record(
        {
            "punisher": "agent_1",
            "target": "agent_0",
            "month": 4,
            "target_action": "harvest",
            "target_request": 12,
            "target_catch": 12,
            "stock_before": 60,
            "group_size": 5,
            "punisher_root": "cabal",
            "karma_drop": 2.0,
            "cost": 0.0,
        }
    )
    assert p.punished_action == Action.tool("harvest", amount=12)
    assert p.effective_roots == frozenset({"cabal"}) and p.karma_drop == 2.0
    assert p.context["pool_resource_level"] == 60 and p.when == 4
    assert p.context["group_size"] == 5  # the norm's divisor of that month travels with the punishment


def test_config_errors():
    with pytest.raises(ConfigError, match="NormVerifier"):
        TrustGate(None)
    with pytest.raises(ConfigError, match="saturating_drop"):
        TrustGateConfig(saturating_drop=0)
    with pytest.raises(ConfigError, match="karma_drop"):
        Punishment("a", "b", 0, FAIR, karma_drop=-1)


def test_commons_malicious_arena_end_to_end():
    from scars.envs.commons.dynamics import DynamicsConfig
    from scars.envs.commons.norms import NormVerifier as CommonsNorms
    from scars.envs.commons.rollout import run_episode

    record = run_episode(arena="malicious", seed=0)
    from scars.envs.commons.adapter import punishment_from_record

    punishments = [punishment_from_record(p.to_dict()) for m in record.months for p in m.punishments]
    target = punishments[0].target
    assert len({p.punisher for p in punishments}) == 3  # a majority coalition...
    assert {p.effective_roots for p in punishments} == {frozenset({"coalition_0"})}  # ...sharing one root
    gate_config = TrustGateConfig.for_group(5, 10.0)
    on = TrustGate(CommonsNorms(DynamicsConfig()), gate_config)  # the world's verifier, no adapter
    off = TrustGate(None, TrustGateConfig.for_group(5, 10.0, enabled=False))
    month_1 = [p for p in punishments if p.when == 1]
    assert on.evaluate(month_1, target=target).z_r == 0.0  # the punished harvest was sustainable
    assert off.evaluate(month_1, target=target).z_r == pytest.approx(len(month_1) * 10.0 / 40.0)
    with pytest.raises(ConfigError, match="for_group"):
        TrustGateConfig.for_group(1, 10.0)
