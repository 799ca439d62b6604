"""The ``scars`` command line. Each command group lives in its own module under ``experiments/commands``."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from scars.synthesis.errors import ScarsError


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


class ScarsGroup(click.Group):
    """The root group: a failure the testbed expects (a ``ScarsError`` — bad config, bad world input, an unusable
    ledger — or an ``OSError`` — a path that cannot be read or written) that a command did not turn into a
    message itself becomes one line on stderr and exit code 2, never a traceback. Anything else is a bug and
    keeps its traceback."""

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Click's usage errors (a missing argument, an unknown option, a bad value) are one line too — "error:",
        the command, the message and where to look — instead of click's Usage / Try / Error block: one rule for
        every error of every command (docs/cli.md)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # a bare group: its help, as click prints it
            click.echo(exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else (prog_name or "scars")
            click.echo(f"error: {where}: {_one_line(exc.format_message())} (see '{where} --help')", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ScarsError as exc:
            click.echo(f"error: {_one_line(exc)}", err=True)
            sys.exit(2)
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            click.echo(f"error: {_one_line(exc.strerror or exc)}{where}", err=True)
            sys.exit(2)


# (module under experiments.commands, attribute holding the click command or group)
COMMAND_MODULES: tuple[tuple[str, str], ...] = (
    ("arena", "arena"),
    ("calibrate", "calibrate"),
    ("dsl", "dsl"),
    ("ledger", "ledger"),
    ("model", "model"),
    ("world", "world"),
    ("run", "run"),
    ("run", "demo"),
    ("sweep", "sweep"),
    ("sensitivity", "sensitivity"),
    ("report", "report"),
    ("poisoning", "poisoning"),
    ("runtime", "runtime"),
    ("paper", "paper"),
    ("train", "train"),
    ("train", "train_curves"),
)


@click.group(cls=ScarsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scars-testbed")
def main() -> None:
    """Scars testbed: worlds, scar runtime, accommodation engine, baselines and experiments."""


for _module, _attr in COMMAND_MODULES:
    main.add_command(getattr(importlib.import_module(f"scars.experiments.commands.{_module}"), _attr))


if __name__ == "__main__":
    main()
