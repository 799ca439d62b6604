"""The merge's model split into independent components (candidates linked by a shared requirement, an overlap
or a conflict), the exact reductions applied before any solver, and the objective and coverage of a selection."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from scars.synthesis.merge.model import MergeCandidate, MergeProblem


@dataclass(slots=True)
class Component:
    candidates: list[MergeCandidate]
    failures: list[str]
    overlaps: list[tuple[tuple[str, str], float]] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Solution:
    active: frozenset[str]
    uncovered: frozenset[str]
    optimal: bool


def component_of(problem: MergeProblem) -> Component:
    """The whole problem as one component, without requirements no candidate resolves (reported separately)."""
    resolvable = {req for c in problem.candidates for req in c.resolves}
    failures = [req for req in problem.failures if req in resolvable]
    return Component(list(problem.candidates), failures, list(problem.overlaps), list(problem.conflicts))


def split_component(comp: Component) -> list[Component]:
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

    groups: dict[str, Component] = {}
    for c in comp.candidates:
        groups.setdefault(find(c.id), Component([], [])).candidates.append(c)
    for req in comp.failures:
        groups[find(first_resolver[req])].failures.append(req)
    for item in comp.overlaps:
        groups[find(item[0][0])].overlaps.append(item)
    for pair in comp.conflicts:
        groups[find(pair[0])].conflicts.append(pair)
    return list(groups.values())


def reduce_component(comp: Component, eta: float) -> tuple[frozenset[str], Component] | None:
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
    return frozenset(on), Component(free, [r for r in comp.failures if r in remaining], overlaps, conflicts)


def objective(problem: MergeProblem, active: frozenset[str]) -> float:
    cost = sum(c.cost for c in problem.candidates if c.id in active)
    overlap = sum(v for (i, j), v in problem.overlaps if i in active and j in active)
    return cost + problem.eta * overlap


def uncovered_requirements(problem: MergeProblem, active: frozenset[str]) -> frozenset[str]:
    covered: set[str] = set()
    for c in problem.candidates:
        if c.id in active:
            covered |= c.resolves
    return frozenset(problem.failures) - covered
