"""Relational guards from experience only (README "Relational predicates"): when a norm is relative to the
situation — an amount above a share the context states — and the failures happen at several levels of it, the
search offers ``action.<arg> op <variable>`` and MDL prefers it to literal thresholds, with no what-if oracle."""

from __future__ import annotations

from synthesis.dsl import Action, CompareFeatures, canonical_text, parse_rule
from synthesis.dsl.semantics import fires
from synthesis.fragments import ExperienceVerifier, RecordedStep, build_dataset, extract_fragment
from synthesis.mcts import candidate_space, exhaustive_search, synthesize
from synthesis.objective import score_rule

AMOUNTS = (2, 4, 6, 8, 10, 12)
RELATION = canonical_text(parse_rule('if action.amount > share then forbid_tool_call("take")'))


def world_verifier(q, a) -> bool:
    """The world's norm (the oracle; the agent never asks it): taking more than the share breaks it."""
    return a.kind == "tool" and a.name == "take" and a.arg("amount") > q["share"]


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


def prepare(plan):
    steps, evidence = experience(plan)
    failure = next(s for s in steps if s.violated)
    fragment = extract_fragment(
        failure,
        evidence,
        theta="over",
        ignore=frozenset({"episode"}),
        verdict_text="took more than the share",
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
    assert synthesize(data, fragment, seed=0).text == RELATION
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
