"""``scars world``: the tier-1 household world from the terminal (SPEC §7 tier 1).

``scars world play`` is a researcher's first look: play a generated game (or an imported ALFWorld file), see the
admissible commands, the safety rules in force, each verified violation and whether the goal is reached.
``scars world export`` writes a generated game as an ALFWorld ``game.tw-pddl``; ``scars world import`` reads one
(e.g. one of ALFWorld's own evaluation games) into the native engine (issue 12).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scars.envs.household.env import HouseholdConfig, HouseholdEnv
from scars.envs.household.rules import RULE_LIBRARY, RuleSchedule
from scars.envs.household.world import TASK_TYPES
from scars.experiments.commands._checks import check_output_file
from scars.synthesis.errors import WorldError


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
@click.option(
    "--game-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Play this ALFWorld game.tw-pddl file instead of a generated game (see 'scars world import').",
)
def play(
    seed: int,
    task_type: str | None,
    rule_ids: tuple[str, ...],
    world_version: int,
    max_steps: int,
    game_file: str | None,
) -> None:
    """Play a generated game: type commands (one per line); 'quit' or end of input stops."""
    try:
        config = HouseholdConfig(
            task_type=task_type,
            max_steps=max_steps,
            schedule=RuleSchedule.from_ids(rule_ids),
            world_version=world_version,
            game_seed=seed,
            game_file=game_file,
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
    from scars.envs.household.expert import expert_plan
    from scars.envs.household.game_file import TextWorldMissing, export_game
    from scars.envs.household.generator import generate_game
    from scars.envs.household.textworld_game import TextWorldGame
    from scars.envs.household.world import World

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


@world.command("import")
@click.argument("game_file", type=click.Path(dir_okay=False))
@click.option(
    "--alfworld-logic",
    is_flag=True,
    help="Play the file's problem under alfworld 0.4's alfred.pddl/alfred.twl2 instead of the file's own (each "
    "file's ALFWorld generation is detected and played without this), as ALFWorld does when it regenerates game files.",
)
@click.option(
    "--verify",
    is_flag=True,
    help="Play the native expert's walkthrough in TextWorld's PDDL engine too and require the same observations "
    "and the win at its last command (needs textworld).",
)
def import_(game_file: str, alfworld_logic: bool, verify: bool) -> None:
    """Import an ALFWorld game.tw-pddl file GAME_FILE into the native engine and show its expert walkthrough.

    A file the native engine cannot reproduce exactly gets one error line naming the construct (exit code 2).
    """
    from scars.envs.household.expert import NoCompliantPlan, expert_plan
    from scars.envs.household.game_file import load_game_file
    from scars.envs.household.world import World

    try:
        spec = load_game_file(game_file, alfworld_logic=alfworld_logic)
        world = World(spec)
        plan = expert_plan(world)
    except (WorldError, NoCompliantPlan) as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    task = spec.task
    click.echo(
        f"imported {game_file}: {task.task_type} ({task.obj_type} -> {task.recep_type or task.toggle_type}), "
        f"ALFWorld logic {spec.logic}, "
        f"{len(spec.receptacles)} receptacles, {len(spec.objects)} objects, {len(spec.containment())} canContain "
        f"pairs; task: {spec.goal_text}"
    )
    click.echo(f"expert plan ({len(plan)} commands): {' | '.join(plan)}")
    if verify:
        _verify_in_textworld(game_file, world, plan, alfworld_logic)


def _verify_in_textworld(game_file: str, world: object, plan: list[str], alfworld_logic: bool) -> None:
    """Replay ``plan`` in TextWorld and natively; every observation and won flag must agree."""
    import tempfile
    from pathlib import Path

    from scars.envs.household.game_file import TextWorldMissing, rewrite_with_alfworld_logic
    from scars.envs.household.textworld_game import TextWorldGame

    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = (
                rewrite_with_alfworld_logic(game_file, Path(tmp) / "game.tw-pddl")
                if alfworld_logic
                else game_file
            )
            ref = TextWorldGame(path)
            native = world  # a fresh World: nothing has been played on it
            if ref.reset() != native.reset():  # type: ignore[attr-defined]
                raise click.ClickException("the intro differs between TextWorld and the native engine")
            for i, cmd in enumerate(plan):
                got_ref, got_nat = ref.step(cmd), native.step(cmd)  # type: ignore[attr-defined]
                if got_ref != got_nat:
                    raise click.ClickException(
                        f"step {i} {cmd!r}: TextWorld {got_ref!r} vs native {got_nat!r}"
                    )
    except TextWorldMissing as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    if not got_ref[1]:
        raise click.ClickException("the expert walkthrough does not win in TextWorld")
    click.echo(
        f"verified: TextWorld's PDDL engine and the native engine agree on all {len(plan)} steps and win"
    )
