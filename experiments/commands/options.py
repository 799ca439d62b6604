"""Command-line options derived from the configs: one option per config field, its help text the field's docstring,
its allowed values the config's own table (``experiments.config.allowed_values``) — so a check and a ``--help``
cannot disagree — and the one ``--seeds`` option of every command that loops over seeds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click

from scars.experiments.commands._checks import FINITE_FLOAT, check_url
from scars.experiments.config import DEFAULT_SEEDS, RunConfig

ENVVARS = {"api_key": "OPENAI_API_KEY"}
"""Options that fall back to an environment variable (secrets: their value is never shown in --help)."""


def config_options(
    cls: type[RunConfig], skip: tuple[str, ...] = (), only: tuple[str, ...] | None = None
) -> Callable[[Any], Any]:
    """Decorate a click command with one option per field of ``cls`` (``skip``: fields the command declares itself;
    ``only``: just these fields), help text from the field's docstring, choices from ``cls.allowed``."""
    docs = cls.field_docs()

    def decorate(fn):
        for f in reversed(dataclasses.fields(cls)):
            if f.name in skip or (only is not None and f.name not in only):
                continue
            name = "--" + f.name.replace("_", "-")
            default, allowed = f.default, cls.allowed(f.name)
            if isinstance(default, bool):
                fn = click.option(
                    f"{name}/--no-{f.name.replace('_', '-')}",
                    default=default,
                    show_default=True,
                    help=docs[f.name],
                )(fn)
            elif allowed is not None:
                fn = click.option(
                    name, type=click.Choice(allowed), default=default, show_default=True, help=docs[f.name]
                )(fn)
            elif f.name in ENVVARS:
                fn = click.option(
                    name,
                    type=str,
                    default=default,
                    envvar=ENVVARS[f.name],
                    show_envvar=True,
                    help=docs[f.name],
                )(fn)
            else:
                kind = FINITE_FLOAT if isinstance(default, float) else type(default)
                callback = (lambda ctx, param, value: check_url(value)) if f.name == "server_url" else None
                fn = click.option(
                    name, type=kind, default=default, show_default=True, help=docs[f.name], callback=callback
                )(fn)
        return fn

    return decorate


def seeds_option(help_text: str = "Seeds, e.g. 0-4 or 0,2,5.") -> Callable[[Any], Any]:
    """``--seeds`` (default ``DEFAULT_SEEDS``, the paper's five): parsed by ``_checks.parse_seeds``."""
    return click.option("--seeds", default=DEFAULT_SEEDS, show_default=True, help=help_text)
