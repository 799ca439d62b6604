"""Input checks shared by the ``scars`` commands: bad input is one line on stderr and exit code 2 (issue 13).

Each check runs before any work starts, so a typo costs nothing and leaves nothing half-written.
"""

from __future__ import annotations

import math
import os
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import click

MAX_SEEDS = 10_000
"""The most seeds a sweep takes (a range like 0-4000000000 is a typo, not a plan)."""

_DIGITS = re.compile(r"[0-9]+")
"""A seed as typed: ASCII digits only (``str.isdigit`` also takes "²", which ``int`` refuses)."""


class FiniteFloat(click.ParamType):
    """A float that is finite (``nan``/``inf`` are refused with the option's name)."""

    name = "float"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


FINITE_FLOAT = FiniteFloat()


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def check_output_dir(path: Path, option: str = "--out") -> None:
    """OUT must be a folder we can create or write into: not a file, not under a file, not read-only."""
    if path.exists() and not path.is_dir():
        raise click.BadParameter(f"{str(path)!r} is a file, not a folder", param_hint=f"'{option}'")
    base = _first_existing(path)
    if not base.is_dir():
        raise click.BadParameter(
            f"{str(path)!r} lies under {str(base)!r}, which is a file, not a folder", param_hint=f"'{option}'"
        )
    if not os.access(base, os.W_OK | os.X_OK):
        raise click.BadParameter(f"{str(base)!r} is not writable", param_hint=f"'{option}'")


def check_output_file(path: Path, option: str = "OUT") -> None:
    """OUT must be a file path we can write: not a folder, its folder creatable and writable."""
    if path.is_dir():
        raise click.BadParameter(f"{str(path)!r} is a folder; give a file name", param_hint=f"'{option}'")
    if path.exists() and not os.access(path, os.W_OK):
        raise click.BadParameter(f"{str(path)!r} is not writable", param_hint=f"'{option}'")
    check_output_dir(path.parent if str(path.parent) else Path("."), option)


def check_url(url: str, option: str = "--server-url") -> str:
    """An http(s) base URL with a host, e.g. http://127.0.0.1:8000."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises ValueError for a bad port
    except ValueError as exc:
        raise click.BadParameter(f"{url!r} is not a URL ({exc})", param_hint=f"'{option}'") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
        raise click.BadParameter(
            f"{url!r} is not an http(s) URL with a host, e.g. http://127.0.0.1:8000", param_hint=f"'{option}'"
        )
    del port
    return url


def count_seeds(text: str) -> int:
    """How many seeds a ``--seeds`` text expands to, without expanding it (0 when it does not parse: the
    sweep's own parser then names the bad part)."""
    total = 0
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        if not _DIGITS.fullmatch(lo.strip()) or (sep and not _DIGITS.fullmatch(hi.strip())):
            return 0
        low = int(lo)
        high = int(hi) if sep else low
        total += max(0, high - low + 1)
    return total


def parse_seeds(text: str) -> tuple[int, ...]:
    """A ``--seeds`` value: ``0-4`` or ``0,1,2`` (non-negative integers, no repeats); bad input is a
    ``click.BadParameter`` naming the value."""
    if count_seeds(text) > MAX_SEEDS:
        raise click.BadParameter(f"{text!r} names more than {MAX_SEEDS} seeds", param_hint="'--seeds'")
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        lo, sep, hi = (s.strip() for s in part.partition("-"))
        if not _DIGITS.fullmatch(lo) or (sep and not _DIGITS.fullmatch(hi)):
            raise click.BadParameter(f"{text!r}: expected seeds like 0-4 or 0,1,2", param_hint="'--seeds'")
        seeds.extend(range(int(lo), int(hi or lo) + 1))
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise click.BadParameter(f"{text!r}: expected distinct seeds >= 0", param_hint="'--seeds'")
    return tuple(seeds)


OVERWRITE_HELP = "Replace the results in an existing, non-empty --out (refused without it)."
overwrite_option = click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)
"""The ``--overwrite`` flag of every command with ``--out`` (the one overwrite rule: ``claim_output``)."""


def claim_output(
    out: Path,
    overwrite: bool,
    *,
    option: str = "--out",
    resumes: Callable[[Path], bool] | None = None,
    files: tuple[str, ...] | None = None,
) -> None:
    """The one overwrite rule of every command with ``--out``: a command never writes next to or over results
    that are already there. A missing or empty ``--out`` folder is claimed; a non-empty one is refused (one line,
    exit 2) unless ``--overwrite``, which empties it first. ``resumes(out)``: the folder holds this command's own
    unfinished work, which it resumes (``sweep``, ``paper``). ``files``: the command writes only these names into
    ``--out`` (``report`` writes beside its data): only they count, and ``--overwrite`` replaces only them. An
    ``--out`` FILE (``calibrate``) is the case ``files=(name,)`` of its folder."""
    from scars.experiments.provenance import claim_out

    check_output_dir(out, option)
    if resumes is not None and not overwrite and out.is_dir() and resumes(out):
        return
    if files is not None:
        present = sorted(name for name in files if (out / name).exists())
        if present and not overwrite:
            raise click.UsageError(
                f"{option} {str(out)!r} holds {', '.join(present)} already; pass --overwrite to replace them, or "
                f"choose another {option}"
            )
        out.mkdir(parents=True, exist_ok=True)
        return
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise click.UsageError(
            f"{option} {str(out)!r} holds results already; pass --overwrite to replace them, or choose another "
            f"{option}"
        )
    claim_out(out, overwrite)


def exit_if_stopped(summaries: dict[str, dict], announce: bool = True) -> None:
    """A run stopped early (fail closed: another process wrote an agent's ledger) exits ``STOPPED_EXIT`` after
    everything it recorded is written (``experiments.stopping``): ``RUN STOPPED`` (unless the runner printed it
    already, ``announce=False``) and one error line per stopped run."""
    from scars.experiments.stopping import STOPPED_EXIT, stopped_notice, stopped_runs

    stopped = stopped_runs(summaries)
    for label, why in stopped:
        if announce:
            click.secho(f"RUN STOPPED {stopped_notice(label, why)}", fg="red", bold=True)
        click.echo(f"error: {label} stopped before its end: {why}", err=True)
    if stopped:
        raise SystemExit(STOPPED_EXIT)
