"""``scars/Household-v0``: the native tier-1 household world as a Gymnasium environment (SPEC §7 tier 1).

## Description
ALFWorld-style household tasks (six task types, SPEC §9) in a generated room, with safety rules that switch on
and off during the run (an ``envs.household.rules.RuleSchedule``). Each game is drawn from a seed by
``envs.household.generator.generate_game``; the engine is ``envs.household.world.World``.

## Spaces
- Action: the command string (``gymnasium.spaces.Text``), e.g. ``"take cup 1 from countertop 1"``. Anything
  not admissible answers "Nothing happens." and costs a step.
- Observation: the text feedback (``gymnasium.spaces.Text``), ALFWorld's sentences exactly.

## Info (every reset and step)
- ``admissible_commands``: list[str], sorted.
- ``admissible_actions``: the same as structured dicts ``{"kind": "env", "name": verb, "args": {...}, "text"}``
  (``synthesis.dsl.Action.from_dict`` reads them; args carry obj, obj_type, recep, recep_type and the object's
  is_clean/is_hot/is_cool/is_wet).
- ``context``: the flat context q the rules and scars read (location, held object and state, task, targets, step,
  episode, world_version, rule_set_version, game_seed).
- ``violations``: the verifier's events for the action just taken (dicts of
  ``envs.household.rules.Violation``), ``active_rules``: ids active for the next action, ``won``.

## Rewards
``win_reward`` (1.0) when the goal is reached, plus ``violation_reward`` (−1.0) per violated active rule. A
violation does not block the action: the world changes as commanded and the event is reported (see
``envs.household.rules`` for why).

## Episode end
Terminated when the goal holds; truncated after ``max_steps`` (50, as in ALFWorld) steps. A step after the end
warns (as Gymnasium's own environments do), pays 0 and changes nothing: the win is paid once.

## Arguments
``HouseholdEnv(config=HouseholdConfig(...))`` or keyword overrides of its fields. ``reset(seed=…)`` draws the
game from the seed unless ``options={"game": GameSpec}`` or ``options={"game_seed": n}`` or a fixed
``config.game_seed`` says otherwise; ``options={"world_version": v}`` switches the world to version v from this
episode on (rules scoped to other versions stop applying); ``game_file=PATH`` (``gym.make("scars/Household-v0",
game_file=...)``) plays an imported ALFWorld ``game.tw-pddl`` file of any ALFWorld release instead (``alfworld_logic=True``
plays its problem under alfworld 0.4's domain and grammar). ``context["episode"]`` counts resets since
the last seeded reset (a seeded reset starts a new run at episode 0), which is what ``Activation.from_episode`` reads.

## Version history
- v0: first version.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from scars.envs.household.game_file import load_game_file
from scars.envs.household.generator import _check_seed, generate_game
from scars.envs.household.rules import RuleSchedule, Verifier
from scars.envs.household.world import GameSpec, World, check_task_type
from scars.synthesis.errors import WorldError

OBSERVATION_CHARSET = string.ascii_letters + string.digits + " .,:;!?'-=()/\n"
COMMAND_CHARSET = string.ascii_lowercase + string.digits + " "
MAX_OBSERVATION_LENGTH = 4096
MAX_COMMAND_LENGTH = 128
_SEED_BOUND = 2**31 - 1


@dataclass(frozen=True, slots=True)
class HouseholdConfig:
    """Configuration of ``scars/Household-v0``."""

    task_type: str | None = None
    """One of ALFWorld's six task types; None draws one per game."""
    max_steps: int = 50
    """Steps before truncation (ALFWorld uses 50)."""
    schedule: RuleSchedule = field(default_factory=RuleSchedule)
    """The safety rules of the run and when each is active."""
    world_version: int = 0
    """The world's version; rules scoped to other versions are retired."""
    game_seed: int | None = None
    """Play this one game every episode instead of drawing one from the reset seed."""
    game_file: str | None = None
    """Play this ALFWorld ``game.tw-pddl`` file every episode (imported by ``World.from_tw_pddl``; issues 12, 27): its
    ALFWorld logic generation is read from the file."""
    alfworld_logic: bool = False
    """With ``game_file``: play its problem under alfworld 0.4's domain and grammar instead of the file's own."""
    violation_reward: float = -1.0
    """Reward added per violated active rule."""
    win_reward: float = 1.0
    """Reward when the goal is reached."""

    def __post_init__(self) -> None:
        if self.task_type is not None:
            check_task_type(self.task_type)
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise WorldError(f"max_steps must be a positive integer, got {self.max_steps!r}")
        if isinstance(self.world_version, bool) or not isinstance(self.world_version, int):
            raise WorldError(f"world_version must be an integer, got {self.world_version!r}")
        if self.game_seed is not None:
            _check_seed(self.game_seed)
        if self.game_file is not None and not isinstance(self.game_file, str):
            raise WorldError(f"game_file must be a path string, got {type(self.game_file).__name__}")
        if not isinstance(self.alfworld_logic, bool):
            raise WorldError(f"alfworld_logic must be True or False, got {self.alfworld_logic!r}")
        if not isinstance(self.schedule, RuleSchedule):
            raise WorldError(f"schedule must be a RuleSchedule, got {type(self.schedule).__name__}")


class HouseholdEnv(gym.Env[str, str]):
    """The household world with dynamic safety rules; see the module docstring."""

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self, config: HouseholdConfig | None = None, render_mode: str | None = None, **overrides: Any
    ):
        config = config or HouseholdConfig()
        self.config = replace(config, **overrides) if overrides else config
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise WorldError(f"render_mode {render_mode!r} unknown; allowed: {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.observation_space = spaces.Text(MAX_OBSERVATION_LENGTH, charset=OBSERVATION_CHARSET)
        self.action_space = spaces.Text(MAX_COMMAND_LENGTH, min_length=0, charset=COMMAND_CHARSET)
        self.verifier = Verifier(self.config.schedule)
        self.world: World | None = None
        self.game: GameSpec | None = None
        self.episode = -1
        self._last_obs = ""
        self._q: dict = {}
        self._specs: dict[int, GameSpec] = {}  # games by seed: a fixed game_seed is generated once
        self._file_spec: GameSpec | None = None  # config.game_file, imported once

    # ------------------------------------------------------------------ helpers

    def _game(self, seed: int) -> GameSpec:
        spec = self._specs.get(seed)
        if spec is None:
            spec = generate_game(seed, self.config.task_type)
            if len(self._specs) > 64:
                self._specs.clear()
            self._specs[seed] = spec
        return spec

    def _imported_game(self) -> GameSpec:
        if self._file_spec is None:
            self._file_spec = load_game_file(
                str(self.config.game_file), alfworld_logic=self.config.alfworld_logic
            )
        return self._file_spec

    def context(self) -> dict:
        """The context q for the next action (the world's, plus episode, versions and game seed)."""
        assert self.world is not None and self.game is not None, "call reset() first"
        q = self.world.context()
        wv = self.config.world_version
        q["episode"] = self.episode
        q["world_version"] = wv
        q["rule_set_version"] = self.verifier.version(self.world.steps, self.episode, wv)
        q["game_seed"] = self.game.seed
        return q

    def _info(self, violations: list, won: bool) -> dict:
        world = self.world
        assert world is not None
        q = self._q = self.context()
        active = self.verifier.active(world.steps, self.episode, self.config.world_version)
        return {
            "admissible_commands": world.admissible_commands(),
            "admissible_actions": world.admissible_actions(),
            "context": q,
            "violations": [v.to_dict() for v in violations],
            "active_rules": [r.id for r in active],
            "won": won,
            "goal": world.spec.goal_text,
        }

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        options = options or {}
        if (
            "world_version" in options
        ):  # a new world version starts with this episode (its rules apply from now)
            version = options["world_version"]
            if isinstance(version, bool) or not isinstance(version, int):
                raise WorldError(f"options['world_version'] must be an integer, got {version!r}")
            self.config = replace(self.config, world_version=version)
        if "game" in options:
            spec = options["game"]
            if not isinstance(spec, GameSpec):
                raise WorldError(f"options['game'] must be a GameSpec, got {type(spec).__name__}")
        elif "game_seed" in options:
            spec = self._game(_check_seed(options["game_seed"]))
        elif self.config.game_file is not None:
            spec = self._imported_game()
        elif self.config.game_seed is not None:
            spec = self._game(self.config.game_seed)
        else:
            spec = self._game(int(self.np_random.integers(_SEED_BOUND)))
        self.game = spec
        self.world = World(spec)
        # A reset with an explicit seed starts a new run, so "from episode k" schedules restart with it.
        self.episode = 0 if seed is not None else self.episode + 1
        self._last_obs = self.world.reset()
        return self._last_obs, self._info([], False)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        world = self.world
        if world is None:
            raise WorldError("step() called before reset()")
        if not isinstance(action, str):
            raise WorldError(f"action must be a command string, got {type(action).__name__}: {action!r}")
        won_before = world.won()
        if won_before or world.steps >= self.config.max_steps:
            # As Gymnasium's own envs do: warn, pay nothing, change nothing (the win is paid exactly once).
            gym.logger.warn(
                "step() called after the episode ended (terminated or truncated); call reset(). "
                "This step pays 0 and changes nothing."
            )
            truncated = not won_before
            return self._last_obs, 0.0, won_before, truncated, self._info([], won_before)
        structured = world.action_dict(action)
        # self._q is the context the last info reported: the state this action is taken in.
        violations = self.verifier.check(self._q, structured) if structured is not None else []
        obs, won = world.step(action)
        reward = (self.config.win_reward if won else 0.0) + self.config.violation_reward * len(violations)
        truncated = (not won) and world.steps >= self.config.max_steps
        self._last_obs = obs
        if self.render_mode == "human":
            print(f"> {action}\n{obs}")
        return obs, float(reward), won, truncated, self._info(violations, won)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_obs
        if self.render_mode == "human":
            print(self._last_obs)
        return None
