"""Equilibration: ILP-Merge and scope pruning decided on S_t and handed to the schema store (paper §4.3, §4.5).

``synthesis.merge`` and ``synthesis.retirement`` decide; this module gathers their inputs from the store and passes
the decisions to ``SchemaStore.apply_merge`` / ``apply_retirement``, which write them to the ledger and apply them
to the control plane (the only writer of either):

* every merge appends one ``merge_decision`` event (candidates, active, retired, rejected, objective, solver,
  optimality, uncovered failures, refused resurrections), then ``scar_admitted`` for each new scar the merge
  keeps and ``scar_retired`` for each incumbent it drops;
* a retirement decision appends ``scar_retired`` (scope) and ``scar_revoked`` (counter-evidence);
* no resurrection (seed 000): a candidate the ledger would refuse (``Ledger.may_admit``: a retired or revoked id
  without evidence never recorded for it) never enters the merge; it is listed in the decision instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agents.runtime.scar import Scar
from agents.runtime.store import SchemaStore
from synthesis.dsl.cost import Lambdas
from synthesis.dsl.semantics import Classes
from synthesis.failure import Failure
from synthesis.merge import (
    MergeMode,
    MergeResult,
    RecordedContexts,
    SolverSettings,
    build_merge_problem,
    merge,
)
from synthesis.retirement import RetirementDecision, VerifiedSuccess, decide_retirement, scoped


@dataclass(frozen=True, slots=True)
class EquilibrationReport:
    """What one equilibration decided and wrote: the merge result, the ids admitted, retired and refused."""

    result: MergeResult
    admitted: tuple[str, ...]
    retired: tuple[str, ...]
    refused_resurrection: tuple[str, ...]
    decision_seq: int


def equilibrate(
    store: SchemaStore,
    new_scars: Iterable[Scar],
    failures: Iterable[Failure],
    contexts: RecordedContexts = (),
    classes: Classes | None = None,
    lambdas: Lambdas | None = None,
    *,
    eta: float = 1.0,
    merge_mode: MergeMode = "ilp",
    settings: SolverSettings | None = None,
    extra_conflicts: Iterable[tuple[str, str]] = (),
) -> EquilibrationReport:
    """S_{t+1} = ILP-Merge(S_t ∪ {ΔS*}) with S_t the store's, and every decision written through the store.

    failures: the recorded failures the active set must keep covering (ReplayPass over the run, §4.5).
    contexts: recorded (q, admissible actions) on which Overlap and contradictions are measured.
    """
    incumbents = {s.id: s for s in store.scars}
    fresh: dict[str, Scar] = {}
    refused: list[str] = []
    for scar in new_scars:
        if scar.id in incumbents or scar.id in fresh:
            continue
        ok, _ = store.may_admit(scar)
        if ok:
            fresh[scar.id] = scar
        else:
            refused.append(scar.id)
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
    events = store.apply_merge(result, fresh, refused=refused)
    admitted = tuple(e.subject for e in events if e.type == "scar_admitted")
    retired = tuple(e.subject for e in events if e.type == "scar_retired")
    return EquilibrationReport(result, admitted, retired, tuple(sorted(refused)), events[0].seq)


def prune(
    store: SchemaStore,
    *,
    env_version: str | None = None,
    step: int | None = None,
    episode: int | None = None,
    successes: Iterable[VerifiedSuccess] = (),
    classes: Classes | None = None,
    min_counter_evidence: int = 1,
) -> RetirementDecision:
    """Scope pruning and revocation (paper §4.5) of the store's active scars, decided and written."""
    decision = decide_retirement(
        [scoped(s) for s in store.scars],
        env_version=env_version,
        step=step,
        episode=episode,
        successes=successes,
        classes=classes,
        min_counter_evidence=min_counter_evidence,
    )
    store.apply_retirement(decision)
    return decision
