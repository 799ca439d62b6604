"""Scope retirement, revocation by counter-evidence and the equilibration edge (paper §4.3–§4.5, §7.1)."""

from __future__ import annotations

import pytest

from agents.equilibration import (
    admissible_new,
    apply_retirement,
    equilibrate,
    lifecycle_of,
    prune,
    rebuild_control_plane,
    scar_evidence,
)
from agents.runtime.ledger import Ledger, verdict_evidence
from agents.runtime.scar import Scar, Scope
from synthesis.dsl import Action, parse_rule
from synthesis.errors import ConfigError
from synthesis.retirement import (
    ScopedRule,
    VerifiedSuccess,
    decide_retirement,
    scope_retirement,
    scoped,
)

CLASSES = {"dishware": frozenset({"cup", "plate", "bowl"})}
CUP = parse_rule(
    'if action.obj_type == "cup" and action.recep == "sinkbasin" then forbid_env_action("clean")'
)
PLATE = parse_rule(
    'if action.obj_type == "plate" and action.recep == "sinkbasin" then forbid_env_action("clean")'
)
DISHWARE = parse_rule(
    'if in_class(action.obj_type, "dishware") and action.recep == "sinkbasin" then forbid_env_action("clean")'
)
CLEAN_CUP = Action.env("clean", obj_type="cup", recep="sinkbasin")
CLEAN_PLATE = Action.env("clean", obj_type="plate", recep="sinkbasin")
FAILURES = {"f_cup": ({"step": 3}, [CLEAN_CUP]), "f_plate": ({"step": 7}, [CLEAN_PLATE])}
CONTEXTS = [({"step": 1}, [CLEAN_CUP, CLEAN_PLATE, Action.env("go", recep="sinkbasin")])]


def _scar(rule, tag: str, **scope) -> Scar:
    return Scar(rule=rule, evidence=({"failure": tag},), scope=Scope(**scope))


def _clock():
    t = [0]

    def tick() -> int:
        t[0] += 10
        return t[0]

    return tick


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "agent.db", clock=_clock()) as led:
        yield led


# ------------------------------------------------------------------------------------------- pure decisions


def test_scope_retirement_reasons():
    s = ScopedRule("a", CUP, env_version="1", expires_at_step=50, expires_at_episode=4)
    assert scope_retirement(s, env_version="1", step=10, episode=1) is None
    assert scope_retirement(s, env_version="2").kind == "env_version"
    assert scope_retirement(s, step=50).kind == "step_expiry"
    assert scope_retirement(s, episode=4).kind == "episode_expiry"
    assert scope_retirement(ScopedRule("b", CUP), env_version="9", step=10**6) is None  # no scope: everywhere


def test_scope_agrees_with_scope_expired():
    """retirement.scope_retirement reads ρ exactly as agents.runtime.scar.Scope.expired does."""
    for scope in (Scope(env_version="1"), Scope(expires_at_step=5), Scope(expires_at_episode=2), Scope()):
        scar = Scar(rule=CUP, scope=scope)
        for where in ({"env_version": "1"}, {"env_version": "2"}, {"step": 4}, {"step": 5}, {"episode": 2}):
            assert (scope_retirement(scoped(scar), **where) is not None) == scope.expired(**where)


def test_revocation_needs_verified_safe_counter_evidence():
    s = ScopedRule("cup", CUP)
    unverified = VerifiedSuccess({"step": 4}, CLEAN_CUP, safe=False, evidence_id="ep0/4")
    unrelated = VerifiedSuccess({"step": 5}, CLEAN_PLATE, safe=True, evidence_id="ep0/5")
    assert decide_retirement([s], successes=[unverified, unrelated]).kept == ("cup",)
    refuting = VerifiedSuccess(
        {"step": 6}, CLEAN_CUP, safe=True, verifier_id="household", evidence_id="ep1/6"
    )
    d = decide_retirement([s], successes=[unverified, refuting, refuting])
    assert d.revoke_ids == {"cup"} and not d.retire_ids
    assert d.revoke[0].counter_evidence == (refuting,)  # one per distinct (q, a*)
    assert "ep1/6" in d.revoke[0].reason
    assert decide_retirement([s], successes=[refuting], min_counter_evidence=2).kept == ("cup",)


def test_counter_evidence_from_another_world_version_does_not_refute():
    s = ScopedRule("cup", CUP, env_version="1")
    other = VerifiedSuccess({"step": 6}, CLEAN_CUP, safe=True, env_version="2")
    assert decide_retirement([s], successes=[other]).kept == ("cup",)


def test_scope_retirement_takes_precedence_over_revocation():
    s = ScopedRule("cup", CUP, env_version="1")
    refuting = VerifiedSuccess({"step": 6}, CLEAN_CUP, safe=True)
    d = decide_retirement([s], env_version="2", successes=[refuting])
    assert d.retire_ids == {"cup"} and not d.revoke_ids


def test_decision_inputs_validated():
    with pytest.raises(ConfigError, match="min_counter_evidence"):
        decide_retirement([], min_counter_evidence=0)
    with pytest.raises(ConfigError, match="twice"):
        decide_retirement([ScopedRule("a", CUP), ScopedRule("a", CUP)])


# ---------------------------------------------------------------------------------------- the ledger edge


def test_merge_admits_class_rule_retires_instance_rules_in_ledger(ledger):
    cup, plate = _scar(CUP, "cup"), _scar(PLATE, "plate")
    ledger.admit(cup)
    ledger.admit(plate)
    dish = _scar(DISHWARE, "dish")
    report = equilibrate(ledger, [dish], FAILURES, CONTEXTS, CLASSES)
    assert report.result.active == {dish.id}
    assert set(report.retired) == {cup.id, plate.id}
    assert report.admitted == (dish.id,)
    types = [e.type for e in ledger.events()]
    assert types == [
        "scar_admitted",
        "scar_admitted",
        "merge_decision",
        "scar_admitted",
        "scar_retired",
        "scar_retired",
    ]
    decision = next(e for e in ledger.events() if e.type == "merge_decision")
    assert decision.payload["active"] == [dish.id] and decision.payload["optimal"] is True
    plane = rebuild_control_plane(ledger, classes=CLASSES)
    assert plane.active_ids == (dish.id,)
    assert plane.masked({"step": 9}, [CLEAN_CUP, CLEAN_PLATE]) == [True, True]  # coverage kept
    assert scar_evidence(ledger, cup.id) == ({"failure": "cup"},)  # retired, not forgotten
    assert ledger.verify().ok


def test_append_mode_admits_without_garbage_collection(ledger):
    cup, plate = _scar(CUP, "cup"), _scar(PLATE, "plate")
    ledger.admit(cup)
    ledger.admit(plate)
    report = equilibrate(ledger, [_scar(DISHWARE, "dish")], FAILURES, CONTEXTS, CLASSES, merge_mode="append")
    assert report.retired == ()
    assert len(rebuild_control_plane(ledger, classes=CLASSES).active_ids) == 3


def test_uncovered_failure_recorded_in_decision(ledger):
    knife = Action.env("clean", obj_type="knife", recep="sinkbasin")
    failures = {**FAILURES, "f_knife": ({"step": 8}, [knife])}
    report = equilibrate(ledger, [_scar(CUP, "cup"), _scar(PLATE, "plate")], failures, CONTEXTS, CLASSES)
    assert report.result.uncovered == {"f_knife"}
    decision = next(e for e in ledger.events() if e.type == "merge_decision")
    assert decision.payload["uncovered"] == ["f_knife"]


def test_world_version_change_retires_and_unmasks_but_keeps_evidence(ledger):
    v1 = _scar(CUP, "cup-v1", env_version="1")
    anywhere = _scar(PLATE, "plate")
    ledger.admit(v1)
    ledger.admit(anywhere)
    plane = rebuild_control_plane(ledger)
    assert plane.masked({}, [CLEAN_CUP, CLEAN_PLATE]) == [True, True]
    decision = prune(ledger, env_version="2")
    assert decision.retire_ids == {v1.id} and decision.retire[0].kind == "env_version"
    plane = rebuild_control_plane(ledger)
    assert plane.active_ids == (anywhere.id,)
    assert plane.masked({}, [CLEAN_CUP, CLEAN_PLATE]) == [False, True]  # the control plane stops masking it
    assert scar_evidence(ledger, v1.id) == ({"failure": "cup-v1"},)  # the ledger still holds its evidence
    assert lifecycle_of(ledger, [v1.id, anywhere.id]) == {v1.id: "scar_retired", anywhere.id: "scar_admitted"}
    retired = next(e for e in ledger.events() if e.type == "scar_retired")
    assert "version" in retired.payload["reason"]
    assert ledger.verify().ok


def test_revocation_written_with_counter_evidence(ledger):
    cup = _scar(CUP, "cup")
    ledger.admit(cup)
    success = VerifiedSuccess(
        {"step": 12}, CLEAN_CUP, safe=True, verifier_id="household", evidence_id="ep2/12"
    )
    decision = prune(ledger, successes=[success])
    assert decision.revoke_ids == {cup.id}
    revoked = next(e for e in ledger.events() if e.type == "scar_revoked")
    assert revoked.payload["counter_evidence"][0]["evidence_id"] == "ep2/12"
    assert rebuild_control_plane(ledger).active_ids == ()
    assert apply_retirement(ledger, decision) == ()  # already revoked: a stale decision writes nothing


def test_no_resurrection_by_a_later_merge(ledger):
    """A retired scar is not re-activated by a later merge unless re-admitted with new evidence."""
    v1 = _scar(CUP, "cup-v1", env_version="1")
    ledger.admit(v1)
    prune(ledger, env_version="2")
    same = _scar(CUP, "cup-v1", env_version="1")  # same id, same evidence
    allowed, refused = admissible_new(ledger, [same])
    assert allowed == [] and refused == [same.id]
    report = equilibrate(ledger, [same], {"f_cup": FAILURES["f_cup"]}, CONTEXTS, CLASSES)
    assert report.refused_resurrection == (same.id,)
    assert report.result.uncovered == {"f_cup"}  # reported, not silently satisfied by a dead scar
    assert rebuild_control_plane(ledger).active_ids == ()
    # fresh verifier-backed evidence (a failure recorded under the new version) may bring it back (issue 13)
    verdict = ledger.observe_failure({"failure": "cup-v2"})
    fresh = Scar(rule=CUP, evidence=(verdict_evidence(verdict),), scope=Scope(env_version="2"))
    report = equilibrate(ledger, [fresh], {"f_cup": FAILURES["f_cup"]}, CONTEXTS, CLASSES)
    assert report.admitted == (fresh.id,)
    assert rebuild_control_plane(ledger).active_ids == (fresh.id,)
    assert len(scar_evidence(ledger, fresh.id)) == 2  # both evidence items, old and new
