"""Consolidation (issue 24 #3): per-type scars anti-unified into a class rule the merge can choose."""

from __future__ import annotations

from scars.synthesis.consolidate import Success, anti_unify, consolidations
from scars.synthesis.dsl import Action, canonical_text, parse_rule
from scars.synthesis.failure import Failure, FailureSource

CLASSES = {
    "dishware": frozenset({"cup", "plate", "bowl"}),
    "tableware": frozenset({"cup", "plate", "bowl", "fork"}),
}


def sink(obj: str) -> Action:
    return Action.env(
        "clean", f"clean {obj} 1 with sinkbasin 1", obj=f"{obj} 1", obj_type=obj, recep="sinkbasin"
    )


def rule(obj: str):
    return parse_rule(
        f'if action.obj_type == "{obj}" and action.recep == "sinkbasin" then forbid_env_action("clean")'
    )


def failure(obj: str, step: int) -> Failure:
    return Failure(
        {"location": "sinkbasin 1"}, (sink(obj),), "no_dishware_in_sink", FailureSource(episode=0, step=step)
    )


def test_per_type_scars_anti_unify_to_the_smallest_class_or_drop_the_literal():
    guards = [rule("cup").guard, rule("plate").guard]
    out = [canonical_text(g) for g in anti_unify(guards, CLASSES)]
    assert out == ['action.recep == "sinkbasin" and in_class(action.obj_type, "dishware")']
    knife = [canonical_text(g) for g in anti_unify([rule("cup").guard, rule("knife").guard], CLASSES)]
    assert knife == ['action.recep == "sinkbasin"']  # no class holds both: the differing literal is dropped


def test_the_class_rule_is_offered_when_it_covers_both_failures_and_breaks_no_later_success():
    failures = [failure("cup", 3), failure("plate", 9)]
    fork = Action.env("clean", "clean fork 1 with sinkbasin 1", obj_type="fork", recep="sinkbasin")
    successes = [
        Success({"location": "sinkbasin 1"}, fork, (0, 12))
    ]  # a fork was cleaned there after: no vetoes
    (c,) = consolidations([rule("cup"), rule("plate")], failures, successes, CLASSES)[:1]
    assert canonical_text(c.rule) == (
        'if action.recep == "sinkbasin" and in_class(action.obj_type, "dishware") then forbid_env_action("clean")'
    )
    assert c.members == (0, 1) and {f.id for f in c.failures} == {f.id for f in failures}
    # the dropped-literal rule ("any cleaning in the sink") would mask the fork: not offered
    assert all(
        "in_class" in canonical_text(x.rule)
        for x in consolidations([rule("cup"), rule("plate")], failures, successes, CLASSES)
    )


def test_a_success_after_the_first_failure_vetoes_but_one_before_it_does_not():
    failures = [failure("cup", 3), failure("plate", 9)]
    bowl = sink("bowl")
    before = [Success({"location": "sinkbasin 1"}, bowl, (0, 1))]  # before the rule existed: weak evidence
    after = [Success({"location": "sinkbasin 1"}, bowl, (0, 5))]
    assert consolidations([rule("cup"), rule("plate")], failures, before, CLASSES)
    assert consolidations([rule("cup"), rule("plate")], failures, after, CLASSES) == []


def test_rules_with_different_masks_or_a_lone_rule_are_not_consolidated():
    move = parse_rule(
        'if action.obj_type == "plate" and action.recep == "sinkbasin" then forbid_env_action("move")'
    )
    assert consolidations([rule("cup"), move], [failure("cup", 3)], [], CLASSES) == []
    assert consolidations([rule("cup")], [failure("cup", 3)], [], CLASSES) == []


def test_an_instance_scar_and_a_type_scar_meet_at_the_class_of_their_failures():
    """One scar names the instance (``action.obj == "plate 1"``), the other the type (``action.obj_type == "cup"``):
    their guards share only the receptacle, but the failed actions' types are two dishware members."""
    plate = parse_rule(
        'if action.obj == "plate 1" and action.recep == "sinkbasin" then forbid_env_action("clean")'
    )
    fails = [failure("cup", 3), failure("plate", 9)]
    (c,) = consolidations([rule("cup"), plate], fails, [], CLASSES)
    assert canonical_text(c.rule) == (
        'if action.recep == "sinkbasin" and in_class(action.obj_type, "dishware") then forbid_env_action("clean")'
    )
