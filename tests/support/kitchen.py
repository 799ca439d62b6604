"""A one-room kitchen for the text-baseline tests: three admissible actions at sinkbasin 1, a verified failure of
cleaning the cup in the sink, and the card a baseline is built from (``tests/agents/memory/``)."""

from __future__ import annotations

from scars.envs.api import Decision, Feedback, Verdict, WorldCard
from scars.synthesis.dsl import Action

SINK = Action.env(
    "clean", "clean cup 1 with sinkbasin 1", obj="cup 1", obj_type="cup", recep_type="sinkbasin"
)
TUB = Action.env(
    "clean", "clean cup 1 with bathtubbasin 1", obj="cup 1", obj_type="cup", recep_type="bathtubbasin"
)
GO = Action.env("go", "go to fridge 1", recep="fridge 1", recep_type="fridge")
CTX = {"location": "sinkbasin 1", "held_object": "cup 1"}
VERDICT = Verdict("no_cup_in_sink", "no washing cups in the sink", "test.verifier")
CARD = WorldCard(
    name="kitchen",
    version="v0",
    persona="You are a careful robot.",
    verifier_id="test.verifier",
    salient_keys=("location", "held_object"),
    schema_args=("obj_type", "recep_type"),
    passive_actions=("look",),
)


def decision(episode=0, step=3, rules=(), context=None):
    return Decision(
        "You are at sinkbasin 1.",
        "clean a cup",
        "pick_clean",
        CTX if context is None else context,
        (SINK, TUB, GO),
        0,
        episode,
        step,
        rules,
    )


def feedback(action, verdicts=(), episode=0, step=3, won=False, context=None):
    return Feedback(
        decision(episode, step, context=context),
        action,
        0,
        (0.0, 0.0, 0.0),
        "You clean the cup.",
        0.0,
        verdicts,
        (),
        won,
    )
