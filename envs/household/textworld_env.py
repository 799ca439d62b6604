"""A ``.tw-pddl`` game played by the real ALFWorld engine behind the Gymnasium interface of ``scars/Household-v0``.

:class:`TextWorldHousehold` wraps a :class:`~envs.household.textworld_game.TextWorldGame` in the same spaces,
``info`` keys and dynamic-rule verifier (``envs.household.rules``) as the native environment, so the safety-rule
schedule can run over real ALFWorld games too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from scars.envs.household.env import (
    COMMAND_CHARSET,
    MAX_COMMAND_LENGTH,
    MAX_OBSERVATION_LENGTH,
    OBSERVATION_CHARSET,
    HouseholdConfig,
)
from scars.envs.household.rules import Verifier
from scars.envs.household.textworld_game import TextWorldGame
from scars.synthesis.dsl.ast import Value
from scars.synthesis.errors import WorldError


class TextWorldHousehold(gym.Env[str, str]):
    """A ``.tw-pddl`` game (exported or real ALFWorld) behind the interface of ``scars/Household-v0``.

    Same spaces, same ``info`` keys (admissible_commands, admissible_actions, context, violations, active_rules,
    won, goal), same rewards and episode end, and the same :class:`~envs.household.rules.Verifier` over the same
    :class:`~envs.household.env.HouseholdConfig` schedule, so a dynamic-rule run can use the real engine. It is
    about a thousand times slower than the native engine (``benchmarks/world.py``); use it to check, not to sweep.
    ``config.task_type`` and ``config.game_seed`` are ignored: the game is the file.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self, game_file: str | Path, config: HouseholdConfig | None = None, *, include_help: bool = True
    ):
        self.config = config or HouseholdConfig()
        self.game = TextWorldGame(game_file, include_help=include_help)
        self.observation_space = spaces.Text(MAX_OBSERVATION_LENGTH, charset=OBSERVATION_CHARSET)
        self.action_space = spaces.Text(MAX_COMMAND_LENGTH, min_length=0, charset=COMMAND_CHARSET)
        self.verifier = Verifier(self.config.schedule)
        self.episode = -1
        self._last_obs = ""
        self._started = False

    def context(self) -> dict[str, Value]:
        """The context q for the next action: the game's, plus episode, versions and game seed (-1 when the file
        is not an exported native game)."""
        q = self.game.context()
        wv = self.config.world_version
        q["episode"] = self.episode
        q["world_version"] = wv
        q["rule_set_version"] = self.config.schedule.version(self.game.steps, self.episode, wv)
        q["game_seed"] = self.game.spec.seed if self.game.spec is not None else -1
        return q

    def _info(self, violations: list, won: bool) -> dict[str, Any]:
        active = self.config.schedule.active(self.game.steps, self.episode, self.config.world_version)
        return {
            "admissible_commands": self.game.admissible_commands(),
            "admissible_actions": self.game.admissible_actions(),
            "context": self.context(),
            "violations": [v.to_dict() for v in violations],
            "active_rules": [r.id for r in active],
            "won": won,
            "goal": self.game.goal_text,
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        # As in the native env: a seeded reset starts a new run at episode 0.
        self.episode = 0 if seed is not None else self.episode + 1
        self._last_obs = self.game.reset()
        self._started = True
        return self._last_obs, self._info([], self.game.won())

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if not self._started:
            raise WorldError("step() called before reset()")
        if not isinstance(action, str):
            raise WorldError(f"action must be a command string, got {type(action).__name__}: {action!r}")
        structured = self.game.action_dict(action)
        violations = self.verifier.check(self.context(), structured) if structured is not None else []
        obs, won = self.game.step(action)
        reward = (self.config.win_reward if won else 0.0) + self.config.violation_reward * len(violations)
        truncated = (not won) and self.game.steps >= self.config.max_steps
        self._last_obs = obs
        return obs, float(reward), won, truncated, self._info(violations, won)

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None


__all__ = ["TextWorldHousehold"]
