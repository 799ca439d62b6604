"""The crafted synthesis worlds of ``tests/support/synthesis_worlds.py`` flag exactly the moves they say they do."""

from __future__ import annotations

from scars.synthesis.dsl import Action
from support.synthesis_worlds import commons, household


def test_household_world_flags_exactly_the_forbidden_moves():
    steps, _ = household(("cup", "plate"), ("cup", "plate"))
    violated = [(s.context["held_type"], s.context["location_type"]) for s in steps if s.violated]
    assert violated == [("cup", "sinkbasin"), ("plate", "sinkbasin")]


def test_commons_world_flags_harvests_below_the_limit_only():
    steps, verifier = commons()
    assert [s.context["pool_resource_level"] for s in steps if s.violated] == [15, 8]
    rest = Action.tool("rest")
    assert not any(verifier(s.context, rest) for s in steps)
