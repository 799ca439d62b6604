"""The user cache: values that are pure functions of their inputs, kept on disk and shared by every process.

A value is stored under a *kind* (a folder) and a *key* — a JSON mapping of everything the value depends on,
including the version of the code that computes it — in ``<cache dir>/<kind>/<sha256 of the key>.pickle``. The
cache folder is ``$SCARS_CACHE_DIR`` if set, else the user cache folder (``platformdirs.user_cache_dir("scars")``:
``$XDG_CACHE_HOME/scars`` or ``~/.cache/scars`` on Linux); ``SCARS_CACHE=off`` turns the cache off (``scars
--cache-dir DIR`` and ``scars --no-cache`` set them for one command). Worker processes (Ray tasks, Tune trials)
inherit the environment, so a sweep shares one folder.

An entry is one JSON header line (the kind, the key, the SHA-256 of the payload) and the pickled value. It is read
only if the header names the same kind and key, the payload's hash matches and the value passes the caller's type
check; anything else — a truncated write, another version's entry, a file edited by hand — is rebuilt and
overwritten, never used. Writes go to a temporary file in the same folder and are moved into place with
``os.replace``, so a reader sees a whole entry or none, and two processes building the same value both write a valid
one. The hash guards against corruption, not against someone who can write to the user's own cache folder (as for
pip's or Hugging Face's caches). A cache folder that cannot be written to costs a rebuild, not the run: one warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from scars.synthesis.errors import ConfigError

CACHE_DIR_ENV = "SCARS_CACHE_DIR"
CACHE_ENV = "SCARS_CACHE"
FORMAT = 1
"""The entry layout (header fields, pickle protocol 5); a change makes every older entry unreadable, so rebuilt."""

T = TypeVar("T")


def cache_dir() -> Path | None:
    """The cache folder, or None when ``SCARS_CACHE=off``."""
    switch = os.environ.get(CACHE_ENV, "on").strip().lower()
    if switch not in ("on", "off"):
        raise ConfigError(f"{CACHE_ENV}={os.environ[CACHE_ENV]!r}: must be 'on' or 'off'")
    if switch == "off":
        return None
    folder = os.environ.get(CACHE_DIR_ENV, "").strip()
    if folder:
        return Path(folder).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("scars", appauthor=False))


def _canonical(key: Mapping[str, Any]) -> str:
    return json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def entry_path(kind: str, key: Mapping[str, Any]) -> Path | None:
    """Where the entry of (kind, key) lives (None: the cache is off)."""
    folder = cache_dir()
    if folder is None:
        return None
    return folder / kind / f"{hashlib.sha256(_canonical(key).encode()).hexdigest()}.pickle"


def _read(path: Path, kind: str, key: str, valid: Callable[[object], bool]) -> tuple[bool, Any]:
    try:
        raw = path.read_bytes()
    except OSError:
        return False, None
    head, sep, payload = raw.partition(b"\n")
    try:
        header = json.loads(head)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False, None
    if (
        not sep
        or not isinstance(header, dict)
        or header.get("format") != FORMAT
        or header.get("kind") != kind
        or header.get("key") != key
        or header.get("sha256") != hashlib.sha256(payload).hexdigest()
    ):
        return False, None
    try:
        value = pickle.loads(payload)
    except (
        Exception
    ):  # a payload whose hash matches but does not unpickle (another Python's classes): rebuild
        return False, None
    return (True, value) if valid(value) else (False, None)


def _write(path: Path, kind: str, key: str, value: object) -> None:
    payload = pickle.dumps(value, protocol=5)
    header = {"format": FORMAT, "kind": kind, "key": key, "sha256": hashlib.sha256(payload).hexdigest()}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:16]}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_canonical(header).encode() + b"\n" + payload)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def cached(kind: str, key: Mapping[str, Any], build: Callable[[], T], valid: Callable[[object], bool]) -> T:
    """The value of ``build()`` for ``key``: read from the cache when a verified entry exists, else built and
    stored. ``valid`` checks the type of a value read back (an entry that fails it is rebuilt)."""
    path = entry_path(kind, key)
    if path is None:
        return build()
    text = _canonical(key)
    found, value = _read(path, kind, text, valid)
    if found:
        return value
    value = build()
    try:
        _write(path, kind, text, value)
    except OSError as e:
        warnings.warn(
            f"the cache folder {path.parent} cannot be written ({e.strerror or e}); {kind} is rebuilt in every "
            f"process (set {CACHE_DIR_ENV} to a writable folder, or {CACHE_ENV}=off)",
            RuntimeWarning,
            stacklevel=2,
        )
    return value
