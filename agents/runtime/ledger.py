"""The audit-plane store: an append-only, bitemporal, hash-chained ledger over SQLite (SPEC §1, §5).

The model is seed ``000`` (Governed Persistent Memory) §3.1–3.4:

- Every change is an event e_i = (i, τ_i, t_i, type_i, payload_i, h_{i−1}, h_i) with
  h_i = sha256(h_{i−1} ‖ canon(e_i ∖ {h_i})) (seed 000, eq. 3): a contiguous sequence number, a transaction time
  τ (µs since the epoch, assigned by the ledger's clock and never decreasing), a valid-time interval
  [valid_from, valid_to) on the caller's timeline (µs by default: the transaction time), a type, a subject (the
  scar / temporary-mask / failure the event is about) and a payload in canonical JSON.
- **Keyed** (the default): a secret key kept outside the database (``<ledger>.key``, created with the ledger, or
  the file named by ``key_file=`` / the ``SCARS_LEDGER_KEY_FILE`` environment variable) MACs every event
  (HMAC-SHA256 of h_i) and the head, so a rewrite with recomputed hashes is caught by anyone holding the key.
- **Head commitment outside the file**: the event count and chain head are kept in the ``head`` row (same
  transaction as each commit) *and* in a sidecar head file ``<ledger>.head``, replaced atomically (write, fsync,
  rename) around every commit; on a keyed ledger it carries a MAC too. Deleting the last events, editing the head
  row, or dropping the ``-wal`` file a killed writer left behind (which silently loses its last commits) leaves
  the database behind the head file, and verification says so. Appends are serialised by a lock file
  (``<ledger>.lock``) so that the head file is always written in commit order.
- **Group commit, and the durability contract.** Appends are written in groups: ``with ledger.group():`` puts
  every append of the block into one SQLite transaction (WAL journal, ``synchronous=FULL``: with ``NORMAL`` a
  power loss may roll back commits the fsynced head file already names, and the ledger would be refused),
  committed when the outermost block exits; an append outside any group is a group of one. Each group is
  committed in three steps: the head file names the group as ``pending`` (fsynced, folder fsynced), ``COMMIT``
  (the WAL fsynced), the head file names it committed (fsynced). The write locks (``<ledger>.lock`` and SQLite's)
  are held from the group's first append to its commit, and the tail/head/MAC/head-file checks run once per group.
  *A killed process* (SIGKILL, a crash of Python) keeps every group whose commit finished and loses the group in
  progress whole — never part of a group and never part of an event; the ledger verifies (a kill between COMMIT
  and the head-file update leaves the group named as pending, which is accepted, and the next writer settles the
  head file so that removing that group afterwards is caught). *A power loss or OS crash* loses the same and
  nothing more: ``synchronous=FULL`` makes every COMMIT durable before it returns, and the head file is made
  durable before the COMMIT it announces (the update after the COMMIT skips the folder fsync: undone, it leaves the
  pending head file, which still verifies). *The anchor stays honest*: the head row and head file move only when a
  group commits, and ``head()``/``anchor_text()``/``verify()``/the projections commit an open group first, so an
  anchor handed out never names an event that is not on disk. An event returned inside a group is durable once the
  group commits; a commit that fails (disk full, I/O error) loses that group, and the handle refuses further
  appends. ``SchemaStore`` makes each command one group and the scars agent each step one group.
- **Creation is atomic**: a creation marker ``<path>.creating`` is made first; the new database (schema, head row,
  format) is built beside it and moved onto it, its key (written under a temporary name and linked into place) and
  head file are written beside it, and the database is renamed to ``path`` last, all under the exclusive writer
  lock; a resumed creation never removes the marker. After a kill at any instant the folder holds no
  ledger (``path`` absent: the next writer completes the creation, reusing the key; an audit says "no ledger …
  creation interrupted") or the complete empty ledger, which verifies — never a database without its head file.
- ``Ledger(path, read_only=True)`` (what ``scars ledger verify``/``show`` use) never writes: it opens the database
  immutable when no ``-wal`` file exists, and a private copy of the database and its ``-wal`` otherwise (so no
  ``-shm`` is created or changed beside them); it creates nothing and rejects a file that is not a scars ledger.
- **A missing ledger is a tamper, not a fresh start**: a database that is missing, empty or not a ledger while its
  head file (or the default key ``<ledger>.key``) says a ledger existed is ``MissingLedgerError``; so is a database
  deleted or replaced under an open handle (checked, by device and inode, at every group and verification). A
  deleted head row is ``LedgerIntegrityError``. A roll-back of every file is caught only by an anchor.
- The active control plane is a deterministic projection of the events (``active_scars``, ``control_plane``);
  scars are never edited in place. The projection verifies the whole chain, the MACs, the head file and an
  optional external anchor first, and fails closed with ``LedgerIntegrityError`` when any check fails.
- No resurrection (seed 000 §3.4), decided in one place (``may_admit``, which ``admit`` enforces): a retired or
  revoked scar id comes back only with *verifier-backed* fresh evidence — an evidence item
  ``{"verdict_event": {"seq": k, "hash": h}}`` naming a ``failure_observed`` event recorded in this ledger after
  the retirement, not used before for this id, not part of the counter-evidence that revoked it, and a failure
  (read through the one ``Failure`` type: a payload of another shape backs nothing) of an action the scar masks. Free JSON never unlocks it, and
  ``x < 20.0`` is the same scar as ``x < 20`` (``synthesis.dsl.canonical``).

What is and is not detectable is tabulated in docs/ledger.md and checked by
``tests/agents/runtime/test_ledger_properties.py``. In short: without the key, someone who edits the database *and* the head
file consistently is not detected; with the key, only a party holding the key can rewrite; a roll-back of every
file to an earlier genuine state is detected only against an external anchor (``head()`` / ``anchor_text()``
kept elsewhere, e.g. the ``ledger_head`` of a run's ``summary.json``, passed to ``verify(anchor=…)``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scars.agents.runtime import locks
from scars.agents.runtime.admission import judge_admission
from scars.agents.runtime.control import ControlPlane
from scars.agents.runtime.errors import (
    ForeignWriteError,
    LifecycleError,
    MissingLedgerError,
    ResurrectionRefused,
)
from scars.agents.runtime.events import (
    EVENT_NAME,
    EVENT_TYPES,
    FAILURE_OBSERVED,
    GENESIS_HASH,
    LIFECYCLE_EVENTS,
    MERGE_DECISION,
    SCAR_ADMITTED,
    SCAR_RETIRED,
    SCAR_REVOKED,
    TEMP_MASK_LIFTED,
    TEMP_MASK_SET,
    VERDICT_EVENTS,
    Event,
    TemporaryMask,
    VerifyReport,
    decode_payload,
    event_body,
    event_hash,
    verdict_evidence,
)
from scars.agents.runtime.head import (
    HEAD_FILE_FORMAT,
    KEY_FILE_ENV,
    HeadFile,
    create_key_file,
    creation_file_of,
    default_key_file,
    format_anchor,
    fsync_dir,
    head_file_of,
    ledger_files,
    ledger_mac,
    parse_anchor,
    read_key_file,
    remove_stale_key_temporaries,
    same,
    set_aside_ledger,
)
from scars.agents.runtime.projection import active_scars_of, replay, temporary_masks_of
from scars.agents.runtime.scar import Scar, canonical_json, scar_id_of, sha256_hex
from scars.synthesis.dsl import Rule, canonical_text
from scars.synthesis.errors import ConfigError, LedgerError, LedgerIntegrityError, ScarsError
from scars.synthesis.failure import Failure

__all__ = [
    "EVENT_TYPES",
    "FAILURE_OBSERVED",
    "FORMAT_VERSION",
    "GENESIS_HASH",
    "HEAD_FILE_FORMAT",
    "KEY_FILE_ENV",
    "LIFECYCLE_EVENTS",
    "MERGE_DECISION",
    "SCAR_ADMITTED",
    "SCAR_RETIRED",
    "SCAR_REVOKED",
    "TEMP_MASK_LIFTED",
    "TEMP_MASK_SET",
    "VERDICT_EVENTS",
    "Event",
    "ForeignWriteError",
    "Ledger",
    "LifecycleError",
    "MissingLedgerError",
    "ResurrectionRefused",
    "TemporaryMask",
    "VerifyReport",
    "create_key_file",
    "default_key_file",
    "event_hash",
    "format_anchor",
    "head_file_of",
    "ledger_files",
    "parse_anchor",
    "read_key_file",
    "set_aside_ledger",
    "verdict_evidence",
]

FORMAT_VERSION = "2"  # 1: no MACs, no head file (still readable by read-only audits)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq        INTEGER PRIMARY KEY,
    type       TEXT NOT NULL,
    subject    TEXT,
    payload    TEXT NOT NULL,
    tx_time    INTEGER NOT NULL,
    valid_from INTEGER,
    valid_to   INTEGER,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL,
    mac        TEXT
);
CREATE INDEX IF NOT EXISTS events_by_subject ON events (subject, seq);
CREATE TABLE IF NOT EXISTS head (
    singleton    INTEGER PRIMARY KEY CHECK (singleton = 1),
    count        INTEGER NOT NULL,
    last_hash    TEXT NOT NULL,
    last_tx_time INTEGER NOT NULL,
    mac          TEXT
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = "seq, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, hash"
_V1_EVENT_COLUMNS = frozenset(_COLUMNS.split(", "))
_V1_HEAD_COLUMNS = frozenset({"singleton", "count", "last_hash", "last_tx_time"})


@dataclass(slots=True)
class _OpenGroup:
    """The write transaction of a group in progress: the file-lock descriptor it holds, the head it extends and
    the head after its last append."""

    lock: int | None
    base: tuple[int, str]
    last: tuple[int, str]
    last_tx: int


@dataclass(slots=True)
class _VerifiedPrefix:
    """The rows of the last snapshot that verified and the chain state after them: ``prev_hash`` and ``prev_tx`` of
    the last row, the ``key`` they were checked with and whether any carried a MAC. ``conn``, ``data_version`` and
    ``changes`` say when the prefix may be trusted without reading it again: the same connection, SQLite's
    ``PRAGMA data_version`` unchanged (no other connection, in this process or another, committed anything since)
    and the connection's ``total_changes`` equal to ``changes``, which counts this handle's own appends and head
    updates since (no other statement through this connection, nor a trigger, changed a row)."""

    rows: list
    prev_hash: str
    prev_tx: int | None
    key: bytes | None
    macs: bool
    conn: sqlite3.Connection | None = None
    data_version: int | None = None
    changes: int | None = None


@dataclass(slots=True)
class _Snapshot:
    """What one verification read under the shared lock, in one read transaction: the head row, the event rows
    (``trusted``: the verified prefix they start with, not read again), the head file, and the connection's
    ``data_version`` and ``total_changes`` as of that read (None on a read-only audit: its prefix is always read)."""

    head: Any
    rows: list
    trusted: _VerifiedPrefix | None
    side_read: tuple[dict[str, Any] | None, str | None]
    conn: sqlite3.Connection
    data_version: int | None
    changes: int


def _check_time(name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{name} must be an int (µs on the caller's timeline) or None, got {value!r}")


def _now_us() -> int:
    return time.time_ns() // 1000


def _decode_text(raw: bytes) -> str:
    """SQLite TEXT -> str. Everything the ledger writes is valid UTF-8; bytes that are not (a damaged or edited
    row) decode with U+FFFD, so the row fails its hash check and is named, instead of failing the whole read."""
    return raw.decode("utf-8", "replace")


class _Group:
    """``Ledger.group()``'s block (a class rather than a generator-based context manager: an agent enters one at
    every step, most of them appending nothing)."""

    __slots__ = ("_ledger",)

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def __enter__(self) -> None:
        ledger = self._ledger
        ledger._require_writable()
        ledger._group_depth += 1

    def __exit__(self, *exc: object) -> None:
        ledger = self._ledger
        ledger._group_depth -= 1
        if ledger._group_depth == 0:
            ledger._commit_group()


class Ledger:
    """An append-only audit ledger in one SQLite file (seed 000 §3). Use as a context manager or ``close()``.

    Args:
        path:      the SQLite file (created if absent, unless ``read_only``).
        clock:     returns the transaction time in µs; the ledger never lets it decrease. Default: the wall clock.
        key_file:  the HMAC key; default ``$SCARS_LEDGER_KEY_FILE`` or ``<path>.key``. A new ledger creates it
                   (unless ``keyed=False``); an existing keyed ledger cannot be written without it.
        keyed:     whether a *new* ledger gets a key (existing ledgers keep what they have: when a key is found,
                   every MAC must check, so removing the MACs is detected).
        read_only: open for audit only: nothing is created or written, and a file that is not a scars ledger is
                   rejected ("not a scars ledger: …").
        anchor:    ``(count, hash)`` or ``"count:hash"`` from an earlier ``head()``: every verification (and so
                   every projection of the control plane) also requires the chain to extend it.
        sole_writer: the handle's owner keeps state folded from the events it writes (``SchemaStore``): events
                   another writer appends are foreign — ``foreign_events()`` names them (one cheap read) and the
                   next group refuses to extend them (``ForeignWriteError``, nothing appended).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], int] | None = None,
        key_file: str | Path | None = None,
        keyed: bool = True,
        read_only: bool = False,
        anchor: tuple[int, str] | str | None = None,
        sole_writer: bool = False,
    ) -> None:
        self.path = Path(path).absolute()  # identity checks stat this path later, maybe after a chdir
        self.sole_writer = bool(sole_writer)
        self._head = HeadFile(self.path)
        self.head_file = self._head.path
        self.read_only = bool(read_only)
        self._clock = clock or _now_us
        self._anchor = self._check_anchor(anchor)
        self._conn: sqlite3.Connection | None = None
        explicit = key_file is not None or bool(os.environ.get(KEY_FILE_ENV))
        self.key_file = Path(key_file or os.environ.get(KEY_FILE_ENV) or default_key_file(self.path))
        self._key: bytes | None = None
        # the rows of the last snapshot that verified, with the chain state after them (``_VerifiedPrefix``): a
        # later verification recomputes only the rows after an identical prefix, and reads only those when SQLite
        # says nothing but this handle's own appends changed the database since
        self._verified_prefix: _VerifiedPrefix | None = None
        self._immutable = False
        self._format = FORMAT_VERSION
        self._claims_keyed = False
        self._group_depth = 0
        self._open: _OpenGroup | None = None
        self._commit_failed: str | None = None
        self._committed = 0  # the event count as of this writer's last commit (or its opening)
        self._identity: tuple[int, int] | None = None  # (device, inode) of the database as opened
        self._snapshot_dir: Path | None = None  # a read-only audit's private copy of a ledger with a -wal
        if self.read_only:
            self._open_read_only(explicit)
        else:
            self._open_for_writing(explicit, keyed)

    # -------------------------------------------------------------------------------------- opening
    @staticmethod
    def _check_anchor(anchor: tuple[int, str] | str | None) -> tuple[int, str] | None:
        if anchor is None:
            return None
        if isinstance(anchor, str):
            return parse_anchor(anchor)
        try:
            count, digest = anchor
        except (TypeError, ValueError):
            raise ConfigError(f"anchor must be (count, hash) or 'count:hash', got {anchor!r:.120}") from None
        return parse_anchor(format_anchor((count, digest)))

    def _not_a_ledger(self, why: str) -> LedgerError:
        return LedgerError(f"not a scars ledger: {self.path}: {why}")

    def _schema_problem(self) -> str | None:
        """Why the open database is not a scars ledger (None when it is one); also reads its format and flags."""
        assert self._conn is not None
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = {"events", "head", "meta"} - tables
        if missing:
            return f"table(s) {', '.join(sorted(missing))} missing" + (
                f" (it holds {', '.join(sorted(tables))})" if tables else " (the database is empty)"
            )
        events = {r[1] for r in self._conn.execute("PRAGMA table_info(events)")}
        head = {r[1] for r in self._conn.execute("PRAGMA table_info(head)")}
        if not events.issuperset(_V1_EVENT_COLUMNS) or not head.issuperset(_V1_HEAD_COLUMNS):
            return "the events/head tables do not have the ledger's columns"
        meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        self._format = str(meta.get("format_version", "1"))
        if self._format not in ("1", FORMAT_VERSION):
            return f"unknown format_version {self._format!r} (this code reads 1 and {FORMAT_VERSION})"
        if self._format == FORMAT_VERSION and ("mac" not in events or "mac" not in head):
            return f"format {FORMAT_VERSION} without MAC columns"
        self._claims_keyed = meta.get("keyed") == "1"
        return None

    def _load_key(self, explicit: bool) -> None:
        if self.key_file.exists():
            self._key = read_key_file(self.key_file)
        elif explicit:
            raise LedgerError(
                f"key file {self.key_file} does not exist (named by key_file= or ${KEY_FILE_ENV})"
            )

    def _open_read_only(self, explicit: bool) -> None:
        if not self.path.exists() and self.creation_file.exists():
            with self._file_lock(exclusive=False):  # a creation in progress finishes first
                pass
            if not self.path.exists():
                raise LedgerError(
                    f"no ledger at {self.path}: its creation was interrupted before the database was in place "
                    f"({self.creation_file} is left; nothing was recorded) — the next writer completes it"
                )
        if not self.path.exists():
            missing = self._missing_database_evidence(explicit)
            if missing is not None:
                raise MissingLedgerError(
                    f"no ledger at {self.path} but {missing}: the database was deleted or moved"
                )
            raise LedgerError(f"no ledger at {self.path}")
        if not self.path.is_file():
            raise self._not_a_ledger("not a regular file")
        # No -wal file means no writer is active and the main file is complete: open it immutable, so SQLite
        # creates nothing next to it. Otherwise read-only, so the -wal content (a live or killed writer's commits)
        # is seen; SQLite may then create its -shm index, but never writes the ledger.
        try:
            with self._file_lock(exclusive=False):
                self._connect_read_only()
            problem = self._schema_problem()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise self._not_a_ledger(str(exc)) from None
        if problem is not None:
            self.close()
            raise self._not_a_ledger(problem)
        self._load_key(explicit)

    def _connect_read_only(self) -> None:
        """(Re)connect read-only, creating and changing nothing next to the ledger: immutable while no ``-wal``
        file exists (the main file is complete); once one does (a writer is or was active: its commits live in
        the ``-wal`` file), on a private copy of the database and its ``-wal`` — SQLite would otherwise create or
        update the ``-shm`` index beside them. Callers hold the shared writer lock, so the copy is one commit's
        state (the ``-wal`` is copied first: a checkpoint in between only repeats pages the database has)."""
        self.close()
        wal = Path(f"{self.path}-wal")
        self._immutable = not wal.exists()
        target = self.path
        if not self._immutable:
            self._snapshot_dir = Path(tempfile.mkdtemp(prefix="scars-ledger-audit-"))
            target = self._snapshot_dir / self.path.name
            with suppress(FileNotFoundError):
                shutil.copyfile(wal, f"{target}-wal")
            shutil.copyfile(self.path, target)
        uri_path = urllib.parse.quote(str(target.resolve()))
        uri = f"file:{uri_path}?{'immutable=1' if self._immutable else 'mode=ro'}"
        self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
        self._conn.text_factory = _decode_text
        if self._identity is None:
            self._identity = self._file_identity()

    def _open_for_writing(self, explicit: bool, keyed: bool) -> None:
        if self.path.exists() and not self.path.is_file():
            raise LedgerError(f"{self.path} is not a regular file; a ledger is one SQLite file")
        if not self.path.parent.is_dir():
            raise LedgerError(f"cannot create a ledger at {self.path}: {self.path.parent} is not a folder")
        try:
            # A file that is not SQLite is refused before anything is created next to it; the rest happens under the
            # exclusive writer lock: a creation in progress elsewhere (its head file and key already there, its
            # database not yet renamed into place) is waited for, never taken for a deletion.
            tables = self._connect_for_writing(explicit) if self.path.exists() else None
            with self._file_lock(exclusive=True):
                if tables is None:
                    if not self.path.exists():
                        self._create(explicit, keyed, over_empty=False)
                    tables = self._connect_for_writing(explicit)
                elif not tables:  # again under the lock: another process may have created it meanwhile
                    tables = {
                        r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                    }
                if not tables:  # an empty file (or an SQLite file without tables) where no ledger was
                    self.close()
                    self._create(explicit, keyed, over_empty=True)
                    tables = self._connect_for_writing(explicit)
                problem = self._schema_problem()
                if problem is not None:
                    self._refuse_replaced(f"it is not a scars ledger ({problem})", explicit)
                    raise self._not_a_ledger(problem + "; refusing to write into it")
                if self._format != FORMAT_VERSION:
                    raise LedgerError(
                        f"{self.path} is a format-{self._format} ledger (no MACs, no head file): audit it with "
                        "read_only=True (scars ledger verify/show) and start a new ledger for new events"
                    )
                self._load_key(explicit)
                if self._claims_keyed and self._key is None:
                    raise LedgerError(
                        f"{self.path} is a keyed ledger and its key file {self.key_file} is missing; pass "
                        f"key_file= (or set ${KEY_FILE_ENV}) to write to it"
                    )
                self._conn.execute("PRAGMA journal_mode=WAL")  # type: ignore[union-attr]
                self._conn.execute("PRAGMA synchronous=FULL")  # type: ignore[union-attr]
                self._head.remove_stale_temporaries()  # a killed writer's half-written head file
                self._settle_head_file()
                row = self._db.execute("SELECT count FROM head WHERE singleton = 1").fetchone()
                if row is None or isinstance(row[0], bool) or not isinstance(row[0], int):
                    raise LedgerIntegrityError(
                        f"{self.path}: the head record is missing or damaged ({row!r:.60}); refusing to write "
                        "(fail closed) — run `scars ledger verify`"
                    )
                self._committed = row[0]
        except sqlite3.DatabaseError as exc:
            self.close()
            raise LedgerError(f"{self.path} is not a usable ledger file: {exc}") from None
        except BaseException:
            self.close()
            raise

    def _connect_for_writing(self, explicit: bool) -> set[str]:
        """Connect to the database at ``path`` (it exists); its table names. A file that is not SQLite where a
        head file says a ledger was is ``MissingLedgerError`` (replaced), otherwise "not a scars ledger"."""
        try:
            self._conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=30.0)
            self._conn.text_factory = _decode_text
            tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            self.close()
            self._refuse_replaced(f"it is not an SQLite database ({exc})", explicit)
            raise self._not_a_ledger(f"{exc} (not an SQLite database)") from None
        self._identity = self._file_identity()
        return tables

    def _settle_head_file(self) -> None:
        """A writer killed between its COMMIT and the head-file update left the head file naming its group as
        pending. The next writer settles it (under the exclusive lock, before appending): the head file then
        commits exactly what the database holds — the pending group (it was committed) or the previous head (it
        was not) — so from here on removing that group is detected like any truncation. Any other disagreement
        is left alone for ``verify`` to report (fail closed)."""
        side, problem = self._read_head_file()
        if problem is not None or side is None or side.get("pending") is None:
            return
        if self._key is not None and not same(
            side.get("mac"), ledger_mac(self._key, "head-file", self._head_file_body(side))
        ):
            return
        row = self._db.execute("SELECT count, last_hash FROM head WHERE singleton = 1").fetchone()
        tail = self._db.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        if row is None or (tuple(tail) if tail else (0, GENESIS_HASH)) != tuple(row):
            return
        pending = (side["pending"]["count"], side["pending"]["hash"])
        for state in (pending, (side["count"], side["hash"])):
            if tuple(row) == state:
                self._write_head_file(state, None)
                return

    def _missing_database_evidence(self, explicit: bool) -> str | None:
        """What says a ledger existed at this path although its database is missing, empty or replaced: its head
        file (any head file: it is written only by a ledger here), or the key next to it (the default key file is
        created only with a ledger at this path; a key named by key_file= / the environment may serve several)."""
        side, problem = self._read_head_file()
        if problem is not None:
            return f"its head file {self.head_file} exists ({problem})"
        if side is not None:
            pending = side.get("pending")
            more = f", {pending['count']} pending" if pending else ""
            return f"its head file {self.head_file} commits {side['count']} events{more}"
        if not explicit and self.key_file.exists():
            return f"its key file {self.key_file} exists (created with the ledger; the head file is gone too)"
        return None

    def _refuse_replaced(self, what: str, explicit: bool) -> None:
        """A database file that is not a ledger where a head file says one was: replaced, a tamper."""
        missing = self._missing_database_evidence(explicit)
        if missing is not None:
            raise MissingLedgerError(
                f"{self.path}: {what}, but {missing}: the database was replaced (fail closed)"
            )

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _check_same_file(self) -> None:
        """The database this handle opened must still be the file at ``path``: one deleted or replaced under a
        running writer would take its appends where no one reads them, and its verification would be of a file
        that is gone. Checked at every group's start and every verification (fail closed)."""
        if self._identity is None:
            return
        now = self._file_identity()
        if now is None:
            raise MissingLedgerError(
                f"{self.path}: the ledger database was deleted while this handle had it open; refusing to go on "
                "(fail closed) — its events are gone from the file system"
            )
        if now != self._identity:
            raise MissingLedgerError(
                f"{self.path}: the ledger database was replaced by another file while this handle had it open; "
                "refusing to go on (fail closed)"
            )

    @property
    def creation_file(self) -> Path:
        """Where a new ledger's database is built before it is renamed to ``path`` (``<path>.creating``): while it
        exists without ``path``, a creation was interrupted and no ledger exists yet."""
        return creation_file_of(self.path)

    def _create(self, explicit: bool, keyed: bool, *, over_empty: bool) -> None:
        """Make a new, empty ledger at ``path`` atomically (under the exclusive writer lock): the marker
        ``creation_file`` is made first, the database (schema, head row, format) is built as ``<marker>-new`` and
        moved onto the marker, the key and the head file are written beside it, and the database is renamed into
        place last; the marker exists throughout, a resumed creation's too. A kill at any instant leaves either no ledger at ``path`` (only the
        creation file and maybe its key and empty head file: the next writer completes the creation, an audit says
        "no ledger … creation interrupted") or the complete, verifying empty ledger. ``over_empty``: ``path`` is an
        empty file (or an SQLite file without tables), replaced by the new ledger."""
        building = self.creation_file
        resuming = building.exists()
        side, side_error = self._read_head_file()
        if side_error is not None or (side is not None and (side["count"] != 0 or side.get("pending"))):
            what = side_error or f"commits {side['count']} events"  # type: ignore[index]
            raise MissingLedgerError(
                f"{self.path} holds no ledger but its head file {self.head_file} {what}: the database was deleted, "
                "emptied or lost its -wal file; refusing to start a new ledger over it (fail closed) — restore the "
                "database, or move every file of ledger_files() away to start a new ledger here"
            )
        if (
            not resuming
        ):  # what a creation leaves before its database is in place is no evidence of a deletion
            if side is not None and not over_empty:
                raise MissingLedgerError(
                    f"no ledger at {self.path} but its head file {self.head_file} commits 0 events: the database "
                    "was deleted or moved; refusing to start a new ledger over it (fail closed) — move every file of "
                    "ledger_files() away to start a new ledger here"
                )
            if side is None and not explicit and self.key_file.exists():
                raise MissingLedgerError(
                    f"{self.path} holds no ledger but its key file {self.key_file} exists and its head file is "
                    "gone: the database was deleted, emptied or replaced; refusing to start a new ledger over it "
                    "(fail closed) — move every file of ledger_files() away to start a new ledger here"
                )
        # The marker (``building``) exists from before the key and the head file are made until the database is in
        # place: a kill at any instant leaves it, so nothing left looks like a deleted ledger. The database is built
        # beside it (``fresh``) and moved onto it, so a resumed creation never removes the marker either.
        fresh = Path(f"{building}-new")
        if not resuming:
            building.touch()
            fsync_dir(building.parent)
        for leftover in (
            *(Path(f"{building}{s}") for s in ("-journal", "-wal", "-shm")),
            *(Path(f"{fresh}{s}") for s in ("", "-journal", "-wal", "-shm")),
        ):
            leftover.unlink(missing_ok=True)  # an interrupted creation's database: nothing was ever in it
        if not explicit:  # a key of this ledger's own a kill left half-made (a shared key is never touched)
            remove_stale_key_temporaries(self.key_file)
        conn = sqlite3.connect(str(fresh), isolation_level=None, timeout=30.0)
        try:
            if self.key_file.exists():
                self._key = read_key_file(self.key_file)
            elif explicit or keyed:
                try:
                    create_key_file(self.key_file)
                except FileExistsError:  # pragma: no cover - another process created it first
                    pass
                except OSError as exc:
                    raise LedgerError(f"cannot create the key file {self.key_file}: {exc.strerror}") from None
                self._key = read_key_file(self.key_file)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO head (singleton, count, last_hash, last_tx_time, mac) VALUES (1, 0, ?, 0, ?)",
                (GENESIS_HASH, self._head_mac(0, GENESIS_HASH)),
            )
            conn.execute("INSERT INTO meta (key, value) VALUES ('format_version', ?)", (FORMAT_VERSION,))
            conn.execute("INSERT INTO meta (key, value) VALUES ('keyed', ?)", ("1" if self._key else "0",))
            conn.execute("COMMIT")
        finally:
            conn.close()
        os.replace(fresh, building)
        self._write_head_file((0, GENESIS_HASH), None)
        os.replace(building, self.path)  # the ledger exists from here on, whole
        fsync_dir(self.path.parent)

    # -------------------------------------------------------------------------------------- plumbing
    @property
    def keyed(self) -> bool:
        """True when this handle holds the ledger's key (MACs are written and checked)."""
        return self._key is not None

    def close(self) -> None:
        """Commit an open group (its events become durable), then close. Idempotent."""
        try:
            if self._conn is not None and self._open is not None:
                self._commit_group()
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._snapshot_dir is not None:  # an audit's private copy
                shutil.rmtree(self._snapshot_dir, ignore_errors=True)
                self._snapshot_dir = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LedgerError(f"ledger {self.path} is closed")
        return self._conn

    def _require_writable(self) -> None:
        if self.read_only:
            raise LedgerError(
                f"ledger {self.path} is open read-only (an audit); open it without read_only to write"
            )

    @contextmanager
    def _transaction(self, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE takes the write lock up front, so the head read inside is the head we extend;
        ``mode=""`` (deferred) gives readers one consistent snapshot."""
        conn = self._db
        conn.execute(f"BEGIN {mode}".strip())
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _file_lock(self, *, exclusive: bool) -> Iterator[None]:
        """flock on ``<ledger>.lock``: writers exclusive (append + head file), verifiers shared (one consistent
        view of the database and the head file). Read-only handles never create the lock file."""
        fd = self._acquire_file_lock(exclusive=exclusive)
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # releases the lock

    def _acquire_file_lock(self, *, exclusive: bool = True) -> int | None:
        """Open ``<ledger>.lock`` and flock it; the descriptor (closing it releases the lock), or None when there
        is nothing to lock (not POSIX; an audit of a ledger no writer ever locked, or on a read-only file system).
        """
        if self._open is not None:  # flock is per open file: a second lock here would wait for ourselves
            raise LedgerError(f"{self.path}: internal error: file lock requested while a group is open")
        return locks.acquire(self.path, exclusive=exclusive, read_only=self.read_only)

    def _event_mac(self, digest: str) -> str | None:
        return None if self._key is None else ledger_mac(self._key, "event", digest)

    def _head_mac(self, count: int, digest: str) -> str | None:
        return None if self._key is None else ledger_mac(self._key, "head", f"{count}:{digest}")

    # -------------------------------------------------------------------------------------- head file
    def _read_head_file(self) -> tuple[dict[str, Any] | None, str | None]:
        return self._head.read()

    def _head_file_body(self, data: Mapping[str, Any]) -> str:
        return self._head.body(data)

    def _write_head_file(
        self, committed: tuple[int, str], pending: tuple[int, str] | None, *, sync_folder: bool = True
    ) -> None:
        self._head.write(self._key, committed, pending, sync_folder=sync_folder)

    def _head_file_check(
        self,
        count: int,
        digest: str,
        hash_at: Callable[[int], str | None],
        side_read: tuple[dict[str, Any] | None, str | None] | None = None,
    ) -> tuple[int, str] | None:
        required = not (self._format == "1" and self._key is None)
        return self._head.check(self._key, required, count, digest, hash_at, side_read)

    # -------------------------------------------------------------------------------------- the head
    def head(self) -> tuple[int, str]:
        """(event count, last hash): the commitment to anchor externally if the file itself is not trusted.
        Commits an open group first, so the head handed out never names events that are not durable."""
        self.flush()
        self._check_same_file()
        row = self._db.execute("SELECT count, last_hash FROM head WHERE singleton = 1").fetchone()
        if row is None:
            raise LedgerIntegrityError(f"{self.path}: the head record is missing")
        return int(row[0]), str(row[1])

    def anchor_text(self) -> str:
        """``head()`` as ``"count:hash"``: what a run records as ``ledger_head`` in ``summary.json`` and what
        ``scars ledger verify --anchor`` takes."""
        return format_anchor(self.head())

    # -------------------------------------------------------------------------------------- group commit
    def group(self) -> _Group:
        """Group commit: every append inside the block goes into one SQLite transaction, committed (with the
        head-file protocol) when the outermost ``group()`` exits — also when the block raises, since each event
        appended is complete (an append that fails leaves nothing behind). Outside any ``group()`` each append is
        a group of its own. Nothing is written until the first append; a read that needs the group's events to be
        durable (``verify``, ``head``, ``anchor_text``, the projections) commits it first, and the next append
        opens a new transaction. An event returned inside a group is durable only once the group commits; a
        process killed before that leaves the ledger as it was after the previous commit (module docstring).
        While a group's transaction is open it holds the ledger's write locks, so other writers and verifiers of
        the same file wait for it."""
        return _Group(self)

    def _begin_group(self) -> _OpenGroup:
        """Take the write locks (file lock, then BEGIN IMMEDIATE) and check, once per group, that the stored tail,
        the head row, its MAC and the head file agree: fail closed on write as well."""
        if self._commit_failed is not None:
            raise LedgerError(
                f"{self.path}: an earlier group of events failed to commit ({self._commit_failed}); this handle "
                "refuses further appends (its caller may hold state the ledger does not) — reopen the ledger"
            )
        lock = self._acquire_file_lock()
        conn = self._db
        try:
            self._check_same_file()
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT count, last_hash, last_tx_time, mac FROM head WHERE singleton = 1"
                ).fetchone()
                if row is None:
                    raise LedgerIntegrityError(f"{self.path}: the head record is missing; refusing to append")
                count, last_hash, last_tx, head_mac = int(row[0]), str(row[1]), int(row[2]), row[3]
                if self.sole_writer and count != self._committed:
                    raise ForeignWriteError(self._foreign_text(count))
                tail = conn.execute(
                    "SELECT seq, hash, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, mac "
                    "FROM events ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                if (tail is None and count != 0) or (
                    tail is not None and (tail[0] != count or tail[1] != last_hash)
                ):
                    raise LedgerIntegrityError(
                        f"{self.path}: the last event {tuple(tail[:2]) if tail else None} does not match the head "
                        f"({count}, {last_hash[:12]}…); refusing to append — run verify"
                    )
                if tail is not None:
                    self._check_tail_content(tail)
                if self._key is not None and not same(head_mac, self._head_mac(count, last_hash) or ""):
                    raise LedgerIntegrityError(
                        f"{self.path}: the head record's MAC does not match; refusing to append — run verify"
                    )
                mismatch = self._head_file_check(count, last_hash, self._hash_at)
                if mismatch is not None:
                    raise LedgerIntegrityError(f"{self.path}: {mismatch[1]}; refusing to append — run verify")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except BaseException:
            if lock is not None:
                os.close(lock)
            raise
        self._open = _OpenGroup(lock, (count, last_hash), (count, last_hash), last_tx)
        self._committed = count
        return self._open

    def _commit_group(self) -> None:
        """Commit the open group: head file names the group as pending (fsynced), COMMIT (fsynced: WAL with
        synchronous=FULL), head file names it committed (fsynced); then release the locks. A kill between any two
        of these leaves a state ``verify`` accepts: the group absent, or present and named by the head file."""
        group, self._open = self._open, None
        if group is None:
            return
        conn = self._db
        try:
            if group.last == group.base:  # every append of the group failed: nothing to commit
                conn.execute("ROLLBACK")
                return
            seq, digest = group.last
            stage = "write the head file (pending)"
            try:
                conn.execute(
                    "UPDATE head SET count = ?, last_hash = ?, last_tx_time = ?, mac = ? WHERE singleton = 1",
                    (seq, digest, group.last_tx, self._head_mac(seq, digest)),
                )
                self._own_change()
                # Before COMMIT: the head file names the group as pending, so a kill right after the commit is
                # told apart from someone deleting the last events.
                self._write_head_file(group.base, group.last)
                stage = "commit"
                conn.execute("COMMIT")
            except BaseException as exc:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                lost = seq - group.base[0]
                self._commit_failed = f"could not {stage}: {exc!s:.200}; {lost} event(s) not written"
                if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: as they are
                    raise
                raise LedgerError(f"{self.path}: {self._commit_failed}") from exc
            self._committed = seq
            self._write_head_file(group.last, None, sync_folder=False)
        finally:
            if group.lock is not None:
                os.close(group.lock)  # releases the file lock

    def _abort_group(self, why: str) -> None:
        """Give up the open group (roll it back, release the locks) and refuse further appends on this handle."""
        group, self._open = self._open, None
        with suppress(sqlite3.Error):
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        if group is not None and group.lock is not None:
            os.close(group.lock)
        lost = 0 if group is None else group.last[0] - group.base[0]
        self._commit_failed = f"{why}; {lost} earlier event(s) of its group not written"
        raise LedgerError(f"{self.path}: {self._commit_failed}")

    @property
    def committed(self) -> int:
        """The event count as of this writer's last commit (at opening: the ledger's count). Kept in memory, so
        any thread may read it; events appended in an open group are not counted until it commits."""
        return self._committed

    def stored_count(self) -> int:
        """The event count the database's head row commits now, as one read (no commit, no verification): what a
        monitor compares with ``committed`` at every decision to see another writer at once."""
        row = self._db.execute("SELECT count FROM head WHERE singleton = 1").fetchone()
        if row is None or isinstance(row[0], bool) or not isinstance(row[0], int):
            raise LedgerIntegrityError(f"{self.path}: the head record is missing or damaged ({row!r:.60})")
        return row[0]

    def foreign_events(self) -> tuple[Event, ...]:
        """The events another writer committed after this handle's last commit (empty when none: one read of the
        head row). Inside an open group nothing foreign can arrive (the group holds the write locks, and its start
        refused foreign events for a ``sole_writer``). Fewer events than this handle committed is a truncation
        (``LedgerIntegrityError``)."""
        if self._open is not None:
            return ()
        count = self.stored_count()
        if count < self._committed:
            raise LedgerIntegrityError(
                f"{self.path}: the head commits {count} events but this handle committed {self._committed}: events "
                "were removed under a running writer (fail closed)"
            )
        return () if count == self._committed else self.events(after=self._committed)

    def _foreign_text(self, count: int) -> str:
        """Name the events another writer appended after this handle's last commit (up to five)."""
        foreign = self._db.execute(
            "SELECT seq, type, subject FROM events WHERE seq > ? ORDER BY seq LIMIT 5", (self._committed,)
        ).fetchall()
        named = "; ".join(f"event {seq} {type_} {subject or '-'}" for seq, type_, subject in foreign)
        more = (
            f" and {count - self._committed - len(foreign)} more"
            if count - self._committed > len(foreign)
            else ""
        )
        return (
            f"{self.path}: another process wrote {count - self._committed} event(s) into this ledger after this "
            f"writer's last commit (event {self._committed}): {named}{more}; the state folded from it is stale — "
            "refusing to append (fail closed)"
        )

    def _own_change(self) -> None:
        """One row this handle itself changed (an appended event, the head row's update): counted, so that a
        verification can tell its own writes from any other change through its connection."""
        prefix = self._verified_prefix
        if prefix is not None and prefix.changes is not None:
            prefix.changes += 1

    def flush(self) -> None:
        """Commit the open group's events now (no-op when none are pending); the group stays open for more."""
        if self._open is not None:
            self._commit_group()

    # -------------------------------------------------------------------------------------- appending
    def _next_seq(self) -> int:
        """The seq the next append gets (inside an open group: after its uncommitted events; commits nothing)."""
        if self._open is not None:
            return self._open.last[0] + 1
        row = self._db.execute("SELECT count FROM head WHERE singleton = 1").fetchone()
        if row is None:
            raise LedgerIntegrityError(f"{self.path}: the head record is missing")
        return int(row[0]) + 1

    def _append(
        self,
        type_: str,
        payload: Mapping[str, Any],
        *,
        subject: str | None,
        valid_from: int | None,
        valid_to: int | None,
        precondition: Callable[[list[Event]], None] | None = None,
    ) -> Event:
        self._require_writable()
        _check_time("valid_from", valid_from)
        _check_time("valid_to", valid_to)
        if valid_from is not None and valid_to is not None and valid_to <= valid_from:
            raise ConfigError(f"valid_to ({valid_to}) must be after valid_from ({valid_from})")
        payload_text = canonical_json(dict(payload))
        with self.group():
            group = self._open or self._begin_group()
            if precondition is not None:  # reads the open transaction: the group's own events count
                precondition(self._subject_events(subject) if subject is not None else [])
            count, last_hash = group.last
            tx_time = max(int(self._clock()), group.last_tx)
            if valid_from is None:
                valid_from = tx_time
            if valid_to is not None and valid_to <= valid_from:
                raise ConfigError(f"valid_to ({valid_to}) must be after valid_from ({valid_from})")
            seq = count + 1
            digest = event_hash(
                last_hash,
                event_body(seq, type_, subject, payload_text, tx_time, valid_from, valid_to, last_hash),
            )
            row = (seq, type_, subject, payload_text, tx_time, valid_from, valid_to, last_hash, digest)
            try:  # one statement: it is written whole or not at all
                if not self._db.in_transaction:
                    raise sqlite3.OperationalError("the group's transaction was rolled back by SQLite")
                self._db.execute(
                    f"INSERT INTO events ({_COLUMNS}, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*row, self._event_mac(digest)),
                )
                self._own_change()
            except sqlite3.Error as exc:  # an I/O error may have rolled the whole group back: give it up
                self._abort_group(f"could not append event {seq}: {exc!s:.200}")
            group.last, group.last_tx = (seq, digest), tx_time
        return Event(
            seq, type_, subject, json.loads(payload_text), tx_time, valid_from, valid_to, last_hash, digest
        )

    def _check_tail_content(self, tail: tuple) -> None:
        """The new group extends the last event's hash: recompute it from the event's stored content (and its MAC
        on a keyed ledger), so an edit of the last event that left its hash column alone is caught on the next
        append, not only by a later ``verify``."""
        seq, digest, type_, subject, payload, tx_time, valid_from, valid_to, prev_hash, mac = tail
        try:
            body = event_body(seq, type_, subject, payload, tx_time, valid_from, valid_to, prev_hash)
            intact = event_hash(prev_hash, body) == digest
        except (TypeError, ValueError):
            intact = False
        if not intact:
            raise LedgerIntegrityError(
                f"{self.path}: event {seq}'s content does not match its hash (modified); refusing to append — run "
                "verify"
            )
        if self._key is not None and not same(mac, ledger_mac(self._key, "event", digest)):
            raise LedgerIntegrityError(
                f"{self.path}: event {seq} has no valid MAC (forged or rewritten without the key); refusing to "
                "append — run verify"
            )

    def _hash_at(self, seq: int) -> str | None:
        row = self._db.execute("SELECT hash FROM events WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else row[0]

    def _row_event(self, row: tuple) -> Event:
        seq, type_, subject, payload, tx_time, valid_from, valid_to, prev_hash, digest = row[:9]
        try:
            decoded = decode_payload(payload)
        except ValueError as exc:
            raise LedgerIntegrityError(f"{self.path}: event {seq} is damaged: {exc} — run verify") from None
        return Event(seq, type_, subject, decoded, tx_time, valid_from, valid_to, prev_hash, digest)

    def _subject_events(self, subject: str) -> list[Event]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM events WHERE subject = ? ORDER BY seq", (subject,)
        ).fetchall()
        return [self._row_event(r) for r in rows]

    def _event_at(self, seq: int) -> Event | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM events WHERE seq = ?", (seq,)).fetchone()
        if row is None:
            return None
        try:
            return self._row_event(row)
        except LedgerIntegrityError:
            return None

    # ---------------------------------------------------------------------------------- admission (one place)
    def may_admit(self, scar: Scar) -> tuple[bool, str]:
        """Whether ``admit(scar)`` would be accepted now, and why (the no-resurrection rule lives here only).

        Allowed: a new id; an active id with evidence never recorded for it (the audit plane grows); a retired or
        revoked id with at least one fresh *verifier-backed* evidence item (see the module docstring). Refused
        otherwise, with the reason naming each evidence item's problem. Reads one snapshot; ``admit`` checks
        again inside its write transaction.
        """
        if not isinstance(scar, Scar):
            raise ConfigError(f"may_admit() takes a Scar, got {type(scar).__name__}")
        # inside a group, its open transaction is the snapshot (with the group's own events)
        if self._open is not None:
            error, reason = judge_admission(scar, self._subject_events(scar.id), self._event_at)
        else:
            with self._transaction(""):
                error, reason = judge_admission(scar, self._subject_events(scar.id), self._event_at)
        return error is None, reason

    # ---------------------------------------------------------------------------------- lifecycle events
    def admit(
        self,
        scar: Scar,
        *,
        valid_from: int | None = None,
        valid_to: int | None = None,
        reason: str = "",
    ) -> Event:
        """Append ``scar_admitted`` when ``may_admit(scar)`` allows it; otherwise raise ``LifecycleError`` (an
        active id without new evidence) or ``ResurrectionRefused`` (a retired/revoked id without fresh
        verifier-backed evidence: no resurrection, seed 000 §3.4)."""
        if not isinstance(scar, Scar):
            raise ConfigError(f"admit() takes a Scar, got {type(scar).__name__}")

        def precondition(history: list[Event]) -> None:
            error, why = judge_admission(scar, history, self._event_at)
            if error is not None:
                raise error(why)

        payload = {**scar.to_json(), "evidence_hashes": list(scar.evidence_hashes), "reason": reason}
        return self._append(
            SCAR_ADMITTED,
            payload,
            subject=scar.id,
            valid_from=valid_from,
            valid_to=valid_to,
            precondition=precondition,
        )

    def _require_active_scar(self, scar_id: str, action: str) -> Callable[[list[Event]], None]:
        def precondition(history: list[Event]) -> None:
            lifecycle = [e for e in history if e.type in (SCAR_ADMITTED, SCAR_RETIRED, SCAR_REVOKED)]
            if not lifecycle:
                raise LifecycleError(
                    f"cannot {action} scar {scar_id!r}: it was never admitted to this ledger"
                )
            if lifecycle[-1].type != SCAR_ADMITTED:
                raise LifecycleError(
                    f"cannot {action} scar {scar_id!r}: it is already "
                    f"{lifecycle[-1].type.removeprefix('scar_')} (seq {lifecycle[-1].seq})"
                )

        return precondition

    def retire(self, scar_id: str, reason: str, *, valid_from: int | None = None) -> Event:
        """Append ``scar_retired``: the scope expired (SPEC §5). The evidence stays in the ledger."""
        return self._append(
            SCAR_RETIRED,
            {"scar_id": scar_id, "reason": reason},
            subject=scar_id,
            valid_from=valid_from,
            valid_to=None,
            precondition=self._require_active_scar(scar_id, "retire"),
        )

    def revoke(
        self,
        scar_id: str,
        evidence: Iterable[Mapping[str, Any]],
        *,
        reason: str = "",
        valid_from: int | None = None,
    ) -> Event:
        """Append ``scar_revoked``: counter-evidence (e.g. a verified-safe success the scar masks) refutes it."""
        if isinstance(evidence, Mapping):
            evidence = (evidence,)
        counter = [dict(item) for item in evidence]
        if not counter:
            raise ConfigError(f"revoking scar {scar_id!r} needs at least one counter-evidence item")
        return self._append(
            SCAR_REVOKED,
            {"scar_id": scar_id, "counter_evidence": counter, "reason": reason},
            subject=scar_id,
            valid_from=valid_from,
            valid_to=None,
            precondition=self._require_active_scar(scar_id, "revoke"),
        )

    def set_temp_mask(
        self, rule: Rule, *, until_step: int, mask_id: str | None = None, reason: str = ""
    ) -> Event:
        """Append ``temp_mask_set`` (storm control, SPEC §4). The default id is ``tmp:L<seq>:<rule hash>``."""
        if isinstance(until_step, bool) or not isinstance(until_step, int):
            raise ConfigError(f"until_step must be an int, got {until_step!r}")
        if mask_id is None:
            mask_id = f"tmp:L{self._next_seq()}:{scar_id_of(rule)}"

        def precondition(history: list[Event]) -> None:
            if history and history[-1].type == TEMP_MASK_SET:
                raise LifecycleError(f"temporary mask {mask_id!r} is already set (seq {history[-1].seq})")

        return self._append(
            TEMP_MASK_SET,
            {"mask_id": mask_id, "rule": canonical_text(rule), "until_step": until_step, "reason": reason},
            subject=mask_id,
            valid_from=None,
            valid_to=None,
            precondition=precondition,
        )

    def lift_temp_mask(self, mask_id: str, reason: str = "") -> Event:
        """Append ``temp_mask_lifted`` (the hot swap when the mature scar is admitted, SPEC §4)."""

        def precondition(history: list[Event]) -> None:
            if not history or history[-1].type != TEMP_MASK_SET:
                raise LifecycleError(f"temporary mask {mask_id!r} is not set; nothing to lift")

        return self._append(
            TEMP_MASK_LIFTED,
            {"mask_id": mask_id, "reason": reason},
            subject=mask_id,
            valid_from=None,
            valid_to=None,
            precondition=precondition,
        )

    def observe_failure(
        self, fragment: Failure | Mapping[str, Any], *, valid_from: int | None = None
    ) -> Event:
        """Append ``failure_observed``: a verified failure E = (q, F, θ) (SPEC §4) — a ``Failure``, stored as its
        ``to_json()`` form, or a JSON-able mapping. Only a payload that reads back as a ``Failure``
        (``Failure.from_json``) can back a re-admission (``admission.read_failure``); any other is kept as a
        record and backs nothing."""
        payload = fragment.to_json() if isinstance(fragment, Failure) else dict(fragment)
        subject = "failure:" + sha256_hex(canonical_json(payload))[:16]
        return self._append(FAILURE_OBSERVED, payload, subject=subject, valid_from=valid_from, valid_to=None)

    def record(
        self,
        event_type: str,
        payload: Mapping[str, Any],
        *,
        subject: str | None = None,
        valid_from: int | None = None,
        valid_to: int | None = None,
    ) -> Event:
        """Append a non-lifecycle event (``merge_decision``, ``failure_observed`` or another snake_case type).

        Lifecycle events go through ``admit``/``retire``/``revoke``/``set_temp_mask``/``lift_temp_mask`` only,
        so their preconditions (no resurrection) cannot be bypassed.
        """
        if event_type in LIFECYCLE_EVENTS:
            raise ConfigError(
                f"{event_type!r} is a lifecycle event; use the matching Ledger method instead of record()"
            )
        if not isinstance(event_type, str) or not EVENT_NAME.fullmatch(event_type):
            raise ConfigError(f"event type must be snake_case (e.g. 'merge_decision'), got {event_type!r}")
        return self._append(event_type, payload, subject=subject, valid_from=valid_from, valid_to=valid_to)

    # ---------------------------------------------------------------------------------- reads and audit
    def events(self, *, after: int = 0) -> tuple[Event, ...]:
        """Every event in sequence order, or those with seq > ``after`` (not verified; use ``verify`` for that). A
        row whose payload cannot be decoded raises ``LedgerIntegrityError`` naming its seq (``rows()`` shows it)."""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM events WHERE seq > ? ORDER BY seq", (after,)
        ).fetchall()
        return tuple(self._row_event(r) for r in rows)

    def rows(self) -> tuple[dict[str, Any], ...]:
        """Every stored row as it is (undecoded, any column type): for showing a damaged ledger."""
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM events ORDER BY seq").fetchall()
        names = _COLUMNS.split(", ")
        return tuple(dict(zip(names, row, strict=True)) for row in rows)

    def verify(self, *, anchor: tuple[int, str] | str | None = None) -> VerifyReport:
        """Check the whole chain, the MACs (with the key), the head row, the head file and the anchors; report
        the first event that fails. Never raises for a damaged ledger: the report says what is wrong.

        Detects modification (hash mismatch), deletion (a gap in seq), reordering (a broken prev_hash link),
        truncation (fewer events than the head row or head file commits: deleted last events, a dropped -wal
        file), injection (more events than committed, or a broken link) and, with the key, any rewrite with
        recomputed hashes (the first event whose MAC fails). ``anchor`` (and the ``anchor`` the ledger was opened
        with) = a (count, hash) pair or ``"count:hash"`` from ``head()`` kept elsewhere: the event at that seq
        must still carry that hash.

        A handle verifying again recomputes only the events after the prefix it last verified, when that prefix is
        column for column what it judged, and reads only those while SQLite says nothing but this handle's own
        appends changed the database since (``PRAGMA data_version``: no other connection committed;
        ``total_changes``: no other statement through this connection, nor a trigger, changed a row); any other
        change is read and judged again from the genesis. (Bytes of the file edited past SQLite while a handle has
        it open are not seen by that handle's reads, whole or not — SQLite serves its cached pages; a new handle,
        such as ``scars ledger verify``'s, reads the file.)
        """
        anchors = [a for a in (self._anchor, self._check_anchor(anchor)) if a is not None]
        return self._verify_rows(anchors)[0]

    def _verify_rows(self, anchors: list[tuple[int, str]]) -> tuple[VerifyReport, list]:
        """Read the database and the head file under one shared lock and verify that snapshot; returns the
        report and the rows it judged (so a projection uses exactly what was verified). An open group is
        committed first: what is verified is what is on disk."""
        self.flush()
        try:
            with self._file_lock(exclusive=False):
                self._check_same_file()
                if self.read_only and (not self._immutable or Path(f"{self.path}-wal").exists()):
                    self._connect_read_only()  # a fresh copy: what writers committed since is seen too
                self._db.execute("BEGIN")
                try:
                    snapshot = self._snapshot()
                finally:
                    self._db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            return VerifyReport(False, None, f"the ledger tables cannot be read: {exc}", 0, ""), []
        except LedgerError as exc:
            return VerifyReport(False, None, str(exc), 0, ""), []
        return self._verify_snapshot(snapshot, anchors, self._key), snapshot.rows

    def _snapshot(self) -> _Snapshot:
        """The head row, the event rows and the head file, read in the open read transaction. The rows of the last
        verified prefix are not read again when it may be trusted (``_VerifiedPrefix``): then the rows are that
        prefix's followed by those read after it."""
        conn = self._db
        head_columns = {r[1] for r in conn.execute("PRAGMA table_info(head)")}
        has_mac = "mac" in head_columns
        head = conn.execute(
            f"SELECT count, last_hash, {'mac' if has_mac else 'NULL'} FROM head WHERE singleton = 1"
        ).fetchone()
        # read in the transaction the head read opened: the version of the snapshot the rows come from
        version = None if self.read_only else conn.execute("PRAGMA data_version").fetchone()[0]
        prefix, trusted = self._verified_prefix, None
        if (
            prefix is not None
            and version is not None
            and prefix.conn is conn
            and prefix.data_version == version
            and prefix.changes == conn.total_changes
        ):
            trusted = prefix
        after = 0 if trusted is None else len(trusted.rows)
        rows = conn.execute(
            f"SELECT {_COLUMNS}, {'mac' if has_mac else 'NULL'} FROM events WHERE seq > ? ORDER BY seq",
            (after,),
        ).fetchall()
        if trusted is not None:
            rows = trusted.rows + rows
        # the head file under the same lock
        return _Snapshot(head, rows, trusted, self._read_head_file(), conn, version, conn.total_changes)

    def _verify_snapshot(
        self, snapshot: _Snapshot, anchors: list[tuple[int, str]], key: bytes | None
    ) -> VerifyReport:
        """Judge a snapshot. A prefix of its rows the last verification passed keeps its verdict: when the
        snapshot says it was not read again (``trusted``: unchanged since), or when its rows are equal, column for
        column, to those judged."""
        head, rows, trusted, side_read = snapshot.head, snapshot.rows, snapshot.trusted, snapshot.side_read
        unread = len(trusted.rows) if trusted is not None else 0  # rows taken from the trusted prefix
        macs_present = (
            self._claims_keyed
            or (trusted is not None and trusted.macs)
            or any(r[9] is not None for r in rows[unread:])
            or (head and head[2] is not None)
        )
        flags = {
            "keyed": key is not None,
            "head_file": self._format != "1" or self.head_file.exists(),
            "anchored": bool(anchors),
            "mac_unchecked": key is None and bool(macs_present),
        }

        def bad(seq: int | None, reason: str, count: int, head_hash: str) -> VerifyReport:
            return VerifyReport(False, seq, reason, count, head_hash, **flags)

        def hash_at(seq: int) -> Any:
            """The stored hash of event ``seq`` of a contiguous run of rows from event 1 (a verified prefix, or
            every row once the loop below passed them all)."""
            return rows[seq - 1][8] if 1 <= seq <= len(rows) else None

        prev_hash, prev_tx, expected = GENESIS_HASH, None, 1
        start = 0
        cached = self._verified_prefix
        if cached is not None and cached.key == key and len(rows) >= len(cached.rows):
            k = len(cached.rows)
            # an identical prefix gets the verdict it got: every check below reads only its row and the state
            # the rows before it left (the anchors are checked against the prefix's hashes here)
            if trusted is cached or rows[:k] == cached.rows:
                for count_, digest_ in anchors:
                    if 1 <= count_ <= k and hash_at(count_) != digest_:
                        before = hash_at(count_ - 1) if count_ > 1 else GENESIS_HASH
                        return bad(
                            count_, f"event {count_} differs from the external anchor", count_ - 1, before
                        )
                start, prev_hash, prev_tx, expected = k, cached.prev_hash, cached.prev_tx, k + 1
        for seq, type_, subject, payload, tx_time, valid_from, valid_to, stored_prev, digest, mac in rows[
            start:
        ]:
            n = expected - 1
            if seq != expected:
                return bad(
                    expected, f"event {expected} is missing (found seq {seq!r} next): deleted", n, prev_hash
                )
            if stored_prev != prev_hash:
                return bad(
                    seq, f"event {seq} does not link to event {seq - 1}: reordered or injected", n, prev_hash
                )
            if not isinstance(type_, str) or not EVENT_NAME.fullmatch(type_):
                return bad(seq, f"event {seq} has an invalid type {type_!r:.80}", n, prev_hash)
            if subject is not None and not isinstance(subject, str):
                return bad(seq, f"event {seq} has a subject of type {type(subject).__name__}", n, prev_hash)
            try:
                if canonical_json(decode_payload(payload)) != payload:
                    return bad(seq, f"event {seq} payload is not in canonical form: modified", n, prev_hash)
            except (TypeError, ValueError, ScarsError) as exc:
                return bad(seq, f"event {seq} payload is not valid canonical JSON ({exc})", n, prev_hash)
            if isinstance(tx_time, bool) or not isinstance(tx_time, int):
                return bad(
                    seq, f"event {seq} transaction time {tx_time!r:.40} is not an integer", n, prev_hash
                )
            if prev_tx is not None and tx_time < prev_tx:
                return bad(seq, f"event {seq} transaction time {tx_time!r} goes backwards", n, prev_hash)
            for name, value in (("valid_from", valid_from), ("valid_to", valid_to)):
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                    return bad(seq, f"event {seq} {name} {value!r:.40} is not an integer", n, prev_hash)
            if not isinstance(digest, str):
                return bad(seq, f"event {seq} hash {digest!r:.40} is not text", n, prev_hash)
            body = event_body(seq, type_, subject, payload, tx_time, valid_from, valid_to, stored_prev)
            if event_hash(prev_hash, body) != digest:
                return bad(seq, f"event {seq} content does not match its hash: modified", n, prev_hash)
            if key is not None and not same(mac, ledger_mac(key, "event", digest)):
                return bad(
                    seq,
                    f"event {seq} has no valid MAC: forged or rewritten by someone without the key",
                    n,
                    prev_hash,
                )
            for count_, digest_ in anchors:
                if seq == count_ and digest != digest_:
                    return bad(seq, f"event {seq} differs from the external anchor", n, prev_hash)
            prev_hash, prev_tx, expected = digest, tx_time, expected + 1
        n = expected - 1
        if head is None:
            return bad(None, "the head record is missing", n, prev_hash)
        count, last_hash, head_mac = head
        if isinstance(count, bool) or not isinstance(count, int) or not isinstance(last_hash, str):
            return bad(
                n or None, f"the head record ({count!r:.40}, {last_hash!r:.40}) is damaged", n, prev_hash
            )
        if n < count:
            return bad(n + 1, f"truncated: the head commits {count} events, {n} present", n, prev_hash)
        if n > count:
            return bad(
                count + 1, f"injected: {n - count} event(s) after the committed head ({count})", n, prev_hash
            )
        if prev_hash != last_hash:
            return bad(
                n or None,
                f"the chain ends in {prev_hash[:12]}… but the head commits {last_hash[:12]}…",
                n,
                prev_hash,
            )
        mismatch = self._head_file_check(n, prev_hash, hash_at, side_read)
        if mismatch is not None:
            return bad(mismatch[0], mismatch[1], n, prev_hash)
        if key is not None and not same(head_mac, ledger_mac(key, "head", f"{count}:{last_hash}")):
            return bad(n or None, "the head record has no valid MAC: edited without the key", n, prev_hash)
        for count_, _ in anchors:
            if count_ > n:
                return bad(n + 1, f"truncated below the external anchor ({count_} events)", n, prev_hash)
        self._verified_prefix = _VerifiedPrefix(
            list(rows),
            prev_hash,
            prev_tx,
            key,
            bool(macs_present),
            snapshot.conn,
            snapshot.data_version,
            snapshot.changes,
        )
        checks = ["hash chain"]
        if flags["keyed"]:
            checks.append("MACs")
        if flags["head_file"]:
            checks.append("head file")
        if anchors:
            checks.append("anchor")
        note = f" ({', '.join(checks)} checked"
        if flags["mac_unchecked"]:
            note += f"; MACs NOT checked: no key at {self.key_file}"
        return VerifyReport(True, None, f"intact: {n} events{note})", n, prev_hash, **flags)

    def _verified_events(self, as_of_tx: int | None) -> list[Event]:
        report, rows = self._verify_rows([a for a in (self._anchor,) if a is not None])
        if not report.ok:
            raise LedgerIntegrityError(
                f"{self.path} failed verification at event {report.first_bad_seq}: {report.reason}; "
                "refusing to project the control plane (fail closed)"
            )
        if report.mac_unchecked:
            raise LedgerIntegrityError(
                f"{self.path} is a keyed ledger but its key ({self.key_file}) is not available, so a rewrite "
                "cannot be ruled out; refusing to project the control plane (fail closed) — pass key_file="
            )
        events = (self._row_event(row) for row in rows)  # the very rows verified, not a second read
        return [e for e in events if as_of_tx is None or e.tx_time <= as_of_tx]

    def active_scars(self, *, as_of_tx: int | None = None, valid_at: int | None = None) -> tuple[Scar, ...]:
        """The deterministic projection S_t of the ledger, in first-admission order (``projection.active_scars_of``).

        as_of_tx: consider only events with transaction time ≤ as_of_tx (what the ledger knew then).
        valid_at: return the scars whose valid-time interval contains this instant (an audit query); None =
                  the current lifecycle state (admitted and not retired/revoked since), valid times ignored.
        Fails closed (``LedgerIntegrityError``) if the ledger does not verify.
        """
        return active_scars_of(self._verified_events(as_of_tx), self.path, valid_at)

    def temporary_masks(self, *, as_of_tx: int | None = None) -> tuple[TemporaryMask, ...]:
        """Temporary masks set and not lifted (fails closed like ``active_scars``)."""
        return temporary_masks_of(self._verified_events(as_of_tx), self.path)

    def control_plane(self, **kwargs: Any) -> ControlPlane:
        """A ``ControlPlane`` that is the fold of the verified events (``projection.replay``; kwargs go
        to ControlPlane). Fails closed like ``active_scars``."""
        return replay(self._verified_events(None), **kwargs)
