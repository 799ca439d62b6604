"""Scope retirement, revocation by counter-evidence and the equilibration edge (paper §4.3–§4.5, §7.1)."""

from __future__ import annotations

import pytest

from scars.agents.runtime.equilibration import equilibrate, prune
from scars.agents.runtime.ledger import Ledger, verdict_evidence
from scars.agents.runtime.scar import Scar, Scope
from scars.agents.runtime.store import SchemaStore
from scars.synthesis.dsl import Action, parse_rule
from scars.synthesis.errors import ConfigError
from scars.synthesis.failure import Failure, FailureSource
from scars.synthesis.retirement import (
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


def _failure(fid: str, q, actions) -> Failure:
    return Failure(q, tuple(actions), "test", FailureSource(world=fid, episode=0, step=0))


F_CUP, F_PLATE = _failure("f_cup", {"step": 3}, [CLEAN_CUP]), _failure("f_plate", {"step": 7}, [CLEAN_PLATE])
FAILURES = [F_CUP, F_PLATE]
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
def store(tmp_path):
    with SchemaStore(tmp_path / "agent.db") as st:
        st.ledger._clock = _clock()
        yield st


def _evidence(ledger: Ledger, scar_id: str) -> tuple:
    """Every evidence item ever admitted for a scar: the audit plane outlives the control plane."""
    return tuple(
        item
        for e in ledger.events()
        if e.type == "scar_admitted" and e.subject == scar_id
        for item in Scar.from_json(e.payload).evidence
    )


def _admit(store: SchemaStore, *scars: Scar) -> None:
    """Admit scars through the store (an append-mode merge with no failures to cover)."""
    equilibrate(store, scars, [], merge_mode="append")


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


def test_merge_admits_class_rule_retires_instance_rules_in_ledger(store):
    cup, plate = _scar(CUP, "cup"), _scar(PLATE, "plate")
    _admit(store, cup, plate)
    dish = _scar(DISHWARE, "dish")
    report = equilibrate(store, [dish], FAILURES, CONTEXTS, CLASSES)
    assert report.result.active == {dish.id}
    assert set(report.retired) == {cup.id, plate.id}
    assert report.admitted == (dish.id,)
    types = [e.type for e in store.ledger.events()]
    assert types == [
        "merge_decision",
        "scar_admitted",
        "scar_admitted",
        "merge_decision",
        "scar_admitted",
        "scar_retired",
        "scar_retired",
    ]
    decision = [e for e in store.ledger.events() if e.type == "merge_decision"][-1]
    assert decision.payload["active"] == [dish.id] and decision.payload["optimal"] is True
    plane = store.ledger.control_plane(classes=CLASSES)
    assert plane.active_ids == (dish.id,) == store.plane.active_ids
    assert plane.masked({"step": 9}, [CLEAN_CUP, CLEAN_PLATE]) == [True, True]  # coverage kept
    assert _evidence(store.ledger, cup.id) == ({"failure": "cup"},)  # retired, not forgotten
    assert store.ledger.verify().ok and store.consistent()


def test_append_mode_admits_without_garbage_collection(store):
    _admit(store, _scar(CUP, "cup"), _scar(PLATE, "plate"))
    report = equilibrate(store, [_scar(DISHWARE, "dish")], FAILURES, CONTEXTS, CLASSES, merge_mode="append")
    assert report.retired == ()
    assert len(store.plane.active_ids) == 3 and store.consistent()


def test_uncovered_failure_recorded_in_decision(store):
    knife = Action.env("clean", obj_type="knife", recep="sinkbasin")
    failures = [*FAILURES, _failure("f_knife", {"step": 8}, [knife])]
    report = equilibrate(store, [_scar(CUP, "cup"), _scar(PLATE, "plate")], failures, CONTEXTS, CLASSES)
    assert report.result.uncovered == {"f_knife:0:0"}
    decision = next(e for e in store.ledger.events() if e.type == "merge_decision")
    assert decision.payload["uncovered"] == ["f_knife:0:0"]


def test_world_version_change_retires_and_unmasks_but_keeps_evidence(store):
    v1 = _scar(CUP, "cup-v1", env_version="1")
    anywhere = _scar(PLATE, "plate")
    _admit(store, v1, anywhere)
    assert store.plane.masked({}, [CLEAN_CUP, CLEAN_PLATE]) == [True, True]
    decision = prune(store, env_version="2")
    assert decision.retire_ids == {v1.id} and decision.retire[0].kind == "env_version"
    assert store.plane.active_ids == (anywhere.id,)
    assert store.plane.masked({}, [CLEAN_CUP, CLEAN_PLATE]) == [
        False,
        True,
    ]  # the control plane stops masking it
    assert _evidence(store.ledger, v1.id) == ({"failure": "cup-v1"},)  # the ledger still holds its evidence
    retired = next(e for e in store.ledger.events() if e.type == "scar_retired")
    assert "version" in retired.payload["reason"] and retired.subject == v1.id
    assert store.ledger.verify().ok and store.consistent()


def test_revocation_written_with_counter_evidence(store):
    cup = _scar(CUP, "cup")
    _admit(store, cup)
    success = VerifiedSuccess(
        {"step": 12}, CLEAN_CUP, safe=True, verifier_id="household", evidence_id="ep2/12"
    )
    decision = prune(store, successes=[success])
    assert decision.revoke_ids == {cup.id}
    revoked = next(e for e in store.ledger.events() if e.type == "scar_revoked")
    assert revoked.payload["counter_evidence"][0]["evidence_id"] == "ep2/12"
    assert store.plane.active_ids == () and store.consistent()
    assert store.apply_retirement(decision) == ()  # already revoked: a stale decision writes nothing


def test_no_resurrection_by_a_later_merge(store):
    """A retired scar is not re-activated by a later merge unless re-admitted with new evidence."""
    v1 = _scar(CUP, "cup-v1", env_version="1")
    _admit(store, v1)
    prune(store, env_version="2")
    same = _scar(CUP, "cup-v1", env_version="1")  # same id, same evidence
    assert store.may_admit(same)[0] is False
    report = equilibrate(store, [same], [F_CUP], CONTEXTS, CLASSES)
    assert report.refused_resurrection == (same.id,)
    assert report.result.uncovered == {F_CUP.id}  # reported, not silently satisfied by a dead scar
    assert store.plane.active_ids == ()
    # free JSON "new evidence" does not unlock a re-admission (issue 13) ...
    assert store.may_admit(Scar(rule=CUP, evidence=({"nonce": 1},)))[0] is False
    # ... fresh verifier-backed evidence (a failure recorded under the new version) does
    verdict = store.record_failure(_failure("cup-v2", {"step": 3}, [CLEAN_CUP]))
    fresh = Scar(rule=CUP, evidence=(verdict_evidence(verdict),), scope=Scope(env_version="2"))
    report = equilibrate(store, [fresh], [F_CUP], CONTEXTS, CLASSES)
    assert report.admitted == (fresh.id,)
    assert store.plane.active_ids == (fresh.id,) and store.consistent()
    assert len(_evidence(store.ledger, fresh.id)) == 2  # both evidence items, old and new
