"""Where a result came from, and the safety of result folders (issue 16).

Every run folder gets ``provenance.json``: the git commit of the testbed and whether its tree was dirty, the versions
of the packages the result depends on (alfworld and textworld among them), the command line, Python, the host,
the start and end time (UTC), the run's config and, for runs on ALFWorld game files, the sha256 of each file
played. A saved ``config.json`` replays with ``--config FILE`` (:func:`load_config`). Default output folders
are unique (``runs/<tier>-<method>-<UTC timestamp>``, :func:`default_out`) and an existing, non-empty folder is
never written into without ``--overwrite`` (:func:`claim_out`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import platform
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from scars.envs.household.game_file import file_sha256, find_game_files
from scars.experiments.report import write_json
from scars.synthesis.errors import ConfigError

PACKAGES: tuple[str, ...] = (
    "scars-testbed",
    "numpy",
    "pandas",
    "pyarrow",
    "gymnasium",
    "pettingzoo",
    "ortools",
    "ray",
    "wandb",
    "matplotlib",
    "torch",
    "transformers",
    "alfworld",
    "textworld",
)
"""The packages whose versions a run records (absent ones are recorded as None). ``alfworld`` and ``textworld``
are there because ALFWorld's results drift with their versions (issue 27)."""

REPO = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """The testbed's git commit and whether tracked files differ from it (None when not a git checkout)."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "branch": None}
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "dirty": None if status is None else bool(status),
        "branch": _git("rev-parse", "--abbrev-ref", "HEAD"),
    }


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def utc_now(seconds: float | None = None) -> str:
    return dt.datetime.fromtimestamp(time.time() if seconds is None else seconds, dt.UTC).isoformat(
        timespec="seconds"
    )


def provenance(
    config: Mapping[str, Any], *, tier: str, started: float, ended: float | None
) -> dict[str, Any]:
    """The provenance record of one run (times are Unix seconds; written as UTC ISO-8601)."""
    return {
        "tier": tier,
        "git": git_state(),
        "packages": package_versions(),
        "command": sys.argv,
        "python": sys.version,
        "executable": sys.executable,
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "started": utc_now(started),
        "ended": None if ended is None else utc_now(ended),
        "wall_seconds": None if ended is None else ended - started,
        "config": dict(config),
        "game_files": game_file_hashes(config),
    }


def _game_file_settings(config: Any) -> list[tuple[str, int]]:
    """Every (``game_files``, ``episodes``) pair in a config, or in a runner's configs keyed by label."""
    if not isinstance(config, Mapping):
        return []
    if config.get("game_files"):
        return [(str(config["game_files"]), int(config.get("episodes") or 0))]
    return [pair for value in config.values() for pair in _game_file_settings(value)]


def game_file_hashes(config: Mapping[str, Any]) -> dict[str, str] | None:
    """For runs on game files: the sha256 of every file played (the sorted files under ``game_files``, the
    first ``episodes`` of them), keyed by path; None for runs on generated games."""
    from_files = _game_file_settings(config)
    if not from_files:
        return None
    hashes: dict[str, str] = {}
    for root, episodes in from_files:
        for path in find_game_files(root)[: episodes or None]:
            hashes[str(path)] = file_sha256(path)
    return hashes


def write_provenance(
    out: Path, config: Mapping[str, Any], *, tier: str, started: float, ended: float | None = None
) -> Path:
    path = out / "provenance.json"
    write_json(path, provenance(config, tier=tier, started=started, ended=ended))
    return path


def default_out(*parts: str, root: Path = Path("runs")) -> Path:
    """``runs/<parts…>-<UTC yyyymmddTHHMMSS>`` (e.g. ``runs/tier1-scars-20261201T023000``), with ``-2``, ``-3`` … if
    that folder exists already."""
    stem = "-".join([*parts, time.strftime("%Y%m%dT%H%M%S", time.gmtime())])
    candidate, k = root / stem, 1
    while candidate.exists():
        k += 1
        candidate = root / f"{stem}-{k}"
    return candidate


class OutputExists(ConfigError):
    """An output folder holds results already and ``--overwrite`` was not given."""


def claim_out(out: Path, overwrite: bool) -> None:
    """Make ``out`` ready for a new run: a missing or empty folder is fine; a folder with files is refused unless
    ``overwrite``, which removes its contents first (never a silent mix of two runs' files)."""
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise OutputExists(
                f"output folder {str(out)!r} holds results already; pass --overwrite to replace them, or choose "
                "another --out (the default is a new folder per run)"
            )
        for child in out.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    out.mkdir(parents=True, exist_ok=True)


def load_config(path: Path, cls: type) -> dict[str, Any]:
    """The fields of a saved config for ``cls`` (a frozen config dataclass): ``config.json`` of a run, or a
    runner's ``config.json`` holding exactly one labelled config. Unknown fields are an error listing the
    allowed ones; missing fields keep their defaults."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"--config {str(path)!r} is not a readable JSON file ({exc})") from None
    allowed = tuple(f.name for f in dataclasses.fields(cls))
    if not isinstance(data, dict):
        raise ConfigError(
            f"--config {str(path)!r} holds {type(data).__name__}, not a JSON object of config fields"
        )
    if data and all(isinstance(v, dict) for v in data.values()) and not set(data) & set(allowed):
        if len(data) != 1:
            raise ConfigError(
                f"--config {str(path)!r} holds {len(data)} configs ({', '.join(data)}); give one run's "
                "<label>/config.json instead"
            )
        data = next(iter(data.values()))
    check_fields(data, cls, f"--config {str(path)!r}")
    return data


def check_fields(fields: Mapping[str, Any], cls: type, where: str) -> None:
    """Every key must be a field of ``cls``; otherwise one error naming the unknown keys and the allowed ones."""
    allowed = tuple(f.name for f in dataclasses.fields(cls))
    unknown = [k for k in fields if k not in allowed]
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(map(repr, unknown))} of {cls.__name__}; allowed: "
            f"{', '.join(allowed)}"
        )


__all__ = [
    "OutputExists",
    "check_fields",
    "claim_out",
    "default_out",
    "game_file_hashes",
    "git_state",
    "load_config",
    "package_versions",
    "provenance",
    "write_provenance",
]
