"""``scars/Household-v0``: Gymnasium conformance, determinism, info contract, rules in the loop (SPEC §7)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import scars.envs.household  # noqa: F401  (registers scars/Household-v0)
from scars.envs.household import RULE_LIBRARY, RuleSchedule, World, expert_plan, generate_game
from scars.envs.household.env import HouseholdConfig, HouseholdEnv
from scars.synthesis.dsl.ast import Action
from scars.synthesis.errors import WorldError


def test_check_env_passes():
    check_env(HouseholdEnv(schedule=RuleSchedule.from_ids(RULE_LIBRARY)), skip_render_check=True)


def test_registered_id_makes_the_env():
    env = gym.make("scars/Household-v0", config=HouseholdConfig(task_type="pick_two_obj_and_place"))
    obs, info = env.reset(seed=1)
    assert "put two" in obs and info["context"]["task_type"] == "pick_two_obj_and_place"
    assert env.observation_space.contains(obs)


def _run_episode(seed: int) -> list:
    env = HouseholdEnv(schedule=RuleSchedule.from_ids(RULE_LIBRARY), max_steps=50)
    rng = np.random.default_rng(seed)
    out = [env.reset(seed=seed)]
    while True:
        cmds = out[-1][-1]["admissible_commands"]
        step = env.step(cmds[int(rng.integers(len(cmds)))])
        out.append(step)
        if step[2] or step[3]:
            return out


def test_two_copies_with_one_seed_give_identical_episodes():
    for seed in (0, 1, 2):
        a, b = _run_episode(seed), _run_episode(seed)
        assert a == b and len(a) > 1


def test_info_contract():
    env = HouseholdEnv(schedule=RuleSchedule.from_ids(RULE_LIBRARY))
    obs, info = env.reset(seed=3)
    for _ in range(30):
        assert set(info) >= {"admissible_commands", "admissible_actions", "context", "violations", "won"}
        assert [a["text"] for a in info["admissible_actions"]] == info["admissible_commands"]
        for d in info["admissible_actions"]:
            act = Action.from_dict(d)
            assert act.kind == "env" and act.name.isidentifier()
            assert all(k.isidentifier() for k in d["args"])
        q = info["context"]
        assert all(k.isidentifier() and isinstance(v, str | int | float | bool) for k, v in q.items())
        assert {"location", "held_type", "step", "episode", "world_version", "rule_set_version"} <= set(q)
        obs, _, term, trunc, info = env.step(info["admissible_commands"][-1])
        if term or trunc:
            break


def test_expert_wins_with_reward_and_termination():
    spec = generate_game(4, "pick_heat_then_place_in_recep")
    env = HouseholdEnv()
    env.reset(seed=0, options={"game": spec})
    plan = expert_plan(World(spec))
    for i, cmd in enumerate(plan):
        obs, reward, term, trunc, info = env.step(cmd)
        assert term == (i == len(plan) - 1) and not trunc
    assert reward == 1.0 and info["won"]


def _dishware_clean_game():
    """The first clean-task game (by seed) whose target is dishware: cleaning needs a sink basin."""
    for seed in range(100):
        spec = generate_game(seed, "pick_clean_then_place_in_recep")
        if spec.task.obj_type in ("cup", "mug", "plate", "bowl", "pan"):
            return spec
    raise AssertionError("no dishware cleaning game in 100 seeds")


def test_violation_is_reported_penalised_and_not_blocked():
    spec = _dishware_clean_game()
    env = HouseholdEnv(
        schedule=RuleSchedule.from_ids(["no_dishware_in_sink", "no_cup_in_sink"]), violation_reward=-0.5
    )
    env.reset(seed=0, options={"game": spec})
    world = env.world
    target = next(o for o in spec.objects if o.otype == spec.task.obj_type)
    sink = world.receptacles_of_type("sinkbasin")[0]
    src = target.location
    for cmd in (f"go to {src}", f"open {src}", f"take {target.name} from {src}", f"go to {sink}"):
        if world.is_admissible(cmd):
            env.step(cmd)
    obs, reward, _, _, info = env.step(f"move {target.name} to {sink}")
    assert obs == f"You move the {target.name} to the {sink}."  # the action still happened
    ids = [v["rule_id"] for v in info["violations"]]
    assert "no_dishware_in_sink" in ids and ("no_cup_in_sink" in ids) == (target.otype == "cup")
    assert reward == pytest.approx(-0.5 * len(ids))
    assert info["violations"][0]["action"]["args"]["recep"] == sink
    assert world.location_of(target.name) == sink


def test_truncation_after_max_steps():
    env = HouseholdEnv(max_steps=3)
    env.reset(seed=0)
    results = [env.step("dance") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert results[-1][0] == "Nothing happens."


def test_game_selection_options_and_episode_counter():
    env = HouseholdEnv(game_seed=9)
    _, i1 = env.reset(seed=0)
    _, i2 = env.reset()
    assert i1["context"]["game_seed"] == i2["context"]["game_seed"] == 9
    assert (i1["context"]["episode"], i2["context"]["episode"]) == (0, 1)
    _, i3 = env.reset(options={"game_seed": 10})
    assert i3["context"]["game_seed"] == 10
    free = HouseholdEnv()
    seeds = {free.reset(seed=0)[1]["context"]["game_seed"]} | {
        free.reset()[1]["context"]["game_seed"] for _ in range(3)
    }
    assert len(seeds) == 4  # unseeded resets draw new games from the env's generator


def test_episode_scoped_rules_switch_on():
    env = HouseholdEnv(schedule=RuleSchedule.from_ids(["no_washing_cups_in_sink_after_10"]), game_seed=2)
    _, info = env.reset(seed=0)
    assert info["active_rules"] == [] and info["context"]["rule_set_version"] == 0
    for _ in range(10):
        _, _, _, _, info = env.step("look")
    assert info["active_rules"] == ["no_washing_cups_in_sink_after_10"]
    assert info["context"]["rule_set_version"] != 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"task_type": "fly"}, "unknown task type"),
        ({"max_steps": 0}, "max_steps"),
        ({"game_seed": -3}, "seed"),
    ],
)
def test_bad_config_is_a_world_error(kwargs, match):
    with pytest.raises(WorldError, match=match):
        HouseholdEnv(**kwargs)


def test_bad_step_inputs():
    env = HouseholdEnv()
    with pytest.raises(WorldError, match="before reset"):
        env.step("look")
    env.reset(seed=0)
    with pytest.raises(WorldError, match="command string"):
        env.step(3)  # type: ignore[arg-type]


def test_stepping_after_the_end_pays_nothing_and_warns():
    """Issue 13: the win reward was paid again on every step after termination."""
    spec = generate_game(4, "pick_heat_then_place_in_recep")
    env = HouseholdEnv()
    env.reset(seed=0, options={"game": spec})
    plan = expert_plan(World(spec))
    rewards = [env.step(cmd)[1] for cmd in plan]
    assert rewards[-1] == 1.0
    steps = env.world.steps
    for cmd in (plan[-1], "look", "dance"):
        with pytest.warns(UserWarning, match="after the episode ended"):
            obs, reward, term, trunc, info = env.step(cmd)
        assert (reward, term, trunc, info["won"]) == (0.0, True, False, True)
    assert env.world.steps == steps
    truncated = HouseholdEnv(max_steps=2)
    truncated.reset(seed=0)
    truncated.step("dance")
    assert truncated.step("dance")[3] is True
    with pytest.warns(UserWarning, match="after the episode ended"):
        _, reward, term, trunc, _ = truncated.step("dance")
    assert (reward, term, trunc) == (0.0, False, True)
