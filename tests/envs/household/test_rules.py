"""Safety rules as data, schedules, scope retirement and the deterministic verifier (SPEC §3.2, §5, §7)."""

from __future__ import annotations

import pytest

from scars.envs.household import (
    GENERALISATION_SPLITS,
    OBJECT_CLASSES,
    RULE_LIBRARY,
    Activation,
    RuleSchedule,
    SafetyRule,
    Verifier,
    library_rule,
    rules_for_task,
)
from scars.envs.household.world import TASK_TYPES
from scars.synthesis.dsl.ast import Action, Rule
from scars.synthesis.errors import WorldError


def _move(obj_type: str, recep_type: str, **flags) -> Action:
    return Action.env(
        "move",
        text=f"move {obj_type} 1 to {recep_type} 1",
        obj=f"{obj_type} 1",
        obj_type=obj_type,
        recep=f"{recep_type} 1",
        recep_type=recep_type,
        **{"is_clean": False, "is_hot": False, "is_cool": False, "is_wet": False, **flags},
    )


def test_library_size_and_shape():
    assert len(RULE_LIBRARY) >= 12
    for rid, rule in RULE_LIBRARY.items():
        assert rule.id == rid and isinstance(rule.rule, Rule) and rule.description
        assert rule.task_types <= set(TASK_TYPES) and rule.task_types
    for task_type in TASK_TYPES:
        assert len(rules_for_task(task_type)) >= 2
    for train, test in GENERALISATION_SPLITS.values():
        assert train and test and not set(train) & set(test)
        assert all(i in RULE_LIBRARY for i in (*train, *test))
    assert GENERALISATION_SPLITS["dishware_sink"] == (
        ("no_cup_in_sink",),
        ("no_plate_in_sink", "no_wet_dishware_in_cabinet"),
    )


def test_rules_print_and_parse_back():
    dsl = pytest.importorskip("scars.synthesis.dsl")
    if not hasattr(dsl, "parse_rule"):
        pytest.skip("the DSL parser is not in the tree yet")
    for rule in RULE_LIBRARY.values():
        text = dsl.to_text(rule.rule)
        assert dsl.canonical(dsl.parse_rule(text)) == dsl.canonical(rule.rule), text


def test_dishware_class_generalises_cup_to_plate():
    verifier = Verifier(RuleSchedule.from_ids(["no_dishware_in_sink", "no_cup_in_sink"]))
    q = {"step": 0, "episode": 0, "world_version": 0}
    assert {v.rule_id for v in verifier.check(q, _move("cup", "sinkbasin"))} == {
        "no_dishware_in_sink",
        "no_cup_in_sink",
    }
    assert [v.rule_id for v in verifier.check(q, _move("plate", "sinkbasin"))] == ["no_dishware_in_sink"]
    assert verifier.check(q, _move("apple", "sinkbasin")) == []
    assert {"cup", "mug", "plate", "bowl", "pan"} <= OBJECT_CLASSES["dishware"]


def test_wet_dishware_rule_reads_the_object_state():
    verifier = Verifier(RuleSchedule.from_ids(["no_wet_dishware_in_cabinet"]))
    q = {"step": 3}
    assert verifier.check(q, _move("mug", "cabinet", is_wet=False)) == []
    (event,) = verifier.check(q, _move("mug", "cabinet", is_wet=True))
    assert event.rule_id == "no_wet_dishware_in_cabinet" and event.step == 3
    assert event.action["args"]["obj_type"] == "mug" and event.context["step"] == 3
    assert event.to_dict()["action"]["name"] == "move"


def test_after_step_10_activation():
    rule = library_rule("no_washing_cups_in_sink_after_10")
    assert rule.activation.after_step == 10
    verifier = Verifier(RuleSchedule((rule,)))
    wash = Action.env("clean", obj="cup 1", obj_type="cup", recep="sinkbasin 1", recep_type="sinkbasin")
    assert verifier.check({"step": 9}, wash) == []
    assert [v.rule_id for v in verifier.check({"step": 10}, wash)] == [rule.id]
    other_sink = Action.env("clean", obj="cup 1", obj_type="cup", recep="sinkbasin 2", recep_type="sinkbasin")
    assert [v.rule_id for v in verifier.check({"step": 30}, other_sink)] == [
        rule.id
    ]  # every sink from step 10
    tub = Action.env("clean", obj="cup 1", obj_type="cup", recep="bathtubbasin 1", recep_type="bathtubbasin")
    assert verifier.check({"step": 30}, tub) == []


def test_schedule_changes_the_active_set_and_version():
    late = SafetyRule(
        "late", library_rule("no_cup_in_sink").rule, "d", Activation(after_step=5, from_episode=2)
    )
    schedule = RuleSchedule((library_rule("no_plate_in_sink"), late))
    assert [r.id for r in schedule.active(0, 0, 0)] == ["no_plate_in_sink"]
    assert [r.id for r in schedule.active(5, 1, 0)] == ["no_plate_in_sink"]
    assert [r.id for r in schedule.active(5, 2, 0)] == ["no_plate_in_sink", "late"]
    assert schedule.version(0, 0, 0) != schedule.version(5, 2, 0)
    assert schedule.version(0, 0, 0) == schedule.version(4, 9, 3)
    verifier = Verifier(schedule)
    for step, episode in [(0, 0), (4, 2), (5, 2), (7, 1), (50, 9)]:
        assert verifier.active(step, episode, 0) == schedule.active(step, episode, 0)
        assert verifier.version(step, episode, 0) == schedule.version(step, episode, 0)
    assert RuleSchedule().version(0, 0, 0) == 0


def test_world_version_change_retires_scoped_rules():
    schedule = RuleSchedule.from_ids(["microwave_1_broken", "no_hot_food_in_fridge"])
    assert {r.id for r in schedule.active(0, 0, 0)} == {"microwave_1_broken", "no_hot_food_in_fridge"}
    assert {r.id for r in schedule.active(0, 0, 1)} == {"no_hot_food_in_fridge"}
    heat = Action.env("heat", obj="egg 1", obj_type="egg", recep="microwave 1", recep_type="microwave")
    verifier = Verifier(schedule)
    assert len(verifier.check({"world_version": 0}, heat)) == 1
    assert verifier.check({"world_version": 1}, heat) == []


def test_bad_rule_inputs_are_world_errors():
    with pytest.raises(WorldError, match="no_such_rule.*known"):
        library_rule("no_such_rule")
    with pytest.raises(WorldError, match="more than once"):
        RuleSchedule.from_ids(["no_cup_in_sink", "no_cup_in_sink"])
    with pytest.raises(WorldError, match="after_step=-1"):
        Activation(after_step=-1)
