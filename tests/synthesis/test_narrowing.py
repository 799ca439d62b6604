"""``synthesis.narrowing``: what a proposal a scar blocked in a lost episode presumes (issue 24)."""

from __future__ import annotations

from scars.synthesis.dsl import Action
from scars.synthesis.failure import Failure, FailureSource
from scars.synthesis.narrowing import BlockedProposal, blocked_presumptions, with_presumptions

FRIDGE = Action.env("open", "open fridge 1", recep="fridge 1", recep_type="fridge")
FAILED_AT = {"held_type": "tomato", "room": "kitchen", "step": 7, "episode": 3}


def _blocked(context, action=FRIDGE, at=(5, 2)):
    return BlockedProposal(frozenset({"s1"}), context, action, at)


def test_the_categorical_differences_are_transplanted_into_the_failure_context_numbers_are_not():
    (p,) = blocked_presumptions(
        FAILED_AT,
        [(FAILED_AT, FRIDGE)],
        [_blocked({"held_type": "none", "room": "kitchen", "step": 2, "episode": 5})],
        ignore=frozenset({"episode"}),
    )
    q, a = p
    assert a == FRIDGE
    # the held type changes; the step stays the failure's (a step counter would separate any two decisions), and
    # bookkeeping is never changed
    assert dict(q) == {"held_type": "none", "room": "kitchen", "step": 7, "episode": 3}


def test_the_failures_own_situation_and_a_refuted_presumption_are_dropped():
    same = _blocked({"held_type": "tomato", "room": "kitchen", "step": 12})
    mug = _blocked({"held_type": "mug", "room": "kitchen", "step": 12}, at=(6, 1))
    failed_with_mug = {"held_type": "mug", "room": "kitchen", "step": 4}
    assert blocked_presumptions(FAILED_AT, [(FAILED_AT, FRIDGE)], [same]) == ()
    assert len(blocked_presumptions(FAILED_AT, [(FAILED_AT, FRIDGE)], [mug])) == 1
    # a later failure with a mug in hand refutes the presumption that the fridge is safe with a mug in hand
    assert blocked_presumptions(FAILED_AT, [(FAILED_AT, FRIDGE), (failed_with_mug, FRIDGE)], [mug]) == ()


def test_another_action_blocked_in_the_same_situation_is_presumed_safe_there():
    other = Action.env("open", "open fridge 2", recep="fridge 2", recep_type="fridge")
    ((q, a),) = blocked_presumptions(FAILED_AT, [(FAILED_AT, FRIDGE)], [_blocked(dict(FAILED_AT), other)])
    assert a == other and dict(q) == FAILED_AT


def test_presumptions_are_added_at_full_weight_beside_the_fragments_own():
    f = Failure(FAILED_AT, (FRIDGE,), "rule", FailureSource("w", 3, 7))
    extra = blocked_presumptions(
        FAILED_AT, [(FAILED_AT, FRIDGE)], [_blocked({**FAILED_AT, "held_type": "none"})]
    )
    g = with_presumptions(f, extra)
    assert len(g.presumed_safe) == 1 and g.presumption_weights == (1.0,)
    assert with_presumptions(f, ()) is f
