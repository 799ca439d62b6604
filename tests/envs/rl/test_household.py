"""The household's RL view: Gymnasium's and SB3's env checkers, masks, the documented encoding, progress shaping."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from scars.envs.household import RULE_LIBRARY, RuleSchedule
from scars.envs.household.expert import expert_plan
from scars.envs.household.world import NOTHING_HAPPENS
from scars.envs.rl import GLOBAL_FEATURES, SLOT_FEATURES, household_layout, make_household_view
from scars.synthesis.errors import WorldError
from support.extras import require_extra


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped")
@pytest.mark.parametrize("dict_obs", [False, True])
def test_gymnasium_check_env_passes(dict_obs):
    check_env(make_household_view(dict_obs=dict_obs, shaping=0.1), skip_render_check=True)


def test_sb3_env_checker_and_masking_support():
    require_extra("sb3_contrib", "rl")
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
    from stable_baselines3.common.env_checker import check_env as sb3_check_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    sb3_check_env(make_household_view(), warn=True)
    vec = DummyVecEnv([make_household_view])
    vec.reset()
    assert is_masking_supported(vec)
    assert get_action_masks(vec).shape == (1, 40)


def test_slots_are_the_admissible_commands_and_an_empty_slot_does_nothing():
    view = make_household_view()
    obs, info = view.reset(seed=3)
    commands = view.commands()
    assert sorted(commands) == sorted(info["admissible_commands"])
    mask = view.action_masks()
    assert mask.sum() == len(commands) and mask[: len(commands)].all()
    assert np.array_equal(info["action_mask"], mask)
    assert [a.text for a in view.slot_actions()] == commands
    text = view.household._last_obs
    _, reward, terminated, truncated, info = view.step(len(commands))  # the first empty slot
    assert info["command"] == "" and view.household._last_obs == NOTHING_HAPPENS != text
    assert reward == 0.0 and not terminated
    with pytest.raises(WorldError, match="outside Discrete"):
        view.step(40)


def test_a_decision_is_the_slots_structured_actions_built_once_per_game(monkeypatch):
    """Issue 39 item 5: a shield's decision read each admissible dict into a ``synthesis.dsl.Action`` at every step
    (35,578 ``Action.from_dict`` calls in 1,500 shielded steps); the view builds each once per game and hands the
    same tuple out whenever the world is in a state with the same admissible set."""
    from scars.synthesis.dsl import Action

    built: list[int] = []
    real = Action.from_dict.__func__
    monkeypatch.setattr(Action, "from_dict", classmethod(lambda cls, d: built.append(1) or real(cls, d)))
    view = make_household_view()
    view.reset(seed=3)

    def decide():
        """The decision, and how many actions it read from their dicts."""
        built.clear()
        return view.decision(), len(built)

    first, read = decide()
    assert first.actions == tuple(
        real(Action, d) for d in view._slots.actions
    )  # the slots' dicts, in slot order
    assert [a.text for a in first.actions] == view.commands() and view.slot_actions() is first.actions
    assert read == len(first.actions)  # each once
    go = next(c for c in view.commands() if c.startswith("go to"))
    view.step(view.commands().index(go))
    back = next(c for c in view.commands() if c.startswith("go to") and c != go)
    reads = []
    for _ in range(4):  # back and forth between two receptacles: the same admissible sets again and again
        view.step(view.commands().index(back))
        reads.append(decide()[1])
        view.step(view.commands().index(go))
        reads.append(decide()[1])
    assert reads[0] > 0 and reads[2:] == [0] * 6  # read at the first visit only
    view.reset(seed=3)  # the same game again: its first state's actions were built at the first decision
    assert decide() == (first, 0) and view.decision().actions is first.actions


def test_equal_actions_are_one_object_whichever_dict_they_came_from():
    """The world hands out one dict per command and location ("go to cabinet 2" from each place the agent can
    stand); the view keeps one structured action per game and content (a shielded walk met 15,737 dicts for 2,605
    distinct actions in 3,000 steps), each equal to ``Action.from_dict`` of its dicts."""
    from scars.envs.household.generator import generate_game
    from scars.synthesis.dsl import Action

    game = generate_game(5)
    view = make_household_view()
    rng = np.random.default_rng(0)
    by_value: dict[Action, set[int]] = {}
    dicts = set()
    for episode in range(4):
        view.reset(seed=episode, options={"game": game})
        for _ in range(30):
            actions = view.decision().actions
            assert actions == tuple(Action.from_dict(d) for d in view._slots.actions)
            dicts.update(map(id, view._slots.actions))
            for a in actions:
                by_value.setdefault(a, set()).add(id(a))
            view.step(int(rng.integers(len(actions))))
    assert len(dicts) > len(by_value)  # the walk met the same action through several dicts ...
    assert all(len(ids) == 1 for ids in by_value.values())  # ... and got one object for each
    # a value and its look-alike of another type are different actions (True == 1, but not for the DSL)
    d = {"kind": "env", "name": "take", "args": {"obj": "apple 1", "is_hot": True}, "text": "take apple 1"}
    e = {"kind": "env", "name": "take", "args": {"obj": "apple 1", "is_hot": 1}, "text": "take apple 1"}
    slots = type(view._slots).__new__(type(view._slots))
    slots.dsl, slots.actions = None, [d, e]
    hot, one = view._game.dsl(slots)
    assert hot.arg("is_hot") is True and one.arg("is_hot") == 1 and one.arg("is_hot") is not True


def test_the_observation_is_the_documented_layout():
    view = make_household_view(dict_obs=True)
    obs, info = view.reset(seed=5)
    layout = household_layout()
    assert obs["observations"].shape == (len(layout),) == (len(GLOBAL_FEATURES) + 40 * len(SLOT_FEATURES),)
    assert np.array_equal(obs["action_mask"], view.action_masks().astype(np.int8))
    x = dict(zip(layout, obs["observations"].tolist(), strict=True))
    q = info["context"]
    assert x[f"task={q['task_type']}"] == 1.0 and x["holding"] == 0.0
    for i, action in enumerate(view.slot_actions()):
        assert x[f"slot{i}:valid"] == 1.0 and x[f"slot{i}:verb={action.name}"] == 1.0
        assert x[f"slot{i}:recep_is_target_type"] == (action.arg("recep_type") == q["target_recep_type"])
    n = len(view.commands())
    assert x[f"slot{n}:valid"] == 0.0
    # slot order: the more of the task's object type, receptacle type and appliance a command touches, the earlier
    relevance = [
        x[f"slot{i}:obj_is_target_type"]
        + x[f"slot{i}:recep_is_target_type"]
        + x[f"slot{i}:recep_is_appliance"]
        for i in range(n)
    ]
    assert relevance == sorted(relevance, reverse=True) and relevance[0] > 0


def test_the_view_remembers_visited_receptacles():
    view = make_household_view()
    view.reset(seed=2)
    first, second = [c for c in view.commands() if c.startswith("go to ")][:2]
    view.step(_slot_of(view, first))
    view.step(_slot_of(view, second))
    x = dict(zip(household_layout(), view._encode().tolist(), strict=True))
    flags = {c: x[f"slot{i}:goto_visited"] for i, c in enumerate(view.commands()) if c.startswith("go to ")}
    assert (
        flags[first] == 1.0 and sum(flags.values()) == 1.0
    )  # standing at the second: it is not a destination


def _slot_of(view, command: str) -> int:
    return view.commands().index(command)


def test_progress_shaping_pays_the_expert_plan_length_along_the_plan():
    view = make_household_view(shaping=0.1, gamma=1.0)
    view.reset(seed=11)
    plan = expert_plan(view.household.world)
    total, world_total = 0.0, 0.0
    for command in plan:
        _, reward, terminated, _, info = view.step(_slot_of(view, command))
        assert info["shaping"] == pytest.approx(0.1)  # every command of the plan is one step nearer
        total += info["shaping"]
        world_total += info["world_reward"]
    assert terminated and total == pytest.approx(0.1 * len(plan))
    assert world_total == 1.0


def test_shaping_off_pays_exactly_the_world_reward_and_violations_cost():
    schedule = RuleSchedule.from_ids(RULE_LIBRARY)
    view = make_household_view(schedule=schedule)
    view.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        _, reward, terminated, truncated, info = view.step(rng.choice(np.flatnonzero(view.action_masks())))
        assert info["shaping"] == 0.0 and reward == info["world_reward"]
        assert reward == float(terminated) - len(info["violations"])
        if terminated or truncated:
            view.reset()


def test_same_seed_same_observations():
    def trace(seed):
        view = make_household_view(shaping=0.05)
        obs, _ = view.reset(seed=seed)
        out = [obs]
        rng = np.random.default_rng(seed)
        for _ in range(40):
            obs, reward, *_ = view.step(rng.choice(np.flatnonzero(view.action_masks())))
            out.append(np.append(obs, reward))
        return np.concatenate(out)

    assert np.array_equal(trace(4), trace(4))


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(WorldError, match="shaping"):
        make_household_view(shaping=-1.0)
    with pytest.raises(WorldError, match="max_actions"):
        make_household_view(max_actions=0)
    view = make_household_view(max_actions=3)
    with pytest.raises(WorldError, match="exceed max_actions=3"):
        view.reset(seed=0)
