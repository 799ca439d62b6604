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
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypeAlias

import numpy as np

from scars.synthesis.dsl.ast import (
    FLIPPED_OPS,
    NAMED_PREDICATES,
    Action,
    And,
    Compare,
    CompareFeatures,
    ForbidEnvAction,
    ForbidToolArg,
    ForbidToolCall,
    Guard,
    InClass,
    Named,
    Rule,
    Value,
)
from scars.synthesis.dsl.cost import DEFAULT_LAMBDAS, Lambdas, description_length
from scars.synthesis.dsl.semantics import Classes, Context, fires, mask_key
from scars.synthesis.errors import ConfigError
from scars.synthesis.failure import Failure

if TYPE_CHECKING:  # OR-Tools loads when a merge solves a component, not when the module is imported
    from ortools.sat.python import cp_model

MergeMode: TypeAlias = Literal["ilp", "append"]
Backend: TypeAlias = Literal[
    "cp_sat", "scip", "cbc", "highs", "mathopt_cp_sat", "mathopt_gscip", "mathopt_highs"
]
BACKENDS: tuple[str, ...] = (
    "cp_sat",
    "scip",
    "cbc",
    "highs",
    "mathopt_cp_sat",
    "mathopt_gscip",
    "mathopt_highs",
)
MERGE_MODES: tuple[str, ...] = ("ilp", "append")

# CP-SAT optimises integers: costs and η·Overlap are scaled by this factor and rounded. With costs of order
# 10–100 the rounding moves any objective by less than n·5e-7, far below the smallest cost difference.
OBJECTIVE_SCALE = 1_000_000


# ---------------------------------------------------------------------------------------------------------------
# The problem and the result
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MergeCandidate:
    """One σ_i ∈ S_t ∪ {ΔS*}: its id, control plane, cost C(σ_i) and the failure requirements it resolves.

    ``incumbent`` marks members of S_t (active before this merge): dropping one is a retirement; dropping a new
    candidate is a rejection.
    """

    id: str
    rule: Rule | None
    cost: float
    resolves: frozenset[str]
    incumbent: bool = False


@dataclass(frozen=True, slots=True)
class MergeProblem:
    """The integer program of SPEC §5, already reduced to numbers.

    failures:  the requirement ids every one of which must be resolved (see the module docstring).
    overlaps:  ((id_i, id_j), Overlap) for co-firing pairs only, id_i < id_j, Overlap > 0.
    conflicts: (id_i, id_j) pairs never both active, id_i < id_j.
    """

    candidates: tuple[MergeCandidate, ...]
    failures: tuple[str, ...]
    overlaps: tuple[tuple[tuple[str, str], float], ...] = ()
    conflicts: tuple[tuple[str, str], ...] = ()
    eta: float = 1.0

    def __post_init__(self) -> None:
        ids = [c.id for c in self.candidates]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ConfigError(f"duplicate candidate ids {dup[:5]}; every candidate needs a distinct id")
        known = set(ids)
        for (i, j), value in self.overlaps:
            if i not in known or j not in known or i == j:
                raise ConfigError(f"overlap pair ({i!r}, {j!r}) must name two distinct candidates")
            if not (0.0 <= value <= 1.0) or math.isnan(value):
                raise ConfigError(f"Overlap({i!r}, {j!r}) = {value!r}; expected a value in [0, 1]")
        for i, j in self.conflicts:
            if i not in known or j not in known or i == j:
                raise ConfigError(f"conflict pair ({i!r}, {j!r}) must name two distinct candidates")
        for c in self.candidates:
            if not (c.cost >= 0.0) or math.isinf(c.cost):
                raise ConfigError(f"candidate {c.id!r} has cost {c.cost!r}; expected a finite value >= 0")
        if not (self.eta >= 0.0) or math.isinf(self.eta):
            raise ConfigError(f"eta = {self.eta!r}; expected a finite value >= 0")

    @property
    def previous_active(self) -> frozenset[str]:
        return frozenset(c.id for c in self.candidates if c.incumbent)


@dataclass(frozen=True, slots=True)
class MergeResult:
    """S_{t+1}: the active ids, the incumbents retired and the new candidates rejected by this merge.

    objective:  Σ C + η·Σ Overlap over the active set, in the problem's own units (recomputed, not scaled).
    optimal:    the solver proved optimality of every component (append mode: trivially true, nothing chosen).
    uncovered:  requirements the active set does not resolve (no resolver, or blocked by conflicts).
    components: how many sub-problems reached a solver after decomposition and exact reductions.
    """

    active: frozenset[str]
    retired: frozenset[str]
    rejected: frozenset[str]
    objective: float
    optimal: bool
    solver: str
    wall_seconds: float
    uncovered: frozenset[str]
    mode: str = "ilp"
    components: int = 1

    @property
    def feasible(self) -> bool:
        return not self.uncovered


@dataclass(frozen=True, slots=True)
class SolverSettings:
    """How the integer program is solved. The default is the fastest measured setting (benchmarks/results/merge.md).

    backend:             "cp_sat" (OR-Tools CP-SAT), "scip" / "cbc" / "highs" (MIP through pywraplp) or
                         "mathopt_cp_sat" / "mathopt_gscip" / "mathopt_highs" (through MathOpt).
    num_workers:         solver threads (CP-SAT ``num_workers``; MIP threads where the back-end honours them).
    time_limit_seconds:  per solve; a component that hits it is reported with ``optimal=False``.
    decompose:           solve independent components (linked by shared requirements, overlaps or conflicts)
                         separately; singleton components are decided without a solver.
    cp_sat_presolve, cp_sat_symmetry_level, cp_sat_linearization_level: CP-SAT parameters (None = its default).
    use_hint:            start CP-SAT / MIP from the previous active set (incumbents 1, new candidates 0).
    reduce:              exact reductions before the solver (forced resolvers, useless candidates; see ``_reduce``).
    enumerate_up_to:     components with at most this many candidates are decided by exact enumeration of all
                         2^n choices (vectorised): cheaper than any solver's start-up. 0 = always the back-end.
    """

    backend: Backend = "cp_sat"
    num_workers: int = 1
    time_limit_seconds: float = 30.0
    decompose: bool = True
    cp_sat_presolve: bool = False
    cp_sat_symmetry_level: int | None = None
    cp_sat_linearization_level: int | None = None
    use_hint: bool = True
    reduce: bool = True
    enumerate_up_to: int = 12

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(
                f"unknown merge backend {self.backend!r}; expected one of {', '.join(BACKENDS)}"
            )
        if self.num_workers < 1:
            raise ConfigError(f"num_workers = {self.num_workers!r}; expected an integer >= 1")
        if not 0 <= self.enumerate_up_to <= 16:
            raise ConfigError(
                f"enumerate_up_to = {self.enumerate_up_to!r}; expected 0..16 (2^n choices are enumerated)"
            )
        if not self.time_limit_seconds > 0:
            raise ConfigError(f"time_limit_seconds = {self.time_limit_seconds!r}; expected a value > 0")


# ---------------------------------------------------------------------------------------------------------------
# Building the problem from DSL rules and recorded evidence
# ---------------------------------------------------------------------------------------------------------------

RecordedContexts: TypeAlias = Iterable[tuple[Context, Sequence[Action]]]


def requirement_ids(failure_id: str, failed_actions: Sequence[Action]) -> tuple[str, ...]:
    """The coverage requirements of one failure: its id when |F| = 1, ``id[j]`` per failed action otherwise."""
    if len(failed_actions) == 1:
        return (failure_id,)
    return tuple(f"{failure_id}[{j}]" for j in range(len(failed_actions)))


def build_merge_problem(
    rules_with_ids: Iterable[tuple[str, Rule]],
    failures: Iterable[Failure],
    contexts: RecordedContexts = (),
    classes: Classes | None = None,
    lambdas: Lambdas | None = None,
    *,
    eta: float = 1.0,
    previous_active: Iterable[str] = (),
    cost_fn: Callable[[Rule], float] | None = None,
    extra_conflicts: Iterable[tuple[str, str]] = (),
) -> MergeProblem:
    """Turn S_t ∪ {ΔS*} and the recorded evidence into a ``MergeProblem`` (SPEC §5; definitions in the module doc).

    rules_with_ids:   (scar id, rule) for every incumbent and every new candidate.
    failures:         the recorded failures D⁻ that must stay covered (each ``Failure`` by its ``id``).
    contexts:         recorded (q, admissible actions) pairs (D⁺ contexts, Q_safe, failure contexts): the pairs on
                      which Overlap and contradictions are measured.
    lambdas:          (λ_tok, λ_ast, λ_pred) of C(σ) (SPEC §2); None = the DSL's defaults.
    cost_fn:          overrides C(σ) (e.g. a cached cost); default ``synthesis.dsl.description_length``.
    previous_active:  the ids of S_t (incumbents).
    """
    rules = list(rules_with_ids)
    ids = [rid for rid, _ in rules]
    if len(set(ids)) != len(ids):
        raise ConfigError(
            f"duplicate rule ids in rules_with_ids: {sorted({i for i in ids if ids.count(i) > 1})[:5]}"
        )
    incumbents = frozenset(previous_active)
    if cost_fn is None:
        weights = lambdas if lambdas is not None else DEFAULT_LAMBDAS
        cost_fn = lambda r: description_length(r, weights)  # noqa: E731

    # Recorded pairs P, indexed by mask key so that a rule is only evaluated on actions its mask can cover.
    pairs: list[tuple[Context, Action]] = []
    context_pairs: list[list[int]] = []  # per recorded context: the indices of its control pairs
    requirement_pair: dict[str, int] = {}
    by_key: dict[tuple[str, str], list[int]] = defaultdict(list)

    def add_pair(q: Context, a: Action) -> int:
        pairs.append((q, a))
        index = len(pairs) - 1
        by_key[(a.kind, a.name)].append(index)
        return index

    for failure in failures:
        fid, q, failed = failure.id, failure.q, failure.F
        if any(req in requirement_pair for req in requirement_ids(fid, failed)):
            raise ConfigError(f"failure id {fid!r} appears twice; every recorded failure needs a distinct id")
        for req, a in zip(requirement_ids(fid, failed), failed, strict=True):
            if not a.is_control:
                raise ConfigError(
                    f"failure {fid!r} lists {a.kind} action {a.name!r}; only control actions (env, tool) can be masked"
                )
            requirement_pair[req] = add_pair(q, a)
    for q, actions in contexts:
        context_pairs.append([add_pair(q, a) for a in actions if a.is_control])

    fired: dict[str, frozenset[int]] = {}
    for rid, rule in rules:
        key = mask_key(rule.mask)
        fired[rid] = frozenset(
            p for p in by_key.get(key, ()) if fires(rule, pairs[p][0], pairs[p][1], classes)
        )

    firing_on: dict[int, list[str]] = defaultdict(list)
    for rid in ids:
        for p in fired[rid]:
            firing_on[p].append(rid)

    rule_of = dict(rules)
    overlaps: dict[tuple[str, str], float] = {}
    for rids in firing_on.values():
        for a_i in range(len(rids)):
            for a_j in range(a_i + 1, len(rids)):
                i, j = sorted((rids[a_i], rids[a_j]))
                if (i, j) not in overlaps:
                    both = len(fired[i] & fired[j])
                    overlaps[(i, j)] = both / (len(fired[i]) + len(fired[j]) - both)

    conflicts: set[tuple[str, str]] = set()
    for members in context_pairs:
        admissible = frozenset(members)
        if len(admissible) < 2:
            continue
        masking = defaultdict(set)
        for p in members:
            for rid in firing_on.get(p, ()):
                masking[rid].add(p)
        partial = [(rid, frozenset(m)) for rid, m in masking.items() if m != admissible]
        for a_i in range(len(partial)):
            for a_j in range(a_i + 1, len(partial)):
                (ri, mi), (rj, mj) = partial[a_i], partial[a_j]
                if mi | mj == admissible:
                    conflicts.add(tuple(sorted((ri, rj))))  # type: ignore[arg-type]
    for i, j in extra_conflicts:
        if i in rule_of and j in rule_of and i != j:
            conflicts.add(tuple(sorted((i, j))))  # type: ignore[arg-type]

    candidates = tuple(
        MergeCandidate(
            id=rid,
            rule=rule,
            cost=float(cost_fn(rule)),
            resolves=frozenset(req for req, p in requirement_pair.items() if p in fired[rid]),
            incumbent=rid in incumbents,
        )
        for rid, rule in rules
    )
    return MergeProblem(
        candidates=candidates,
        failures=tuple(requirement_pair),
        overlaps=tuple(sorted(overlaps.items())),
        conflicts=tuple(sorted(conflicts)),
        eta=eta,
    )


# ---------------------------------------------------------------------------------------------------------------
# Structural co-firing
# ---------------------------------------------------------------------------------------------------------------


def _mask_literals(rule: Rule) -> list[tuple[str, str, Value]]:
    """The equalities a candidate action must satisfy for the mask to cover it."""
    match rule.mask:
        case ForbidToolCall(tool_id):
            return [
                ("action.kind", "==", "tool"),
                ("action.name", "==", tool_id),
                ("action.tool", "==", tool_id),
            ]
        case ForbidToolArg(tool_id, arg_name, value):
            return [
                ("action.kind", "==", "tool"),
                ("action.name", "==", tool_id),
                ("action.tool", "==", tool_id),
                (f"action.{arg_name}", "==", value),
            ]
        case ForbidEnvAction(action_id):
            return [
                ("action.kind", "==", "env"),
                ("action.name", "==", action_id),
                ("action.verb", "==", action_id),
            ]
    raise TypeError(f"not an action mask: {rule.mask!r}")


def _conjuncts(guard: Guard) -> list[Guard]:
    """Top-level conjuncts of a guard; an ``or`` is kept whole (and treated as unconstrained)."""
    if isinstance(guard, And):
        out: list[Guard] = []
        for g in guard.operands:
            out.extend(_conjuncts(g))
        return out
    return [guard]


def _literals(
    rule: Rule,
) -> tuple[list[tuple[str, str, Value]], list[tuple[str, str]], list[tuple[str, str, str]]]:
    comparisons = _mask_literals(rule)
    memberships: list[tuple[str, str]] = []
    relations: list[tuple[str, str, str]] = []
    for g in _conjuncts(rule.guard):
        match g:
            case Compare(feature, op, value):
                comparisons.append((feature, op, value))
            case CompareFeatures(feature, op, other):
                # one orientation per pair of features, so `a < b` and `b < a` meet as `a < b`, `a > b`
                relations.append(
                    (feature, op, other) if feature <= other else (other, FLIPPED_OPS[op], feature)
                )
            case Named(name, value):
                comparisons.append((NAMED_PREDICATES[name], "==", value))
            case InClass(feature, class_name):
                memberships.append((feature, class_name))
    return comparisons, memberships, relations


# The outcomes of comparing two numbers (less, equal, greater) an op allows. An ordering op needs numbers; an
# ``==``/``!=`` of non-numbers still excludes its opposite, so intersecting these sets is sound for every value.
_OUTCOMES = {"<": {-1}, "<=": {-1, 0}, ">": {1}, ">=": {0, 1}, "==": {0}, "!=": {-1, 1}}


def _relations_satisfiable(
    relations: Sequence[tuple[str, str, str]], bounds: dict[str, tuple[float, float]]
) -> bool:
    """Can the relational conjuncts hold together, given the numeric range each feature's literals allow?
    Sound for ``False``: ``a < b`` with ``a > b``, ``a == b`` with ``a != b``, or ``a < b`` where the literals
    put every a at or above every b; anything unsure answers True."""
    outcomes: dict[tuple[str, str], set[int]] = {}
    for left, op, right in relations:
        if left == right:
            if op in ("<", ">"):
                return False
            continue
        allowed = outcomes.setdefault((left, right), {-1, 0, 1})
        allowed &= _OUTCOMES[op]
        if not allowed:
            return False
        if left in bounds and right in bounds:
            (lo_a, hi_a), (lo_b, hi_b) = bounds[left], bounds[right]
            impossible = {
                "<": lo_a >= hi_b,
                "<=": lo_a > hi_b,
                ">": hi_a <= lo_b,
                ">=": hi_a < lo_b,
                "==": lo_a > hi_b or lo_b > hi_a,
                "!=": False,
            }[op]
            if impossible:
                return False
    return True


def _is_number(v: object) -> bool:
    return (
        isinstance(v, int | float)
        and not isinstance(v, bool)
        and not (isinstance(v, float) and math.isnan(v))
    )


def _satisfiable(
    comparisons: list[tuple[str, str, Value]],
    memberships: list[tuple[str, str]],
    classes,
    relations: Sequence[tuple[str, str, str]] = (),
) -> bool:
    """Can one value per feature satisfy all these literals (and relations between features)? Sound for
    ``False``: unsure cases answer True."""
    bounds: dict[str, tuple[float, float]] = {}  # the numeric range a feature's literals confine it to
    by_feature: dict[str, list[tuple[str, Value]]] = defaultdict(list)
    for feature, op, value in comparisons:
        by_feature[feature].append((op, value))
    for feature, lits in by_feature.items():
        equal = {(type(v) is bool, v) for op, v in lits if op == "=="}
        if len(equal) > 1:
            return False
        lo, lo_strict, hi, hi_strict = -math.inf, False, math.inf, False
        for op, v in lits:
            if op in ("<", "<=", ">", ">=") and _is_number(v):
                if op in (">", ">=") and (v > lo or (v == lo and op == ">")):
                    lo, lo_strict = v, op == ">"
                if op in ("<", "<=") and (v < hi or (v == hi and op == "<")):
                    hi, hi_strict = v, op == "<"
        ranged = lo > -math.inf or hi < math.inf
        if lo > hi or (lo == hi and (lo_strict or hi_strict)):
            return False
        if ranged:
            bounds[feature] = (lo, hi)
        if equal:
            (_, v) = next(iter(equal))
            if _is_number(v):
                bounds[feature] = (v, v)
            if any(op == "!=" and (type(w) is bool) == (type(v) is bool) and w == v for op, w in lits):
                return False
            if ranged:
                if not _is_number(v):
                    return False
                if v < lo or v > hi or (v == lo and lo_strict) or (v == hi and hi_strict):
                    return False
            for f, cname in memberships:
                members = (classes or {}).get(cname)
                if f == feature and members is not None and v not in members:
                    return False
    if classes:
        by_class_feature: dict[str, list[frozenset]] = defaultdict(list)
        for f, cname in memberships:
            if cname in classes:
                by_class_feature[f].append(frozenset(classes[cname]))
        for sets in by_class_feature.values():
            if not frozenset.intersection(*sets):
                return False
    return _relations_satisfiable(relations, bounds)


def can_co_fire(rule_i: Rule, rule_j: Rule, classes: Classes | None = None) -> bool:
    """Can σ_i and σ_j fire on the same (q, a)? A cheap structural test, sound when it answers ``False``.

    Both rules' masks and the top-level conjuncts of both guards are put together; the pair cannot co-fire when
    those literals demand two different values of one feature (``tool_is("a")`` vs ``tool_is("b")``,
    ``forbid_env_action("clean")`` vs ``forbid_env_action("move")``, ``obj_type == "cup"`` vs ``obj_type ==
    "plate"``), an empty numeric range (``level < 10`` vs ``level > 20``), a value outside a required class, or
    disjoint classes, or relations between features that contradict each other or those ranges
    (``action.amount > share`` vs ``action.amount <= share``). Disjunctions are not analysed (treated as
    satisfiable).
    """
    ci, mi, ri = _literals(rule_i)
    cj, mj, rj = _literals(rule_j)
    return _satisfiable(ci + cj, mi + mj, classes, ri + rj)


# ---------------------------------------------------------------------------------------------------------------
# Solving
# ---------------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Component:
    candidates: list[MergeCandidate]
    failures: list[str]
    overlaps: list[tuple[tuple[str, str], float]] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Solution:
    active: frozenset[str]
    uncovered: frozenset[str]
    optimal: bool


def _component_of(problem: MergeProblem) -> _Component:
    """The whole problem as one component, without requirements no candidate resolves (reported separately)."""
    resolvable = {req for c in problem.candidates for req in c.resolves}
    failures = [req for req in problem.failures if req in resolvable]
    return _Component(list(problem.candidates), failures, list(problem.overlaps), list(problem.conflicts))


def _split(comp: _Component) -> list[_Component]:
    """Independent sub-problems: candidates linked by a shared requirement, an overlap or a conflict."""
    parent = {c.id: c.id for c in comp.candidates}

    def find(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: str, j: str) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    wanted = set(comp.failures)
    first_resolver: dict[str, str] = {}
    for c in comp.candidates:
        for req in c.resolves:
            if req not in wanted:
                continue
            if req in first_resolver:
                union(first_resolver[req], c.id)
            else:
                first_resolver[req] = c.id
    for (i, j), _ in comp.overlaps:
        union(i, j)
    for i, j in comp.conflicts:
        union(i, j)

    groups: dict[str, _Component] = {}
    for c in comp.candidates:
        groups.setdefault(find(c.id), _Component([], [])).candidates.append(c)
    for req in comp.failures:
        groups[find(first_resolver[req])].failures.append(req)
    for item in comp.overlaps:
        groups[find(item[0][0])].overlaps.append(item)
    for pair in comp.conflicts:
        groups[find(pair[0])].conflicts.append(pair)
    return list(groups.values())


def _reduce(comp: _Component, eta: float) -> tuple[frozenset[str], _Component] | None:
    """Exact reductions before the solver; ``None`` when they meet a contradiction (the solver then decides).

    Repeated to a fixed point, each preserving every optimal solution's value:
    * a requirement with a single remaining resolver forces it on (x_i = 1), and its conflict partners off;
    * a requirement resolved by a forced candidate is met and leaves the model;
    * a candidate that resolves no remaining requirement is off: with costs and overlaps ≥ 0 it can only add.
    Overlaps with forced candidates become linear costs of their partners. Returns (forced on, residual).
    """
    resolvers: dict[str, set[str]] = {req: set() for req in comp.failures}
    for c in comp.candidates:
        for req in c.resolves:
            if req in resolvers:
                resolvers[req].add(c.id)
    partners: dict[str, set[str]] = defaultdict(set)
    for i, j in comp.conflicts:
        partners[i].add(j)
        partners[j].add(i)
    by_id = {c.id: c for c in comp.candidates}
    on: set[str] = set()
    off: set[str] = set()
    remaining = set(comp.failures)
    changed = True
    while changed:
        changed = False
        for req in list(remaining):
            if req not in remaining:
                continue
            live = resolvers[req] - off
            if live & on:
                remaining.discard(req)
                changed = True
                continue
            if not live:
                return None  # conflicts made this requirement unreachable: the solver reports it
            if len(live) == 1:
                (forced,) = live
                if partners[forced] & on:
                    return None
                on.add(forced)
                off |= partners[forced]
                remaining.discard(req)
                changed = True
        needed = {cid for req in remaining for cid in resolvers[req]}
        for c in comp.candidates:
            if c.id not in on and c.id not in off and c.id not in needed:
                off.add(c.id)
                changed = True
    extra_cost: dict[str, float] = defaultdict(float)
    overlaps = []
    for (i, j), value in comp.overlaps:
        if i in off or j in off:
            continue
        if i in on and j not in on:
            extra_cost[j] += eta * value
        elif j in on and i not in on:
            extra_cost[i] += eta * value
        elif i not in on and j not in on:
            overlaps.append(((i, j), value))
    free = [
        replace(by_id[c.id], cost=c.cost + extra_cost[c.id]) if extra_cost.get(c.id) else c
        for c in comp.candidates
        if c.id not in on and c.id not in off
    ]
    free_ids = {c.id for c in free}
    conflicts = [(i, j) for i, j in comp.conflicts if i in free_ids and j in free_ids]
    return frozenset(on), _Component(free, [r for r in comp.failures if r in remaining], overlaps, conflicts)


class _CpSatWorkspace:
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


def _solve_cp_sat(
    comp: _Component,
    eta: float,
    settings: SolverSettings,
    soft: bool,
    workspace: _CpSatWorkspace | None = None,
) -> _Solution:
    """CP-SAT. The linear constraints of SPEC §5 are posted as the equivalent clauses on Booleans
    (z ≤ x_i ⇔ z → x_i; z ≥ x_i + x_j − 1 ⇔ ¬x_i ∨ ¬x_j ∨ z; x_i + x_j ≤ 1 ⇔ ¬x_i ∨ ¬x_j), which CP-SAT
    propagates natively instead of re-deriving them in presolve."""
    from ortools.sat.python import cp_model

    workspace = workspace or _CpSatWorkspace()
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
            return _Solution(frozenset(), frozenset(comp.failures), False)
        return _solve_cp_sat(comp, eta, settings, True, workspace)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Solution(frozenset(), frozenset(comp.failures), False)
    active = frozenset(cid for cid, v in x.items() if solver.boolean_value(v))
    uncovered = frozenset(req for req, u in slack.items() if solver.boolean_value(u))
    return _Solution(active, uncovered, status == cp_model.OPTIMAL)


_PYWRAPLP_NAMES = {"scip": "SCIP", "cbc": "CBC", "highs": "HIGHS"}


def _solve_pywraplp(comp: _Component, eta: float, settings: SolverSettings, soft: bool) -> _Solution:
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
            _Solution(frozenset(), frozenset(comp.failures), False)
            if soft
            else _solve_pywraplp(comp, eta, settings, True)
        )
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        return _Solution(frozenset(), frozenset(comp.failures), False)
    active = frozenset(cid for cid, v in x.items() if v.solution_value() > 0.5)
    uncovered = frozenset(req for req, u in slack.items() if u.solution_value() > 0.5)
    return _Solution(active, uncovered, status == pywraplp.Solver.OPTIMAL)


def _solve_mathopt(comp: _Component, eta: float, settings: SolverSettings, soft: bool) -> _Solution:
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
            _Solution(frozenset(), frozenset(comp.failures), False)
            if soft
            else _solve_mathopt(comp, eta, settings, True)
        )
    if not result.has_primal_feasible_solution():
        return _Solution(frozenset(), frozenset(comp.failures), False)
    values = result.variable_values()
    active = frozenset(cid for cid, v in x.items() if values[v] > 0.5)
    uncovered = frozenset(req for req, u in slack.items() if values[u] > 0.5)
    return _Solution(active, uncovered, reason == mathopt.TerminationReason.OPTIMAL)


def _timedelta(seconds: float):
    from datetime import timedelta

    return timedelta(seconds=seconds)


_SUBSETS: dict[int, np.ndarray] = {}


def _solve_enumerate(comp: _Component, eta: float) -> _Solution | None:
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
    return _Solution(
        frozenset(c.id for k, c in enumerate(comp.candidates) if choices[best, k]), frozenset(), True
    )


def _solve_singleton(comp: _Component) -> _Solution:
    """One candidate, no pairwise terms: keep it exactly when it resolves a requirement (its cost is ≥ 0)."""
    (c,) = comp.candidates
    return _Solution(frozenset({c.id}) if comp.failures else frozenset(), frozenset(), True)


def _objective(problem: MergeProblem, active: frozenset[str]) -> float:
    cost = sum(c.cost for c in problem.candidates if c.id in active)
    overlap = sum(v for (i, j), v in problem.overlaps if i in active and j in active)
    return cost + problem.eta * overlap


def _uncovered(problem: MergeProblem, active: frozenset[str]) -> frozenset[str]:
    covered: set[str] = set()
    for c in problem.candidates:
        if c.id in active:
            covered |= c.resolves
    return frozenset(problem.failures) - covered


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
            objective=_objective(problem, active),
            optimal=True,
            solver="append",
            wall_seconds=time.perf_counter() - start,
            uncovered=_uncovered(problem, active),
            mode="append",
            components=0,
        )

    solve = {
        "cp_sat": _solve_cp_sat,
        "scip": _solve_pywraplp,
        "cbc": _solve_pywraplp,
        "highs": _solve_pywraplp,
        "mathopt_cp_sat": _solve_mathopt,
        "mathopt_gscip": _solve_mathopt,
        "mathopt_highs": _solve_mathopt,
    }[settings.backend]
    whole = _component_of(problem)
    components = _split(whole) if settings.decompose else [whole]
    active: set[str] = set()
    uncovered: set[str] = set()
    optimal = True
    to_solve: list[_Component] = []
    for comp in components:
        if not comp.failures:
            continue  # nothing to cover: every x_i = 0 is optimal (costs and overlaps are ≥ 0)
        reduced = _reduce(comp, problem.eta) if settings.reduce else None
        if reduced is None:
            to_solve.append(comp)
            continue
        forced, residual = reduced
        active |= forced
        if residual.failures:
            # the reductions reached a fixed point, so the residual's parts need only the solver
            to_solve.extend(_split(residual) if settings.decompose else [residual])
    workspace = _CpSatWorkspace() if settings.backend == "cp_sat" else None
    for comp in to_solve:
        solution = None
        if len(comp.candidates) == 1:
            solution = _solve_singleton(comp)
        elif len(comp.candidates) <= settings.enumerate_up_to:
            solution = _solve_enumerate(comp, problem.eta)
        if solution is None and workspace is not None:
            solution = _solve_cp_sat(comp, problem.eta, settings, False, workspace)
        elif solution is None:
            solution = solve(comp, problem.eta, settings, False)
        active |= solution.active
        uncovered |= solution.uncovered
        optimal &= solution.optimal
    frozen_active = frozenset(active)
    # Requirements no candidate resolves never reach a component: the final check reports them too.
    uncovered_all = _uncovered(problem, frozen_active) | frozenset(uncovered)
    return MergeResult(
        active=frozen_active,
        retired=frozenset(c.id for c in problem.candidates if c.incumbent and c.id not in frozen_active),
        rejected=frozenset(c.id for c in problem.candidates if not c.incumbent and c.id not in frozen_active),
        objective=_objective(problem, frozen_active),
        optimal=optimal,
        solver=settings.backend,
        wall_seconds=time.perf_counter() - start,
        uncovered=uncovered_all,
        mode="ilp",
        components=len(to_solve),
    )
