"""The audit-plane store: an append-only, bitemporal, hash-chained ledger over SQLite (SPEC §1, §5).

The model is seed ``000`` (Governed Persistent Memory) §3.1–3.4:

- Every change is an event e_i = (i, τ_i, t_i, type_i, payload_i, h_{i−1}, h_i) with
  h_i = sha256(h_{i−1} ‖ canon(e_i ∖ {h_i})) (seed 000, eq. 3): a contiguous sequence number, a transaction time
  τ (µs since the epoch, assigned by the ledger's clock and never decreasing), a valid-time interval
  [valid_from, valid_to) on the caller's timeline (µs by default: the transaction time), a type, a subject (the
  scar / temporary-mask / failure the event is about) and a payload in canonical JSON.
- The event count and chain head are kept in a separate ``head`` row updated in the same transaction as each
  append (the seed's "sidecar commitment"), so truncation and injection after the head are detected too.
- One SQLite transaction per event (WAL journal, ``synchronous=FULL``): a process killed at any instant leaves
  each event either fully committed (with its head) or absent.
- The active control plane is a deterministic projection of the events (``active_scars``, ``control_plane``);
  scars are never edited in place. The projection verifies the whole chain first and fails closed with
  ``LedgerIntegrityError`` when verification fails.
- No resurrection (seed 000 §3.4): a retired or revoked scar id is re-admitted only by an admission that carries
  evidence never seen before for that id; the refusal is an error, not a silent no-op.

What verification cannot see: someone who rewrites the chain *and* the head consistently. Anchor the head
(``Ledger.head()``) outside the file and pass it to ``verify(anchor=…)`` when that matters.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.runtime.control import ControlPlane
from agents.runtime.scar import Scar, canonical_json, scar_id_of, sha256_hex
from synthesis.dsl import Rule, canonical_text, parse_rule
from synthesis.errors import ConfigError, LedgerError, LedgerIntegrityError, ScarsError

GENESIS_HASH = "0" * 64
FORMAT_VERSION = "1"

SCAR_ADMITTED = "scar_admitted"
SCAR_RETIRED = "scar_retired"  # validity scope expired (SPEC §5)
SCAR_REVOKED = "scar_revoked"  # counter-evidence refutes it (SPEC §5)
TEMP_MASK_SET = "temp_mask_set"  # storm control (SPEC §4)
TEMP_MASK_LIFTED = "temp_mask_lifted"
FAILURE_OBSERVED = "failure_observed"
MERGE_DECISION = "merge_decision"
LIFECYCLE_EVENTS: tuple[str, ...] = (
    SCAR_ADMITTED,
    SCAR_RETIRED,
    SCAR_REVOKED,
    TEMP_MASK_SET,
    TEMP_MASK_LIFTED,
)
EVENT_TYPES: tuple[str, ...] = (*LIFECYCLE_EVENTS, FAILURE_OBSERVED, MERGE_DECISION)
_EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

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
    hash       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_subject ON events (subject, seq);
CREATE TABLE IF NOT EXISTS head (
    singleton    INTEGER PRIMARY KEY CHECK (singleton = 1),
    count        INTEGER NOT NULL,
    last_hash    TEXT NOT NULL,
    last_tx_time INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = "seq, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, hash"


class ResurrectionRefused(LedgerError):
    """A retired/revoked scar was re-admitted without evidence never seen before for its id (seed 000 §3.4)."""


class LifecycleError(LedgerError):
    """A lifecycle event does not apply to its subject's state (retiring an inactive scar, …)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One ledger event, as stored. ``payload`` is the decoded canonical JSON."""

    seq: int
    type: str
    subject: str | None
    payload: dict[str, Any]
    tx_time: int
    valid_from: int | None
    valid_to: int | None
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Result of ``Ledger.verify``: ``first_bad_seq`` names the first event that fails (None when intact)."""

    ok: bool
    first_bad_seq: int | None
    reason: str
    count: int
    head_hash: str


@dataclass(frozen=True, slots=True)
class TemporaryMask:
    """A temporary mask in the projection (storm control, SPEC §4)."""

    mask_id: str
    rule: Rule
    until_step: int


def _body(
    seq: int,
    type_: str,
    subject: str | None,
    payload_text: str,
    tx_time: int,
    valid_from: int | None,
    valid_to: int | None,
    prev_hash: str,
) -> str:
    """canon(e ∖ {h}): the canonical serialisation every hash covers (the payload as its canonical text)."""
    return canonical_json(
        {
            "seq": seq,
            "type": type_,
            "subject": subject,
            "payload": payload_text,
            "tx_time": tx_time,
            "valid_from": valid_from,
            "valid_to": valid_to,
            "prev_hash": prev_hash,
        }
    )


def event_hash(prev_hash: str, body: str) -> str:
    """h_i = sha256(h_{i−1} ‖ canon(e_i ∖ {h_i}))."""
    return sha256_hex(prev_hash + body)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in payload")


def _decode_payload(text: str) -> dict[str, Any]:
    payload = json.loads(text, parse_constant=_reject_constant)
    if not isinstance(payload, dict):
        raise ValueError("payload is not a JSON object")
    return payload


def _check_time(name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{name} must be an int (µs on the caller's timeline) or None, got {value!r}")


def _admission_refusal(scar: Scar, history: list[Event]) -> LedgerError | None:
    """Why admitting ``scar`` after its own ``history`` is refused, or None: an active id needs new evidence (the
    admission then adds it to the audit plane); a retired or revoked id needs evidence never seen for that id."""
    new_hashes = scar.evidence_hashes
    seen = {h for e in history if e.type == SCAR_ADMITTED for h in e.payload.get("evidence_hashes", ())}
    fresh = [h for h in new_hashes if h not in seen]
    lifecycle = [e for e in history if e.type in (SCAR_ADMITTED, SCAR_RETIRED, SCAR_REVOKED)]
    if not lifecycle or fresh:
        return None
    last = lifecycle[-1]
    if last.type == SCAR_ADMITTED:
        return LifecycleError(
            f"scar {scar.id} is already active (admitted at seq {last.seq}) and this admission carries no new evidence"
        )
    return ResurrectionRefused(
        f"scar {scar.id} was {last.type.removeprefix('scar_')} at seq {last.seq}; re-admission needs "
        f"evidence never seen for this id (got {len(new_hashes)} item(s), all already recorded)"
    )


def _now_us() -> int:
    return time.time_ns() // 1000


class Ledger:
    """An append-only audit ledger in one SQLite file (seed 000 §3). Use as a context manager or ``close()``.

    Args:
        path:  the SQLite file (created if absent).
        clock: returns the transaction time in µs; the ledger never lets it decrease. Default: the wall clock.
    """

    def __init__(self, path: str | Path, *, clock: Callable[[], int] | None = None) -> None:
        self.path = Path(path)
        self._clock = clock or _now_us
        try:
            self._conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=30.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            with self._transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                self._conn.execute(
                    "INSERT OR IGNORE INTO head (singleton, count, last_hash, last_tx_time) VALUES (1, 0, ?, 0)",
                    (GENESIS_HASH,),
                )
                self._conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('format_version', ?)", (FORMAT_VERSION,)
                )
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.path} is not a usable ledger file: {exc}") from exc

    # -------------------------------------------------------------------------------------- plumbing
    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE takes the write lock up front, so the head read inside is the head we extend."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def head(self) -> tuple[int, str]:
        """(event count, last hash): the commitment to anchor externally if the file itself is not trusted."""
        row = self._conn.execute("SELECT count, last_hash FROM head WHERE singleton = 1").fetchone()
        if row is None:
            raise LedgerIntegrityError(f"{self.path}: the head record is missing")
        return int(row[0]), str(row[1])

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
        _check_time("valid_from", valid_from)
        _check_time("valid_to", valid_to)
        payload_text = canonical_json(dict(payload))
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT count, last_hash, last_tx_time FROM head WHERE singleton = 1"
            ).fetchone()
            if row is None:
                raise LedgerIntegrityError(f"{self.path}: the head record is missing; refusing to append")
            count, last_hash, last_tx = int(row[0]), str(row[1]), int(row[2])
            # Fail closed on write as well: the stored tail must be exactly what the head commits to.
            tail = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
            if (tail is None and count != 0) or (
                tail is not None and (tail[0] != count or tail[1] != last_hash)
            ):
                raise LedgerIntegrityError(
                    f"{self.path}: the last event {tuple(tail) if tail else None} does not match the head "
                    f"({count}, {last_hash[:12]}…); refusing to append — run verify"
                )
            if precondition is not None:
                precondition(self._subject_events(subject) if subject is not None else [])
            tx_time = max(int(self._clock()), last_tx)
            if valid_from is None:
                valid_from = tx_time
            if valid_to is not None and valid_to <= valid_from:
                raise ConfigError(f"valid_to ({valid_to}) must be after valid_from ({valid_from})")
            seq = count + 1
            digest = event_hash(
                last_hash, _body(seq, type_, subject, payload_text, tx_time, valid_from, valid_to, last_hash)
            )
            conn.execute(
                f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (seq, type_, subject, payload_text, tx_time, valid_from, valid_to, last_hash, digest),
            )
            conn.execute(
                "UPDATE head SET count = ?, last_hash = ?, last_tx_time = ? WHERE singleton = 1",
                (seq, digest, tx_time),
            )
        return Event(
            seq, type_, subject, json.loads(payload_text), tx_time, valid_from, valid_to, last_hash, digest
        )

    @staticmethod
    def _row_event(row: tuple) -> Event:
        seq, type_, subject, payload, tx_time, valid_from, valid_to, prev_hash, digest = row
        return Event(
            seq, type_, subject, _decode_payload(payload), tx_time, valid_from, valid_to, prev_hash, digest
        )

    def _subject_events(self, subject: str) -> list[Event]:
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM events WHERE subject = ? ORDER BY seq", (subject,)
        ).fetchall()
        return [self._row_event(r) for r in rows]

    # ---------------------------------------------------------------------------------- lifecycle events
    def admit(
        self,
        scar: Scar,
        *,
        valid_from: int | None = None,
        valid_to: int | None = None,
        reason: str = "",
    ) -> Event:
        """Append ``scar_admitted``. Refused for an active id unless it brings new evidence (the admission then
        adds that evidence and updates the audit plane), and for a retired/revoked id unless it brings
        evidence never seen for that id (no resurrection)."""
        if not isinstance(scar, Scar):
            raise ConfigError(f"admit() takes a Scar, got {type(scar).__name__}")
        new_hashes = scar.evidence_hashes

        def precondition(history: list[Event]) -> None:
            refusal = _admission_refusal(scar, history)
            if refusal is not None:
                raise refusal

        payload = {**scar.to_json(), "evidence_hashes": list(new_hashes), "reason": reason}
        return self._append(
            SCAR_ADMITTED,
            payload,
            subject=scar.id,
            valid_from=valid_from,
            valid_to=valid_to,
            precondition=precondition,
        )

    def may_admit(self, scar: Scar) -> tuple[bool, str]:
        """Would ``admit(scar)`` be accepted now? (ok, reason): the one no-resurrection check (seed 000 §3.4),
        shared with ``admit``'s precondition. Reads only this scar's own events."""
        refusal = _admission_refusal(scar, self._subject_events(scar.id))
        return (True, "") if refusal is None else (False, str(refusal))

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
            mask_id = f"tmp:L{self.head()[0] + 1}:{scar_id_of(rule)}"

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

    def observe_failure(self, fragment: Mapping[str, Any], *, valid_from: int | None = None) -> Event:
        """Append ``failure_observed`` with the failure fragment E = (q, F, θ) as a JSON-able dict (SPEC §4)."""
        subject = "failure:" + sha256_hex(canonical_json(dict(fragment)))[:16]
        return self._append(
            FAILURE_OBSERVED, dict(fragment), subject=subject, valid_from=valid_from, valid_to=None
        )

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
        if not isinstance(event_type, str) or not _EVENT_NAME.match(event_type):
            raise ConfigError(f"event type must be snake_case (e.g. 'merge_decision'), got {event_type!r}")
        return self._append(event_type, payload, subject=subject, valid_from=valid_from, valid_to=valid_to)

    # ---------------------------------------------------------------------------------- reads and audit
    def events(self) -> tuple[Event, ...]:
        """Every event in sequence order (not verified; use ``verify`` for that)."""
        rows = self._conn.execute(f"SELECT {_COLUMNS} FROM events ORDER BY seq").fetchall()
        return tuple(self._row_event(r) for r in rows)

    def verify(self, *, anchor: tuple[int, str] | None = None) -> VerifyReport:
        """Check the whole chain and the head; report the first event that fails.

        Detects modification (hash mismatch), deletion (a gap in seq), reordering (a broken prev_hash link),
        truncation (fewer events than the head commits) and injection (more events than the head commits, or a
        broken link). ``anchor`` = a (count, hash) pair from ``head()`` kept elsewhere: the event at that seq
        must still carry that hash.
        """
        try:
            head = self._conn.execute("SELECT count, last_hash FROM head WHERE singleton = 1").fetchone()
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM events ORDER BY seq").fetchall()
        except sqlite3.DatabaseError as exc:
            return VerifyReport(False, None, f"the ledger tables cannot be read: {exc}", 0, "")

        def bad(seq: int | None, reason: str, count: int, head_hash: str) -> VerifyReport:
            return VerifyReport(False, seq, reason, count, head_hash)

        prev_hash, prev_tx, expected = GENESIS_HASH, None, 1
        for seq, type_, subject, payload, tx_time, valid_from, valid_to, stored_prev, digest in rows:
            n = expected - 1
            if seq != expected:
                return bad(
                    expected, f"event {expected} is missing (found seq {seq} next): deleted", n, prev_hash
                )
            if stored_prev != prev_hash:
                return bad(
                    seq, f"event {seq} does not link to event {seq - 1}: reordered or injected", n, prev_hash
                )
            if not isinstance(type_, str) or not _EVENT_NAME.match(type_):
                return bad(seq, f"event {seq} has an invalid type {type_!r}", n, prev_hash)
            try:
                if canonical_json(_decode_payload(payload)) != payload:
                    return bad(seq, f"event {seq} payload is not in canonical form: modified", n, prev_hash)
            except (TypeError, ValueError, ScarsError) as exc:
                return bad(seq, f"event {seq} payload is not valid canonical JSON ({exc})", n, prev_hash)
            if not isinstance(tx_time, int) or (prev_tx is not None and tx_time < prev_tx):
                return bad(seq, f"event {seq} transaction time {tx_time!r} goes backwards", n, prev_hash)
            body = _body(seq, type_, subject, payload, tx_time, valid_from, valid_to, stored_prev)
            if event_hash(prev_hash, body) != digest:
                return bad(seq, f"event {seq} content does not match its hash: modified", n, prev_hash)
            if anchor is not None and seq == anchor[0] and digest != anchor[1]:
                return bad(seq, f"event {seq} differs from the external anchor", n, prev_hash)
            prev_hash, prev_tx, expected = digest, tx_time, expected + 1
        n = expected - 1
        if head is None:
            return bad(None, "the head record is missing", n, prev_hash)
        count, last_hash = int(head[0]), str(head[1])
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
        if anchor is not None and anchor[0] > n:
            return bad(n + 1, f"truncated below the external anchor ({anchor[0]} events)", n, prev_hash)
        return VerifyReport(True, None, f"intact: {n} events", n, prev_hash)

    def _verified_events(self, as_of_tx: int | None) -> list[Event]:
        report = self.verify()
        if not report.ok:
            raise LedgerIntegrityError(
                f"{self.path} failed verification at event {report.first_bad_seq}: {report.reason}; "
                "refusing to project the control plane (fail closed)"
            )
        return [e for e in self.events() if as_of_tx is None or e.tx_time <= as_of_tx]

    def active_scars(self, *, as_of_tx: int | None = None, valid_at: int | None = None) -> tuple[Scar, ...]:
        """The deterministic projection S_t of the ledger, in first-admission order.

        as_of_tx: consider only events with transaction time ≤ as_of_tx (what the ledger knew then).
        valid_at: return the scars whose valid-time interval contains this instant (an audit query); None =
                  the current lifecycle state (admitted and not retired/revoked since), valid times ignored.
        Fails closed (``LedgerIntegrityError``) if the ledger does not verify.
        """
        state: dict[str, tuple[Scar, list[list[int | None]], bool]] = {}
        for event in self._verified_events(as_of_tx):
            if event.type == SCAR_ADMITTED:
                scar = Scar.from_json(event.payload)
                _, intervals, is_open = state.get(scar.id, (scar, [], False))
                if not is_open:
                    intervals = [*intervals, [event.valid_from, event.valid_to]]
                state[scar.id] = (scar, intervals, True)
            elif event.type in (SCAR_RETIRED, SCAR_REVOKED) and event.subject in state:
                scar, intervals, _ = state[event.subject]
                start, end = intervals[-1]
                cut = event.valid_from if end is None else min(end, event.valid_from)
                state[event.subject] = (scar, [*intervals[:-1], [start, cut]], False)
        if valid_at is None:
            return tuple(scar for scar, _, is_open in state.values() if is_open)
        return tuple(
            scar
            for scar, intervals, _ in state.values()
            if any(start <= valid_at and (end is None or valid_at < end) for start, end in intervals)
        )

    def temporary_masks(self, *, as_of_tx: int | None = None) -> tuple[TemporaryMask, ...]:
        """Temporary masks set and not lifted (fails closed like ``active_scars``)."""
        masks: dict[str, TemporaryMask] = {}
        for event in self._verified_events(as_of_tx):
            if event.type == TEMP_MASK_SET:
                p = event.payload
                masks[p["mask_id"]] = TemporaryMask(p["mask_id"], parse_rule(p["rule"]), p["until_step"])
            elif event.type == TEMP_MASK_LIFTED:
                masks.pop(event.payload["mask_id"], None)
        return tuple(masks.values())

    def control_plane(self, **kwargs: Any) -> ControlPlane:
        """A ``ControlPlane`` that is the fold of the verified events (``agents.runtime.store.replay``; kwargs go
        to ControlPlane). Fails closed like ``active_scars``."""
        from agents.runtime.store import replay  # the store owns the one transition function; it imports us

        return replay(self._verified_events(None), **kwargs)
