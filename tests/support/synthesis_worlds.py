"""Crafted recorded trajectories for the synthesis tests (household-like and commons-like).

The ``tests/synthesis`` modules import the builders from here; ``tests/synthesis/test_worlds.py`` checks them. Every trajectory is hand-written so the
minimal rule can be derived by hand (see each builder's docstring).
"""

from __future__ import annotations

from scars.synthesis.dsl import Action
from scars.synthesis.fragments import RecordedStep

CLASSES = {
    "dishware": frozenset({"cup", "plate", "mug", "bowl"}),
    "produce": frozenset({"apple", "tomato", "potato"}),
}


def sink_verifier(forbidden_types: tuple[str, ...]):
    """The environment's rule: no object of these types moved into a sink basin."""

    def verifier(q, a) -> bool:
        return (
            a.kind == "env"
            and a.name == "move"
            and a.arg("obj_type") in forbidden_types
            and a.arg("recep_type") == "sinkbasin"
        )

    return verifier


def household_step(verifier, held: str, recep: str, choose: str, episode: int, step: int) -> RecordedStep:
    """Agent at ``recep`` holding ``held``: it may move it there, go elsewhere or examine; base logits fixed."""
    actions = (
        Action.env(
            "move",
            text=f"move {held} 1 to {recep} 1",
            obj=f"{held} 1",
            obj_type=held,
            recep=f"{recep} 1",
            recep_type=recep,
        ),
        Action.env("go", text="go to countertop 1", target="countertop 1"),
        Action.env("go", text="go to cabinet 1", target="cabinet 1"),
        Action.env("examine", text=f"examine {recep} 1", target=f"{recep} 1"),
    )
    chosen = {"move": 0, "go": 1, "examine": 3}[choose]
    context = {
        "location": f"{recep} 1",
        "location_type": recep,
        "held_type": held,
        "step": step,
        "episode": episode,
    }
    return RecordedStep(
        context, actions, (1.5, 0.5, 0.3, 0.0), chosen, verifier(context, actions[chosen]), episode, step
    )


def household(
    forbidden_types: tuple[str, ...] = ("cup",), failing: tuple[str, ...] = ("cup",), with_apple=True
):
    """A kitchen episode. Failures: each type in ``failing`` moved into the sink.

    Successes: cup → cabinet, mug → cabinet, (apple → sink). Safe contexts: bowl at the sink (walks away), apple at
    the countertop, bowl at the cabinet. With ``forbidden_types == failing == ("cup",)`` the minimal rule is
    ``if action.obj_type == "cup" and action.recep_type == "sinkbasin" then forbid_env_action("move")``: dropping
    the receptacle breaks cup → cabinet, dropping the type masks the apple and the bowl at the sink.
    """
    verifier = sink_verifier(forbidden_types)
    plan = [(t, "sinkbasin", "move") for t in failing] + [
        ("cup", "cabinet", "move"),
        ("bowl", "sinkbasin", "go"),
        ("apple", "countertop", "go"),
        ("mug", "cabinet", "move"),
        ("bowl", "cabinet", "examine"),
    ]
    if with_apple:
        plan.append(("apple", "sinkbasin", "move"))
    steps = [household_step(verifier, h, r, c, 0, i + 1) for i, (h, r, c) in enumerate(plan)]
    return steps, verifier


def harvest_verifier(limit: float = 20):
    """GovSim-style norm: harvesting while the pool is below ``limit`` collapses the commons."""

    def verifier(q, a) -> bool:
        return a.kind == "tool" and a.name == "harvest" and q.get("pool_resource_level", float("inf")) < limit

    return verifier


def commons_step(verifier, pool: int, month: int, choose: str, karma: int = 10) -> RecordedStep:
    """One harvest decision: harvest 5 or 10 tons, or rest; the base policy likes to harvest."""
    actions = (
        Action.tool("harvest", text="harvest 5", amount=5),
        Action.tool("harvest", text="harvest 10", amount=10),
        Action.tool("rest", text="rest"),
    )
    chosen = {"harvest5": 0, "harvest10": 1, "rest": 2}[choose]
    context = {"pool_resource_level": pool, "month": month, "karma": karma, "sustainable_share": pool // 10}
    return RecordedStep(
        context, actions, (1.0, 1.2, 0.2), chosen, verifier(context, actions[chosen]), 0, month
    )


def commons():
    """Pools 100 → 60 → 40 → 30 (harvest fine), then 15 and 8 (harvest collapses the commons: failures)."""
    verifier = harvest_verifier(20)
    plan = [
        (100, 1, "harvest10"),
        (60, 2, "harvest10"),
        (40, 3, "harvest5"),
        (30, 4, "harvest5"),
        (15, 5, "harvest10"),
        (8, 6, "harvest5"),
        (25, 7, "rest"),
    ]
    steps = [commons_step(verifier, p, m, c) for p, m, c in plan]
    return steps, verifier


def wide_world(n_vars: int = 8, n_steps: int = 30, seed: int = 0):
    """A failure that needs every one of ``n_vars`` numeric sensors high at once: a large derivation space.

    Used where a search must run long enough to observe it in flight.
    """
    import numpy as np

    rng = np.random.default_rng(seed)

    def verifier(q, a) -> bool:
        return a.kind == "tool" and a.name == "vent" and all(q.get(f"s{i}", 0) > 50 for i in range(n_vars))

    actions = (Action.tool("vent", text="vent"), Action.tool("wait", text="wait"))
    steps = []
    for t in range(n_steps):
        high = t % 3 == 0
        context = {
            f"s{i}": int(rng.integers(51, 100) if high else rng.integers(0, 100)) for i in range(n_vars)
        }
        chosen = 0 if t % 2 == 0 else 1
        steps.append(
            RecordedStep(context, actions, (1.0, 0.5), chosen, verifier(context, actions[chosen]), 0, t)
        )
    return steps, verifier
