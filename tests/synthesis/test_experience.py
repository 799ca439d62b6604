"""Issue 24, item 2: attribution from experience. The verdict's wording decides nothing; the contrast of the agent's
own failures and successes does, narrow first (presumptions of met-but-untried actions), widening on a sibling
failure of the same told rule (to the type, to the class when the class is the cheapest rule consistent with D⁺ and
D⁻), a stale success (before the rule's first failure) weaker than a fresh one."""

from __future__ import annotations

import pytest

from scars.synthesis import SearchConfig, build_dataset, extract_fragment
from scars.synthesis.dsl import Action, canonical_text
from scars.synthesis.fragments import (
    Experience,
    ExperienceVerifier,
    RecordedStep,
    flagged_actions,
    presumptions,
)
from scars.synthesis.mcts import exhaustive_search, synthesize

CLASSES = {"dishware": frozenset({"mug", "bowl", "plate", "cup"}), "food": frozenset({"apple", "egg"})}


def clean(obj: str, basin: str) -> Action:
    obj_type = obj.split()[0]
    args = (("obj", obj), ("obj_type", obj_type), ("recep", basin), ("recep_type", basin.split()[0]))
    return Action("env", "clean", args, f"clean {obj} with {basin}")


def opening(recep: str) -> Action:
    return Action("env", "open", (("recep", recep), ("recep_type", recep.split()[0])), f"open {recep}")


GOTOS = tuple(
    Action("env", "goto", (("recep", r), ("recep_type", r.split()[0])), f"go to {r}")
    for r in (
        "countertop 1",
        "countertop 2",
        "cabinet 1",
        "cabinet 2",
        "shelf 1",
        "shelf 2",
        "table 1",
        "table 2",
    )
)


def step(actions, chosen, violated, episode, held="none", number=3) -> RecordedStep:
    """One decision among ``actions`` plus eight ways to walk elsewhere (a household step has many options)."""
    context = {"held_type": held, "room": "kitchen", "step": number, "episode": episode}
    actions = (*actions, *GOTOS)
    return RecordedStep(context, actions, (1.0,) * len(actions), chosen, violated, episode, number)


def learn(
    history: list[RecordedStep],
    theta_of=lambda s: "rule",
    text: str = "whatever the verdict says",
    search=synthesize,
    older: tuple[RecordedStep, ...] = (),
) -> str:
    """The rule learned from ``history`` (the agent's window of recorded steps); ``older`` steps left the window
    and live on only as verdicts in the agent's evidence."""
    evidence = ExperienceVerifier(frozenset({"episode"}))
    for s in (*older, *history):
        evidence.record(s.context, s.chosen_action, s.violated, s.step_id)
    failures = [s for s in history if s.violated]
    last = failures[-1]
    theta = theta_of(last)
    first = next(s for s in failures if theta_of(s) == theta)
    key = (last.chosen_action.kind, last.chosen_action.name)
    varied = frozenset(
        k for k in last.context if len({s.context.get(k) for s in history}) > 1 and k != "episode"
    )
    experience = Experience(
        failures=tuple((s.context, s.chosen_action) for s in failures if theta_of(s) == theta),
        met=tuple(dict.fromkeys(a for s in history for a in s.actions if a.is_control)),
        varied=varied,
        successes=tuple(
            (s.context, s.chosen_action, s.step_id >= first.step_id)
            for s in history
            if not s.violated and (s.chosen_action.kind, s.chosen_action.name) == key
        ),
        since=first.step_id,
    )
    fragment = extract_fragment(
        last,
        evidence,
        CLASSES,
        theta=theta,
        ignore=frozenset({"episode"}),
        verdict_text=text,
        experience=experience,
    )
    steps = [s for s in history if not s.violated or theta_of(s) == theta]
    data = build_dataset(steps, evidence, fragment, since=first.step_id)
    config = SearchConfig(num_simulations=600)
    result = (
        synthesize(data, fragment, (), (), CLASSES, config, seed=0)
        if search is synthesize
        else search(data, fragment, (), (), CLASSES, config)
    )
    assert result.admitted
    return canonical_text(result.rule)


MENU = (clean("mug 1", "sinkbasin 1"), clean("mug 1", "sinkbasin 2"), clean("plate 1", "sinkbasin 1"))


def test_one_failure_yields_the_narrowest_rule_the_met_actions_allow_and_the_wording_decides_nothing():
    history = [step(MENU, 2, False, 0), step(MENU, 0, True, 1)]
    rules = {
        learn(history, text=t)
        for t in ("Do not wash mugs in sinkbasin 1.", "Keep cups out of the left sink.")
    }
    (rule,) = rules  # two wordings, one rule: the text is not read
    assert (
        '"sinkbasin 1"' in rule and '"mug' in rule
    )  # the basin and the mug: the presumed-safe neighbours stay open


def test_a_sibling_failure_of_the_same_told_rule_widens_to_the_type_then_to_the_class():
    menu = (
        *MENU,
        clean("mug 2", "sinkbasin 1"),
        clean("bowl 1", "sinkbasin 1"),
        clean("apple 1", "sinkbasin 1"),
    )
    first = [step(menu, 5, False, 0), step(menu, 0, True, 1)]
    assert 'action.obj == "mug 1"' in learn(first)  # narrow: mug 2 was met and is presumed safe
    two_mugs = [*first, step(menu, 3, True, 2)]
    assert 'action.obj_type == "mug"' in learn(two_mugs)  # a sibling: the type
    mug_and_plate = [*first, step(menu, 2, True, 2)]
    # the bowl (never tried) does not veto the class; the apple (washed safely) keeps it from "any cleaning"
    assert 'in_class(action.obj_type, "dishware")' in learn(mug_and_plate)


def test_presumptions_give_way_to_the_failures_generalisation():
    verifier = ExperienceVerifier()
    met = (clean("mug 2", "sinkbasin 1"), clean("bowl 1", "sinkbasin 1"), clean("apple 1", "sinkbasin 1"))
    one = Experience(failures=((({}), clean("mug 1", "sinkbasin 1")),), met=met)
    presumed, weights = presumptions({}, clean("mug 1", "sinkbasin 1"), verifier, one, CLASSES)
    assert {a.text for _, a in presumed} == {a.text for a in met} and weights == (1.0, 1.0, 1.0)
    two = Experience(
        failures=(({}, clean("mug 1", "sinkbasin 1")), ({}, clean("plate 1", "sinkbasin 1"))), met=met
    )
    presumed, _ = presumptions({}, clean("plate 1", "sinkbasin 1"), verifier, two, CLASSES)
    assert {a.text for _, a in presumed} == {"clean apple 1 with sinkbasin 1"}  # mug 2, bowl 1 join the class


def test_fresh_successes_with_empty_hands_keep_the_condition_on_what_is_held():
    menu = (opening("drawer 1"), opening("drawer 2"), opening("cabinet 1"))
    history = [step(menu, 1, False, 0, "none", 2), step(menu, 0, True, 1, "mug", 4)]
    history += [
        step(menu, 0, False, 2, "none", n) for n in (2, 5)
    ]  # after the first failure: strong evidence
    history += [step(menu, 1, True, 3, "plate", 6)]  # a sibling drawer fails too
    rule = learn(history)
    assert 'action.recep_type == "drawer"' in rule and 'held_type != "none"' in rule


def test_no_equality_on_a_numeric_context_variable_restates_when_a_rule_switched_on():
    menu = (clean("mug 1", "sinkbasin 1"), clean("apple 1", "sinkbasin 1"))
    # washed safely before the rule switched on (weak), then it failed: "step == 7" would separate them
    history = [step(menu, 0, False, e, number=n) for e, n in ((0, 2), (1, 3), (2, 4))]
    history += [step(menu, 1, False, 3, number=5), step(menu, 0, True, 4, number=7)]
    rule = learn(history)
    assert "step ==" not in rule and '"mug' in rule


def test_remembered_flagged_actions_follow_every_new_verdict_in_their_situation():
    # D_t asks the evidence which actions of every recorded step it flags, at every synthesis; the evidence
    # remembers a step's answer until a verdict changes an answer in that step's situation (the same context but
    # for the ignored bookkeeping: another episode's step of the same situation is the same evidence).
    evidence = ExperienceVerifier(frozenset({"episode"}))
    mug, bowl = clean("mug 1", "sinkbasin 1"), clean("bowl 1", "sinkbasin 1")
    here = step((mug, bowl), 0, False, episode=0)
    again = step((mug, bowl), 1, False, episode=4)  # the same situation, a later episode
    elsewhere = step((mug, bowl), 0, False, episode=0, held="mug")
    assert evidence.flagged_actions(here) == ()
    evidence.record(elsewhere.context, mug, True)  # another situation: the answer stands
    assert evidence.flagged_actions(here) == ()
    assert evidence.flagged_actions(elsewhere) == (mug,)
    evidence.record(again.context, bowl, True)
    assert evidence.flagged_actions(here) == (bowl,)
    evidence.record(here.context, mug, False)  # a safe verdict is evidence too, but flags nothing
    evidence.record(here.context, mug, True)
    assert evidence.flagged_actions(here) == (mug, bowl)
    evidence.record(here.context, mug, False)  # once flagged, flagged
    for s in (here, again, elsewhere):
        assert evidence.flagged_actions(s) == flagged_actions(s, evidence)
    failed = step((mug, bowl), 1, True, episode=5, held="mug")
    evidence.record(failed.context, bowl, True)
    data = build_dataset([here, again, elsewhere, failed], evidence)
    assert data.Q_safe == () and (bowl, mug) == data.D_minus[0].F


# ---- issue 40: evidence before context ------------------------------------------------------------------------------
# Constructed cases: a realistic D⁺ (forty steps of walking elsewhere, so one blocked success is not the whole of
# L_succ), then the failures and successes that do or do not separate a context variable.


def moving(obj: str, recep: str, is_clean: bool, is_wet: bool) -> Action:
    args = {"obj": obj, "obj_type": obj.split()[0], "is_clean": is_clean, "is_wet": is_wet}
    args |= {"recep": recep, "recep_type": recep.split()[0]}
    return Action("env", "move", tuple(sorted(args.items())), f"move {obj} to {recep}")


def using(obj: str) -> Action:
    args = (("obj", obj), ("obj_type", obj.split()[0]), ("recep", "desk 1"), ("recep_type", "desk"))
    return Action("env", "use", args, f"use {obj}")


def situated(
    actions, chosen, violated, episode, number, *, room="kitchen", held="none", wet=False, clean=False
):
    """A step whose context carries what a household step's does: the room, the step, what is held and its state."""
    context = {
        "held_type": held,
        "held_is_clean": clean,
        "held_is_wet": wet,
        "room": room,
        "step": number,
        "episode": episode,
    }
    actions = (*actions, *GOTOS)
    return RecordedStep(context, actions, (1.0,) * len(actions), chosen, violated, episode, number)


def walking(actions, episodes: int = 4) -> list[RecordedStep]:
    """Forty safe steps of walking to the receptacles (the chosen action is a goto)."""
    first = len(actions)
    return [
        situated(actions, first + i % len(GOTOS), False, 100 + i // 10, 1 + i % 10)
        for i in range(10 * episodes)
    ]


def test_clean_and_wet_confounded_in_every_failure_keep_both_readings_on_the_action():
    # cleaning makes a mug clean *and* wet; it fails into cabinet 1 that way, a dirty (dry) mug went in safely:
    # nothing separates the two flags, so the rule keeps both (not one at random), and reads them off the action
    # moved, not off the hands (held_is_clean restates the object's own flag)
    def menu(clean, wet):
        return (moving("mug 1", "cabinet 1", clean, wet), moving("mug 1", "countertop 1", clean, wet))

    history = [
        situated(menu(False, False), 0, False, 0, 4, held="mug"),
        situated(menu(True, True), 1, False, 1, 6, held="mug", clean=True, wet=True),
        situated(menu(True, True), 0, True, 2, 6, held="mug", clean=True, wet=True),
    ]
    rule = learn(history)
    assert "action.is_clean == true" in rule and "action.is_wet == true" in rule, rule
    assert "held_is" not in rule, rule
    # a contrast decides for wetness: a clean mug, dried on the counter, went into the cabinet safely after the
    # failure (nothing decides against cleanliness: no object is ever wet and dirty, so keeping it costs nothing)
    history.append(situated(menu(True, False), 0, False, 3, 9, held="mug", clean=True))
    rule = learn(history)
    assert "action.is_wet == true" in rule and "held_is" not in rule, rule


def test_a_safe_verdict_from_before_the_rule_was_in_force_certifies_no_what_if():
    # "use desklamp 1" went well at step 3 of an early episode (the verdict is kept; the step has left the window),
    # then failed at step 6 in the same situation: the step is all that differs. The early verdict may predate the
    # rule, so it does not make "the lamp at step 3" a certified-safe what-if, and no step window is forced
    lamps = (using("desklamp 1"), using("desklamp 2"))
    before = situated(lamps, 0, False, 0, 3)
    failure = situated(lamps, 0, True, 5, 6)
    rule = learn([*walking(lamps), failure], older=(before,))
    assert rule == 'if action.obj == "desklamp 1" then forbid_env_action("use")', rule
    # the same verdict received after the rule's first failure (the rule in force) does certify it
    again = situated(lamps, 0, False, 6, 3)
    rule = learn([*walking(lamps), failure], older=(before, again))
    assert 'action.obj == "desklamp 1"' in rule and "step >" in rule, rule


@pytest.mark.xfail(
    strict=True,
    reason="issue 40 item 2, not landed: the stale success is no certified what-if any more (it differs in room "
    "and step), but masking it still costs L_succ 5.1 + its weak contrast 2 + its weak transplant 6 against 7 for "
    '`room != "kitchen"`; withholding such context (the gates of docs/precision.md) or dropping weak transplants '
    "cost paraphrase_b/c tasks",
)
def test_a_room_and_step_coincidence_without_separating_evidence_enters_no_guard():
    # "open drawer 1" succeeded in the kitchen at step 5 before the rule's first failure (stale: the rule may have
    # switched on since), then failed in the bedroom at step 3: the room and the step differ, but no failure and
    # strong success of the action do — so the rule is about drawer 1, not the room or the hour
    menu = (opening("drawer 1"), opening("drawer 2"), opening("cabinet 1"))
    history = walking(menu) + [
        situated(menu, 0, False, 0, 5),
        situated(menu, 1, False, 0, 6),
        situated(menu, 0, True, 1, 3, room="bedroom"),
        situated(menu, 0, True, 2, 2, room="bedroom"),
    ]
    rule = learn(history)
    assert 'action.recep == "drawer 1"' in rule and "room" not in rule and "step" not in rule, rule
    # separating evidence: the same action failed in the bedroom and then, with the rule in force, succeeded in the
    # kitchen — the room is kept
    history = walking(menu) + [
        situated(menu, 0, True, 1, 3, room="bedroom"),
        situated(menu, 0, False, 2, 3, room="kitchen"),
        situated(menu, 0, True, 3, 4, room="bedroom"),
    ]
    rule = learn(history)
    assert 'room != "kitchen"' in rule or 'room == "bedroom"' in rule, rule


def test_wet_dishware_beside_a_dry_neighbour_gives_the_class_and_the_wet_reading_not_instances():
    # a wet cup and a wet mug failed into cabinet 1; a dry, dirty plate was only met (never moved there); an apple
    # went in wet, safely: the class (dishware) is the cheapest rule consistent with D⁺ and D⁻ — the plate's other
    # state flags are no reason to keep it presumed safe (the flags have their own readings)
    def wet(obj):
        return (moving(obj, "cabinet 1", True, True), moving(obj, "countertop 1", True, True))

    held = {"clean": True, "wet": True}
    dry_plate = (
        moving("plate 1", "cabinet 1", False, False),
        moving("plate 1", "countertop 1", False, False),
    )
    history = walking(dry_plate) + [
        situated(dry_plate, 1, False, 0, 3, held="plate"),
        situated(wet("cup 1"), 0, True, 1, 5, held="cup", **held),
        situated(wet("mug 1"), 0, True, 2, 5, held="mug", **held),
        situated(wet("apple 1")[:1], 0, False, 3, 5, held="apple", **held),
    ]
    # the objective's optimum over the whole derivation space — and the search finds it: the tree alone (600
    # simulations) ends at the instance disjunction, which scores worse; the generalisation step after it offers
    # the type and the class in its place (``synthesis.mcts._generalise``)
    for search in (exhaustive_search, synthesize):
        rule = learn(history, search=search)
        assert 'in_class(action.obj_type, "dishware")' in rule and "action.obj ==" not in rule, rule
        assert "action.is_wet == true" in rule, rule


def test_no_step_window_where_what_is_held_separates_the_same_evidence():
    # the clock gate: "open drawer 1" succeeded empty-handed at steps 1-2 and failed holding a mug at step 5 and a
    # plate at step 6, and the agent walks empty-handed early and carrying later (what is held and the step are
    # confounded in every step): `step > 4` and `held_type != "none"` separate the same evidence, and what is held
    # has no value in common between the failures and the successes of the action — so no step window is offered,
    # and the rule is about what is held (on main the window wins on drift and masks the empty-handed opening the
    # expert needs later)
    menu = (opening("drawer 1"), opening("drawer 2"), opening("cabinet 1"))
    first = len(menu)
    carrying_later = [
        situated(
            menu,
            first + i % len(GOTOS),
            False,
            100 + i // 10,
            1 + i % 10,
            held="none" if i % 10 < 3 else "mug",
        )
        for i in range(40)
    ]
    history = carrying_later + [
        situated(menu, 0, False, 0, 1),
        situated(menu, 0, True, 1, 5, held="mug"),
        situated(menu, 0, False, 2, 1),
        situated(menu, 0, False, 3, 2),
        situated(menu, 0, True, 4, 6, held="plate"),
    ]
    rule = learn(history)
    assert 'action.recep == "drawer 1"' in rule and 'held_type != "none"' in rule and "step" not in rule, rule
    # (the window still comes where the step alone separates: the desk lamp's fresh what-if above keeps `step >`)
