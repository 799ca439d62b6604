"""Failure fragments by counterfactual checks and the D⁻/D⁺/Q_safe data set (paper §4.1, §3.3)."""

from __future__ import annotations

import pickle

import pytest

from scars.synthesis.dsl import Action
from scars.synthesis.failure import Failure, FailureSource
from scars.synthesis.fragments import (
    FragmentError,
    RecordedStep,
    build_dataset,
    causal_context_variables,
    extract_fragment,
)
from support.synthesis_worlds import CLASSES, commons, household, household_step, sink_verifier


def test_household_fragment_keeps_only_the_causal_action_arguments():
    steps, verifier = household()
    fragment = extract_fragment(steps[0], verifier, CLASSES, theta="no_cup_in_sink")
    # The verifier reads the object type and the receptacle type; the instance names and the context do not matter.
    assert fragment.causal_args == frozenset({"obj_type", "recep_type"})
    assert dict(fragment.q) == {}
    assert list(fragment.F) == [steps[0].chosen_action]
    assert fragment.theta == "no_cup_in_sink"
    assert fragment.source == FailureSource(episode=0, step=1)


def test_commons_fragment_keeps_the_pool_level_and_drops_month_karma_and_amount():
    steps, verifier = commons()
    failing = next(s for s in steps if s.violated)
    fragment = extract_fragment(failing, verifier)
    assert dict(fragment.q) == {"pool_resource_level": 15}
    assert fragment.causal_args == frozenset()
    # Both harvest amounts are flagged at this pool level: the equivalent admissible action joins F.
    assert {a.arg("amount") for a in fragment.F} == {5, 10}
    assert fragment.F[0] == failing.chosen_action


def test_numeric_variable_is_causal_only_through_a_counterfactual_value():
    # Dropping the variable would not help here (the verifier defaults to "low"), only a higher value does.
    def verifier(q, a):
        return a.name == "harvest" and q.get("pool_resource_level", 0) < 20

    harvest = Action.tool("harvest", amount=5)
    q = {"pool_resource_level": 10, "month": 3}
    assert causal_context_variables(q, harvest, verifier) == frozenset({"pool_resource_level"})
    assert causal_context_variables(q, harvest, verifier, {"pool_resource_level": [50]}) == frozenset(
        {"pool_resource_level"}
    )


def test_extraction_refuses_a_step_the_verifier_does_not_flag():
    steps, verifier = household()
    success = next(s for s in steps if not s.violated)
    with pytest.raises(FragmentError, match="does not flag"):
        extract_fragment(success, verifier)


def test_extraction_refuses_a_text_action():
    step = RecordedStep({}, (Action("text", "say", text="hello"), Action.env("go")), (0.0, 0.0), 0, True)
    with pytest.raises(FragmentError, match="kind 'text'"):
        extract_fragment(step, lambda q, a: True)


def test_dataset_splits_failures_successes_and_safe_contexts():
    steps, verifier = household()
    data = build_dataset(steps, verifier)
    assert [c.step.step for c in data.D_minus] == [1]
    assert len(data.D_plus) == len(steps) - 1
    # Q_safe: successes where no admissible action is flagged. Here only a cup at the sink would be flagged.
    assert all(not verifier(s.context, a) for s in data.Q_safe for a in s.actions)
    assert len(data.Q_safe) == len(data.D_plus)


def test_a_success_context_offering_a_flagged_action_is_not_safe():
    verifier = sink_verifier(("cup",))
    walked_away = household_step(verifier, "cup", "sinkbasin", "go", 0, 1)
    failed = household_step(verifier, "cup", "sinkbasin", "move", 0, 2)
    data = build_dataset([walked_away, failed], verifier)
    assert [c.step for c in data.D_plus] == [walked_away]
    assert data.Q_safe == ()


def test_dataset_with_a_fragment_keeps_only_that_failure_pattern():
    steps, verifier = commons()
    other = RecordedStep(
        {"pool_resource_level": 50}, (Action.tool("punish", target="a2"),), (0.0,), 0, True, 0, 99
    )
    fragment = extract_fragment(steps[4], verifier)
    data = build_dataset([*steps, other], verifier, fragment)
    assert {c.step.step for c in data.D_minus} == {5, 6}
    assert len(build_dataset([*steps, other], verifier).D_minus) == 3


def test_empty_failure_set_is_an_error():
    steps, verifier = household(failing=())
    with pytest.raises(FragmentError, match="D⁻ is empty"):
        build_dataset(steps, verifier)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"actions": (), "logits": ()}, "at least one admissible action"),
        ({"logits": (0.0,)}, "exactly one logit per admissible action"),
        ({"logits": (0.0, float("nan"))}, "finite"),
        ({"chosen": 2}, "out of range"),
    ],
)
def test_recorded_step_validation_names_the_bad_value(kwargs, message):
    base = {
        "context": {"x": 1},
        "actions": (Action.env("go"), Action.env("look")),
        "logits": (0.0, 1.0),
        "chosen": 0,
        "violated": False,
    }
    with pytest.raises(FragmentError, match=message):
        RecordedStep(**{**base, **kwargs})


def test_records_are_read_only_and_pickle():
    steps, verifier = household()
    ctx = {"a": 1}
    step = RecordedStep(ctx, steps[0].actions, steps[0].logits, 0, True)
    ctx["a"] = 2
    assert step.context["a"] == 1
    with pytest.raises(TypeError):
        step.context["a"] = 3  # type: ignore[index]
    fragment = extract_fragment(steps[0], verifier)
    assert pickle.loads(pickle.dumps(step)) == step
    again = pickle.loads(pickle.dumps(fragment))
    assert isinstance(again, Failure) and again == fragment and dict(again.q) == dict(fragment.q)


def test_dataset_asks_the_verifier_once_per_recorded_step_across_calls():
    # The agent rebuilds D_t from a sliding window of the same steps: a deterministic verifier's answers on a step
    # object are remembered, so a second window over the same objects asks only about the new steps.
    steps, verifier = household(("cup", "plate"), ("cup", "plate"))
    calls: list[tuple[int, str]] = []

    def counting(q, a):
        calls.append((id(q), a.text))
        return verifier(q, a)

    first = build_dataset(steps[:-2], counting)
    asked = len(calls)
    second = build_dataset(steps, counting)
    # every control action of every step is asked once: the second call asks about the two new steps only
    assert asked == sum(a.is_control for s in steps[:-2] for a in s.actions)
    assert len(calls) - asked == sum(a.is_control for s in steps[-2:] for a in s.actions)
    assert second == build_dataset(steps, verifier) and first == build_dataset(steps[:-2], verifier)
    # another verifier object is asked again (answers are remembered per verifier)
    assert build_dataset(steps, lambda q, a: False).Q_safe == tuple(s for s in steps if not s.violated)


def test_a_normal_value_becomes_an_exception_predicate_and_other_values_join_d_minus():
    """'Open the fridge only with empty hands': the failure disappears for held_type == none and persists for any
    other value the agent has seen, so the scar must be `held_type != "none"`, not `held_type == "apple"`."""
    from scars.synthesis import SearchConfig, synthesize
    from scars.synthesis.dsl import canonical_text
    from scars.synthesis.mcts import candidate_space

    def verifier(q, a):
        return a.name == "open" and a.arg("recep_type") == "fridge" and q.get("held_type", "none") != "none"

    open_fridge = Action.env("open", "open fridge 1", recep="fridge 1", recep_type="fridge")
    go = Action.env("go", "go to fridge 1", recep="fridge 1", recep_type="fridge")
    failing = RecordedStep(
        {"held_type": "apple", "location": "fridge 1"}, (open_fridge, go), (1.0, 0.0), 0, True, 0, 4
    )
    safe = RecordedStep(
        {"held_type": "none", "location": "fridge 1"}, (open_fridge, go), (1.0, 0.0), 0, False, 0, 9
    )
    seen = {"held_type": ["none", "apple", "cup", "mug"], "location": ["fridge 1", "table 1"]}
    failure = extract_fragment(failing, verifier, theta="fridge", alternatives=seen)
    assert dict(failure.q) == {"held_type": "apple"}
    assert {q["held_type"] for q, _ in failure.failing_counterfactuals} == {"cup", "mug"}
    data = build_dataset([failing, safe], verifier, failure)
    assert len(data.D_minus) == 3  # the recorded failure and two still-failing what-ifs
    space = candidate_space(data, failure)
    assert any(canonical_text(p) == 'held_type != "none"' for p in space.predicates)
    result = synthesize(data, failure, config=SearchConfig(num_simulations=200), seed=0)
    assert result.admitted and 'held_type != "none"' in result.text
    without = extract_fragment(failing, verifier, theta="fridge")  # no observed alternatives: nothing to add
    assert without.failing_counterfactuals == ()
