"""The decision log: every gate decision, written in batches by a background thread (``<ledger>.decisions.sqlite``).

Not hash-chained: the ledger is the evidence of what was enforced; this log is what was decided under it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections import deque
from pathlib import Path
from typing import Any

from scars.agents.runtime.errors import GateError

_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id        INTEGER PRIMARY KEY,
    time_us   INTEGER NOT NULL,
    tool      TEXT NOT NULL,
    action    TEXT,  -- the DSL action's arguments (JSON object); NULL when the call did not fit the mapping
    context   TEXT NOT NULL,
    allowed   INTEGER NOT NULL,
    fired     TEXT NOT NULL,
    error     TEXT,
    schema_version INTEGER NOT NULL
);
"""


class DecisionLog:
    """Every gate decision, written in batches by a background thread (the call only appends to a queue).

    Rows: time, tool, the call's DSL arguments (``action``) and context as JSON, allowed, the fired rule ids, the mapping error and the
    schema version (the ledger event count the decision was taken under). ``flush()`` waits until everything queued
    so far is written; ``close()`` flushes and stops the thread. Not hash-chained: the ledger is the evidence of what
    was enforced; this log is what was decided under it.
    """

    def __init__(self, path: str | Path, *, interval_s: float = 0.25, batch: int = 2048) -> None:
        self.path = Path(path).absolute()  # the writer thread connects later, maybe after a chdir
        self.interval_s, self.batch = interval_s, batch
        self._queue: deque[tuple] = deque()
        self._requested = (
            0  # flush requests made / served: a served request wrote everything queued before it
        )
        self._served = 0
        self._done = threading.Condition()
        self._wake = threading.Event()
        self._closing = False
        self._error: BaseException | None = None
        conn = sqlite3.connect(self.path)  # created here so a bad path fails at open, not later
        conn.executescript(_LOG_SCHEMA)
        conn.close()
        self._identity = self._file_identity()
        self._thread = threading.Thread(target=self._run, name="scars-decision-log", daemon=True)
        self._thread.start()

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @property
    def error(self) -> str | None:
        """Why the log stopped recording (its file deleted or replaced, a write that failed), or None. Once set,
        the gate refuses every call (fail closed): a decision that cannot be audited is not taken."""
        return None if self._error is None else f"the decision log {self.path} failed: {self._error}"

    def append(self, row: tuple) -> None:
        self._queue.append(row)
        if len(self._queue) >= self.batch:
            self._wake.set()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path)
        try:
            while True:
                self._wake.wait(self.interval_s)
                self._wake.clear()
                with self._done:
                    request = self._requested
                self._write(conn)
                with self._done:
                    self._served = request
                    self._done.notify_all()
                if self._closing and not self._queue:
                    return
        except BaseException as exc:  # reported by flush/close
            self._error = exc
            with self._done:
                self._done.notify_all()
        finally:
            conn.close()

    def _write(self, conn: sqlite3.Connection) -> None:
        if self._queue and self._file_identity() != self._identity:  # rm'd or replaced under the running gate
            raise GateError(
                f"its file was {'deleted' if self._file_identity() is None else 'replaced'} while the gate ran; "
                f"{len(self._queue)} queued decision(s) could not be recorded"
            )
        rows = []
        dumps = json.dumps
        while self._queue:
            t, tool, action, context, allowed, fired, error, version = self._queue.popleft()
            rows.append(
                (
                    t,
                    tool,
                    None if action is None else dumps(dict(action.args), sort_keys=True),
                    dumps(context, sort_keys=True, default=str) if context else "{}",
                    int(allowed),
                    dumps(fired) if fired else "[]",
                    error,
                    version,
                )
            )
        if rows:
            with conn:
                conn.executemany(
                    "INSERT INTO decisions (time_us, tool, action, context, allowed, fired, error, schema_version) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every decision queued before this call is written."""
        with self._done:
            self._requested += 1
            request = self._requested
        self._wake.set()
        with self._done:
            ok = self._done.wait_for(lambda: self._served >= request or self._error is not None, timeout)
        if self._error is not None:
            raise GateError(self.error) from self._error
        if not ok:
            raise GateError(f"the decision log {self.path} was not written within {timeout}s")

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._wake.set()
        self._thread.join(timeout=30.0)
        if self._error is not None:
            raise GateError(self.error) from self._error

    def rows(self) -> list[dict[str, Any]]:
        """The written decisions, oldest first (call ``flush()`` first to include the queued ones)."""
        conn = sqlite3.connect(self.path)
        try:
            conn.row_factory = sqlite3.Row
            out = []
            for row in conn.execute("SELECT * FROM decisions ORDER BY id"):
                d = dict(row)
                d["allowed"] = bool(d["allowed"])
                d["fired"] = json.loads(d["fired"])
                d["context"] = json.loads(d["context"])
                d["action"] = None if d["action"] is None else json.loads(d["action"])
                out.append(d)
            return out
        finally:
            conn.close()
