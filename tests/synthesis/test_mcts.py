"""Golden tests of the MCTS synthesiser on crafted fragments (paper §4.2, SPEC §4)."""

from __future__ import annotations

import dataclasses

import pytest

from scars.synthesis.dsl import Lambdas, canonical_text, description_length, parse_rule
from scars.synthesis.dsl.semantics import fires
from scars.synthesis.errors import ConfigError
from scars.synthesis.fragments import build_dataset, extract_fragment
from scars.synthesis.mcts import (
    SearchConfig,
    candidate_key,
    candidate_space,
    exhaustive_search,
    merge_results,
    synthesize,
)
from scars.synthesis.objective import ObjectiveWeights, score_rule
from support.synthesis_worlds import CLASSES, commons, household, wide_world


def prepare(steps, verifier):
    fragment = extract_fragment(next(s for s in steps if s.violated), verifier, CLASSES)
    return build_dataset(steps, verifier, fragment), fragment


def text(rule_text: str) -> str:
    return canonical_text(parse_rule(rule_text))


CUP = text('if action.obj_type == "cup" and action.recep_type == "sinkbasin" then forbid_env_action("move")')
DISHWARE = text(
    'if in_class(action.obj_type, "dishware") and action.recep_type == "sinkbasin" then forbid_env_action("move")'
)
CUP_OR_PLATE = text(
    'if (action.obj_type == "cup" or action.obj_type == "plate") and action.recep_type == "sinkbasin" '
    'then forbid_env_action("move")'
)


def test_cup_into_sink_fragment_gives_the_hand_derived_minimal_rule():
    data, fragment = prepare(*household())
    result = synthesize(data, fragment, classes=CLASSES, seed=0)
    assert result.admitted and result.text == CUP
    assert result.replay.passed and result.score.l_fail == 0.0
    assert result.text == exhaustive_search(data, fragment, classes=CLASSES).text


def test_cup_and_plate_failures_give_the_class_rule_under_mdl():
    data, fragment = prepare(*household(("cup", "plate"), ("cup", "plate")))
    result = synthesize(data, fragment, classes=CLASSES, seed=0)
    assert result.text == DISHWARE
    # The class rule drifts a little (it also masks the bowl at the sink) but is 6 units of C shorter.
    instances = score_rule(parse_rule(CUP_OR_PLATE), data, classes=CLASSES)
    assert result.score.l_drift > instances.l_drift == 0.0
    assert result.score.description_length < instances.description_length


def test_when_lambda_makes_length_cheap_the_two_instance_rule_wins():
    data, fragment = prepare(*household(("cup", "plate"), ("cup", "plate")))
    cheap = SearchConfig(weights=ObjectiveWeights(lambdas=Lambdas(tok=0.05, ast=0.05, pred=0.05)))
    assert synthesize(data, fragment, classes=CLASSES, config=cheap, seed=0).text == CUP_OR_PLATE


def test_no_mdl_yields_a_bigger_rule_than_mdl():
    data, fragment = prepare(*household(("cup", "plate"), ("cup", "plate")))
    with_mdl = synthesize(data, fragment, classes=CLASSES, seed=0)
    no_mdl = synthesize(
        data, fragment, classes=CLASSES, config=SearchConfig(weights=ObjectiveWeights.no_mdl()), seed=0
    )
    assert description_length(no_mdl.rule) > description_length(with_mdl.rule)


def test_a_candidate_that_breaks_a_recorded_success_loses():
    data, fragment = prepare(*household())
    whole_sink = parse_rule('if action.recep_type == "sinkbasin" then forbid_env_action("move")')
    broken = score_rule(whole_sink, data, classes=CLASSES)
    result = synthesize(data, fragment, classes=CLASSES, seed=0)
    # Shorter, but it masks the recorded "apple into the sink" success.
    assert broken.description_length < result.score.description_length
    assert broken.l_succ > result.score.l_succ + 1.0 and broken.total > result.score.total
    # Without that success on record (and without the verifier's what-if answers, see below) the shorter rule is
    # the optimum: the success term made the difference.
    data, fragment = prepare(*household(with_apple=False))
    data = dataclasses.replace(data, safe_counterfactuals=())
    assert synthesize(data, fragment, classes=CLASSES, seed=0).text == canonical_text(whole_sink)


def test_verifier_certified_safe_counterfactuals_forbid_dropping_a_causal_variable():
    # No success on record, but extraction asked the verifier "and with another object?" and it said safe:
    # a rule that no longer looks at the object would forbid that certified-safe move, so it is not admitted.
    data, fragment = prepare(*household(with_apple=False))
    assert data.safe_counterfactuals, "extraction records the verifier's safe what-if answers"
    whole_sink = parse_rule('if action.recep_type == "sinkbasin" then forbid_env_action("move")')
    score = score_rule(whole_sink, data, classes=CLASSES)
    assert score.replay_passed and not score.counterfactual_safe and not score.admissible
    result = synthesize(data, fragment, classes=CLASSES, seed=0)
    assert result.admitted and result.score.counterfactual_safe
    assert "obj_type" in result.text


def test_govsim_example_is_found_from_a_commons_fragment():
    data, fragment = prepare(*commons())
    result = synthesize(data, fragment, classes=CLASSES, seed=0)
    assert result.admitted
    assert result.text == text('if pool_resource_level < 20 then forbid_tool_call("harvest")')
    # The paper writes the same rule with tool_is("harvest"), which the mask already implies: the same pairs
    # fire, the same losses, and MDL drops the redundant predicate.
    paper = parse_rule('if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")')
    pairs = [(s.context, a) for s in data.steps for a in s.actions]
    assert [fires(result.rule, q, a) for q, a in pairs] == [fires(paper, q, a) for q, a in pairs]
    paper_score = score_rule(paper, data)
    assert paper_score.total - result.score.total == pytest.approx(
        paper_score.description_length - result.score.description_length
    )
    assert paper_score.total > result.score.total


@pytest.mark.parametrize("world", ["cup", "cup_plate", "commons"])
def test_mcts_reaches_the_exhaustive_optimum(world):
    steps, verifier = {
        "cup": household(),
        "cup_plate": household(("cup", "plate"), ("cup", "plate")),
        "commons": commons(),
    }[world]
    data, fragment = prepare(steps, verifier)
    optimum = exhaustive_search(data, fragment, classes=CLASSES)
    for seed in range(3):
        result = synthesize(
            data, fragment, classes=CLASSES, config=SearchConfig(num_simulations=200), seed=seed
        )
        assert result.text == optimum.text
        assert result.score == optimum.score


def test_same_seed_same_result_and_candidates_are_ranked():
    data, fragment = prepare(*household(("cup", "plate"), ("cup", "plate")))
    config = SearchConfig(num_simulations=60, max_predicates=3)
    a = synthesize(data, fragment, classes=CLASSES, config=config, seed=7)
    b = synthesize(data, fragment, classes=CLASSES, config=config, seed=7)
    assert a.signature() == b.signature()
    keys = [candidate_key(c) for c in a.top_k]
    assert keys == sorted(keys) and len({c.text for c in a.top_k}) == len(a.top_k)
    assert a.nodes_expanded <= config.num_simulations + 1
    assert a.trace and a.trace[-1][2] == a.top_k[0].text


def test_the_tree_stops_when_the_derivation_space_is_exhausted():
    data, fragment = prepare(*household())
    space = candidate_space(data, fragment, CLASSES)
    result = synthesize(data, fragment, classes=CLASSES, config=SearchConfig(num_simulations=5000), seed=0)
    assert result.simulations < 5000
    assert result.evaluations == space.count_rules(3)  # every rule of the (small) space was scored once


def test_a_candidate_failing_admission_is_reported_not_admitted():
    # Every replay-passing one-predicate rule also masks a safe move, and the drift budget is zero.
    data, fragment = prepare(*household(("cup", "plate"), ("cup", "plate")))
    config = SearchConfig(max_predicates=1, weights=ObjectiveWeights(drift_budget=0.0))
    result = synthesize(data, fragment, classes=CLASSES, config=config, seed=0)
    assert not result.admitted and result.rule is None and result.score is None
    assert result.rejected and all(not c.score.admissible for c in result.rejected)
    assert result.top_k[0] == result.rejected[0]


def test_merge_is_deterministic_and_order_free():
    data, fragment = prepare(*household(("cup", "plate"), ("cup", "plate")))
    config = SearchConfig(num_simulations=20)
    trees = [synthesize(data, fragment, classes=CLASSES, config=config, seed=s) for s in range(3)]
    merged = merge_results(trees)
    assert merged.signature() == merge_results(trees[::-1]).signature()
    assert merged.nodes_expanded == sum(t.nodes_expanded for t in trees)
    assert candidate_key(merged.top_k[0]) == min(candidate_key(t.top_k[0]) for t in trees)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_simulations": 0}, "num_simulations"),
        ({"max_predicates": 0}, "max_predicates"),
        ({"rollout_stop_prob": 0.0}, "rollout_stop_prob"),
        ({"time_budget_s": -1.0}, "time_budget_s"),
    ],
)
def test_search_config_validation_names_the_bad_value(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SearchConfig(**kwargs)


def test_stop_when_scored_changes_only_the_counts():
    # Once every rule of the space has been scored, further simulations only revisit cached scores.
    data, fragment = prepare(*household(("cup", "plate"), ("cup", "plate")))
    space = candidate_space(data, fragment, CLASSES)
    for seed in range(3):
        on = synthesize(data, fragment, classes=CLASSES, config=SearchConfig(num_simulations=5000), seed=seed)
        off = synthesize(
            data,
            fragment,
            classes=CLASSES,
            config=SearchConfig(num_simulations=5000, stop_when_scored=False),
            seed=seed,
        )
        assert on.signature()[:5] == off.signature()[:5] and on.evaluations == off.evaluations
        assert on.evaluations == space.count_rules(3)
        assert on.simulations <= off.simulations and on.nodes_expanded <= off.nodes_expanded
        assert [t[2:] for t in on.trace] == [t[2:] for t in off.trace]


def test_patience_stops_a_search_that_stopped_improving():
    data, fragment = prepare(*wide_world())
    config = SearchConfig(num_simulations=2000, max_predicates=4, patience=50)
    a = synthesize(data, fragment, classes=CLASSES, config=config, seed=3)
    assert a.signature() == synthesize(data, fragment, classes=CLASSES, config=config, seed=3).signature()
    full = synthesize(
        data, fragment, classes=CLASSES, config=dataclasses.replace(config, patience=None), seed=3
    )
    assert a.simulations < full.simulations == 2000

    # same seed, same path until the stop: the stopped search saw exactly the full search's improvements so far
    def improvements(trace, upto):
        return [(nodes, text, total) for nodes, _, text, total in trace if nodes <= upto]

    assert improvements(a.trace, a.nodes_expanded) == improvements(full.trace, a.nodes_expanded)
    with pytest.raises(ConfigError, match="patience"):
        SearchConfig(patience=0)
