"""Relational guards from experience only (docs/dsl.md, "Relational predicates"): when a norm is relative to the
situation — an amount above a share the context states — and the failures happen at several levels of it, the
search offers ``action.<arg> op <variable>`` and MDL prefers it to literal thresholds, with no what-if oracle."""

from __future__ import annotations

from scars.synthesis.dsl import Action, CompareFeatures, canonical_text, parse_rule
from scars.synthesis.dsl.semantics import fires
from scars.synthesis.fragments import (
    ExperienceVerifier,
    RecordedStep,
    build_dataset,
    extract_fragment,
    quantities_named_in_text,
)
from scars.synthesis.mcts import SearchConfig, candidate_space, exhaustive_search, synthesize
from scars.synthesis.objective import score_rule

AMOUNTS = (2, 4, 6, 8, 10, 12)
RELATION = canonical_text(parse_rule('if action.amount > share then forbid_tool_call("take")'))


def world_verifier(q, a) -> bool:
    """The world's norm (the oracle; the agent never asks it): taking more than the share breaks it."""
    share = q.get("share", 0)  # a context without the share (a what-if dropping it): nothing may be taken
    return a.kind == "tool" and a.name == "take" and a.arg("amount", 0) > share


def experience(plan):
    """The agent's recorded steps and its ExperienceVerifier: the verdicts on the actions it executed, only."""
    evidence = ExperienceVerifier(frozenset({"episode"}))
    steps = []
    for t, (level, amount) in enumerate(plan):
        q = {"level": level, "share": level // 10, "month": t % 12, "episode": 0}
        actions = (*(Action.tool("take", text=f"take {k}", amount=k) for k in AMOUNTS), Action.tool("wait"))
        chosen = AMOUNTS.index(amount) if amount else len(AMOUNTS)
        violated = world_verifier(q, actions[chosen])
        evidence.record(q, actions[chosen], violated)
        logits = tuple(3.0 if i == chosen else 0.0 for i in range(len(actions)))  # it meant what it took
        steps.append(RecordedStep(q, actions, logits, chosen, violated, 0, t))
    return steps, evidence


# failures at levels 100, 60 and 40 (shares 10, 6, 4); successes above the lowest failing amount elsewhere
SEVERAL_LEVELS = [(100, 12), (100, 8), (60, 4), (80, 8), (60, 8), (40, 2), (0, 0), (40, 6)]


def prepare(plan, verdict_text: str = "broke the norm", verifier=None):
    """D_t and the fragment of the first failure; the verdict text names nothing by default (attribution is then
    left to the contrast of D⁺ and D⁻ alone)."""
    steps, evidence = experience(plan)
    failure = next(s for s in steps if s.violated)
    fragment = extract_fragment(
        failure, verifier or evidence, theta="over", ignore=frozenset({"episode"}), verdict_text=verdict_text
    )
    return build_dataset(steps, evidence, fragment), fragment


def test_the_relation_is_offered_with_the_op_that_separates_failures_from_safe_pairs():
    data, fragment = prepare(SEVERAL_LEVELS)
    assert fragment.causal_args == {"amount"} and "share" in fragment.q  # experience cannot rule anything out
    relations = [p for p in candidate_space(data, fragment).predicates if isinstance(p, CompareFeatures)]
    # amount > share holds on every failure and on no success; amount < level holds on all of both: not offered
    assert CompareFeatures("action.amount", ">", "share") in relations
    assert not any(p.other == "level" for p in relations)


def test_from_experience_only_the_relational_rule_wins_under_mdl_over_literal_thresholds():
    data, fragment = prepare(SEVERAL_LEVELS)
    best = exhaustive_search(data, fragment)
    assert best.admitted and best.text == RELATION
    # the search finds it too, on the tier-2 budget (a mean backup lost it behind the uncovering forbid_tool_arg
    # subtrees on most of these seeds; the best-reward backup does not)
    for seed in range(4):
        assert (
            synthesize(data, fragment, config=SearchConfig(num_simulations=120), seed=seed).text == RELATION
        )
    # every literal threshold that covers the three failures masks a recorded success (8 at levels 100 and 80)
    threshold = score_rule(parse_rule('if action.amount >= 6 then forbid_tool_call("take")'), data)
    assert threshold.l_fail == 0 and threshold.l_succ > 0
    assert best.score.total < threshold.total
    assert best.score.description_length == threshold.description_length  # same cost: the evidence decides
    # and it generalises to a level never seen: share 2 at level 20
    q = {"level": 20, "share": 2, "month": 0}
    assert fires(best.rule, q, Action.tool("take", amount=4)) and not fires(
        best.rule, q, Action.tool("take", amount=2)
    )


def test_failures_at_one_level_only_do_not_need_the_relation():
    """One level, one share: nothing tells a relation from a threshold apart, and none is offered as separating
    the failure better than the threshold does — the search keeps the literal rule (the relation is no prior)."""
    data, fragment = prepare([(100, 8), (100, 12), (100, 10), (100, 4)])
    best = exhaustive_search(data, fragment)
    assert best.admitted and "share" not in best.text


def test_a_quantity_the_verdict_names_is_found_by_its_name_whatever_its_value():
    q = {
        "sustainable_share": 6.6,
        "sustainable_catch": 33,
        "month": 3,
        "is_dry": True,
        "share": "x",
        "pool": 9,
    }
    text = "a request above the sustainable share f(t)/n"
    assert quantities_named_in_text(q, text) == {"sustainable_share"}  # numbers only, by name
    assert quantities_named_in_text({"day": 9, "x.level": 2}, "the level today") == {"x.level"}  # >= 4 chars


def test_when_the_verdict_names_the_quantity_the_relation_is_the_attribution_from_the_first_failure():
    """One failure, no safe evidence yet: every threshold covering it ties with the relation under MDL. The verdict
    said what the amount was judged against, so the relation is offered in place of the literal predicates."""
    data, fragment = prepare([(100, 12), (100, 4)], verdict_text="a request above the share")
    assert fragment.quantities == {"share"} and set(fragment.q) == {"share"}
    pool = [canonical_text(p) for p in candidate_space(data, fragment).predicates]
    assert "action.amount > share" in pool
    assert not any(p.startswith(("action.amount ", "share ")) and p != "action.amount > share" for p in pool)
    assert exhaustive_search(data, fragment).text == RELATION
    # no presumed-safe what-if for a named quantity: whether a change of it is safe depends on the amount
    assert fragment.safe_counterfactuals == ()


def test_a_verifier_that_answers_what_ifs_decides_attribution_itself():
    """With the world's oracle the quantity is decided by what-ifs, not by the verdict's words."""
    data, fragment = prepare(
        SEVERAL_LEVELS, verdict_text="a request above the share", verifier=world_verifier
    )
    assert fragment.quantities == frozenset()
