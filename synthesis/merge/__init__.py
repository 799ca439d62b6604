"""ILP-Merge and garbage collection of the active self-schema (paper §4.3, SPEC §5).

    S_{t+1} = ILP-Merge(S_t ∪ {ΔS*})

    min_{x,z}  Σ_i x_i·C(σ_i) + η·Σ_{i<j} z_ij·Overlap(σ_i, σ_j)
    s.t.       z_ij ≤ x_i,  z_ij ≤ x_j,  z_ij ≥ x_i + x_j − 1          (z_ij = x_i ∧ x_j)
               Σ_i x_i·1[σ_i resolves E_k] ≥ 1                         for every recorded failure k
               x_i + x_j ≤ 1                                           for every contradictory pair (i, j)
               x, z binary

Definitions this module fixes (the paper leaves them open):

* **Coverage unit.** A recorded failure E_k = (q, F) may hold several failed actions. ReplayPass (SPEC §4,
  Prop. 1) asks F(q) ⊆ U_{S}(q), so the coverage constraint is written per failed action: requirement
  ``k`` when |F| = 1, requirements ``k[0]``, ``k[1]``, … otherwise. σ_i *resolves* a requirement when it fires on
  (q, a) (``synthesis.dsl.semantics.fires``). A rule set satisfying every requirement passes ReplayPass.
* **Overlap.** Let P be the recorded (q, a) pairs: every control action of every recorded context plus every
  failed action of every failure, and P_i ⊆ P the pairs σ_i fires on. Overlap(σ_i, σ_j) = |P_i ∩ P_j| / |P_i ∪ P_j|
  (Jaccard share of the pairs either rule masks that both mask), in [0, 1], independent of how many unrelated
  contexts were recorded.
* **Co-firing.** A pairwise term z_ij exists only where the two guards co-fire, i.e. Overlap > 0 on the recorded
  pairs. The pairs are found through an inverted index (recorded pair → rules firing on it), so the cost is
  Σ_p |rules firing on p|², never n². ``can_co_fire`` is the structural test (two rules whose conjunctive
  equality / range / class literals, mask included, demand incompatible values cannot fire on the same (q, a));
  it prunes candidate pairs before any evaluation and holds for every measured overlap (a test checks it).
* **Contradictory masks.** The DSL only forbids, so two masks contradict when, on a recorded context q with
  admissible control actions A(q), each masks part of A(q) and together they mask all of it while neither does
  alone: jointly they force the fallback a_⊥ although each alone leaves a choice. Callers may add further pairs
  (e.g. the synthesiser's L_conflict pairs) through ``extra_conflicts``.
* **Infeasible coverage.** A requirement no candidate resolves, or one that contradictory pairs make unreachable,
  is reported in ``MergeResult.uncovered`` — never dropped silently. In the second case the model is re-solved
  with a slack per requirement priced above the whole candidate set, so the result covers as much as possible.

The merge is pure: it reads a frozen ``MergeProblem`` and returns a frozen ``MergeResult``; ledger writes live in
``agents.runtime.equilibration``. ``merge_mode="append"`` is the No-ILP-Merge ablation (§6.4): every candidate stays.

The package: ``model`` (problem, result, settings), ``cofire`` (the structural co-firing test), ``components``
(decomposition and exact reductions), ``solvers`` (OR-Tools' backends); ``merge`` itself is here.
"""

from __future__ import annotations

import time

from scars.synthesis.errors import ConfigError
from scars.synthesis.merge.cofire import can_co_fire
from scars.synthesis.merge.components import (
    Component,
    component_of,
    objective,
    reduce_component,
    split_component,
    uncovered_requirements,
)
from scars.synthesis.merge.model import (
    BACKENDS,
    MERGE_MODES,
    OBJECTIVE_SCALE,
    Backend,
    MergeCandidate,
    MergeMode,
    MergeProblem,
    MergeResult,
    RecordedContexts,
    SolverSettings,
    build_merge_problem,
    requirement_ids,
)
from scars.synthesis.merge.solvers import (
    CpSatWorkspace,
    solve_cp_sat,
    solve_enumerate,
    solve_mathopt,
    solve_pywraplp,
    solve_singleton,
)

__all__ = [
    "BACKENDS",
    "MERGE_MODES",
    "OBJECTIVE_SCALE",
    "Backend",
    "MergeCandidate",
    "MergeMode",
    "MergeProblem",
    "MergeResult",
    "RecordedContexts",
    "SolverSettings",
    "build_merge_problem",
    "can_co_fire",
    "merge",
    "requirement_ids",
]


def merge(
    problem: MergeProblem,
    *,
    merge_mode: MergeMode = "ilp",
    settings: SolverSettings | None = None,
) -> MergeResult:
    """S_{t+1} = ILP-Merge(S_t ∪ {ΔS*}) (paper §4.3, SPEC §5), or plain append for the No-ILP-Merge ablation.

    Requirements with no resolver are excluded from the model (they cannot be met) and reported as uncovered;
    a model made infeasible by conflicts is re-solved with priced slacks and reports what stays uncovered.
    """
    if merge_mode not in MERGE_MODES:
        raise ConfigError(f"merge_mode = {merge_mode!r}; expected one of {', '.join(MERGE_MODES)}")
    settings = settings or SolverSettings()
    start = time.perf_counter()
    if merge_mode == "append":
        active = frozenset(c.id for c in problem.candidates)
        return MergeResult(
            active=active,
            retired=frozenset(),
            rejected=frozenset(),
            objective=objective(problem, active),
            optimal=True,
            solver="append",
            wall_seconds=time.perf_counter() - start,
            uncovered=uncovered_requirements(problem, active),
            mode="append",
            components=0,
        )

    solve = {
        "cp_sat": solve_cp_sat,
        "scip": solve_pywraplp,
        "cbc": solve_pywraplp,
        "highs": solve_pywraplp,
        "mathopt_cp_sat": solve_mathopt,
        "mathopt_gscip": solve_mathopt,
        "mathopt_highs": solve_mathopt,
    }[settings.backend]
    whole = component_of(problem)
    components = split_component(whole) if settings.decompose else [whole]
    active: set[str] = set()
    uncovered: set[str] = set()
    optimal = True
    to_solve: list[Component] = []
    for comp in components:
        if not comp.failures:
            continue  # nothing to cover: every x_i = 0 is optimal (costs and overlaps are ≥ 0)
        reduced = reduce_component(comp, problem.eta) if settings.reduce else None
        if reduced is None:
            to_solve.append(comp)
            continue
        forced, residual = reduced
        active |= forced
        if residual.failures:
            # the reductions reached a fixed point, so the residual's parts need only the solver
            to_solve.extend(split_component(residual) if settings.decompose else [residual])
    workspace = CpSatWorkspace() if settings.backend == "cp_sat" else None
    for comp in to_solve:
        solution = None
        if len(comp.candidates) == 1:
            solution = solve_singleton(comp)
        elif len(comp.candidates) <= settings.enumerate_up_to:
            solution = solve_enumerate(comp, problem.eta)
        if solution is None and workspace is not None:
            solution = solve_cp_sat(comp, problem.eta, settings, False, workspace)
        elif solution is None:
            solution = solve(comp, problem.eta, settings, False)
        active |= solution.active
        uncovered |= solution.uncovered
        optimal &= solution.optimal
    frozen_active = frozenset(active)
    # Requirements no candidate resolves never reach a component: the final check reports them too.
    uncovered_all = uncovered_requirements(problem, frozen_active) | frozenset(uncovered)
    return MergeResult(
        active=frozen_active,
        retired=frozenset(c.id for c in problem.candidates if c.incumbent and c.id not in frozen_active),
        rejected=frozenset(c.id for c in problem.candidates if not c.incumbent and c.id not in frozen_active),
        objective=objective(problem, frozen_active),
        optimal=optimal,
        solver=settings.backend,
        wall_seconds=time.perf_counter() - start,
        uncovered=uncovered_all,
        mode="ilp",
        components=len(to_solve),
    )
