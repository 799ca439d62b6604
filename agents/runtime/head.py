"""Head anchoring: the ledger's head commitment outside its database, its HMAC key, and external anchors.

- The **head file** ``<ledger>.head`` (``HeadFile``) holds the committed event count and chain head and, during a
  commit, the group in flight (``pending``); it is replaced atomically (write, fsync, rename, fsync the folder). On
  a keyed ledger it carries a MAC. A database behind it (deleted events, a dropped ``-wal`` file, a deleted or
  replaced database) is caught by comparing the two (``HeadFile.check``).
- The **key** ``<ledger>.key`` (or ``key_file=`` / ``$SCARS_LEDGER_KEY_FILE``): 256 random bits, owner-only; MACs
  of every event, the head row and the head file (``mac``).
- An **anchor** ``COUNT:HASH`` (``format_anchor`` / ``parse_anchor``) kept elsewhere: the only thing that catches a
  roll-back of every file to an earlier genuine copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scars.agents.runtime.scar import canonical_json
from scars.synthesis.errors import ConfigError, LedgerError

HEAD_FILE_FORMAT = "scars-ledger-head/1"
KEY_FILE_ENV = "SCARS_LEDGER_KEY_FILE"
"""Environment variable naming the key file when ``key_file=`` is not given (default: ``<ledger>.key``)."""
_KEY_BYTES = 32


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def head_file_of(path: str | Path) -> Path:
    """The sidecar head file of the ledger at ``path``: ``<path>.head``."""
    return Path(f"{path}.head")


def default_key_file(path: str | Path) -> Path:
    """Where the key of the ledger at ``path`` lives unless ``key_file=`` or ``SCARS_LEDGER_KEY_FILE`` say where."""
    return Path(f"{path}.key")


def creation_file_of(path: str | Path) -> Path:
    """Where a new ledger at ``path`` is built before it is renamed into place: ``<path>.creating``."""
    return Path(f"{path}.creating")


def ledger_files(path: str | Path) -> tuple[Path, ...]:
    """Every file that belongs to the ledger at ``path`` (move them together to set a ledger aside), including an
    interrupted creation's marker ``<path>.creating``."""
    return tuple(
        Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm", ".head", ".key", ".lock", ".creating")
    )


def set_aside_ledger(path: str | Path) -> None:
    """Move the ledger at ``path`` (every file of ``ledger_files``) aside, never reusing or deleting it: its files are
    renamed ``<name>.<mtime stamp><suffix>`` next to it, so a new ledger can start at ``path`` and the old audit trail
    stays readable beside it."""
    main = Path(path)
    if not main.exists():
        return
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(main.stat().st_mtime))
    aside, n = main.with_name(f"{main.stem}.{stamp}{main.suffix}"), 1
    while any(f.exists() for f in ledger_files(aside)):  # two set aside within a second
        aside, n = main.with_name(f"{main.stem}.{stamp}.{n}{main.suffix}"), n + 1
    for old, new in zip(ledger_files(main), ledger_files(aside), strict=True):  # they move together
        if old.exists():
            old.rename(new)


def format_anchor(head: tuple[int, str]) -> str:
    """``(count, hash)`` as the text ``scars ledger verify --anchor`` and ``summary.json`` carry: ``"N:HASH"``."""
    count, digest = head
    return f"{count}:{digest}"


def parse_anchor(text: str) -> tuple[int, str]:
    """``"N:HASH"`` (N events, HASH the 64-hex-digit hash of event N) -> ``(N, HASH)``; ``ConfigError`` otherwise."""
    match = re.fullmatch(r"\s*(\d{1,18}):([0-9a-fA-F]{64})\s*", text) if isinstance(text, str) else None
    if match is None:
        raise ConfigError(
            f"anchor {text!r:.120} is not COUNT:HASH (an event count and the 64-hex-digit hash of that event, as "
            "printed by `scars ledger verify` and stored as ledger_head in summary.json)"
        )
    return int(match.group(1)), match.group(2).lower()


def create_key_file(path: str | Path) -> Path:
    """Create a new random ledger key (256 bits, hex) at ``path``, readable by its owner only. Never overwrites
    (``FileExistsError``), and never leaves a partial key: the key is written and fsynced under a temporary name
    (``<path>.tmp-<pid>``), then hard-linked into place, which fails rather than replace an existing file."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(_KEY_BYTES) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path


def remove_stale_key_temporaries(path: str | Path) -> None:
    """Remove the ``<key>.tmp-<pid>`` files a process killed inside ``create_key_file`` left (call only where no
    other process may be creating that key: under the ledger's exclusive lock, for its own default key)."""
    path = Path(path)
    for stale in path.parent.glob(f"{path.name}.tmp-*"):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


def read_key_file(path: str | Path) -> bytes:
    """The key in ``path``; ``LedgerError`` naming the file when it is missing or not a ledger key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise LedgerError(f"key file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"key file {path} cannot be read: {exc}") from None
    if not re.fullmatch(r"[0-9a-fA-F]{32,256}", text) or len(text) % 2:
        raise LedgerError(
            f"key file {path} is not a scars ledger key (expected 32 to 256 hex digits, as create_key_file writes)"
        )
    return bytes.fromhex(text)


def ledger_mac(key: bytes, domain: str, message: str) -> str:
    return hmac.new(key, f"scars-ledger/{domain}\n{message}".encode(), hashlib.sha256).hexdigest()


def same(a: Any, b: str) -> bool:
    return isinstance(a, str) and hmac.compare_digest(a.encode("utf-8", "replace"), b.encode())


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class HeadFile:
    """The sidecar head file of one ledger (module docstring). ``key`` (when given) MACs and checks it."""

    def __init__(self, ledger_path: str | Path) -> None:
        self.path = head_file_of(ledger_path)

    def read(self) -> tuple[dict[str, Any] | None, str | None]:
        """(content, None), (None, None) when absent, or (None, what is wrong with it)."""
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None, None
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"cannot be read ({exc})"
        try:
            data = json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return None, "is not valid JSON (truncated or edited)"

        def pair(value: Any) -> bool:
            return (
                isinstance(value, dict)
                and isinstance(value.get("count"), int)
                and not isinstance(value.get("count"), bool)
                and value["count"] >= 0
                and isinstance(value.get("hash"), str)
            )

        if (
            not isinstance(data, dict)
            or data.get("format") != HEAD_FILE_FORMAT
            or not pair(data)
            or not (data.get("pending") is None or pair(data.get("pending")))
        ):
            return None, f"is not a {HEAD_FILE_FORMAT} head file"
        return data, None

    def body(self, data: Mapping[str, Any]) -> str:
        return canonical_json({k: v for k, v in data.items() if k != "mac"})

    def write(
        self,
        key: bytes | None,
        committed: tuple[int, str],
        pending: tuple[int, str] | None,
        *,
        sync_folder: bool = True,
    ) -> None:
        """Atomically replace the head file: write a temporary file, fsync it, rename it over, fsync the folder.

        ``sync_folder=False`` (the update after a COMMIT only): the rename is not forced to disk. A power loss may
        then undo it, leaving the previous head file — which names the committed group as pending, a state
        ``verify`` accepts — and never a head file without its content (the content is fsynced before the
        rename). The next group's pending write syncs the folder."""
        data: dict[str, Any] = {
            "format": HEAD_FILE_FORMAT,
            "count": committed[0],
            "hash": committed[1],
            "pending": None if pending is None else {"count": pending[0], "hash": pending[1]},
        }
        if key is not None:
            data["mac"] = ledger_mac(key, "head-file", self.body(data))
        tmp = self.path.with_name(f"{self.path.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(data, sort_keys=True) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise LedgerError(f"cannot write the head file {self.path}: {exc.strerror}") from None
        if sync_folder:
            fsync_dir(self.path.parent)

    def remove_stale_temporaries(self) -> int:
        """Remove the ``<head>.tmp-<pid>`` files writers killed mid-write left behind. Call under the exclusive
        writer lock only: every head-file write happens under it, so any temporary found then is stale."""
        removed = 0
        for stale in self.path.parent.glob(f"{self.path.name}.tmp-*"):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
                removed += 1
        return removed

    def check(
        self,
        key: bytes | None,
        required: bool,
        count: int,
        digest: str,
        hash_at: Callable[[int], str | None],
        side_read: tuple[dict[str, Any] | None, str | None] | None = None,
    ) -> tuple[int, str] | None:
        """Compare the chain (``count`` events ending in ``digest``) with the head file: None when consistent, else
        (first bad seq, reason). ``hash_at(n)`` is the stored hash of event n (None if absent); ``side_read`` is
        the head file as read under the same lock as the chain (read now when None)."""
        side, problem = side_read if side_read is not None else self.read()
        if problem is not None:
            return max(count, 1), f"the head file {self.path} {problem}"
        if side is None:
            if not required:
                return None  # a format-1 ledger never had one
            return max(count, 1), f"the head file {self.path} is missing (deleted)"
        if key is not None and not same(side.get("mac"), ledger_mac(key, "head-file", self.body(side))):
            return max(count, 1), f"the head file {self.path} has no valid MAC: edited without the key"
        committed = (side["count"], side["hash"])
        pending = side.get("pending")
        if (count, digest) == committed:
            return None
        if pending is not None and (count, digest) == (pending["count"], pending["hash"]):
            return None  # a writer was stopped between its commit and the head-file update
        c, h = committed
        if count < c:
            return count + 1, (
                f"truncated: the head file commits {c} events, the database holds {count} (deleted events, a dropped "
                "-wal file, or a rolled-back copy)"
            )
        if count == c or (c > 0 and hash_at(c) != h):
            return max(c, 1), (
                f"the head file commits event {c} with hash {h[:12]}…, the database holds "
                f"{(hash_at(c) or digest)[:12]}…: rewritten"
            )
        return c + 1, f"injected: {count - c} event(s) after the head file's commitment ({c} events)"
