"""The command line loads a command's module only when that command runs (issue 39, item 7: click's lazy-loading
pattern), and ``scars --help`` still lists every command with its own one-line help."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from scars.experiments.cli import COMMANDS, main

PROBE = """
import json, sys
from scars.experiments.cli import main
try:
    main({args!r})
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("scars."))))
"""


def _loaded(*args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=list(args))], capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("entry", COMMANDS, ids=[c.name for c in COMMANDS])
def test_every_rows_help_is_its_commands_own(entry):
    command = getattr(importlib.import_module(f"scars.experiments.commands.{entry.module}"), entry.attr)
    assert command.name == entry.name
    assert command.get_short_help_str(10**6) == entry.help


def test_help_lists_every_command_as_click_would_and_loads_none_of_them():
    listed = CliRunner().invoke(main, ["--help"], terminal_width=100)
    assert listed.exit_code == 0
    eager = click.Group("scars", commands=[main.get_command(None, c.name) for c in COMMANDS])
    expected = CliRunner().invoke(eager, ["--help"], terminal_width=100).output
    assert listed.output.split("Commands:")[1] == expected.split("Commands:")[1]
    assert not {m for m in _loaded("--help") if m.startswith("scars.experiments.commands.")}


def test_a_command_loads_its_own_module_only():
    loaded = _loaded("dsl", "parse", 'if action.name == "x" then forbid_env_action("x")')
    commands = {m for m in loaded if m.startswith("scars.experiments.commands.")}
    assert "scars.experiments.commands.dsl" in commands
    assert not commands - {"scars.experiments.commands.dsl", "scars.experiments.commands._checks"}
    assert "scars.agents.scars_agent" not in loaded and "scars.synthesis.mcts" not in loaded
