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


def test_per_type_scars_anti_unify_to_the_smallest_class_or_not_at_all():
    guards = [rule("cup").guard, rule("plate").guard]
    out = [canonical_text(g) for g in anti_unify(guards, CLASSES)]
    assert out == ['action.recep == "sinkbasin" and in_class(action.obj_type, "dishware")']
    # no class holds both: dropping the object would leave "any cleaning in the sink", which forgets both members'
    # condition — there is no consolidation
    assert anti_unify([rule("cup").guard, rule("knife").guard], CLASSES) == []


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


def test_a_class_is_never_lifted_from_an_argument_one_member_did_not_constrain():
    """A broken-appliance scar (``action.recep == "microwave 1"``: every food it heated there failed) and an instance
    scar (``action.obj == "potato 1"``, any microwave) share only the verb. Their failures' objects are all food,
    but the appliance scar never named the object: lifting them to ``in_class(action.obj_type, "food")`` would
    forbid heating every food everywhere (the over-broad class rule that lost every heating task on a paraphrase
    schedule). The least general generalisation keeps no literal, so nothing is offered."""
    food = {"food": frozenset({"tomato", "bread", "potato"})}

    def heat(obj: str, recep: str) -> Action:
        return Action.env("heat", f"heat {obj} 1 with {recep}", obj=f"{obj} 1", obj_type=obj, recep=recep)

    def failed(obj: str, recep: str, rule_id: str, step: int) -> Failure:
        return Failure({"location": recep}, (heat(obj, recep),), rule_id, FailureSource(episode=0, step=step))

    appliance = parse_rule('if action.recep == "microwave 1" then forbid_env_action("heat")')
    potato = parse_rule('if action.obj == "potato 1" then forbid_env_action("heat")')
    fails = [
        failed("tomato", "microwave 1", "broken", 2),
        failed("bread", "microwave 1", "broken", 5),
        failed("potato", "microwave 2", "potato", 8),
    ]
    assert consolidations([appliance, potato], fails, [], food) == []
    # two instance scars of the same argument still meet at their class
    tomato = parse_rule('if action.obj == "tomato 1" then forbid_env_action("heat")')
    (c,) = consolidations([tomato, potato], [fails[0], fails[2]], [], food)
    assert canonical_text(c.rule) == 'if in_class(action.obj_type, "food") then forbid_env_action("heat")'


def test_instances_no_class_holds_meet_at_their_type_not_at_nothing():
    """Two cabinet scars name different instances (``cabinet 1``, ``cabinet 2``): no class holds the instances, so the
    receptacle literal used to be dropped, leaving "never move anything clean" (a consolidation that lost every
    clean-and-place task). One level up the failures agree: both receptacles are cabinets."""

    def move(obj: str, recep: str) -> Action:
        return Action.env(
            "move",
            f"move {obj} 1 to {recep}",
            obj=f"{obj} 1",
            obj_type=obj,
            recep=recep,
            recep_type=recep.split()[0],
            is_clean=True,
        )

    def failed(obj: str, recep: str, step: int) -> Failure:
        return Failure({"location": recep}, (move(obj, recep),), "wet", FailureSource(episode=0, step=step))

    one = parse_rule(
        'if action.is_clean == true and action.recep == "cabinet 1" then forbid_env_action("move")'
    )
    two = parse_rule(
        'if action.obj == "pan 1" and action.recep == "cabinet 2" then forbid_env_action("move")'
    )
    fails = [failed("bowl", "cabinet 1", 3), failed("pan", "cabinet 2", 9)]
    found = [canonical_text(c.rule) for c in consolidations([one, two], fails, [], CLASSES)]
    assert found == []  # the second member's object would be forgotten
    both_clean = parse_rule(
        'if action.is_clean == true and action.recep == "cabinet 2" then forbid_env_action("move")'
    )
    found = [canonical_text(c.rule) for c in consolidations([one, both_clean], fails, [], CLASSES)]
    assert 'if action.is_clean == true then forbid_env_action("move")' not in found
    assert found == [
        'if action.is_clean == true and action.recep_type == "cabinet" then forbid_env_action("move")'
    ]
