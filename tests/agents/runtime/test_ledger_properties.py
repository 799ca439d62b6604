"""Property test of the ledger (issue 13): random histories of admissions, retirements, revocations, failures and
merge decisions, then one random tampering, checked against what docs/ledger.md's tampering table
says is detectable — unkeyed, keyed and audited with the key, keyed but audited without it, and with an external
anchor. ``EXPECTED`` below *is* that table; ``test_the_docs_table_matches_the_property_test`` compares the two.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scars.agents.runtime import Scar
from scars.agents.runtime.events import event_body as _body
from scars.agents.runtime.head import ledger_mac as _mac
from scars.agents.runtime.ledger import (
    GENESIS_HASH,
    Ledger,
    ResurrectionRefused,
    event_hash,
    head_file_of,
    ledger_files,
    read_key_file,
    verdict_evidence,
)
from scars.agents.runtime.scar import canonical_json
from scars.synthesis.dsl import parse_rule
from scars.synthesis.errors import LedgerError, LedgerIntegrityError
from support.failures import failure_of

LEDGER_PAGE = Path(__file__).resolve().parents[3] / "docs" / "ledger.md"
RULES = [
    parse_rule(f'if step == {i} and action.obj_type == "cup" then forbid_env_action("move")')
    for i in range(3)
]
MOVE = {"kind": "env", "name": "move", "args": {}}

# tampering -> (detected on an unkeyed ledger, or a keyed one audited WITHOUT its key;
#               detected on a keyed ledger audited with its key;
#               detected by an external anchor taken before the tampering — on top of the first two columns)
EXPECTED: dict[str, tuple[bool, bool, bool]] = {
    "modify": (True, True, True),
    "delete": (True, True, True),
    "reorder": (True, True, True),
    "truncate": (True, True, True),
    "edit-head-row": (True, True, True),
    "forged-append": (True, True, True),
    "forged-append-and-head-file": (False, True, False),
    "rewrite-recomputed": (True, True, True),
    "rewrite-recomputed-and-head-file": (False, True, True),
    "drop-wal": (True, True, True),
    "delete-head-file": (True, True, True),
    "roll-back-all-files": (False, False, True),
    "rewrite-by-key-holder": (False, False, True),
}
TAMPERS = sorted(EXPECTED)


# ---------------------------------------------------------------------------------------------- history
def build(folder: Path, ops: list[str], picks: list[int], keyed: bool, snapshot_at: int) -> dict:
    """Play ``ops`` on a new ledger in ``folder`` (checking the projection against a model as it goes); keep a
    genuine copy of every file after op ``snapshot_at`` and one with the last commits only in the -wal file."""
    path = folder / "live" / "l.db"
    path.parent.mkdir()
    state: dict[int, str] = {}
    counter = iter(range(10_000))
    with Ledger(path, keyed=keyed) as led:
        led.observe_failure({"start": True})
        for i, (op, pick) in enumerate(zip(ops, picks, strict=True)):
            r = pick % len(RULES)
            active = sorted(k for k, v in state.items() if v == "active")
            if op == "admit":
                if state.get(r) in ("retired", "revoked"):
                    with pytest.raises(ResurrectionRefused):  # made-up evidence never brings it back
                        led.admit(Scar(RULES[r], evidence=({"nonce": next(counter)},)))
                    verdict = led.observe_failure(failure_of(MOVE["kind"], MOVE["name"], n=next(counter)))
                    led.admit(Scar(RULES[r], evidence=(verdict_evidence(verdict),)))
                else:
                    led.admit(Scar(RULES[r], evidence=({"e": next(counter)},)))
                state[r] = "active"
            elif op in ("retire", "revoke") and active:
                target = active[pick % len(active)]
                sid = Scar(RULES[target]).id
                if op == "retire":
                    led.retire(sid, "scope expired")
                    state[target] = "retired"
                else:
                    led.revoke(sid, [{"safe": next(counter)}])
                    state[target] = "revoked"
            elif op == "record":
                led.record("merge_decision", {"n": next(counter)})
            else:
                led.observe_failure({"n": next(counter)})
            if i == snapshot_at:
                led._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                snapshot = folder / "snapshot"
                snapshot.mkdir()
                for file in ledger_files(path):
                    if file.exists() and not file.name.endswith(("-wal", "-shm", ".lock")):
                        shutil.copy2(file, snapshot / file.name)
                led.observe_failure({"after-snapshot": True})  # at least one commit only in the -wal file
        expected_active = {Scar(RULES[k]).id for k, v in state.items() if v == "active"}
        assert {s.id for s in led.active_scars()} == expected_active  # the projection follows the lifecycle
        anchor = led.anchor_text()
        dropped = folder / "dropped"
        dropped.mkdir()
        for file in ledger_files(path):  # the files as a killed writer leaves them, minus its -wal file
            if file.exists() and not file.name.endswith(("-wal", "-shm", ".lock")):
                shutil.copy2(file, dropped / file.name)
        assert Path(f"{path}-wal").stat().st_size > 0
    return {
        "path": path,
        "anchor": anchor,
        "snapshot": folder / "snapshot" / "l.db",
        "dropped": dropped / "l.db",
    }


# ---------------------------------------------------------------------------------------------- tampering
def _rows(conn: sqlite3.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT seq, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, hash FROM events ORDER BY seq"
    ).fetchall()


def _rehash_from(conn: sqlite3.Connection, start: int, key: bytes | None) -> tuple[int, str]:
    """Recompute every hash from event ``start`` on (and, for a key holder, every MAC); returns the new head."""
    rows = _rows(conn)
    prev = GENESIS_HASH if start == 1 else rows[start - 2][8]
    for seq, type_, subject, payload, tx, vf, vt, _, _ in rows[start - 1 :]:
        digest = event_hash(prev, _body(seq, type_, subject, payload, tx, vf, vt, prev))
        mac = _mac(key, "event", digest) if key else None
        conn.execute(
            "UPDATE events SET prev_hash = ?, hash = ?, mac = COALESCE(?, mac) WHERE seq = ?",
            (prev, digest, mac, seq),
        )
        prev = digest
    count = len(rows)
    head_mac = _mac(key, "head", f"{count}:{prev}") if key else None
    conn.execute("UPDATE head SET count = ?, last_hash = ?, mac = COALESCE(?, mac)", (count, prev, head_mac))
    return count, prev


def _rewrite_head_file(path: Path, count: int, digest: str, key: bytes | None) -> None:
    side = json.loads(head_file_of(path).read_text())
    side.update(count=count, hash=digest, pending=None)
    if key:
        body = json.dumps(
            {k: v for k, v in side.items() if k != "mac"}, sort_keys=True, separators=(",", ":")
        )
        side["mac"] = _mac(key, "head-file", body)
    head_file_of(path).write_text(json.dumps(side))


def tamper(kind: str, built: dict, folder: Path, pick: int) -> Path:
    """Apply one tampering to a copy of the closed ledger; returns the path to audit."""
    if kind == "drop-wal":
        return built["dropped"]
    if kind == "roll-back-all-files":
        return built["snapshot"]
    target = folder / "tampered"
    target.mkdir()
    for file in ledger_files(built["path"]):
        if file.exists() and not file.name.endswith(("-wal", "-shm", ".lock")):
            shutil.copy2(file, target / file.name)
    path = target / "l.db"
    if kind == "delete-head-file":
        head_file_of(path).unlink()
        return path
    key = read_key_file(f"{built['path']}.key") if Path(f"{built['path']}.key").exists() else None
    conn = sqlite3.connect(path)
    rows = _rows(conn)
    n = len(rows)
    k = 1 + pick % n
    # a plausible edit: the payload stays a valid record of its kind (one more field), only the hashes can tell
    edited = canonical_json({**json.loads(rows[k - 1][3]), "tampered": k})
    if kind == "modify":
        conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (edited, k))
    elif kind == "delete":
        conn.execute("DELETE FROM events WHERE seq = ?", (k,))
    elif kind == "reorder":
        k = min(k, n - 1)
        conn.execute("UPDATE events SET seq = -1 WHERE seq = ?", (k,))
        conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (k, k + 1))
        conn.execute("UPDATE events SET seq = ? WHERE seq = -1", (k + 1,))
    elif kind == "truncate":
        keep = pick % n  # 0 .. n-1 events survive, the head row is set to match them
        conn.execute("DELETE FROM events WHERE seq > ?", (keep,))
        last = GENESIS_HASH if keep == 0 else rows[keep - 1][8]
        conn.execute("UPDATE head SET count = ?, last_hash = ?", (keep, last))
    elif kind == "edit-head-row":
        conn.execute("UPDATE head SET count = count - 1") if pick % 2 else conn.execute(
            "UPDATE head SET last_hash = 'f'"
        )
    elif kind in ("forged-append", "forged-append-and-head-file"):
        last = rows[-1]
        payload = '{"forged":true}'
        digest = event_hash(
            last[8], _body(n + 1, "merge_decision", None, payload, last[4], last[4], None, last[8])
        )
        conn.execute(
            "INSERT INTO events (seq, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, hash) "
            "VALUES (?, 'merge_decision', NULL, ?, ?, ?, NULL, ?, ?)",
            (n + 1, payload, last[4], last[4], last[8], digest),
        )
        conn.execute("UPDATE head SET count = ?, last_hash = ?", (n + 1, digest))
        if kind == "forged-append-and-head-file":
            conn.commit()
            _rewrite_head_file(path, n + 1, digest, None)
    else:  # the three rewrites: change event k and recompute the hashes after it
        conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (edited, k))
        holder = key if kind == "rewrite-by-key-holder" else None
        count, digest = _rehash_from(conn, k, holder)
        if kind != "rewrite-recomputed":
            conn.commit()
            _rewrite_head_file(path, count, digest, holder)
    conn.commit()
    conn.close()
    return path


def detected(path: Path, *, key_file: Path | None, anchor: str | None) -> bool:
    """Does an audit (read-only open + verify) flag it? A flagged ledger must also refuse to project."""
    try:
        led = Ledger(path, read_only=True, key_file=key_file, anchor=anchor)
    except LedgerError:
        return True
    with led:
        report = led.verify()
        if report.ok:
            if not report.mac_unchecked:
                led.active_scars()  # intact: the projection works
            return False
        with pytest.raises(LedgerIntegrityError):
            led.active_scars()  # fail closed
        return True


@given(
    ops=st.lists(
        st.sampled_from(["admit", "admit", "retire", "revoke", "observe", "record"]), min_size=2, max_size=9
    ),
    picks=st.lists(st.integers(0, 1000), min_size=9, max_size=9),
    keyed=st.booleans(),
    kind=st.sampled_from(TAMPERS),
    pick=st.integers(0, 1000),
)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_tampering_is_detected_exactly_where_the_readme_says(ops, picks, keyed, kind, pick):
    check_one(ops, picks, keyed, kind, pick)


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
@pytest.mark.parametrize("kind", TAMPERS)
def test_every_row_of_the_table_on_a_fixed_history(kind, keyed):
    """Every (tampering, key) cell at least once, whatever Hypothesis draws."""
    ops = ["admit", "admit", "observe", "retire", "admit", "revoke", "record"]
    check_one(ops, [0, 1, 0, 0, 0, 1, 0], keyed, kind, pick=3)


def check_one(ops: list[str], picks: list[int], keyed: bool, kind: str, pick: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        built = build(folder, ops, picks[: len(ops)], keyed, snapshot_at=pick % len(ops))
        path = tamper(kind, built, folder, pick)
        plain, with_key, with_anchor = EXPECTED[kind]
        key_file = Path(f"{built['path']}.key")
        if keyed:
            assert detected(path, key_file=key_file, anchor=None) == with_key, (kind, "keyed, with the key")
            missing = folder / "no.key"  # a keyed ledger audited without its key: the unkeyed guarantees
            if kind != "rewrite-by-key-holder":
                hidden = Path(f"{path}.key")
                hidden.unlink(missing_ok=True)
                assert detected(path, key_file=None, anchor=None) == plain, (
                    kind,
                    "keyed, audited without key",
                )
            assert missing.exists() is False
        else:
            assert detected(path, key_file=None, anchor=None) == plain, (kind, "unkeyed")
        # an anchor adds its column to what the key (or its absence) already catches
        key = key_file if keyed else None
        base = with_key if keyed else plain
        assert detected(path, key_file=key, anchor=built["anchor"]) == (base or with_anchor), (
            kind,
            "anchored",
        )


def test_the_docs_table_matches_the_property_test():
    """docs/ledger.md's table of tampering lists exactly EXPECTED (✓ detected, ✗ not)."""
    section = LEDGER_PAGE.read_text(encoding="utf-8")
    rows = {}
    for line in section.splitlines()[1:]:
        match = re.match(r"\|\s*`([a-z-]+)`[^|]*\|\s*([✓✗])[^|]*\|\s*([✓✗])[^|]*\|\s*([✓✗])[^|]*\|", line)
        if match:
            rows[match.group(1)] = tuple(mark == "✓" for mark in match.group(2, 3, 4))
    assert rows == EXPECTED
