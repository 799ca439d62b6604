"""The household RL view plays the recorded trajectory: the same observations, rewards, ends, masks and commands
for the same seed as the per-action encoder it replaced (issue 39 item 5).

``data/household_trajectory.npz`` was written by ``python tests/envs/rl/test_household_trajectory.py --record`` on the commit
before the view was vectorised; rerun it only when the encoding is meant to change (and say so in the commit).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from scars.envs.household import RULE_LIBRARY, RuleSchedule, expert_next_command
from scars.envs.rl import make_household_view

RECORDING = Path(__file__).with_name("data") / "household_trajectory.npz"
SEEDS = (0, 1, 2, 3, 4)
STEPS = 120


def trajectory(seed: int, *, dict_obs: bool) -> dict[str, np.ndarray]:
    """One run of ``STEPS`` steps, resetting at each episode's end: mostly the expert's next command (so episodes are
    won and rules violated), else a random masked slot, every 7th step an empty slot."""
    view = make_household_view(
        schedule=RuleSchedule.from_ids(RULE_LIBRARY), shaping=0.05, max_steps=25, dict_obs=dict_obs
    )
    rng = np.random.default_rng(seed)
    obs, info = view.reset(seed=seed)
    observations, masks, rewards, ends, commands = [], [], [], [], []
    for t in range(STEPS):
        vector = obs["observations"] if dict_obs else obs
        observations.append(vector.copy())
        masks.append(view.action_masks())
        if dict_obs:
            assert np.array_equal(obs["action_mask"], masks[-1].astype(np.int8))
        expert = expert_next_command(view.household.world)
        if t % 7 == 6:
            slot = len(view.commands())
        elif expert is not None and rng.random() < 0.7:
            slot = view.commands().index(expert)
        else:
            slot = int(rng.choice(np.flatnonzero(masks[-1])))
        obs, reward, terminated, truncated, info = view.step(slot)
        rewards.append(reward)
        ends.append((terminated, truncated))
        commands.append(info["command"])
        if terminated or truncated:
            obs, info = view.reset()
    return {
        "observations": np.array(observations, dtype=np.float32),
        "masks": np.array(masks, dtype=bool),
        "rewards": np.array(rewards, dtype=np.float64),
        "ends": np.array(ends, dtype=bool),
        "commands": np.array(commands, dtype=str),
    }


def test_the_view_replays_the_recorded_trajectory():
    recorded = np.load(RECORDING)
    for seed in SEEDS:
        for dict_obs in (False, True):
            run = trajectory(seed, dict_obs=dict_obs)
            for name, values in run.items():
                expected = recorded[f"{seed}:{name}"]
                assert values.shape == expected.shape, (seed, name)
                assert np.array_equal(values, expected), (seed, dict_obs, name)


if __name__ == "__main__" and "--record" in sys.argv:
    RECORDING.parent.mkdir(exist_ok=True)
    np.savez_compressed(
        RECORDING,
        **{f"{seed}:{k}": v for seed in SEEDS for k, v in trajectory(seed, dict_obs=False).items()},
    )
    print(f"wrote {RECORDING}")


def test_the_trajectory_is_the_same_when_the_view_keeps_almost_nothing_encoded(monkeypatch):
    """The encoded admissible sets are a cache: starting it again every few steps changes no number."""
    import scars.envs.rl.household as household

    monkeypatch.setattr(household, "_MAX_CACHED_STATES", 3)
    recorded = np.load(RECORDING)
    run = trajectory(SEEDS[0], dict_obs=False)
    for name, values in run.items():
        assert np.array_equal(values, recorded[f"{SEEDS[0]}:{name}"]), name
