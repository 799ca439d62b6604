"""The ``scars`` command line. Each command group lives in its own module under ``experiments/commands``."""

from __future__ import annotations

import importlib

import click

# (module under experiments.commands, attribute holding the click command or group)
COMMAND_MODULES: tuple[tuple[str, str], ...] = (
    ("arena", "arena"),
    ("calibrate", "calibrate"),
    ("dsl", "dsl"),
    ("ledger", "ledger"),
    ("world", "world"),
    ("run", "run"),
    ("run", "demo"),
    ("sweep", "sweep"),
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scars-testbed")
def main() -> None:
    """Scars testbed: worlds, scar runtime, accommodation engine, baselines and experiments."""


for _module, _attr in COMMAND_MODULES:
    main.add_command(getattr(importlib.import_module(f"experiments.commands.{_module}"), _attr))


if __name__ == "__main__":
    main()
