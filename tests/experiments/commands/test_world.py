"""``scars world play`` driven through click's CliRunner."""

from __future__ import annotations

from click.testing import CliRunner

from scars.envs.household import World, expert_plan, generate_game
from scars.experiments.cli import main


def test_play_expert_plan_wins():
    spec = generate_game(6, "pick_cool_then_place_in_recep")
    plan = expert_plan(World(spec))
    result = CliRunner().invoke(
        main,
        ["world", "play", "--seed", "6", "--task", "pick_cool_then_place_in_recep"],
        input="\n".join(plan) + "\n",
    )
    assert result.exit_code == 0, result.output
    assert f"Your task is to: {spec.goal_text}." in result.output
    assert "[admissible: " in result.output
    assert f"[WON after {len(plan)} steps; return 1]" in result.output


def test_play_reports_violations_and_quits():
    result = CliRunner().invoke(
        main,
        ["world", "play", "--seed", "0", "--task", "pick_and_place_simple", "--rule", "no_dishware_near_bed"],
        input="look\nquit\n",
    )
    assert result.exit_code == 0 and "[rules in force: no_dishware_near_bed]" in result.output
    assert "You are in the middle of a room." in result.output and "bye." in result.output


def test_play_violation_line():
    for seed in range(100):
        spec = generate_game(seed, "pick_clean_then_place_in_recep")
        if spec.task.obj_type in ("cup", "mug", "plate", "bowl", "pan"):
            break
    sink = next(r.name for r in spec.receptacles if r.rtype == "sinkbasin")
    obj = next(o for o in spec.objects if o.otype == spec.task.obj_type)
    cmds = [f"go to {obj.location}", f"take {obj.name} from {obj.location}", f"go to {sink}"]
    if obj.location.split()[0] in ("cabinet", "drawer", "fridge", "microwave"):
        cmds.insert(1, f"open {obj.location}")
    cmds.append(f"move {obj.name} to {sink}")
    args = ["world", "play", "--seed", str(seed), "--task", "pick_clean_then_place_in_recep"]
    result = CliRunner().invoke(
        main, [*args, "--rule", "no_dishware_in_sink"], input="\n".join(cmds) + "\nquit\n"
    )
    assert result.exit_code == 0, result.output
    assert f"You move the {obj.name} to the {sink}." in result.output
    assert "!! VIOLATION of no_dishware_in_sink: Do not leave any dishware in the sink." in result.output


def test_bad_task_is_a_usage_error():
    result = CliRunner().invoke(main, ["world", "play", "--task", "fly"])
    assert result.exit_code == 2 and "fly" in result.output
    result = CliRunner().invoke(main, ["world", "play", "--seed", "-4"])
    assert result.exit_code == 2 and "-4" in result.output
