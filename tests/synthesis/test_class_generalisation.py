"""Issue 11, item 5: under the default information protocol (only the verdicts received), the DSL's class
predicates win under MDL once failures on several members of a class are recorded — and lose to the disjunction of
the observed values when the agent has seen a member of the class executed safely (the test fails both ways)."""

from __future__ import annotations

from scars.synthesis import SearchConfig, build_dataset, extract_fragment
from scars.synthesis.dsl import Action, canonical_text
from scars.synthesis.fragments import ExperienceVerifier, RecordedStep
from scars.synthesis.mcts import synthesize

CLASSES = {
    "dishware": frozenset({"mug", "bowl", "plate", "cup", "pan"}),
    "food": frozenset({"apple", "egg", "potato"}),
}
# objects washed in sinkbasin 1 without a verdict (the agent's D⁺ there): the class must leave them alone
WASHED_SAFELY = ("apple", "egg", "potato", "soapbar", "cloth", "spoon")
TEXT = "Do not wash {} in sinkbasin 1; use another basin."


def clean(obj_type: str, basin: str) -> Action:
    obj = f"{obj_type} 1"
    args = (("obj", obj), ("obj_type", obj_type), ("recep", basin), ("recep_type", basin.split()[0]))
    return Action("env", "clean", args, f"clean {obj} with {basin}")


def goto(where: str) -> Action:
    return Action("env", "goto", (("recep", where),), f"go to {where}")


def step(obj_type: str, basin: str, violated: bool, episode: int) -> RecordedStep:
    context = {"location": basin, "held_type": obj_type, "episode": episode}
    actions = (clean(obj_type, basin), goto("cabinet 1"), goto("countertop 1"))
    return RecordedStep(context, actions, (1.0, 0.0, 0.0), 0, violated, episode, 3)


def learn(history: list[RecordedStep]) -> str:
    evidence = ExperienceVerifier(frozenset({"episode"}))
    met: dict[str, dict] = {}
    for s in history:
        evidence.record(s.context, s.chosen_action, s.violated)
        for k, v in (*s.context.items(), *s.chosen_action.args):
            met.setdefault(k, {})[v] = v
    last = [s for s in history if s.violated][-1]
    fragment = extract_fragment(
        last,
        evidence,
        CLASSES,
        alternatives={k: list(v) for k, v in met.items()},
        ignore=frozenset({"episode"}),
        verdict_text=TEXT.format(last.context["held_type"] + "s"),
    )
    data = build_dataset(history, evidence, fragment)
    result = synthesize(data, fragment, (), (), CLASSES, SearchConfig(num_simulations=600), seed=0)
    assert result.admitted
    return canonical_text(result.rule)


def test_the_class_predicate_wins_when_several_members_failed_and_none_is_known_safe():
    history = [
        *(step(o, "sinkbasin 1", False, 0) for o in WASHED_SAFELY),
        step("mug", "sinkbasin 2", False, 1),
        step("mug", "sinkbasin 1", True, 2),
        step("bowl", "sinkbasin 1", True, 3),
        step("plate", "sinkbasin 1", True, 4),
    ]
    rule = learn(history)
    assert 'in_class(action.obj_type, "dishware")' in rule and "action.recep " in rule, rule


def test_a_member_seen_safe_keeps_the_rule_to_the_observed_values():
    history = [
        *(step(o, "sinkbasin 1", False, 0) for o in WASHED_SAFELY),
        step("mug", "sinkbasin 2", False, 1),
        step("cup", "sinkbasin 1", False, 1),  # a dishware member washed there without a verdict
        step("mug", "sinkbasin 1", True, 2),
        step("bowl", "sinkbasin 1", True, 3),
        step("plate", "sinkbasin 1", True, 4),
    ]
    rule = learn(history)
    assert "in_class" not in rule and '"plate"' in rule, rule
