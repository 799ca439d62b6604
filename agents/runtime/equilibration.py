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

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scars.agents.runtime.ledger import Event, verdict_evidence
from scars.agents.runtime.scar import Provenance, Scar, Scope
from scars.agents.runtime.store import SchemaStore
from scars.synthesis.dsl.cost import Lambdas
from scars.synthesis.dsl.semantics import Classes, fires
from scars.synthesis.failure import Failure
from scars.synthesis.fragments import SynthesisData
from scars.synthesis.mcts import SynthesisResult
from scars.synthesis.merge import (
    MergeMode,
    MergeResult,
    RecordedContexts,
    SolverSettings,
    build_merge_problem,
    merge,
)
from scars.synthesis.retirement import RetirementDecision, VerifiedSuccess, decide_retirement, scoped


@dataclass(frozen=True, slots=True)
class EquilibrationReport:
    """What one equilibration decided and wrote: the merge result, the ids admitted, retired and refused."""

    result: MergeResult
    admitted: tuple[str, ...]
    retired: tuple[str, ...]
    refused_resurrection: tuple[str, ...]
    decision_seq: int


def scar_from_synthesis(
    result: SynthesisResult,
    fragment: Failure,
    *,
    classes: Classes | None,
    data: SynthesisData | None = None,
    failure_event: Event | None = None,
    seed: int | None = None,
    synthesiser: str = "mcts",
    settings: Mapping[str, Any] | None = None,
    verifier_id: str = "",
) -> Scar:
    """The scar ΔS* a finished synthesis proposes, with its audit plane (evidence, provenance, scope).

    The evidence cites the failure's recorded verdict (``failure_event``: its ``failure_observed`` event) — the only
    evidence that may re-admit a retired id. The scope is the world version only when the counterfactual checks
    found it causal (§4.1); confidence is Laplace's rule of succession over the recorded failures the rule masks (k)
    and the recorded successes it would have blocked (m) in ``data``: (k + 1) / (k + m + 2).
    """
    if result.rule is None:
        raise ValueError("the synthesis proposed no rule; there is no scar to build")
    version = fragment.q.get("world_version")
    covered, blocked = 0, 0
    if data is not None:
        covered = sum(1 for case in data.D_minus for a in case.F if fires(result.rule, case.q, a, classes))
        blocked = sum(1 for case in data.D_plus if fires(result.rule, case.q, case.a_star, classes))
    evidence = (
        fragment.to_json() if failure_event is None else verdict_evidence(failure_event, **fragment.to_json())
    )
    return Scar(
        rule=result.rule,
        evidence=(evidence,),
        provenance=Provenance(
            source_episode=fragment.source.episode,
            source_step=fragment.source.step,
            verifier_id=fragment.source.verifier_id or verifier_id,
            synthesiser=synthesiser,
            synthesiser_settings=tuple(sorted((settings or {}).items())),
            seed=seed,
            synthesised_at_us=time.time_ns() // 1000,
        ),
        scope=Scope(
            env_version=None if version is None else str(version),
            confidence=(covered + 1) / (covered + blocked + 2),
        ),
    )


def owed_failures(
    failures: Iterable[Failure], candidates: Iterable[Scar], classes: Classes | None
) -> list[Failure]:
    """The recorded failures the merge must keep covered: one per failure id (the latest), each one some candidate
    resolves. Coverage is owed to the whole record, not a recent window — retiring a rule must not forget a failure
    (§4.5); failures only resolved by scars retired for scope have no candidate left and drop out with them."""
    rules = [c.rule for c in candidates]
    unique = {f.id: f for f in reversed(list(failures))}
    return [f for f in unique.values() if any(fires(r, f.q, a, classes) for r in rules for a in f.F)]


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
