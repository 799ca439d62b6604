"""A verdict that states its condition in words ("Open the fridge only with empty hands."): the world's glossary
(``envs.api.WorldCard.glossary``) says which variable the phrase is about and which value it allows, so extraction
from experience alone attributes the failure to that variable and the search offers ``variable != value``."""

from __future__ import annotations

from scars.envs.household.adapter import household_card
from scars.synthesis.dsl import Action, Compare, canonical_text, parse_rule
from scars.synthesis.fragments import (
    ExperienceVerifier,
    RecordedStep,
    build_dataset,
    extract_fragment,
    stated_in_text,
)
from scars.synthesis.mcts import candidate_space, exhaustive_search

GLOSSARY = {"empty hands": ("held_type", "none")}
TEXT = "Open the fridge only with empty hands."
RULE = canonical_text(
    parse_rule('if action.recep_type == "fridge" and held_type != "none" then forbid_env_action("open")')
)


def _open(recep: str) -> Action:
    return Action.env("open", text=f"open {recep} 1", recep=f"{recep} 1", recep_type=recep)


def experience(plan):
    """Recorded steps (held object, receptacle opened, violated?) and the verdicts the agent received, only."""
    evidence = ExperienceVerifier(frozenset({"episode"}))
    steps = []
    for t, (held, recep) in enumerate(plan):
        q = {"held_type": held, "location": f"{recep} 1", "episode": 0}
        actions = (_open("fridge"), _open("drawer"), Action.env("look"))
        chosen = 0 if recep == "fridge" else 1
        violated = recep == "fridge" and held != "none"
        evidence.record(q, actions[chosen], violated)
        steps.append(RecordedStep(q, actions, (1.0, 1.0, 0.0), chosen, violated, 0, t))
    return steps, evidence


PLAN = [("none", "drawer"), ("apple", "drawer"), ("apple", "fridge"), ("mug", "drawer")]


def _fragment(glossary):
    steps, evidence = experience(PLAN)
    failure = next(s for s in steps if s.violated)
    fragment = extract_fragment(
        failure, evidence, theta="fridge", ignore=frozenset({"episode"}), verdict_text=TEXT, glossary=glossary
    )
    return build_dataset(steps, evidence, fragment), fragment


def test_a_glossary_phrase_states_the_allowed_value_of_its_variable():
    assert stated_in_text({"held_type": "apple"}, TEXT, GLOSSARY) == {"held_type": "none"}
    assert stated_in_text({"held_type": "none"}, TEXT, GLOSSARY) == {}  # already allowed: not the cause
    assert stated_in_text({"held_type": "apple"}, "Never open the fridge.", GLOSSARY) == {}
    # issue 24: no rule sentence of ours is written into a world's code; the scars agent attributes from experience
    assert household_card().glossary == {}


def test_extraction_attributes_the_stated_variable_and_presumes_only_its_allowed_value_safe():
    _, fragment = _fragment(GLOSSARY)
    assert fragment.q.get("held_type") == "apple" and fragment.allowed == (("held_type", "none"),)
    safe_values = {q["held_type"] for q, _ in fragment.safe_counterfactuals if "held_type" in q}
    assert safe_values == {"none"}  # not "mug": the sentence allows empty hands only
    # without the glossary the verdict states nothing about the hands: no allowed value, no presumed-safe what-if
    _, blind = _fragment({})
    assert blind.allowed == () and not any(
        q.get("held_type") == "none" for q, _ in blind.safe_counterfactuals
    )


def test_the_search_offers_not_the_allowed_value_and_it_wins():
    data, fragment = _fragment(GLOSSARY)
    predicates = candidate_space(data, fragment).predicates
    assert Compare("held_type", "!=", "none") in predicates
    assert Compare("held_type", "==", "apple") not in predicates  # in its place, not beside it
    best = exhaustive_search(data, fragment)
    assert best.admitted and best.text == RULE
    # the fault the glossary fixes: without it the verdict names only the fridge, and the best candidate forbids
    # opening it whatever is held (here it is not even admissible: it moves too much of the model's mass)
    data, blind = _fragment({})
    assert dict(blind.q) == {}
    best_blind = exhaustive_search(data, blind)
    assert not best_blind.admitted
    assert best_blind.rejected[0].text == 'if action.recep_type == "fridge" then forbid_env_action("open")'


def test_a_value_the_action_carries_is_the_action_s_not_a_context_variable_s():
    # "Open drawers only with empty hands." names "drawer": the opened receptacle's type, and the task's target type
    # too when the task is to put something in a drawer — the verdict judges the action, so the action's wins
    evidence = ExperienceVerifier(frozenset({"episode"}))
    q = {"held_type": "fork", "target_recep_type": "drawer", "location": "drawer 1", "episode": 0}
    actions = (_open("drawer"), Action.env("look"))
    evidence.record(q, actions[0], True)
    step = RecordedStep(q, actions, (1.0, 0.0), 0, True, 0, 0)
    fragment = extract_fragment(
        step,
        evidence,
        theta="drawer",
        ignore=frozenset({"episode"}),
        verdict_text="Open drawers only with empty hands.",
        glossary=GLOSSARY,
    )
    assert "recep_type" in fragment.causal_args and "target_recep_type" not in fragment.q
    assert dict(fragment.q) == {"held_type": "fork"}
