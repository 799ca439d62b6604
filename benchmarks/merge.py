"""Benchmark of ILP-Merge (paper §4.3, SPEC §5): OR-Tools back-ends and settings on generated merge problems.

A generated problem looks like the self-schema of a long run: failures come in clusters (one cluster = one
failure pattern, e.g. "wet dishware into the cabinet"), each cluster has cheap instance rules (one object type)
and a few costlier class rules (a whole equivalence class) that cover several failures at once; rules of a cluster
overlap (Jaccard of what they mask) and some pairs are contradictory. A few rules bridge two clusters, so
components are not trivially tiny. A quarter of the candidates are incumbents (the previous active set).

Usage:  python benchmarks/merge.py [--quick]
Prints one line per measured setting, then, last, one JSON line:
{"n": 1000, "seconds": …, "optimal": true, "n5000_seconds": …, "backends": {…}}
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from scars.synthesis.merge import MergeCandidate, MergeProblem, SolverSettings, merge  # noqa: E402


def generate_problem(n: int, rng: np.random.Generator, *, eta: float = 2.0) -> MergeProblem:
    """A merge problem with n candidates in clusters of 4–16, each failure resolved by 1–4 candidates."""
    candidates: list[dict] = []
    failures: list[str] = []
    overlaps: dict[tuple[str, str], float] = {}
    conflicts: set[tuple[str, str]] = set()
    cluster = 0
    previous_ids: list[str] = []
    while len(candidates) < n:
        size = int(min(rng.integers(4, 17), n - len(candidates)))
        n_fail = max(1, int(rng.integers(max(1, size // 2), size + 2)))
        fids = [f"f{cluster}_{k}" for k in range(n_fail)]
        failures.extend(fids)
        ids = [f"c{cluster}_{k}" for k in range(size)]
        n_class = max(1, size // 5)
        resolves: list[set[str]] = []
        for k in range(size):
            if k < n_class:  # class rule: covers many failures of the pattern, costs more
                share = rng.uniform(0.4, 1.0)
                chosen = {f for f in fids if rng.random() < share}
                cost = float(rng.uniform(14.0, 26.0))
            else:  # instance rule: one or two failures, cheap
                chosen = set(
                    rng.choice(fids, size=int(min(len(fids), rng.integers(1, 3))), replace=False).tolist()
                )
                cost = float(rng.uniform(8.0, 14.0))
            resolves.append(chosen)
            candidates.append(
                {"id": ids[k], "cost": cost, "resolves": chosen, "incumbent": rng.random() < 0.25}
            )
        # every failure keeps at least one instance resolver
        for f in fids:
            if not any(f in r for r in resolves[n_class:]) and size > n_class:
                k = int(rng.integers(n_class, size))
                resolves[k].add(f)
        # overlaps: Jaccard of resolved failures plus some shared off-failure contexts
        for a in range(size):
            for b in range(a + 1, size):
                both = len(resolves[a] & resolves[b])
                extra = int(rng.integers(0, 3)) if both else 0
                if both:
                    union = len(resolves[a] | resolves[b]) + extra
                    overlaps[(ids[a], ids[b])] = (both + extra) / (union + extra)
        # contradictory pairs among instance rules that share nothing
        for a in range(n_class, size):
            for b in range(a + 1, size):
                if not (resolves[a] & resolves[b]) and rng.random() < 0.08:
                    conflicts.add((ids[a], ids[b]))
        # a bridge rule now and then links this cluster with the previous one
        if previous_ids and rng.random() < 0.3:
            bridge = candidates[-1]
            bridge["resolves"] = set(bridge["resolves"]) | {f"f{cluster - 1}_0"}
        previous_ids = ids
        cluster += 1
    cands = tuple(
        MergeCandidate(c["id"], None, c["cost"], frozenset(c["resolves"]), c["incumbent"])
        for c in candidates[:n]
    )
    return MergeProblem(
        candidates=cands,
        failures=tuple(failures),
        overlaps=tuple(sorted((tuple(sorted(k)), v) for k, v in overlaps.items())),
        conflicts=tuple(sorted(tuple(sorted(p)) for p in conflicts)),
        eta=eta,
    )


def time_setting(problem: MergeProblem, settings: SolverSettings, repeats: int) -> dict:
    """Median wall and process-CPU seconds over ``repeats`` merges (CPU shows the cost when the machine is shared)."""
    wall, cpu, results = [], [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = merge(problem, settings=settings)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        results.append(result)
    return {
        "seconds": statistics.median(wall),
        "cpu_seconds": statistics.median(cpu),
        "optimal": all(r.optimal for r in results),
        "objective": results[0].objective,
        "active": len(results[0].active),
        "uncovered": len(results[0].uncovered),
        "components": results[0].components,
    }


LIMIT = (
    10.0  # seconds per solve: a monolithic model that cannot prove optimality within it is reported as such
)
MONO = {"decompose": False, "reduce": False, "enumerate_up_to": 0, "time_limit_seconds": LIMIT}
DEC = {"decompose": True, "reduce": True, "enumerate_up_to": 0, "time_limit_seconds": LIMIT}
SETTINGS: dict[str, SolverSettings] = {
    "default (cp_sat w1, decomposed, reduced, enum<=12, presolve off)": SolverSettings(),
    "cp_sat w2, decomposed, reduced, enum<=12": SolverSettings(num_workers=2),
    "cp_sat w1 decomposed+reduced, no enumeration": SolverSettings(**DEC),
    "cp_sat w1 decomposed, no reductions, no enumeration": SolverSettings(
        decompose=True, reduce=False, enumerate_up_to=0
    ),
    "cp_sat w1 decomposed+reduced, presolve on": SolverSettings(cp_sat_presolve=True, **DEC),
    "cp_sat w1 decomposed+reduced, presolve on, no hint": SolverSettings(
        cp_sat_presolve=True, use_hint=False, **DEC
    ),
    "cp_sat w1 monolithic (presolve on)": SolverSettings(num_workers=1, cp_sat_presolve=True, **MONO),
    "cp_sat w2 monolithic (presolve on)": SolverSettings(num_workers=2, cp_sat_presolve=True, **MONO),
    "cp_sat w8 monolithic (presolve on)": SolverSettings(num_workers=8, cp_sat_presolve=True, **MONO),
    "cp_sat w1 monolithic, presolve on, linearization 2": SolverSettings(
        num_workers=1, cp_sat_presolve=True, cp_sat_linearization_level=2, **MONO
    ),
    "cp_sat w1 monolithic, presolve on, symmetry 0": SolverSettings(
        num_workers=1, cp_sat_presolve=True, cp_sat_symmetry_level=0, **MONO
    ),
    "cp_sat w1 monolithic, presolve off, linearization 2": SolverSettings(
        num_workers=1, cp_sat_linearization_level=2, **MONO
    ),
    "scip (pywraplp) decomposed+reduced": SolverSettings("scip", **DEC),
    "scip (pywraplp) monolithic": SolverSettings("scip", **MONO),
    "cbc (pywraplp) decomposed+reduced": SolverSettings("cbc", **DEC),
    "cbc (pywraplp) monolithic": SolverSettings("cbc", **MONO),
    "highs (pywraplp) decomposed+reduced": SolverSettings("highs", **DEC),
    "highs (pywraplp) monolithic": SolverSettings("highs", **MONO),
    "mathopt cp_sat monolithic": SolverSettings("mathopt_cp_sat", **MONO),
    "mathopt gscip decomposed+reduced": SolverSettings("mathopt_gscip", **DEC),
    "mathopt gscip monolithic": SolverSettings("mathopt_gscip", **MONO),
    "mathopt highs monolithic": SolverSettings("mathopt_highs", **MONO),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the default setting (no comparison table)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(np.random.SeedSequence(args.seed))
    problems = {n: generate_problem(n, rng) for n in (1000, 5000)}
    default = SolverSettings()
    repeats = args.repeats
    table: dict[str, dict] = {}
    names = [] if args.quick else list(SETTINGS)
    for name in names:
        settings = SETTINGS[name]
        row = {}
        for n, problem in problems.items():
            # a setting that could not prove n = 1000 optimal, or took > 5 s, is not worth the 5,000 run
            if n == 5000 and (not row[1000]["optimal"] or row[1000]["seconds"] > 5.0):
                continue
            row[n] = time_setting(problem, settings, repeats)
        table[name] = row
        cells = "  ".join(
            f"n={n}: wall {r['seconds']:.3f}s cpu {r['cpu_seconds']:.3f}s opt={r['optimal']} obj={r['objective']:.3f}"
            for n, r in row.items()
        )
        print(f"{name:62s} {cells}", flush=True)
    final = {n: time_setting(problems[n], default, repeats) for n in (1000, 5000)}
    summary = {
        "n": 1000,
        "seconds": round(final[1000]["seconds"], 4),
        "optimal": final[1000]["optimal"] and final[5000]["optimal"],
        "n5000_seconds": round(final[5000]["seconds"], 4),
        "cpu_seconds": round(final[1000]["cpu_seconds"], 4),
        "n5000_cpu_seconds": round(final[5000]["cpu_seconds"], 4),
        "objective": round(final[1000]["objective"], 4),
        "n5000_objective": round(final[5000]["objective"], 4),
        "default": {
            "backend": default.backend,
            "num_workers": default.num_workers,
            "decompose": default.decompose,
        },
        "backends": {
            name: {
                str(n): {
                    "seconds": round(r["seconds"], 4),
                    "cpu": round(r["cpu_seconds"], 4),
                    "optimal": r["optimal"],
                }
                for n, r in row.items()
            }
            for name, row in table.items()
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
