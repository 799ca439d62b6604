"""The five-term objective (SPEC §4), ReplayPass (Prop. 1) and the drift bound (Prop. 3)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from scars.synthesis.dsl import Lambdas, canonical_text, description_length, parse_rule, token_count
from scars.synthesis.dsl.ast import Action, ForbidEnvAction, ForbidToolArg, ForbidToolCall
from scars.synthesis.dsl.semantics import guard_holds, mask_covers
from scars.synthesis.errors import ConfigError
from scars.synthesis.fragments import RecordedStep, SynthesisData, build_dataset, extract_fragment
from scars.synthesis.mcts import build_rule, candidate_space
from scars.synthesis.objective import (
    LOG_CAP,
    ObjectiveEvaluator,
    ObjectiveWeights,
    policy_distribution,
    replay_pass,
    score_rule,
    shared_evaluator,
    tv_drift,
)
from support.synthesis_worlds import CLASSES, commons, household, household_step, sink_verifier

CUP_RULE = parse_rule(
    'if action.obj_type == "cup" and action.recep_type == "sinkbasin" then forbid_env_action("move")'
)
SINK_RULE = parse_rule('if action.recep_type == "sinkbasin" then forbid_env_action("move")')


def cup_data() -> SynthesisData:
    steps, verifier = household()
    return build_dataset(steps, verifier)


def reference_terms(rule, data, rules_before, classes, weights):
    """The objective's four loss terms straight from the formulas, one step at a time (no vectorisation)."""
    after = (*rules_before, rule)
    mode, bias = weights.mask_mode, weights.soft_bias
    l_fail = 0.0
    for case in data.D_minus:
        p, _ = policy_distribution(case.step, after, classes, mode, bias)
        l_fail += sum(p[case.step.actions.index(a)] for a in case.F)
    l_fail /= len(data.D_minus)
    l_succ = 0.0
    for case in data.D_plus:
        p, _ = policy_distribution(case.step, after, classes, mode, bias)
        pa = p[case.step.chosen]
        l_succ += min(-math.log(pa), LOG_CAP) if pa > 0 else LOG_CAP
    l_succ /= max(len(data.D_plus), 1)
    l_drift = 0.0
    for step in data.Q_safe:
        p, fb = policy_distribution(step, after, classes, mode, bias)
        q, qfb = policy_distribution(step, rules_before, classes, mode, bias)
        for x, y in zip((*p, fb), (*q, qfb), strict=True):
            if x > 0:
                l_drift += x * (math.log(x) - max(math.log(y) if y > 0 else -LOG_CAP, -LOG_CAP))
    l_drift /= max(len(data.Q_safe), 1)
    return l_fail, l_succ, l_drift


def pooled_rules(data, fragment, classes, k=2):
    space = candidate_space(data, fragment, classes)
    for mask in space.masks:
        for n in range(1, k + 1):
            for combo in itertools.combinations(space.predicates, n):
                yield build_rule(mask, combo)


@pytest.mark.parametrize("mode", ["hard", "soft"])
@pytest.mark.parametrize("world", ["household", "commons"])
def test_vectorised_terms_equal_the_formulas(mode, world):
    steps, verifier = household(("cup", "plate"), ("cup", "plate")) if world == "household" else commons()
    data = build_dataset(steps, verifier)
    fragment = extract_fragment(data.D_minus[0].step, verifier)
    weights = ObjectiveWeights(mask_mode=mode)
    before = (parse_rule('if action.obj_type == "bowl" then forbid_env_action("examine")'),)
    evaluator = ObjectiveEvaluator(data, current_rules=before, classes=CLASSES, weights=weights)
    checked = 0
    for rule in pooled_rules(data, fragment, CLASSES):
        score = evaluator.score(rule)
        expected = reference_terms(rule, data, before, CLASSES, weights)
        assert (score.l_fail, score.l_succ, score.l_drift) == pytest.approx(expected, abs=1e-9)
        c = description_length(rule, weights.lambdas)
        assert score.total == pytest.approx(
            c + 100 * score.l_fail + 10 * score.l_succ + 20 * score.l_drift + 10 * score.l_conflict
        )
        checked += 1
    assert checked >= 10


def test_fallback_takes_all_mass_when_every_control_action_is_masked():
    steps, _ = commons()
    step = steps[4]  # pool 15: harvest 5, harvest 10, rest
    everything = [
        parse_rule('if pool_resource_level < 20 then forbid_tool_call("harvest")'),
        parse_rule('if pool_resource_level < 20 then forbid_tool_call("rest")'),
    ]
    p, fallback = policy_distribution(step, everything)
    assert fallback == 1.0 and p.sum() == 0.0
    p, fallback = policy_distribution(step, everything[:1])
    assert fallback == 0.0 and p[:2].sum() == 0.0 and p[2] == pytest.approx(1.0)


def test_a_masked_success_costs_the_documented_cap():
    steps, verifier = commons()
    data = build_dataset(steps, verifier)
    every_harvest = parse_rule('if tool_is("harvest") then forbid_tool_call("harvest")')
    score = score_rule(every_harvest, data)
    # 4 of the 5 successes chose a harvest: each costs LOG_CAP; the "rest" success now has probability 1.
    rest = next(c for c in data.D_plus if c.a_star.name == "rest")
    assert len(data.D_plus) == 5
    assert score.l_succ == pytest.approx(4 * LOG_CAP / 5)
    p, _ = policy_distribution(rest.step, [every_harvest])
    assert p[2] == pytest.approx(1.0)
    assert math.isclose(LOG_CAP, -math.log(1e-12))


def test_no_mdl_and_no_drift_loss_are_one_setting_each():
    data = cup_data()
    full = score_rule(CUP_RULE, data, classes=CLASSES)
    no_mdl = score_rule(CUP_RULE, data, classes=CLASSES, weights=ObjectiveWeights.no_mdl())
    assert full.total - no_mdl.total == pytest.approx(description_length(CUP_RULE))
    no_drift = score_rule(SINK_RULE, data, classes=CLASSES, weights=ObjectiveWeights.no_drift_loss())
    with_drift = score_rule(SINK_RULE, data, classes=CLASSES)
    assert with_drift.l_drift > 0
    assert with_drift.total - no_drift.total == pytest.approx(20 * with_drift.l_drift)
    heavy = ObjectiveWeights(lambdas=Lambdas(tok=2.0, ast=0.0, pred=0.0))
    # if, 2 × (feature op value), and, then, forbid_env_action ( "move" ): 13 lexer tokens.
    assert token_count(CUP_RULE) == 13
    assert score_rule(CUP_RULE, data, weights=heavy).description_length == 2 * 13


def test_replay_pass_reports_every_uncovered_failed_action():
    steps, verifier = household(("cup", "plate"), ("cup", "plate"))
    data = build_dataset(steps, verifier)
    report = replay_pass([CUP_RULE], data.D_minus, CLASSES)
    assert not report.passed and report.n_cases == 2
    assert [a.arg("obj_type") for _, a in report.uncovered] == ["plate"]
    class_rule = parse_rule(
        'if in_class(action.obj_type, "dishware") and action.recep_type == "sinkbasin" then forbid_env_action("move")'
    )
    assert replay_pass([class_rule], data.D_minus, CLASSES).passed
    assert not replay_pass([class_rule], data.D_minus, classes={}).passed  # no class table, no generalisation
    assert score_rule(class_rule, data, classes=CLASSES).replay_passed


def test_prop1_replay_pass_means_zero_mass_on_covered_failures():
    steps, verifier = commons()
    data = build_dataset(steps, verifier)
    fragment = extract_fragment(data.D_minus[0].step, verifier)
    passing = 0
    for rule in pooled_rules(data, fragment, None):
        if replay_pass([rule], data.D_minus).passed:
            passing += 1
            for case in data.D_minus:
                p, _ = policy_distribution(case.step, [rule])
                assert sum(p[case.step.actions.index(a)] for a in case.F) == 0.0
            assert score_rule(rule, data).l_fail == 0.0
    assert passing >= 3


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_prop3_tv_drift_is_bounded_by_the_kl_drift(mode):
    steps, verifier = household(("cup", "plate"), ("cup", "plate"))
    data = build_dataset(steps, verifier)
    fragment = extract_fragment(data.D_minus[0].step, verifier)
    weights = ObjectiveWeights(mask_mode=mode)
    evaluator = ObjectiveEvaluator(data, classes=CLASSES, weights=weights)
    drifting = 0
    for rule in pooled_rules(data, fragment, CLASSES, k=3):
        eps = evaluator.score(rule).l_drift
        tv = tv_drift([], [rule], data.Q_safe, CLASSES, mode, weights.soft_bias)
        assert tv <= math.sqrt(eps / 2) + 1e-12
        drifting += tv > 0
    assert drifting >= 5


def test_conflict_counts_a_pair_that_only_together_forces_the_fallback():
    verifier = sink_verifier(("cup",))
    steps = [household_step(verifier, "cup", "sinkbasin", "move", 0, 1)]
    steps += [household_step(verifier, "apple", "sinkbasin", "go", 0, 2)]
    data = build_dataset(steps, verifier)
    no_walking = parse_rule('if location_type == "sinkbasin" then forbid_env_action("go")')
    no_looking = parse_rule('if location_type == "sinkbasin" then forbid_env_action("examine")')
    evaluator = ObjectiveEvaluator(data, current_rules=[no_walking, no_looking], classes=CLASSES)
    # With going and examining already forbidden at the sink, masking every move there leaves nothing.
    assert evaluator.score(SINK_RULE).l_conflict == 2
    # With only going forbidden, examining stays open: no contradiction.
    assert (
        ObjectiveEvaluator(data, current_rules=[no_walking], classes=CLASSES).score(SINK_RULE).l_conflict == 0
    )
    # Rules whose guards never co-fire with the candidate on a recorded context do not conflict.
    elsewhere = [
        parse_rule('if location_type == "cabinet" then forbid_env_action("go")'),
        parse_rule('if location_type == "cabinet" then forbid_env_action("examine")'),
    ]
    assert ObjectiveEvaluator(data, current_rules=elsewhere, classes=CLASSES).score(SINK_RULE).l_conflict == 0


def test_soft_bias_leaks_mass_onto_the_failure():
    data = cup_data()
    hard = score_rule(CUP_RULE, data, classes=CLASSES)
    soft = score_rule(
        CUP_RULE, data, classes=CLASSES, weights=ObjectiveWeights(mask_mode="soft", soft_bias=-3.0)
    )
    assert hard.l_fail == 0.0
    assert 0 < soft.l_fail < 0.1
    assert soft.replay_passed  # ReplayPass is about the masked set, not the mass


def test_drift_budget_decides_admission():
    data = cup_data()
    drift = score_rule(SINK_RULE, data, classes=CLASSES).l_drift
    assert drift > 0
    assert not score_rule(SINK_RULE, data, weights=ObjectiveWeights(drift_budget=drift / 2)).admissible
    assert score_rule(SINK_RULE, data, weights=ObjectiveWeights(drift_budget=drift)).admissible


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beta1": -1.0}, "beta1"),
        ({"beta3": float("inf")}, "beta3"),
        ({"drift_budget": -0.1}, "drift_budget"),
        ({"mask_mode": "medium"}, "mask_mode"),
        ({"soft_bias": 0.0}, "soft_bias"),
    ],
)
def test_weights_validation_names_the_bad_value(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ObjectiveWeights(**kwargs)


def test_evaluator_is_a_pure_function_of_the_rule():
    data = cup_data()
    evaluator = ObjectiveEvaluator(data, classes=CLASSES)
    first = evaluator.score(CUP_RULE)
    evaluator.score(SINK_RULE)
    assert evaluator.score(CUP_RULE) == first == score_rule(CUP_RULE, data, classes=CLASSES)
    assert np.isfinite(first.total)


def mixed_literal_data() -> SynthesisData:
    """Steps whose context and action values mix literals Python calls equal (True, 1, 1.0) with strings and gaps."""
    values = [True, 1, 1.0, 0, False, "1", 2.5, None]
    steps = []
    for i, v in enumerate(values * 2):
        context = {"flag": v, "room": "kitchen" if i % 3 else "bath"}
        if i % 4 == 0:
            del context["flag"]  # missing feature
        actions = (
            Action.env("move", text=f"move {i}", obj_type="cup" if i % 2 else "plate", level=v),
            Action.env("go", text="go"),
            Action.tool("harvest", text="harvest", amount=v),
        )
        steps.append(RecordedStep(context, actions, (0.1 * i, 0.2, -0.3), i % 3, i == 1, 0, i))
    return build_dataset(steps, lambda q, a: a.name == "move" and q.get("flag") is True)


def test_predicate_vectors_equal_the_semantics_pair_by_pair():
    # The evaluator evaluates a predicate once per distinct value of its feature; the grouping must keep apart the
    # literals Python calls equal (True == 1 == 1.0) exactly as the DSL does.
    data = mixed_literal_data()
    classes = {"ones": frozenset({"1", "cup"})}
    evaluator = ObjectiveEvaluator(data, classes=classes)
    pairs = [(s.context, a) for s in data.steps for a in s.actions]
    guards = [
        parse_rule(f'if {g} then forbid_env_action("move")').guard
        for g in (
            "flag == true",
            "flag == 1",
            "flag == 1.0",
            "flag != 1",
            "flag >= 1",
            "flag < 1",
            'flag == "1"',
            'in_class(flag, "ones")',
            "action.level == true",
            "action.level == 1",
            "action.level > 0.5",
            "action.amount == 1.0",
            'in_class(action.obj_type, "ones")',
            'action_is("move")',
            'tool_is("harvest")',
            'action.name == "go"',
            'room == "kitchen" and flag == 1',
            "flag == true or action.level == 1.0",
        )
    ]
    for guard in guards:
        expected = [guard_holds(guard, q, a, classes) for q, a in pairs]
        assert evaluator.guard_vector(guard).tolist() == expected, guard
    for mask in (
        ForbidEnvAction("move"),
        ForbidToolCall("harvest"),
        ForbidToolArg("harvest", "amount", True),
        ForbidToolArg("harvest", "amount", 1),
        ForbidToolArg("harvest", "amount", 1.0),
    ):
        assert evaluator.mask_vector(mask).tolist() == [mask_covers(mask, a) for _, a in pairs], mask


def test_incremental_scores_equal_a_fresh_full_evaluation():
    # score() recomputes only the steps a candidate fires on; scoring in any order, with current rules and in both
    # mask modes, gives exactly the numbers of a fresh evaluator (which recomputes every step through ``_policy``).
    steps, verifier = household(("cup", "plate"), ("cup", "plate"))
    data = build_dataset(steps, verifier)
    fragment = extract_fragment(data.D_minus[0].step, verifier)
    before = (parse_rule('if action.obj_type == "bowl" then forbid_env_action("move")'),)
    for mode in ("hard", "soft"):
        weights = ObjectiveWeights(mask_mode=mode)
        evaluator = ObjectiveEvaluator(data, current_rules=before, classes=CLASSES, weights=weights)
        rules = list(pooled_rules(data, fragment, CLASSES))
        for rule in reversed(rules):
            fresh = ObjectiveEvaluator(data, current_rules=before, classes=CLASSES, weights=weights)
            counts = fresh._base_counts + fresh.rule_vector(rule)
            p, fallback = fresh._policy(counts)
            kl = fresh._step_kl(p, fallback, slice(None), fresh._starts, np.arange(len(data.steps)))
            l_drift = float(np.maximum(kl[fresh._safe_steps], 0.0).sum() / len(fresh._safe_steps))
            score = evaluator.score(rule)
            assert score.l_fail == float(p[fresh._fail_pairs].sum() / len(data.D_minus))
            assert score.l_drift == l_drift
            assert score == fresh.score(rule)


def test_trees_share_one_evaluator_only_for_the_same_inputs():
    data = cup_data()
    first = shared_evaluator(data, (), (), CLASSES, ObjectiveWeights())
    assert shared_evaluator(data, [], [], CLASSES, ObjectiveWeights()) is first
    assert shared_evaluator(data, (), (), dict(CLASSES), ObjectiveWeights()) is not first
    assert shared_evaluator(data, (SINK_RULE,), (), CLASSES, ObjectiveWeights()) is not first
    assert shared_evaluator(data, (), (), CLASSES, ObjectiveWeights(beta3=0.0)) is not first
    assert shared_evaluator(cup_data(), (), (), CLASSES, ObjectiveWeights()) is not first
    assert first.score(CUP_RULE) == score_rule(CUP_RULE, data, classes=CLASSES)


def test_scores_from_signatures_equal_the_rule_by_rule_scores():
    # The search scores a derivation from the bit sets of its mask and predicates (``signature``, met once per
    # synthesis) instead of the rule; with the contrast, presumptions and certified-safe what-ifs in the data, and an
    # incumbent rule, every term equals ``score(rule)``'s, whatever order the rules come in (the terms shared by
    # rules that fire on the same pairs are computed once).
    steps, verifier = household(("cup", "plate"), ("cup", "plate"))
    data = build_dataset(steps, verifier)
    fragment = extract_fragment(data.D_minus[0].step, verifier)
    plus = data.D_plus
    data = dataclasses.replace(
        data,
        contrast=tuple(2 if i % 3 == 0 else i % 2 for i in range(len(plus))),
        presumed_safe=tuple((dict(c.q), c.step.actions[j]) for c in plus[:4] for j in range(2)),
        presumption_weights=(1.0, 0.5, 0.25, 2.0, 1.0, 1.0, 0.75, 3.0),
        safe_counterfactuals=tuple((dict(c.q), c.a_star) for c in plus[4:7]),
    )
    space = candidate_space(data, fragment, CLASSES)
    before = (SINK_RULE,)
    signed = ObjectiveEvaluator(data, current_rules=before, classes=CLASSES)
    by_rule = ObjectiveEvaluator(data, current_rules=before, classes=CLASSES)
    derivations = [
        (mask, combo)
        for mask in space.masks
        for n in (1, 2, 3)
        for combo in itertools.combinations(space.predicates, n)
    ]
    assert len(derivations) > 40
    scores = {}
    for mask, combo in derivations:
        rule = build_rule(mask, combo)
        scores[rule] = signed.score_signed(rule, signed.signature(mask), [signed.signature(p) for p in combo])
    assert any(s.l_contrast > 0 for s in scores.values())
    assert any(not s.counterfactual_safe for s in scores.values())
    for rule in reversed(list(scores)):
        assert scores[rule] == by_rule.score(rule), canonical_text(rule)
        assert scores[rule] == ObjectiveEvaluator(data, before, (), CLASSES).score(rule)
