"""The simulated LM's competence (``experiments.model_plan``): the tidying habit that H forbids (z_C moves in tier 1)
and the re-plan around refused steps when no route avoids the controller's rules."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scars.disequilibrium.contradiction import contradicts_core
from scars.envs.household.adapter import HouseholdAdapter, core_schema
from scars.envs.household.env import HouseholdConfig, HouseholdEnv
from scars.envs.household.expert import expert_plan
from scars.envs.household.world import OBJECT_CLASSES
from scars.experiments.config import Tier1Config
from scars.experiments.model_plan import ModelPlan, refused_in_context, task_prior
from scars.experiments.schedules import episode_games
from scars.experiments.tier1 import run_tier1
from scars.synthesis.dsl import Action, parse_rule

GAMES = episode_games("paper", 36, 0)


def _env(game) -> HouseholdEnv:
    env = HouseholdEnv(HouseholdConfig())
    env.reset(seed=0, options={"game": game})
    return env


def _plan(env: HouseholdEnv) -> ModelPlan:
    return ModelPlan(env, agent=None, card=HouseholdAdapter(env).card)  # type: ignore[arg-type]


def _actions(env: HouseholdEnv) -> tuple[Action, ...]:
    return tuple(Action.from_dict(d) for d in env.world.admissible_actions())


def _top(env: HouseholdEnv, prior: np.ndarray) -> str:
    return _actions(env)[int(np.argmax(prior))].text


def test_the_tidying_habit_walks_to_the_bin_and_proposes_what_h_forbids():
    """Game 4 of seed 0 is a tidying episode: once the model holds what it took, its habit is to walk to the
    garbage can and throw it in — H forbids that throw, so z_C (which reads the proposal) sees it."""
    env = _env(GAMES[4])
    plan = _plan(env)
    assert plan.tidy
    route = expert_plan(env.world)
    take = next(i for i, c in enumerate(route) if c.startswith("take "))
    for cmd in route[: take + 1]:  # nothing held yet: the habit waits, the task's route is the habit
        assert _top(env, plan.prior(_actions(env))) == cmd
        env.step(cmd)
    held = env.world.context()["held_object"]
    prior = plan.prior(_actions(env))
    assert _top(env, prior) == "go to garbagecan 1"
    assert sorted(prior[prior > 0]) == [0.6, 1.0]  # the task's next step stays the alternative
    env.step("go to garbagecan 1")
    actions = _actions(env)
    throw = _top(env, plan.prior(actions))
    assert throw == f"move {held} to garbagecan 1"
    q = env.world.context()
    assert contradicts_core(core_schema(), q, next(a for a in actions if a.text == throw), OBJECT_CLASSES)
    assert not plan.tidy  # proposed once: the habit has had its go
    assert _top(env, plan.prior(actions)) != throw


def test_the_habit_is_drawn_from_the_game_and_never_fires_when_the_task_wants_the_bin():
    tidy = [_plan(_env(g)).tidy for g in GAMES]
    assert tidy == [_plan(_env(g)).tidy for g in GAMES]  # the game decides, nothing else
    assert 0 < sum(tidy) < len(GAMES)
    assert GAMES[3].task.recep_type == "garbagecan" and not _plan(_env(GAMES[3])).tidy


def test_with_no_route_around_the_rule_the_model_plans_around_the_refused_step_in_its_situation():
    """A scar wider than the rule ("never open the fridge") leaves no route for a task that needs the fridge. The
    model was refused "open fridge 1" while holding something: it plans around that refusal in that situation —
    put the load down, open the fridge empty-handed — so its next proposal shows where the scar is too wide."""
    env = _env(GAMES[7])
    route = expert_plan(env.world)
    opening = route.index("open fridge 1")
    for cmd in route[:opening]:
        env.step(cmd)
    q = env.world.context()
    assert q["held_object"] != "none"
    actions = _actions(env)
    fridge = next(a for a in actions if a.text == "open fridge 1")
    wide = parse_rule('if action.recep == "fridge 1" then forbid_env_action("open")')
    counts: dict[str, int] = {}
    stuck = task_prior(env.world, actions, (fridge,), (wide,))
    assert not stuck.any()  # no route avoids the wide rule
    refusal = refused_in_context(fridge, q, ("location", "held_object", "held_type"))
    prior = task_prior(env.world, actions, (fridge,), (wide,), refused=(refusal,), counts=counts)
    assert prior.any() and counts == {"refused_route": 1}
    w = env.world.copy()  # its route puts the load down and opens the fridge empty-handed
    for cmd in expert_plan(w, (refusal,)):
        if cmd == "open fridge 1":
            assert w.context()["held_object"] == "none"
            break
        w.step(cmd)
    else:
        raise AssertionError("the route never opens the fridge")


def test_z_c_moves_in_tier_1_and_its_weight_changes_no_action(tmp_path):
    """Issue 24 #6: with the tidying habit z_C is nonzero in an ordinary tier-1 run. Its weight γ changes d_t but no
    action: accommodation starts on a verified failure, which crosses τ on its own (z_V = 1)."""
    base = dict(method="scars", episodes=12, seed=0)
    full = run_tier1(Tier1Config(**base), tmp_path / "full")
    zero = run_tier1(Tier1Config(**base, ablation="no_contradiction"), tmp_path / "zero")
    signal = full.summary["signal"]
    assert signal["z_C"]["nonzero_steps"] > 0 and signal["z_C"]["max"] > 0
    a, b = full.steps, zero.steps
    assert list(a["command"]) == list(b["command"])
    assert (a["z_C"] == b["z_C"]).all()
    assert not np.allclose(a["d_t"].to_numpy(), b["d_t"].to_numpy())
    assert isinstance(a, pd.DataFrame)


def test_a_scar_that_leaves_the_controller_stops_shaping_the_models_plan():
    """Issue 40 #3: once a narrowing at once replaces the wide scar within the episode, the model is no longer refused
    by it — it stops planning around the wide rule (and the refusals made under it) and proposes the task's step
    again, so the same episode can be won. Before, it planned around the retired rule until the episode's end."""
    from types import SimpleNamespace

    from scars.agents.runtime.control import ControlPlane
    from scars.agents.runtime.scar import Scar
    from scars.envs.api import Decision
    from scars.experiments.loop import Declined

    env = _env(GAMES[7])
    route = expert_plan(env.world)
    for cmd in route[: route.index("open fridge 1")]:
        env.step(cmd)
    q, actions = env.world.context(), _actions(env)
    scar = Scar(parse_rule('if action.recep == "fridge 1" then forbid_env_action("open")'))
    plane = ControlPlane(core=(), classes=OBJECT_CLASSES)
    plane.add(scar)
    agent = SimpleNamespace(self_schema=lambda: SimpleNamespace(plane=plane))
    plan = ModelPlan(env, agent=agent, card=HouseholdAdapter(env).card)  # type: ignore[arg-type]
    plan.tidy = False  # the game's tidying habit is beside the point here
    governed = plane.govern(q, actions, np.zeros(len(actions)), 0)
    fridge = next(i for i, a in enumerate(actions) if a.text == "open fridge 1")
    decision = Decision("", "", "", q, actions, 0, 0, 0)
    plan.replan(decision, Declined((fridge,), (), governed))
    assert _top(env, plan.planned(actions)) != "open fridge 1"  # it plans around the wide scar
    plane.remove(scar.id)  # narrowed: the wide scar leaves the controller
    assert plan.planned(actions) is None and plan.counts["lifted"] == 1
    assert _top(env, plan.prior(actions)) == "open fridge 1"
