"""The solvers of one merge component: OR-Tools' CP-SAT (the default), pywraplp (SCIP, CBC, HiGHS) and MathOpt;
exhaustive enumeration for small components. OR-Tools loads when a component is solved, not on import."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from scars.synthesis.errors import ConfigError
from scars.synthesis.merge.components import Component, Solution
from scars.synthesis.merge.model import OBJECTIVE_SCALE, SolverSettings

if TYPE_CHECKING:  # OR-Tools loads when a merge solves a component, not when the module is imported
    from ortools.sat.python import cp_model


class CpSatWorkspace:
    """One CpModel reused for every component of a merge: building a fresh ``CpModel`` costs ~4 ms of Python
    (its pre-PEP8 aliases), more than solving a small component; resetting its proto costs microseconds."""

    def __init__(self) -> None:
        from ortools.sat.python import cp_model, cp_model_helper

        self._empty = cp_model_helper.CpModelProto()
        self.model = cp_model.CpModel()
        self.solver = cp_model.CpSolver()

    def fresh_model(self) -> cp_model.CpModel:
        self.model.proto.copy_from(self._empty)
        self.model.rebuild_constant_map()
        return self.model


def solve_cp_sat(
    comp: Component,
    eta: float,
    settings: SolverSettings,
    soft: bool,
    workspace: CpSatWorkspace | None = None,
) -> Solution:
    """CP-SAT. The linear constraints of SPEC §5 are posted as the equivalent clauses on Booleans
    (z ≤ x_i ⇔ z → x_i; z ≥ x_i + x_j − 1 ⇔ ¬x_i ∨ ¬x_j ∨ z; x_i + x_j ≤ 1 ⇔ ¬x_i ∨ ¬x_j), which CP-SAT
    propagates natively instead of re-deriving them in presolve."""
    from ortools.sat.python import cp_model

    workspace = workspace or CpSatWorkspace()
    model = workspace.fresh_model()
    x = {c.id: model.new_bool_var(f"x_{k}") for k, c in enumerate(comp.candidates)}
    terms = [(x[c.id], round(c.cost * OBJECTIVE_SCALE)) for c in comp.candidates]
    pairs: list[tuple[cp_model.IntVar, str, str]] = []
    for k, ((i, j), value) in enumerate(comp.overlaps):
        weight = round(eta * value * OBJECTIVE_SCALE)
        if weight <= 0:
            continue
        z = model.new_bool_var(f"z_{k}")
        model.add_implication(z, x[i])
        model.add_implication(z, x[j])
        model.add_bool_or([x[i].Not(), x[j].Not(), z])
        terms.append((z, weight))
        pairs.append((z, i, j))
    for i, j in comp.conflicts:
        model.add_bool_or([x[i].Not(), x[j].Not()])
    resolvers: dict[str, list[cp_model.IntVar]] = defaultdict(list)
    for c in comp.candidates:
        for req in c.resolves:
            resolvers[req].append(x[c.id])
    slack: dict[str, cp_model.IntVar] = {}
    big = sum(w for _, w in terms) + 1  # one uncovered requirement costs more than every candidate together
    for req in comp.failures:
        if soft:
            slack[req] = model.new_bool_var(f"u_{req}")
            model.add_bool_or([*resolvers[req], slack[req]])
            terms.append((slack[req], big))
        else:
            model.add_bool_or(resolvers[req])
    model.minimize(cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [w for _, w in terms]))
    if settings.use_hint:
        # a complete hint (x from S_t, z = x_i ∧ x_j, slacks from coverage): CP-SAT ignores partial ones early
        before = {c.id: c.incumbent for c in comp.candidates}
        for cid, var in x.items():
            model.add_hint(var, before[cid])
        for z, i, j in pairs:
            model.add_hint(z, before[i] and before[j])
        for req, u in slack.items():
            model.add_hint(u, not any(before[c.id] for c in comp.candidates if req in c.resolves))
    solver = workspace.solver
    params = solver.parameters
    params.num_workers = settings.num_workers
    params.max_time_in_seconds = settings.time_limit_seconds
    params.random_seed = 0
    params.cp_model_presolve = settings.cp_sat_presolve
    if settings.cp_sat_symmetry_level is not None:
        params.symmetry_level = settings.cp_sat_symmetry_level
    if settings.cp_sat_linearization_level is not None:
        params.linearization_level = settings.cp_sat_linearization_level
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        if soft:
            return Solution(frozenset(), frozenset(comp.failures), False)
        return solve_cp_sat(comp, eta, settings, True, workspace)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solution(frozenset(), frozenset(comp.failures), False)
    active = frozenset(cid for cid, v in x.items() if solver.boolean_value(v))
    uncovered = frozenset(req for req, u in slack.items() if solver.boolean_value(u))
    return Solution(active, uncovered, status == cp_model.OPTIMAL)


_PYWRAPLP_NAMES = {"scip": "SCIP", "cbc": "CBC", "highs": "HIGHS"}


def solve_pywraplp(comp: Component, eta: float, settings: SolverSettings, soft: bool) -> Solution:
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver(_PYWRAPLP_NAMES[settings.backend])
    if solver is None:
        raise ConfigError(f"OR-Tools was built without the {settings.backend!r} back-end; use 'cp_sat'")
    solver.SetTimeLimit(int(settings.time_limit_seconds * 1000))
    solver.SetNumThreads(settings.num_workers)
    x = {c.id: solver.BoolVar(f"x_{k}") for k, c in enumerate(comp.candidates)}
    objective = solver.Objective()
    for c in comp.candidates:
        objective.SetCoefficient(x[c.id], c.cost)
    for k, ((i, j), value) in enumerate(comp.overlaps):
        if eta * value <= 0:
            continue
        z = solver.BoolVar(f"z_{k}")
        solver.Add(z <= x[i])
        solver.Add(z <= x[j])
        solver.Add(z >= x[i] + x[j] - 1)
        objective.SetCoefficient(z, eta * value)
    for i, j in comp.conflicts:
        solver.Add(x[i] + x[j] <= 1)
    resolvers: dict[str, list] = defaultdict(list)
    for c in comp.candidates:
        for req in c.resolves:
            resolvers[req].append(x[c.id])
    slack = {}
    big = sum(c.cost for c in comp.candidates) + eta * len(comp.overlaps) + 1.0
    for req in comp.failures:
        if soft:
            slack[req] = solver.BoolVar(f"u_{req}")
            objective.SetCoefficient(slack[req], big)
            solver.Add(solver.Sum(resolvers[req]) + slack[req] >= 1)
        else:
            solver.Add(solver.Sum(resolvers[req]) >= 1)
    objective.SetMinimization()
    solver.SuppressOutput()
    # OR-Tools 9.15: SetHint on the pywraplp HiGHS interface segfaults the process, so HiGHS starts cold
    if settings.use_hint and settings.backend != "highs":
        solver.SetHint(list(x.values()), [1.0 if c.incumbent else 0.0 for c in comp.candidates])
    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(pywraplp.MPSolverParameters.RELATIVE_MIP_GAP, 0.0)
    status = solver.Solve(params)
    if status == pywraplp.Solver.INFEASIBLE:
        return (
            Solution(frozenset(), frozenset(comp.failures), False)
            if soft
            else solve_pywraplp(comp, eta, settings, True)
        )
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        return Solution(frozenset(), frozenset(comp.failures), False)
    active = frozenset(cid for cid, v in x.items() if v.solution_value() > 0.5)
    uncovered = frozenset(req for req, u in slack.items() if u.solution_value() > 0.5)
    return Solution(active, uncovered, status == pywraplp.Solver.OPTIMAL)


def solve_mathopt(comp: Component, eta: float, settings: SolverSettings, soft: bool) -> Solution:
    from ortools.math_opt.python import mathopt

    solver_type = {
        "mathopt_cp_sat": mathopt.SolverType.CP_SAT,
        "mathopt_gscip": mathopt.SolverType.GSCIP,
        "mathopt_highs": mathopt.SolverType.HIGHS,
    }[settings.backend]
    model = mathopt.Model(name="ilp_merge")
    x = {c.id: model.add_binary_variable(name=f"x_{k}") for k, c in enumerate(comp.candidates)}
    terms = [c.cost * x[c.id] for c in comp.candidates]
    for k, ((i, j), value) in enumerate(comp.overlaps):
        if eta * value <= 0:
            continue
        z = model.add_binary_variable(name=f"z_{k}")
        model.add_linear_constraint(z <= x[i])
        model.add_linear_constraint(z <= x[j])
        model.add_linear_constraint(z >= x[i] + x[j] - 1)
        terms.append(eta * value * z)
    for i, j in comp.conflicts:
        model.add_linear_constraint(x[i] + x[j] <= 1)
    resolvers: dict[str, list] = defaultdict(list)
    for c in comp.candidates:
        for req in c.resolves:
            resolvers[req].append(x[c.id])
    slack = {}
    big = sum(c.cost for c in comp.candidates) + eta * len(comp.overlaps) + 1.0
    for req in comp.failures:
        if soft:
            slack[req] = model.add_binary_variable(name=f"u_{req}")
            terms.append(big * slack[req])
            model.add_linear_constraint(mathopt.fast_sum(resolvers[req]) + slack[req] >= 1)
        else:
            model.add_linear_constraint(mathopt.fast_sum(resolvers[req]) >= 1)
    model.minimize(mathopt.fast_sum(terms))
    # OR-Tools 9.15's MathOpt HiGHS interface rejects a thread count (InvalidArgument), so it gets none
    highs = solver_type == mathopt.SolverType.HIGHS
    params = mathopt.SolveParameters(
        time_limit=_timedelta(settings.time_limit_seconds),
        threads=None if highs else settings.num_workers,
        relative_gap_tolerance=0.0,
    )
    model_params = None
    if settings.use_hint and not highs:
        hint = mathopt.SolutionHint(
            variable_values={x[c.id]: 1.0 if c.incumbent else 0.0 for c in comp.candidates}
        )
        model_params = mathopt.ModelSolveParameters(solution_hints=[hint])
    result = mathopt.solve(model, solver_type, params=params, model_params=model_params)
    reason = result.termination.reason
    if reason in (mathopt.TerminationReason.INFEASIBLE, mathopt.TerminationReason.INFEASIBLE_OR_UNBOUNDED):
        return (
            Solution(frozenset(), frozenset(comp.failures), False)
            if soft
            else solve_mathopt(comp, eta, settings, True)
        )
    if not result.has_primal_feasible_solution():
        return Solution(frozenset(), frozenset(comp.failures), False)
    values = result.variable_values()
    active = frozenset(cid for cid, v in x.items() if values[v] > 0.5)
    uncovered = frozenset(req for req, u in slack.items() if values[u] > 0.5)
    return Solution(active, uncovered, reason == mathopt.TerminationReason.OPTIMAL)


def _timedelta(seconds: float):
    from datetime import timedelta

    return timedelta(seconds=seconds)


_SUBSETS: dict[int, np.ndarray] = {}


def solve_enumerate(comp: Component, eta: float) -> Solution | None:
    """Exact minimum by enumerating all 2^n choices of a small component (numpy, no solver start-up cost).

    Returns None when no choice covers every requirement (conflicts): the solver's slack model then decides
    what stays uncovered. Ties go to the first choice in binary order, so the answer is deterministic.
    """
    n = len(comp.candidates)
    if n not in _SUBSETS:
        _SUBSETS[n] = ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1).astype(bool)
    choices = _SUBSETS[n]
    index = {c.id: k for k, c in enumerate(comp.candidates)}
    objective = choices @ np.array([c.cost for c in comp.candidates])
    for (i, j), value in comp.overlaps:
        objective = objective + eta * value * (choices[:, index[i]] & choices[:, index[j]])
    feasible = np.ones(len(choices), dtype=bool)
    for i, j in comp.conflicts:
        feasible &= ~(choices[:, index[i]] & choices[:, index[j]])
    resolves = np.zeros((n, len(comp.failures)), dtype=bool)
    column = {req: k for k, req in enumerate(comp.failures)}
    for c in comp.candidates:
        for req in c.resolves:
            if req in column:
                resolves[index[c.id], column[req]] = True
    feasible &= (choices.astype(np.int32) @ resolves.astype(np.int32) > 0).all(axis=1)
    if not feasible.any():
        return None
    best = int(np.argmin(np.where(feasible, objective, np.inf)))
    return Solution(
        frozenset(c.id for k, c in enumerate(comp.candidates) if choices[best, k]), frozenset(), True
    )


def solve_singleton(comp: Component) -> Solution:
    """One candidate, no pairwise terms: keep it exactly when it resolves a requirement (its cost is ≥ 0)."""
    (c,) = comp.candidates
    return Solution(frozenset({c.id}) if comp.failures else frozenset(), frozenset(), True)
