"""The ``scars`` command line. Each command group lives in its own module under ``experiments/commands``."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

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


class LazyCommand(NamedTuple):
    """A command of ``scars``: its name, the module under ``experiments.commands`` and the attribute holding the
    click command or group, and its one-line help as ``scars --help`` lists it (the first sentence of its docstring;
    ``tests/experiments/commands/test_lazy_cli.py`` checks the two agree)."""

    name: str
    module: str
    attr: str
    help: str


COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand(
        "arena", "arena", "arena", "The GovSim-style commons arena with peer punishment and karma (tier 2)."
    ),
    LazyCommand(
        "calibrate",
        "calibrate",
        "calibrate",
        "Grid-search the weights w = [α, β, γ, δ] and the threshold τ of d_t = sigmoid(wᵀz) on the step tables STEPS (steps.parquet / steps.csv of earlier runs), maximising F1 of the label; write a config that `scars run tier1 --signal-config OUT` uses.",
    ),
    LazyCommand(
        "demo",
        "run",
        "demo",
        "Every method of the comparison (scars and the text baselines, ``config.METHODS``) on the paper's dynamic-rule schedule: the comparison table, results.md, plots and the scars ledger in OUT.",
    ),
    LazyCommand("dsl", "dsl", "dsl", "The patch DSL: parse rules, print their canonical form and cost."),
    LazyCommand(
        "ledger",
        "ledger",
        "ledger",
        "The append-only, hash-chained audit ledger of scars (admit, retire, revoke, show, verify).",
    ),
    LazyCommand(
        "model", "model", "model", "Local models for the real-model backends (nothing is downloaded)."
    ),
    LazyCommand(
        "paper",
        "paper",
        "paper",
        "Run the paper's protocol (every registered tier × methods × ablations and controls × seeds) on Ray Tune and write report.md and report.html into OUT.",
    ),
    LazyCommand(
        "poisoning",
        "poisoning",
        "poisoning",
        "Aggregate attacked runs (a poisoning sweep's OUT folder, or `scars run tier1|tier2 --attack …` folders) into the table of docs/poisoning.md: attack success per method (with its defences) × attack × poison rate, its 95% CI over seeds and n (seeds, opportunities), the lift over rate 0, utility, RVR, the method's detections and the attack's cost; and a plot of attack success against poison rate.",
    ),
    LazyCommand(
        "report",
        "report",
        "report",
        "Write report.md and report.html (images inline as base64) from sweep folders (scars sweep / scars paper) and runner folders (scars demo / scars run): every tier's tables with n, CIs and paired differences, the ablation table with each ablation's own measures, plots with CI bands and markers at rule switches and world-version changes, and d_t with its four terms for one run.",
    ),
    LazyCommand(
        "run",
        "run",
        "run",
        "Run experiments (tier 1: the household world with dynamic safety rules; tier 2: the commons arena).",
    ),
    LazyCommand(
        "runtime",
        "runtime",
        "runtime",
        "scars-runtime: measurements of the library that gates any framework's tool calls.",
    ),
    LazyCommand(
        "sensitivity",
        "sensitivity",
        "sensitivity",
        "Run every method at every (influence_gain, compliance, replan_competence) grid point of the embedded simulated LM and draw success vs SVR per method as a frontier plot (frontier.png), with the table (frontier.csv, frontier.md) and which headline claims hold at how many grid points (claims.md).",
    ),
    LazyCommand(
        "sweep",
        "sweep",
        "sweep",
        "Sweep any config fields of a tier on Ray Tune: one trial per grid point, each a run in OUT/runs/<name>/.",
    ),
    LazyCommand(
        "train",
        "train",
        "train",
        "Train LEARNER on WORLD behind SHIELD, one run per seed: each OUT/seed<k>/ gets config.json, episodes.csv, summary.json, checkpoints/ (and the scars shield's ledger); OUT gets curves.png (return, success, violations per episode, cumulative violations, CIs over seeds).",
    ),
    LazyCommand(
        "train-curves",
        "train",
        "train_curves",
        "One figure of the learning curves of several `scars train` outputs (each RUN a folder of seed<k>/ runs; its label the runs' shield), with 95% bootstrap CIs over seeds; a JSON of the curves beside it.",
    ),
    LazyCommand("world", "world", "world", "The native ALFWorld-style household world (tier 1)."),
)
"""Every command of ``scars``, in the order ``--help`` lists them. A new command is one more row (its module is
imported only when the command runs)."""


class LazyGroup(ScarsGroup):
    """The root group with click's lazy-loading pattern (click's docs, *Lazily Loading Subcommands*): a command's
    module is imported when that command runs, so ``scars --help`` and ``scars dsl parse`` load no other command's
    module. ``--help`` lists the rows' own one-line help instead of importing every module to read it."""

    def __init__(self, *args: Any, lazy: tuple[LazyCommand, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = {c.name: c for c in lazy}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = self.lazy.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        command = getattr(importlib.import_module(f"scars.experiments.commands.{entry.module}"), entry.attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"scars.experiments.commands.{entry.module}.{entry.attr} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in self.lazy:
                rows.append((name, click.Command(name, help=self.lazy[name].help).get_short_help_str(limit)))
            else:
                command = super().get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _cache_dir(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        from scars.experiments.cache import CACHE_DIR_ENV

        os.environ[CACHE_DIR_ENV] = str(value)


def _no_cache(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        from scars.experiments.cache import CACHE_ENV

        os.environ[CACHE_ENV] = "off"


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scars-testbed")
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path, file_okay=False),
    callback=_cache_dir,
    expose_value=False,
    help="The user cache (game pools) for this command and the processes it starts; default $SCARS_CACHE_DIR, "
    "else the user cache folder (~/.cache/scars).",
)
@click.option(
    "--no-cache",
    is_flag=True,
    callback=_no_cache,
    expose_value=False,
    help="Neither read nor write the user cache (as SCARS_CACHE=off).",
)
def main() -> None:
    """Scars testbed: worlds, scar runtime, accommodation engine, baselines and experiments."""
    from scars.experiments.cache import cache_dir

    cache_dir()  # a bad SCARS_CACHE is one line before any command writes anything


if __name__ == "__main__":
    main()
