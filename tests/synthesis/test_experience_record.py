"""Issue 39: the agent's evidence record (``ExperienceVerifier``) stays small. A world whose context counts steps
gives the record one new situation per executed step, for the whole run (a shielded PPO run of 1M steps): each must
cost a small, fixed amount (one flat tuple per situation, not one per variable), a situation met again nothing, and
the answers must be those of the record keyed by sorted (name, value) pairs."""

from __future__ import annotations

import gc
import tracemalloc
from types import MappingProxyType

from scars.synthesis.dsl import Action
from scars.synthesis.fragments import ExperienceVerifier

GOTO = Action("env", "goto", (("recep", "cabinet 3"), ("recep_type", "cabinet")), "go to cabinet 3")
TAKE = Action("env", "take", (("obj", "mug 1"), ("recep", "cabinet 3")), "take mug 1 from cabinet 3")


def context(i: int) -> MappingProxyType:
    """A household-like context at executed step ``i`` (every one a new situation: ``step`` counts)."""
    return MappingProxyType(
        {
            "room": "kitchen",
            "location": f"cabinet {i % 7}",
            "location_type": "cabinet",
            "location_open": i % 3 == 0,
            "held_object": "none",
            "held_type": "none",
            "held_is_clean": False,
            "held_is_hot": i % 2 == 0,
            "held_is_cool": False,
            "held_is_wet": False,
            "task_type": "pick_heat_then_place_in_recep",
            "target_obj_type": "plate",
            "target_recep_type": "countertop",
            "step": i % 1000,
            "episode": i // 30,
            "world_version": 0,
            "game_seed": i % 64,
        }
    )


def recorded_bytes(verifier: ExperienceVerifier, contexts: list) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, q in enumerate(contexts):
            verifier.record(q, GOTO, i % 97 == 0)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_new_situation_costs_a_few_hundred_bytes_one_met_again_nothing_and_answers_stand() -> None:
    verifier = ExperienceVerifier(frozenset({"episode", "game_seed"}))
    contexts = [context(i) for i in range(1000)]
    grown = recorded_bytes(verifier, contexts)
    assert len(verifier) == 1000
    # main's record kept ~1.5 KB a step (a sorted tuple of (name, value) pairs, one pair per variable, a new
    # ("bool", v) tag per boolean, and a change count per situation)
    assert grown / 1000 < 400, f"{grown / 1000:.0f} bytes per recorded step"
    # the same situations met again in later episodes (another episode counter and game): nothing new is kept
    # (every world variable repeats; the episode and the game differ)
    again = [context(i + 42_000) for i in range(1000)]
    assert recorded_bytes(verifier, again) < 2_000
    assert len(verifier) == 1000

    # the answers are those of a record keyed by the sorted (name, value) pairs without the bookkeeping
    q = dict(context(5_000))  # a new situation
    verifier.record(q, GOTO, False)
    verifier.record(q, TAKE, True)
    # the same situation in another key order, with other bookkeeping
    shuffled = dict(reversed(list({**q, "episode": 99, "game_seed": 3}.items())))
    assert verifier(shuffled, GOTO) is False and verifier(shuffled, TAKE) is True
    # a bool is not the equal int; a missing or extra variable is another situation
    assert verifier({**q, "location_open": 0}, GOTO) is None
    assert verifier({k: v for k, v in q.items() if k != "room"}, GOTO) is None
    assert verifier({**q, "weather": "rain"}, GOTO) is None
    # an answer only ever turns True, and a later safe verdict does not undo it
    verifier.record(shuffled, TAKE, False)
    assert verifier(q, TAKE) is True
