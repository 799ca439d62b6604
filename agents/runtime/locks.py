"""The ledger's writer lock: ``flock`` on ``<ledger>.lock``, so that appends (and the head file) go in commit order.

Writers take it exclusive for a group (append + head file), verifiers shared (one consistent view of the database
and the head file). Read-only handles never create the lock file.
"""

from __future__ import annotations

import os
from pathlib import Path

from scars.synthesis.errors import LedgerError

try:  # POSIX: appends are serialised with flock so the head file is written in commit order
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: single-writer use only
    fcntl = None  # type: ignore[assignment]


def lock_file_of(path: str | Path) -> Path:
    """The lock file of the ledger at ``path``: ``<path>.lock``."""
    return Path(f"{path}.lock")


def acquire(path: str | Path, *, exclusive: bool, read_only: bool) -> int | None:
    """Open the lock file of the ledger at ``path`` and flock it; the descriptor (closing it releases the lock), or
    None when there is nothing to lock (not POSIX; an audit of a ledger no writer ever locked, or on a read-only
    file system)."""
    if fcntl is None:
        return None
    lock_path = lock_file_of(path)
    try:
        if read_only:
            fd = os.open(lock_path, os.O_RDONLY)
        else:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        if not read_only:
            raise LedgerError(f"cannot open the ledger's lock file {lock_path}") from None
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    except BaseException:
        os.close(fd)
        raise
    return fd
