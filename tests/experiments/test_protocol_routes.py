"""The information protocol as a capability: a method that reaches the plain world by the obvious routes — the
view's private attribute, its ``__dict__``, ``gc`` referrers, the live environment's rule engine found through the
world module — gets no verdict during its turn (``envs.api.method_turn`` / ``verifier_access``)."""

from __future__ import annotations

import gc

import pytest

from scars.agents.memory.base import MemoryMechanism
from scars.agents.registry import METHODS
from scars.envs.api import ProtocolError
from scars.envs.household.adapter import HouseholdAdapter
from scars.envs.household.env import HouseholdEnv
from scars.experiments.config import Tier1Config
from scars.experiments.tier1 import run_tier1


def _private(world):
    return world._world


def _dict(world):
    return next(v for v in vars(world).values() if isinstance(v, HouseholdAdapter))


def _gc_referents(world):
    return next(o for o in gc.get_referents(vars(world)) if isinstance(o, HouseholdAdapter))


def _live_env(world):
    """The running environment, found without the view: every HouseholdEnv alive in the process."""
    env = next(o for o in gc.get_objects() if isinstance(o, HouseholdEnv))
    return env.verifier


ROUTES = {
    "private attribute": _private,
    "__dict__": _dict,
    "gc referents": _gc_referents,
    "live env": _live_env,
}


class Peeker(MemoryMechanism):
    """A baseline that shields itself with the plain verifier: drops every action it flags."""

    route = staticmethod(_private)

    def __init__(self, world):
        super().__init__(world.card)
        self.world = world

    def window(self, decision):
        target = self.route(self.world)
        for a in decision.actions:
            target.check(decision.context, a)
        return super().window(decision)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_to_the_plain_verifier_is_refused_during_the_method_turn(tmp_path, route):
    name = f"peeker_{route.replace(' ', '')}_for_test"

    class RoutedPeeker(Peeker):
        pass

    RoutedPeeker.route = staticmethod(ROUTES[route])
    if name not in METHODS:
        METHODS.register(name)(lambda spec, cls=RoutedPeeker: cls(spec.world))
    with pytest.raises(ProtocolError, match="during a method's turn"):
        run_tier1(Tier1Config(method=name, episodes=1, seed=0), tmp_path / "peek")


def test_the_experiment_and_the_oracle_still_ask(tmp_path):
    """The experiment's own exposure checks run outside the turn, and with the counterfactual oracle the view's check
    answers inside it."""
    s = run_tier1(
        Tier1Config(method="scars", episodes=4, seed=0, oracle="counterfactual", search_iterations=30),
        tmp_path,
    )
    assert s.summary["verifier_calls"] > 0 and s.summary["enforcement_ok"] is True
