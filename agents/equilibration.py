"""Equilibration: the side-effect edge of ILP-Merge and scope pruning (paper §4.3, §4.5; SPEC §5).

``synthesis.merge`` and ``synthesis.retirement`` decide; this module writes their decisions to the audit
ledger and rebuilds the control plane from the ledger's projection (the plane is never edited by hand):

* every merge appends one ``merge_decision`` event (candidates, active, retired, rejected, objective, solver,
  optimality, uncovered failures, refused resurrections), then ``scar_admitted`` for each new scar the merge
  keeps and ``scar_retired`` for each incumbent it drops;
* a retirement decision appends ``scar_retired`` (scope) and ``scar_revoked`` (counter-evidence, carried in
  the event);
* nothing is deleted: a retired scar's evidence stays in its ``scar_admitted`` event;
* no resurrection (seed 000): a candidate whose id was retired or revoked and that brings no evidence the ledger
  has not already seen for it never enters the merge; it is listed in the decision instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.runtime.control import ControlPlane
from agents.runtime.ledger import Ledger
from agents.runtime.scar import Scar
from synthesis.dsl.cost import Lambdas
from synthesis.dsl.semantics import Classes
from synthesis.merge import (
    FailureRecords,
    MergeMode,
    MergeResult,
    RecordedContexts,
    SolverSettings,
    build_merge_problem,
    merge,
)
from synthesis.retirement import RetirementDecision, VerifiedSuccess, decide_retirement, scoped

_LIFECYCLE = ("scar_admitted", "scar_retired", "scar_revoked")


@dataclass(frozen=True, slots=True)
class EquilibrationReport:
    """What one equilibration wrote: the merge result and the ledger events it appended, by type."""

    result: MergeResult
    admitted: tuple[str, ...]
    retired: tuple[str, ...]
    refused_resurrection: tuple[str, ...]
    decision_seq: int


def _lifecycle(ledger: Ledger) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Per scar id: its last lifecycle event type, and every evidence hash admitted for it."""
    state: dict[str, str] = {}
    hashes: dict[str, set[str]] = {}
    for event in ledger.events():
        if event.type in _LIFECYCLE:
            state[event.subject] = event.type
            if event.type == "scar_admitted":
                hashes.setdefault(event.subject, set()).update(event.payload.get("evidence_hashes", ()))
    return state, hashes


def admissible_new(ledger: Ledger, new_scars: Iterable[Scar]) -> tuple[list[Scar], list[str]]:
    """Split new candidates into those the merge may consider and those that would be resurrections.

    A candidate whose id was retired or revoked may come back only with evidence never recorded for that id.
    """
    state, hashes = _lifecycle(ledger)
    allowed: list[Scar] = []
    refused: list[str] = []
    for scar in new_scars:
        last = state.get(scar.id)
        if last in ("scar_retired", "scar_revoked") and not set(scar.evidence_hashes) - hashes.get(
            scar.id, set()
        ):
            refused.append(scar.id)
        else:
            allowed.append(scar)
    return allowed, refused


def equilibrate(
    ledger: Ledger,
    new_scars: Iterable[Scar],
    failures: FailureRecords,
    contexts: RecordedContexts = (),
    classes: Classes | None = None,
    lambdas: Lambdas | None = None,
    *,
    eta: float = 1.0,
    merge_mode: MergeMode = "ilp",
    settings: SolverSettings | None = None,
    extra_conflicts: Iterable[tuple[str, str]] = (),
) -> EquilibrationReport:
    """S_{t+1} = ILP-Merge(S_t ∪ {ΔS*}) with S_t read from the ledger, and every decision written back.

    failures: failure id → (q, F), the recorded failures the active set must keep covering (ReplayPass).
    contexts: recorded (q, admissible actions) on which Overlap and contradictions are measured.
    """
    incumbents = {s.id: s for s in ledger.active_scars()}
    allowed, refused = admissible_new(ledger, new_scars)
    fresh = {s.id: s for s in allowed if s.id not in incumbents}
    candidates = {**incumbents, **fresh}
    problem = build_merge_problem(
        [(sid, s.rule) for sid, s in candidates.items()],
        failures,
        contexts,
        classes,
        lambdas,
        eta=eta,
        previous_active=incumbents,
        extra_conflicts=extra_conflicts,
    )
    result = merge(problem, merge_mode=merge_mode, settings=settings)
    decision = ledger.record(
        "merge_decision",
        {
            "mode": result.mode,
            "candidates": sorted(candidates),
            "active": sorted(result.active),
            "retired": sorted(result.retired),
            "rejected": sorted(result.rejected),
            "refused_resurrection": sorted(refused),
            "objective": result.objective,
            "optimal": result.optimal,
            "solver": result.solver,
            "wall_seconds": result.wall_seconds,
            "uncovered": sorted(result.uncovered),
        },
    )
    admitted = sorted(sid for sid in fresh if sid in result.active)
    for sid in admitted:
        ledger.admit(fresh[sid], reason=f"ILP merge admitted it (merge_decision seq {decision.seq})")
    for sid in sorted(result.retired):
        ledger.retire(sid, f"ILP merge dropped it from the active set (merge_decision seq {decision.seq})")
    return EquilibrationReport(
        result, tuple(admitted), tuple(sorted(result.retired)), tuple(sorted(refused)), decision.seq
    )


def apply_retirement(ledger: Ledger, decision: RetirementDecision) -> tuple[int, ...]:
    """Write a retirement decision: ``scar_retired`` for scope, ``scar_revoked`` with the counter-evidence.

    Scars no longer active in the ledger are skipped (a decision made on a stale view must not fail half-way).
    Returns the sequence numbers of the events appended.
    """
    active = {s.id for s in ledger.active_scars()}
    seqs: list[int] = []
    for item in decision.retire:
        if item.scar_id in active:
            seqs.append(ledger.retire(item.scar_id, f"scope ({item.kind}): {item.reason}").seq)
    for item in decision.revoke:
        if item.scar_id in active:
            evidence = [s.to_json() for s in item.counter_evidence]
            seqs.append(ledger.revoke(item.scar_id, evidence, reason=item.reason).seq)
    return tuple(seqs)


def prune(
    ledger: Ledger,
    *,
    env_version: str | None = None,
    step: int | None = None,
    episode: int | None = None,
    successes: Iterable[VerifiedSuccess] = (),
    classes: Classes | None = None,
    min_counter_evidence: int = 1,
) -> RetirementDecision:
    """Scope pruning and revocation (paper §4.5) of the ledger's active scars, decided and written."""
    decision = decide_retirement(
        [scoped(s) for s in ledger.active_scars()],
        env_version=env_version,
        step=step,
        episode=episode,
        successes=successes,
        classes=classes,
        min_counter_evidence=min_counter_evidence,
    )
    apply_retirement(ledger, decision)
    return decision


def rebuild_control_plane(ledger: Ledger, **kwargs: Any) -> ControlPlane:
    """The control plane as the ledger's deterministic projection (kwargs go to ``ControlPlane``)."""
    return ledger.control_plane(**kwargs)


def scar_evidence(ledger: Ledger, scar_id: str) -> tuple[Mapping[str, Any], ...]:
    """Every evidence item ever admitted for a scar, retired or not: the audit plane outlives the control plane."""
    items: list[Mapping[str, Any]] = []
    for event in ledger.events():
        if event.type == "scar_admitted" and event.subject == scar_id:
            items.extend(Scar.from_json(event.payload).evidence)
    return tuple(items)


def lifecycle_of(ledger: Ledger, scar_ids: Sequence[str]) -> dict[str, str | None]:
    """The last lifecycle event type of each id (None = never admitted)."""
    state, _ = _lifecycle(ledger)
    return {sid: state.get(sid) for sid in scar_ids}
