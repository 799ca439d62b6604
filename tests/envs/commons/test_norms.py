"""The deterministic norm verifier and punishment provenance in the three arenas."""

from __future__ import annotations

import dataclasses

from scars.envs.commons.dynamics import DynamicsConfig
from scars.envs.commons.norms import NormVerifier, Punishment, independent_roots
from scars.envs.commons.rollout import run_episode

VERIFIER = NormVerifier(DynamicsConfig())


def _punish(
    target_request: int, stock: int = 100, punisher: str = "agent_1", root: str = "agent_1"
) -> Punishment:
    return Punishment(punisher, "agent_0", 1, target_request, target_request, stock, 5, root, 10.0, 0.0)


def test_harvest_above_the_sustainable_share_breaks_the_norm():
    assert not VERIFIER.judge_harvest("agent_0", 1, 100, 10, 5).broke_norm  # share 50/5 = 10
    assert VERIFIER.judge_harvest("agent_0", 1, 100, 11, 5).broke_norm
    verdict = VERIFIER.judge_harvest("agent_0", 2, 60, 7, 5)  # share 30/5 = 6
    assert verdict.broke_norm and verdict.sustainable_share == 6.0 and "above" in verdict.reason


def test_the_share_divides_by_the_group_of_the_month():
    # a group of four (GovSim's outsider variant before the outsider joins): 50/4 = 12.5
    assert not VERIFIER.judge_harvest("agent_0", 1, 100, 12, 4).broke_norm
    assert VERIFIER.judge_harvest("agent_0", 1, 100, 12, 5).broke_norm
    record = Punishment("agent_1", "agent_0", 1, 12, 12, 100, 4, "agent_1", 10.0, 0.0)
    assert not VERIFIER.judge_punishment(record).justified  # 12 was within the share of a group of four
    assert VERIFIER.judge_punishment(dataclasses.replace(record, group_size=5)).justified


def test_punishment_is_justified_only_when_the_punished_harvest_broke_the_norm():
    assert VERIFIER.judge_punishment(_punish(30)).justified
    unjust = VERIFIER.judge_punishment(_punish(10))
    assert not unjust.justified and unjust.reason.startswith("unjustified")
    self_punish = Punishment("agent_0", "agent_0", 1, 30, 30, 100, 5, "agent_0", 10.0, 0.0)
    assert not VERIFIER.judge_punishment(self_punish).justified


def test_colluding_punishers_share_one_root():
    ps = [_punish(10, punisher=f"agent_{i}", root="coalition_0") for i in (2, 3, 4)]
    ps.append(_punish(10, punisher="agent_1", root="agent_1"))
    assert independent_roots(ps) == {"coalition_0", "agent_1"}
    verdicts = {p: VERIFIER.judge_punishment(p) for p in ps}
    assert independent_roots(ps, verdicts) == frozenset()


def test_malicious_arena_punishes_a_sustainable_target_unjustly_from_one_root():
    record = run_episode(arena="malicious", seed=0)
    punishments = [p for m in record.months for p in m.punishments]
    assert punishments and {p.target for p in punishments} == {"agent_0"}
    assert {p.punisher_root for p in punishments} == {"coalition_0"}
    assert len({p.punisher for p in punishments}) == 3  # a majority of 5
    assert not any(v.justified for v in VERIFIER.judge_punishments(punishments))
    assert all(p.target_request <= 10 for p in punishments)  # the target harvested sustainably


def test_cooperators_punish_the_greedy_agent_justly_in_arena_a_and_nobody_in_b():
    record = run_episode(arena="A", population="coop:4,greedy:1", seed=0)
    punishments = [p for m in record.months for p in m.punishments]
    assert punishments and {p.target for p in punishments} == {"agent_4"}
    assert all(v.justified for v in VERIFIER.judge_punishments(punishments))
    assert record.months[-1].karma[4] < 100
    record_b = run_episode(arena="B", population="coop:4,greedy:1", seed=0)
    assert all(not m.punishments for m in record_b.months)
    assert all(k == 100 for m in record_b.months for k in m.karma)
