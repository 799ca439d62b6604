"""ILP-Merge (SPEC §5): problem building, every back-end against brute force, infeasibility, append mode."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scars.synthesis.dsl import Action, parse_rule
from scars.synthesis.errors import ConfigError
from scars.synthesis.failure import Failure, FailureSource
from scars.synthesis.merge import (
    BACKENDS,
    MergeCandidate,
    MergeProblem,
    SolverSettings,
    build_merge_problem,
    can_co_fire,
    merge,
    requirement_ids,
)

CLASSES = {"dishware": frozenset({"cup", "plate", "bowl"}), "tools": frozenset({"knife", "spatula"})}
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
GO_SINK = Action.env("go", recep="sinkbasin")


def _failures(records: dict) -> list[Failure]:
    """Failures named ``name`` (world), so that ``failure.id`` is ``ID(name)``."""
    return [
        Failure(q, tuple(actions), "test", FailureSource(world=name))
        for name, (q, actions) in records.items()
    ]


def ID(name: str) -> str:  # noqa: N802
    return f"{name}:0:0"


FAILURE_RECORDS = {"f_cup": ({"step": 3}, [CLEAN_CUP]), "f_plate": ({"step": 7}, [CLEAN_PLATE])}
FAILURES = _failures(FAILURE_RECORDS)
CONTEXTS = [({"step": 1}, [CLEAN_CUP, CLEAN_PLATE, GO_SINK])]


def _dishware_problem(**kwargs) -> MergeProblem:
    return build_merge_problem(
        [("cup", CUP), ("plate", PLATE), ("dishware", DISHWARE)],
        FAILURES,
        CONTEXTS,
        CLASSES,
        previous_active=["cup", "plate"],
        **kwargs,
    )


def test_build_resolves_overlap_and_costs():
    p = _dishware_problem()
    by_id = {c.id: c for c in p.candidates}
    assert by_id["cup"].resolves == {ID("f_cup")}
    assert by_id["plate"].resolves == {ID("f_plate")}
    assert by_id["dishware"].resolves == {ID("f_cup"), ID("f_plate")}
    assert by_id["cup"].incumbent and not by_id["dishware"].incumbent
    # the class rule costs more than one instance rule, less than two
    assert by_id["cup"].cost < by_id["dishware"].cost < by_id["cup"].cost + by_id["plate"].cost
    overlaps = dict(p.overlaps)
    # cup fires on 2 recorded pairs, dishware on 4, both on the same 2: Jaccard 2/4
    assert overlaps[("cup", "dishware")] == pytest.approx(0.5)
    assert ("cup", "plate") not in overlaps  # they never co-fire: no pairwise term
    assert p.failures == (ID("f_cup"), ID("f_plate"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_rule_subsumes_two_instance_rules(backend):
    """The cheaper class rule stays; the two instance rules it subsumes are retired (paper §4.3)."""
    p = _dishware_problem()
    r = merge(p, settings=SolverSettings(backend=backend, enumerate_up_to=0, reduce=False))
    assert r.active == {"dishware"}
    assert r.retired == {"cup", "plate"}
    assert r.rejected == frozenset()
    assert r.optimal and r.feasible
    assert r.objective == pytest.approx({c.id: c.cost for c in p.candidates}["dishware"])
    assert r.solver == backend


def test_instance_rules_kept_when_class_rule_is_dear():
    p = _dishware_problem(cost_fn=lambda rule: 100.0 if rule is DISHWARE else 10.0)
    r = merge(p)
    assert r.active == {"cup", "plate"}
    assert r.rejected == {"dishware"} and r.retired == frozenset()


def test_append_mode_keeps_everything():
    """No-ILP-Merge (§6.4): append without merging or garbage collection."""
    p = _dishware_problem()
    r = merge(p, merge_mode="append")
    assert r.active == {"cup", "plate", "dishware"}
    assert r.retired == frozenset() and r.rejected == frozenset()
    assert r.mode == "append"
    costs = {c.id: c.cost for c in p.candidates}
    assert r.objective == pytest.approx(sum(costs.values()) + p.eta * sum(v for _, v in p.overlaps))
    assert r.objective > merge(p).objective


def test_unresolvable_failure_is_reported_not_dropped():
    failures = _failures(
        {
            **FAILURE_RECORDS,
            "f_knife": ({"step": 9}, [Action.env("clean", obj_type="knife", recep="sinkbasin")]),
        }
    )
    p = build_merge_problem([("cup", CUP), ("plate", PLATE)], failures, CONTEXTS, CLASSES)
    r = merge(p)
    assert r.uncovered == {ID("f_knife")}
    assert not r.feasible
    assert r.active == {"cup", "plate"}  # the rest stays covered


@pytest.mark.parametrize("backend", ["cp_sat", "scip", "mathopt_gscip"])
def test_conflicts_blocking_coverage_are_reported(backend):
    """Two rules that must both be active but contradict: the merge covers what it can and says what it could not."""
    cands = (
        MergeCandidate("a", None, 1.0, frozenset({"f1"})),
        MergeCandidate("b", None, 1.0, frozenset({"f2"})),
        MergeCandidate("c", None, 5.0, frozenset({"f3"})),
    )
    p = MergeProblem(cands, ("f1", "f2", "f3"), conflicts=(("a", "b"),))
    for settings in (
        SolverSettings(backend=backend),
        SolverSettings(backend=backend, reduce=False, enumerate_up_to=0),
    ):
        r = merge(p, settings=settings)
        assert len(r.uncovered) == 1 and r.uncovered <= {"f1", "f2"}
        assert "c" in r.active and not {"a", "b"} <= r.active


def test_contradictory_masks_detected_on_recorded_context():
    """Two rules that together mask every admissible action of a recorded context never both stay active."""
    move = parse_rule('if holding == "cup" then forbid_env_action("move")')
    clean = parse_rule('if holding == "cup" then forbid_env_action("clean")')
    q = {"holding": "cup"}
    a_move, a_clean = Action.env("move", obj_type="cup"), Action.env("clean", obj_type="cup")
    failures = _failures({"f_move": (q, [a_move]), "f_clean": (q, [a_clean])})
    p = build_merge_problem([("m", move), ("c", clean)], failures, [(q, [a_move, a_clean])])
    assert p.conflicts == (("c", "m"),)
    r = merge(p)
    assert len(r.uncovered) == 1 and len(r.active) == 1


def test_multi_action_failure_needs_every_action_masked():
    """ReplayPass per failed action: F = {clean cup, clean plate} needs both masked."""
    failures = _failures({"f": ({"step": 1}, [CLEAN_CUP, CLEAN_PLATE])})
    assert requirement_ids("f", failures[0].F) == ("f[0]", "f[1]")
    p = build_merge_problem([("cup", CUP), ("plate", PLATE)], failures, (), CLASSES)
    assert merge(p).active == {"cup", "plate"}


def test_can_co_fire_structural():
    assert not can_co_fire(CUP, PLATE)  # obj_type == cup vs == plate
    assert can_co_fire(CUP, DISHWARE, CLASSES)
    knife = parse_rule('if action.obj_type == "knife" then forbid_env_action("clean")')
    assert not can_co_fire(knife, DISHWARE, CLASSES)  # knife is not dishware
    low = parse_rule('if pool_resource_level < 10 and tool_is("harvest") then forbid_tool_call("harvest")')
    high = parse_rule('if pool_resource_level > 20 then forbid_tool_call("harvest")')
    mid = parse_rule('if pool_resource_level <= 15 then forbid_tool_call("harvest")')
    assert not can_co_fire(low, high)
    assert can_co_fire(low, mid)
    assert not can_co_fire(CUP, high)  # env verb clean vs tool harvest


def test_every_measured_overlap_passes_the_structural_test():
    rng = np.random.default_rng(7)
    types = ["cup", "plate", "bowl", "knife"]
    receps = ["sinkbasin", "cabinet"]
    rules = []
    for t in types:
        for r in receps:
            rules.append(
                (
                    f"{t}-{r}",
                    parse_rule(
                        f'if action.obj_type == "{t}" and action.recep == "{r}" then forbid_env_action("clean")'
                    ),
                )
            )
        rules.append((f"{t}-any", parse_rule(f'if action.obj_type == "{t}" then forbid_env_action("clean")')))
    rules.append(("dish-sink", DISHWARE))
    contexts = [
        (
            {"step": int(s)},
            [
                Action.env("clean", obj_type=str(rng.choice(types)), recep=str(rng.choice(receps)))
                for _ in range(3)
            ],
        )
        for s in range(20)
    ]
    p = build_merge_problem(rules, [], contexts, CLASSES)
    rule_of = dict(rules)
    assert p.overlaps
    for (i, j), value in p.overlaps:
        assert value > 0 and can_co_fire(rule_of[i], rule_of[j], CLASSES)


def _brute_force(p: MergeProblem) -> float:
    ids = [c.id for c in p.candidates]
    cost = {c.id: c.cost for c in p.candidates}
    best = np.inf
    for bits in itertools.product((0, 1), repeat=len(ids)):
        on = {i for i, b in zip(ids, bits, strict=True) if b}
        if any(i in on and j in on for i, j in p.conflicts):
            continue
        covered = set().union(*(c.resolves for c in p.candidates if c.id in on))
        if not set(p.failures) <= covered:
            continue
        value = sum(cost[i] for i in on) + p.eta * sum(v for (i, j), v in p.overlaps if i in on and j in on)
        best = min(best, value)
    return best


def _random_problem(rng: np.random.Generator, n: int) -> MergeProblem:
    failures = [f"f{k}" for k in range(int(rng.integers(1, n + 1)))]
    cands = []
    for k in range(n):
        chosen = frozenset(f for f in failures if rng.random() < 0.35)
        cands.append(
            MergeCandidate(f"c{k}", None, float(rng.uniform(1, 10)), chosen, bool(rng.random() < 0.3))
        )
    for f in failures:  # each failure has a resolver
        if not any(f in c.resolves for c in cands):
            k = int(rng.integers(n))
            cands[k] = MergeCandidate(
                cands[k].id, None, cands[k].cost, cands[k].resolves | {f}, cands[k].incumbent
            )
    overlaps = tuple(
        ((f"c{i}", f"c{j}"), float(rng.uniform(0.05, 1.0)))
        for i in range(n)
        for j in range(i + 1, n)
        if rng.random() < 0.3 and f"c{i}" < f"c{j}"
    )
    conflicts = tuple(
        (f"c{i}", f"c{j}")
        for i in range(n)
        for j in range(i + 1, n)
        if rng.random() < 0.08 and f"c{i}" < f"c{j}"
    )
    return MergeProblem(tuple(cands), tuple(failures), overlaps, conflicts, eta=float(rng.uniform(0.5, 5)))


@pytest.mark.parametrize(
    "settings",
    [
        SolverSettings(),
        SolverSettings(enumerate_up_to=0),
        SolverSettings(enumerate_up_to=0, reduce=False, decompose=False),
        SolverSettings(cp_sat_presolve=True, enumerate_up_to=0),
        SolverSettings(backend="scip", enumerate_up_to=0),
        SolverSettings(backend="cbc", enumerate_up_to=0),
        SolverSettings(backend="highs", enumerate_up_to=0),
        SolverSettings(backend="mathopt_gscip", enumerate_up_to=0, reduce=False),
    ],
    ids=lambda s: (
        f"{s.backend}-enum{s.enumerate_up_to}-red{s.reduce}-dec{s.decompose}-pre{s.cp_sat_presolve}"
    ),
)
def test_optimum_matches_brute_force(settings):
    rng = np.random.default_rng(np.random.SeedSequence(11))
    for _ in range(15):
        p = _random_problem(rng, int(rng.integers(2, 10)))
        expected = _brute_force(p)
        r = merge(p, settings=settings)
        if np.isinf(expected):
            assert r.uncovered  # infeasible: reported
            continue
        assert r.feasible and r.optimal
        assert r.objective == pytest.approx(expected, abs=1e-4)


def test_merge_is_deterministic_and_default_settings_valid():
    rng = np.random.default_rng(3)
    p = _random_problem(rng, 9)
    assert merge(p).active == merge(p).active


def test_bad_inputs_name_the_value():
    with pytest.raises(ConfigError, match="merge_mode"):
        merge(_dishware_problem(), merge_mode="greedy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="backend"):
        SolverSettings(backend="gurobi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="duplicate"):
        MergeProblem(
            (MergeCandidate("a", None, 1.0, frozenset()), MergeCandidate("a", None, 2.0, frozenset())), ()
        )
    with pytest.raises(ConfigError, match="cost"):
        MergeProblem((MergeCandidate("a", None, -1.0, frozenset()),), ())
    with pytest.raises(ConfigError, match="at least one failed action"):
        Failure({}, (), "test")
    with pytest.raises(ConfigError, match="appears twice"):
        build_merge_problem([("cup", CUP)], FAILURES + FAILURES)
