"""The shared command checks (issue 28): one overwrite rule for every command with ``--out``, and one line for
every error, click's usage errors included."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from scars.experiments.cli import main

# every command that writes its results under --out, with arguments that would make it run (cheaply)
OUT_COMMANDS: dict[str, list[str]] = {
    "run-tier1": ["run", "tier1", "--episodes", "1", "--schedule", "smoke"],
    "demo": ["demo", "--episodes", "1"],
    "run-tier2": ["run", "tier2", "--runs", "1", "--months", "1"],
    "run-tier2-collusion": ["run", "tier2-collusion", "--seeds", "0", "--runs", "1", "--months", "1"],
    "run-tier2-transfer": ["run", "tier2-transfer", "--methods", "scars", "--seeds", "0", "--months", "1"],
    "run-tier2-outsider": ["run", "tier2-outsider", "--methods", "scars", "--seeds", "0", "--runs", "1"],
    "run-tier3": ["run", "tier3", "--method", "scars", "--seeds", "0,1"],
    "sensitivity": ["sensitivity", "--methods", "scars", "--influence-gain", "4", "--compliance", "1"],
    "sweep": ["sweep", "--grid", "seed=0,1", "--set", "episodes=1"],
    "paper": ["paper", "--scale", "smoke", "--tiers", "tier1"],
    "model-random": ["model", "random", "--layers", "1", "--width", "8", "--heads", "1"],
}


def one_error_line(result) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("name", sorted(OUT_COMMANDS))
def test_a_non_empty_out_is_refused_unless_overwrite(tmp_path, name):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old-results.txt").write_text("someone else's results")
    result = CliRunner().invoke(main, [*OUT_COMMANDS[name], "--out", str(out)])
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert "holds results already" in line and "--overwrite" in line and str(out) in line
    assert sorted(p.name for p in out.iterdir()) == ["old-results.txt"]  # nothing written beside it
    command = [word for word in OUT_COMMANDS[name] if not word.startswith("-")][:2]
    if command[0] not in ("run", "model"):
        command = command[:1]
    assert "--overwrite" in CliRunner().invoke(main, [*command, "--help"]).output


def test_sweep_resumes_only_its_own_folder(tmp_path):
    """A folder holding a sweep is the one non-empty --out a command writes into without --overwrite: a resume
    (another sweep there is refused by run_sweep itself, tested with the sweep)."""
    from scars.experiments.commands._checks import claim_output

    out = tmp_path / "s"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"identity": {}}))
    claim_output(out, False, resumes=lambda folder: (folder / "sweep.json").is_file())
    assert (out / "sweep.json").exists()
    claim_output(out, True, resumes=lambda folder: (folder / "sweep.json").is_file())
    assert not any(out.iterdir())  # --overwrite replaces, never resumes


def test_report_and_calibrate_refuse_their_own_files_unless_overwrite(tmp_path):
    folder = tmp_path / "run"
    ran = CliRunner().invoke(
        main, ["run", "tier1", "--episodes", "1", "--schedule", "smoke", "--out", str(folder)]
    )
    assert ran.exit_code == 0, ran.output
    (folder / "report.md").write_text("an earlier report")
    result = CliRunner().invoke(main, ["report", str(folder)])
    assert result.exit_code == 2 and "report.md" in one_error_line(result)
    assert (folder / "report.md").read_text() == "an earlier report"
    assert CliRunner().invoke(main, ["report", str(folder), "--overwrite"]).exit_code == 0
    assert (folder / "report.md").read_text() != "an earlier report"
    signal = tmp_path / "signal.json"
    signal.write_text("{}")
    steps = tmp_path / "steps.csv"
    steps.write_text("z_V,z_R,z_C,z_I,violation\n1,0,0,0,1\n0,0,0,0,0\n")
    result = CliRunner().invoke(main, ["calibrate", str(steps), "--out", str(signal)])
    assert result.exit_code == 2 and "signal.json" in one_error_line(result)
    assert signal.read_text() == "{}"


def commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name)


@pytest.mark.parametrize("path", list(commands(main)), ids=" ".join)
def test_every_click_usage_error_is_one_line(path):
    """An unknown option — click's own usage error — is one line naming the command and where to look, exit 2,
    like every other error (no Usage / Try / Error block)."""
    result = CliRunner().invoke(main, [*path, "--no-such-option"], prog_name="scars")
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert "No such option" in line and f"scars {' '.join(path)}" in line and "--help" in line
    assert "Usage:" not in result.output


def test_bad_values_and_missing_arguments_are_one_line():
    for argv, words in (
        (["run", "tier1", "--episodes", "abc"], "'abc' is not a valid integer"),
        (["ledger", "admit"], "Missing argument 'PATH'"),
        (["nonsense"], "No such command 'nonsense'"),
        (["run", "tier2", "--gates", "maybe"], "Invalid value for '--gates'"),
    ):
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 2 and words in one_error_line(result), (argv, result.output)
    assert "Usage:" in CliRunner().invoke(main, ["run", "--help"]).output  # help is still help


def test_calibrate_on_text_columns_is_one_line_naming_the_file_and_column(tmp_path):
    steps = tmp_path / "steps.csv"
    steps.write_text("z_V,z_R,z_C,z_I,violated_rules,mine\nhigh,0,0,0,r1,yes\n0,0,0,0,,no\n")
    result = CliRunner().invoke(main, ["calibrate", str(steps), "--out", str(tmp_path / "a.json")])
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "steps.csv" in line and "'z_V' holds 'high'" in line
    steps.write_text("z_V,z_R,z_C,z_I,violated_rules,mine\n1,0,0,0,r1,yes\n0,0,0,0,,no\n")
    result = CliRunner().invoke(
        main, ["calibrate", str(steps), "--label", "mine", "--out", str(tmp_path / "b.json")]
    )
    assert result.exit_code == 2 and "label column 'mine' holds 'yes'" in one_error_line(result)
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


def test_a_config_file_nested_10000_deep_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 10_000 + "]" * 10_000)
    result = CliRunner().invoke(main, ["run", "tier1", "--config", str(deep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "is not a readable JSON file" in one_error_line(result)
