"""The merge's problem and result (paper §4.3, SPEC §5): the candidates S_t ∪ {ΔS*} with their costs, the
recorded requirements, overlaps and conflicts, the solver settings, and what a merge returns."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from scars.synthesis.dsl.ast import (
    Action,
    Rule,
)
from scars.synthesis.dsl.cost import DEFAULT_LAMBDAS, Lambdas, description_length
from scars.synthesis.dsl.semantics import Classes, Context, fires, mask_key
from scars.synthesis.errors import ConfigError
from scars.synthesis.failure import Failure

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
    reduce:              exact reductions before the solver (forced resolvers, useless candidates; see ``reduce_component``).
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

    # Recorded pairs P, indexed by mask key so that a rule is only evaluated on actions its mask can cover. Only the
    # pairs some rule's mask can cover are kept: no other pair is ever masked, so the others change neither a
    # rule's firing set nor (by the count) an overlap, and a context holding one can host no conflict.
    pairs: list[tuple[Context, Action]] = []
    context_pairs: list[
        list[int]
    ] = []  # per recorded context every control action can be masked in: its pairs
    requirement_pair: dict[str, int] = {}
    by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
    maskable = {mask_key(rule.mask) for _, rule in rules}

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
        control = [a for a in actions if a.is_control]
        if all((a.kind, a.name) in maskable for a in control):
            context_pairs.append([add_pair(q, a) for a in control])
        else:
            for a in control:
                if (a.kind, a.name) in maskable:
                    add_pair(q, a)

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
