"""``scars world``: the tier-1 household world from the terminal (SPEC §7 tier 1).

``scars world play`` is a researcher's first look: play a generated game, see the admissible commands, the
safety rules in force, each verified violation and whether the goal is reached.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from envs.household.env import HouseholdConfig, HouseholdEnv
from envs.household.rules import RULE_LIBRARY, RuleSchedule
from envs.household.world import TASK_TYPES
from experiments.commands._checks import check_output_file
from synthesis.errors import WorldError


@click.group()
def world() -> None:
    """The native ALFWorld-style household world (tier 1)."""


@world.command()
@click.option("--seed", type=int, default=0, show_default=True, help="Game seed (non-negative).")
@click.option(
    "--task", "task_type", type=click.Choice(TASK_TYPES), default=None, help="Task type (default: drawn)."
)
@click.option(
    "--rule",
    "rule_ids",
    multiple=True,
    type=click.Choice(sorted(RULE_LIBRARY)),
    help="A library safety rule to enforce (repeatable); each follows its own activation.",
)
@click.option(
    "--world-version", type=int, default=0, show_default=True, help="World version (retires rules)."
)
@click.option("--max-steps", type=int, default=50, show_default=True, help="Steps before truncation.")
def play(
    seed: int, task_type: str | None, rule_ids: tuple[str, ...], world_version: int, max_steps: int
) -> None:
    """Play a generated game: type commands (one per line); 'quit' or end of input stops."""
    try:
        config = HouseholdConfig(
            task_type=task_type,
            max_steps=max_steps,
            schedule=RuleSchedule.from_ids(rule_ids),
            world_version=world_version,
            game_seed=seed,
        )
        env = HouseholdEnv(config)
        obs, info = env.reset(seed=seed)
    except WorldError as err:
        raise click.UsageError(str(err)) from None
    total = 0.0
    while True:
        click.echo(obs)
        if info["active_rules"]:
            click.echo(f"[rules in force: {', '.join(info['active_rules'])}]")
        click.echo("[admissible: " + " | ".join(info["admissible_commands"]) + "]")
        click.echo("> ", nl=False)
        line = sys.stdin.readline()  # click.testing.CliRunner swaps sys.stdin for its input
        if not line or line.strip() in ("quit", "exit"):
            click.echo("\nbye.")
            return
        obs, reward, terminated, truncated, info = env.step(line.strip())
        total += reward
        for v in info["violations"]:
            click.echo(f"!! VIOLATION of {v['rule_id']}: {RULE_LIBRARY[v['rule_id']].description}")
        if terminated or truncated:
            click.echo(obs)
            outcome = "WON" if info["won"] else "out of steps"
            click.echo(f"[{outcome} after {info['context']['step']} steps; return {total:g}]")
            return


@world.command()
@click.option("--seed", type=int, default=0, show_default=True, help="Game seed (non-negative).")
@click.option(
    "--task", "task_type", type=click.Choice(TASK_TYPES), default=None, help="Task type (default: drawn)."
)
@click.option(
    "--verify",
    is_flag=True,
    help="Replay the native expert's plan in TextWorld's PDDL engine and require it to win (needs textworld).",
)
@click.argument("out", type=click.Path())
def export(seed: int, task_type: str | None, verify: bool, out: str) -> None:
    """Write a generated game as an ALFWorld game.tw-pddl file OUT (playable by TextWorld / ALFWorld)."""
    # Imported here: the exporter reads the optional alfworld package's data files.
    from envs.household.expert import expert_plan
    from envs.household.generator import generate_game
    from envs.household.textworld_ref import TextWorldGame, TextWorldMissing, export_game
    from envs.household.world import World

    check_output_file(Path(out))
    try:
        spec = generate_game(seed, task_type)
        path = export_game(spec, out)
    except (WorldError, TextWorldMissing) as err:
        raise click.UsageError(str(err)) from None
    plan = expert_plan(World.from_spec(spec))
    click.echo(f"wrote {path} ({spec.task.task_type}, seed {spec.seed}): {spec.goal_text}")
    click.echo(f"expert plan ({len(plan)} commands): {' | '.join(plan)}")
    if verify:
        try:
            game = TextWorldGame(path)
        except TextWorldMissing as err:
            raise click.UsageError(str(err)) from None
        game.reset()
        won = [game.step(cmd)[1] for cmd in plan]
        if not (won and won[-1]):
            raise click.ClickException(f"the expert plan does not win in TextWorld (won flags {won})")
        click.echo(f"verified: TextWorld's PDDL engine wins after the {len(plan)} expert commands")
