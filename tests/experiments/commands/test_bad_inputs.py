"""Every ``scars`` command, run with a table of bad inputs (issue 13 #8): each gives exit code 2, one clear error
line on stderr naming the problem, and never a traceback. A case that crashes — any exception escaping the
command other than its SystemExit — fails this test, whatever the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from scars.agents.runtime.ledger import Ledger
from scars.experiments.cli import main

RULE = 'if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")'
ROOT = str(Path(__file__).resolve().parents[3])


@pytest.fixture
def places(tmp_path) -> dict[str, str]:
    """Paths the cases refer to: a plain file, a folder, a folder the checks are told is not writable, …"""
    file = tmp_path / "a_file.txt"
    file.write_text("not a folder")
    folder = tmp_path / "a_folder"
    folder.mkdir()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00junk" * 100)
    ledger = tmp_path / "ledger.db"
    with Ledger(ledger) as led:
        led.observe_failure({"x": 1})
    locked = tmp_path / "read_only"
    locked.mkdir()
    return {
        "FILE": str(file),
        "UNDER_FILE": str(file / "sub"),
        "FOLDER": str(folder),
        "LOCKED": str(locked / "out"),
        "EMPTY": str(empty),
        "JUNK": str(junk),
        "LEDGER": str(ledger),
        "MISSING": str(tmp_path / "missing.db"),
    }


TIER1 = ["run", "tier1", "--episodes", "1", "--schedule", "smoke"]
CASES: list[tuple[str, list[str], str]] = [
    # (case id, argv with placeholders, text the error line must contain)
    ("tier1-out-is-a-file", [*TIER1, "--out", "FILE"], "is a file"),
    ("tier1-out-under-a-file", [*TIER1, "--out", "UNDER_FILE"], "which is a file"),
    ("tier1-out-not-writable", [*TIER1, "--out", "LOCKED"], "not writable"),
    ("tier1-temperature-nan", [*TIER1, "--temperature", "nan"], "not a finite number"),
    ("tier1-temperature-inf", [*TIER1, "--temperature", "inf"], "not a finite number"),
    ("tier1-compliance-text", [*TIER1, "--compliance", "lots"], "not a number"),
    ("tier1-server-url", [*TIER1, "--server-url", "not a url"], "not an http(s) URL"),
    ("tier1-server-url-port", [*TIER1, "--server-url", "http://host:99999"], "not a URL"),
    ("tier1-episodes-0", [*TIER1, "--episodes", "0"], "episodes"),
    ("tier1-seed-negative", [*TIER1, "--seed", "-1"], "seed"),
    ("tier1-tau", [*TIER1, "--tau", "0.9"], "tau"),
    ("tier1-method", [*TIER1, "--method", "gpt"], "gpt"),
    ("tier1-hf-no-model", [*TIER1, "--backend", "hf"], "model_path"),
    ("tier1-hf-model-not-local", [*TIER1, "--backend", "hf", "--model-path", "gpt2"], "not a local folder"),
    ("tier1-hf-folder-not-a-model", [*TIER1, "--backend", "hf", "--model-path", "FOLDER"], "no config.json"),
    ("tier1-device", [*TIER1, "--device", "tpu"], "tpu"),
    ("tier1-dtype-on-cpu", [*TIER1, "--dtype", "float16"], "cannot run on device 'cpu'"),
    ("tier1-policy-mode", [*TIER1, "--policy-mode", "sample"], "sample"),
    ("tier1-generate-embedded", [*TIER1, "--policy-mode", "generate"], "needs a model that writes"),
    ("tier1-choice-param", [*TIER1, "--choice-param", "regex"], "regex"),
    (
        "tier1-server-unreachable",
        [
            *TIER1,
            "--backend",
            "openai",
            "--server-model",
            "m",
            "--server-url",
            "http://127.0.0.1:9",
            "--out",
            "MISSING",
        ],
        "cannot reach the model server",
    ),
    (
        "model-random-width-heads",
        ["model", "random", "--out", "MISSING", "--width", "30", "--heads", "4"],
        "multiple",
    ),
    ("model-random-out-is-a-file", ["model", "random", "--out", "FILE"], "is a file"),
    ("demo-out-is-a-file", ["demo", "--out", "FILE"], "is a file"),
    ("demo-episodes-0", ["demo", "--episodes", "0"], "episodes"),
    ("demo-seed-negative", ["demo", "--seed", "-1"], "seed"),
    ("sweep-billions-of-seeds", ["sweep", "--grid", "seed=0-4000000000", "--out", "FOLDER"], "10,000"),
    ("sweep-seeds-text", ["sweep", "--grid", "seed=zero", "--out", "FOLDER"], "zero"),
    ("sweep-out-is-a-file", ["sweep", "--grid", "seed=0", "--out", "FILE"], "is a file"),
    ("sweep-out-under-a-file", ["sweep", "--grid", "seed=0", "--out", "UNDER_FILE"], "which is a file"),
    ("sweep-episodes-0", ["sweep", "--grid", "seed=0", "--set", "episodes=0", "--out", "FOLDER"], "episodes"),
    (
        "sweep-bootstrap",
        ["sweep", "--grid", "seed=0", "--bootstrap-samples", "5", "--out", "FOLDER"],
        "bootstrap",
    ),
    ("sweep-unknown-field", ["sweep", "--grid", "sed=0", "--out", "FOLDER"], "allowed: method"),
    ("tier1-config-missing", [*TIER1, "--config", "MISSING"], "not a readable JSON file"),
    ("tier1-config-junk", [*TIER1, "--config", "JUNK"], "not a readable JSON file"),
    ("report-no-results", ["report", "FOLDER"], "no run or sweep results"),
    ("report-a-file", ["report", "FILE"], "is a file"),
    ("paper-scale", ["paper", "--scale", "huge"], "huge"),
    ("ledger-show-format", ["ledger", "show", "LEDGER", "--format", "xml"], "xml"),
    ("world-export-out-is-a-folder", ["world", "export", "FOLDER"], "is a folder"),
    ("world-export-out-under-a-file", ["world", "export", "UNDER_FILE/game.tw-pddl"], "which is a file"),
    ("world-export-seed-negative", ["world", "export", "--seed", "-1", "FOLDER/g.tw-pddl"], "seed"),
    ("world-play-seed-negative", ["world", "play", "--seed", "-1"], "seed"),
    ("world-play-max-steps-0", ["world", "play", "--max-steps", "0"], "max_steps"),
    ("arena-seed-negative", ["arena", "run", "--seed", "-1"], "--seed"),
    ("arena-runs-0", ["arena", "run", "--runs", "0"], "--runs"),
    ("arena-months-0", ["arena", "run", "--months", "0"], "--months"),
    ("arena-population", ["arena", "run", "--population", "coop:x"], "coop:x"),
    ("dsl-lone-surrogate", ["dsl", "parse", 'if x == "\\ud800" then forbid_tool_call("t")'], "surrogate"),
    ("dsl-raw-surrogate", ["dsl", "parse", 'if x == "\ud800" then forbid_tool_call("t")'], "surrogate"),
    ("dsl-unbalanced", ["dsl", "parse", 'if (x == 1 then forbid_tool_call("t")'], "line 1, column"),
    ("dsl-lambda-nan", ["dsl", "parse", "--lambda-tok", "nan", RULE], "not a finite number"),
    (
        "ledger-admit-huge-number",
        ["ledger", "admit", "LEDGER", RULE, "--evidence", "9" * 5000],
        "not valid JSON",
    ),
    ("ledger-admit-nan", ["ledger", "admit", "LEDGER", RULE, "--evidence", '{"x": NaN}'], "not valid JSON"),
    ("ledger-admit-deep", ["ledger", "admit", "LEDGER", RULE, "--evidence", "[" * 100_000], "not valid JSON"),
    (
        "ledger-admit-surrogate",
        ["ledger", "admit", "MISSING", RULE, "--evidence", '{"a": "\\ud800"}'],
        "surrogate",
    ),
    ("ledger-admit-scope-list", ["ledger", "admit", "LEDGER", RULE, "--scope", "[1]"], "--scope"),
    ("ledger-admit-bad-rule", ["ledger", "admit", "LEDGER", "if then"], "bad rule"),
    ("ledger-admit-folder", ["ledger", "admit", "FOLDER", RULE], "FOLDER"),
    ("ledger-admit-under-file", ["ledger", "admit", "UNDER_FILE", RULE], "not a folder"),
    ("ledger-admit-junk", ["ledger", "admit", "JUNK", RULE], "not a scars ledger"),
    ("ledger-admit-verdict-missing", ["ledger", "admit", "LEDGER", RULE, "--verdict", "7"], "no such event"),
    (
        "ledger-admit-missing-key",
        ["ledger", "admit", "LEDGER", RULE, "--key-file", "MISSING"],
        "does not exist",
    ),
    ("ledger-verify-empty", ["ledger", "verify", "EMPTY"], "not a scars ledger"),
    ("ledger-verify-junk", ["ledger", "verify", "JUNK"], "not a scars ledger"),
    ("ledger-verify-missing", ["ledger", "verify", "MISSING"], "no ledger at"),
    ("ledger-verify-folder", ["ledger", "verify", "FOLDER"], "FOLDER"),
    ("ledger-verify-anchor", ["ledger", "verify", "LEDGER", "--anchor", "7:nothex"], "COUNT:HASH"),
    ("ledger-verify-anchor-file", ["ledger", "verify", "LEDGER", "--anchor", "FILE"], "COUNT:HASH"),
    ("ledger-show-empty", ["ledger", "show", "EMPTY"], "not a scars ledger"),
    ("ledger-show-junk", ["ledger", "show", "JUNK"], "not a scars ledger"),
    ("ledger-retire-missing", ["ledger", "retire", "MISSING", "abc", "--reason", "x"], "no ledger at"),
    ("train-out-is-a-file", ["train", "--out", "FILE"], "is a file"),
    ("train-learner", ["train", "--learner", "dqn"], "dqn"),
    ("train-shield", ["train", "--shield", "magic"], "magic"),
    ("train-commons-sb3", ["train", "--world", "commons", "--out", "MISSING"], "rllib-ppo"),
    ("train-timesteps-0", ["train", "--timesteps", "0", "--out", "MISSING"], "timesteps"),
    ("train-resume-missing", ["train", "--resume", "--out", "MISSING"], "not a run folder"),
    ("train-seeds-text", ["train", "--seeds", "zero", "--out", "MISSING"], "zero"),
    ("train-curves-no-runs", ["train-curves", "FOLDER", "--out", "MISSING"], "no run folder"),
    # issue 41: "²" (and other non-ASCII digits) passed str.isdigit and then int() raised a traceback
    (
        "tier3-seeds-superscript",
        ["run", "tier3", "--seeds", "0,²", "--out", "MISSING"],
        "expected seeds like",
    ),
    ("tier3-seeds-range-superscript", ["run", "tier3", "--seeds", "0-²", "--out", "MISSING"], "0-²"),
    ("collusion-seeds-arabic", ["run", "tier2-collusion", "--seeds", "٣", "--out", "MISSING"], "٣"),
    ("tier2-population-superscript", ["run", "tier2", "--population", "coop:²", "--out", "MISSING"], "'²'"),
    ("tier3-population-superscript", ["run", "tier3", "--population-c", "coop:²", "--out", "MISSING"], "'²'"),
    (
        "sweep-address-superscript",
        ["sweep", "--grid", "seed=0", "--address", "h:²", "--out", "MISSING"],
        "HOST:PORT",
    ),
]


def _fill(argv: list[str], places: dict[str, str]) -> list[str]:
    out = []
    for arg in argv:
        for name, value in sorted(places.items(), key=lambda kv: -len(kv[0])):
            arg = arg.replace(name, value) if arg.startswith(name) or arg == name else arg
        out.append(arg)
    return out


@pytest.mark.parametrize(
    ("argv", "words"), [(argv, words) for _, argv, words in CASES], ids=[c[0] for c in CASES]
)
def test_every_bad_input_is_one_line_and_exit_code_2(places, monkeypatch, argv, words):
    locked = Path(places["LOCKED"]).parent
    real_access = os.access
    # the machine may run tests as root (who may write anywhere): tell the check this folder is read-only
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == locked else real_access(p, mode))
    argv = _fill(argv, places)
    words = _fill([words], places)[0]
    result = CliRunner().invoke(main, argv, env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{argv}: {type(result.exception).__name__}: {result.exception}"
    )
    assert "Traceback" not in result.output
    assert result.exit_code == 2, (argv, result.output)
    errors = [line for line in result.stderr.splitlines() if line.lower().startswith("error")]
    assert len(errors) == 1, result.stderr
    assert words in errors[0], (words, result.stderr)
    assert len(errors[0]) < 600
    assert not Path(places["MISSING"]).exists()  # bad input creates no ledger


@pytest.mark.parametrize(
    "argv",
    [
        ["ledger", "verify", "EMPTY"],
        ["run", "tier1", "--temperature", "nan", "--out", "FOLDER"],
        ["arena", "run", "--seed", "-1"],
        ["dsl", "parse", 'if x == "\\ud800" then forbid_tool_call("t")'],
    ],
)
def test_a_real_process_prints_no_traceback(places, argv):
    """The same through a real interpreter (what a user sees): stderr holds the error and no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "scars.experiments.cli", *_fill(argv, places)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT, "COLUMNS": "200"},
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sum(line.lower().startswith("error") for line in proc.stderr.splitlines()) == 1, proc.stderr


def test_an_unexpected_scars_error_inside_a_command_is_one_line(monkeypatch, tmp_path):
    """The root group's safety net: a ScarsError or OSError a command did not catch is still one line."""
    import scars.experiments.runner as runner
    from scars.synthesis.errors import WorldError

    def boom(*args, **kwargs):
        raise WorldError("the world refused: value 7 is not allowed; allowed: 1-3")

    monkeypatch.setattr(runner, "run_many", boom)
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        "error: the world refused: value 7 is not allowed; allowed: 1-3"
    ]

    def oserror(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x" / "summary.json"))

    monkeypatch.setattr(runner, "run_many", oserror)
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "Permission denied" in result.stderr and "summary.json" in result.stderr
