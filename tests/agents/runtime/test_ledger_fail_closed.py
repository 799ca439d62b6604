"""Issue 13: the ledger fails closed — a protected head, read-only audits, damaged rows named, no resurrection by
made-up evidence. Each test reproduces one of the attacks the issue reports (they passed before) and checks it is
now caught. The randomised version is ``test_ledger_properties.py``."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from scars.agents.runtime import Scar
from scars.agents.runtime.events import event_body as _body
from scars.agents.runtime.ledger import (
    KEY_FILE_ENV,
    Ledger,
    ResurrectionRefused,
    event_hash,
    head_file_of,
    ledger_files,
    verdict_evidence,
)
from scars.experiments.cli import main
from scars.synthesis.dsl import parse_rule
from scars.synthesis.errors import ConfigError, LedgerError, LedgerIntegrityError
from support.failures import failure_of

HARVEST = 'if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")'
CUP = 'if action.obj_type == "cup" then forbid_env_action("move")'
ROOT = str(Path(__file__).resolve().parents[3])


def clock(start: int = 1_000):
    counter = itertools.count(start, 10)
    return lambda: next(counter)


def cli(*args: str):
    return CliRunner().invoke(main, ["ledger", *args], env={"COLUMNS": "250"})


def no_traceback(result) -> None:
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


def history(path: Path, *, keyed: bool = True, start: int = 1_000) -> tuple[Scar, Scar]:
    """admit cup, admit harvest, a failure, retire harvest: 4 events, harvest retired."""
    cup = Scar(parse_rule(CUP), evidence=({"f": "cup"},))
    harvest = Scar(parse_rule(HARVEST), evidence=({"f": "h"},))
    with Ledger(path, clock=clock(start), keyed=keyed) as led:
        led.admit(cup)
        led.admit(harvest)
        led.observe_failure({"step": 3})
        led.retire(harvest.id, "scope expired")
    return cup, harvest


def raw(path: Path, *statements: str, params: tuple = ()) -> None:
    conn = sqlite3.connect(path)
    for sql in statements:
        conn.execute(sql, params)
    conn.commit()
    conn.close()


# ------------------------------------------------------------------------------ 1. the protected head
@pytest.mark.parametrize("keyed", [True, False])
def test_deleting_the_last_events_and_editing_the_head_row_is_detected(tmp_path, keyed):
    """Issue 13 #1: delete the retirement, set the head row to the remaining chain: 'ok: intact' and the retired
    scar active again — before. Now the head file (and with the key, the head MAC) disagree."""
    path = tmp_path / "l.db"
    _, harvest = history(path, keyed=keyed)
    conn = sqlite3.connect(path)
    seq3_hash = conn.execute("SELECT hash FROM events WHERE seq = 3").fetchone()[0]
    conn.execute("DELETE FROM events WHERE seq = 4")
    conn.execute("UPDATE head SET count = 3, last_hash = ?", (seq3_hash,))
    conn.commit()
    conn.close()
    with Ledger(path, read_only=True) as led:
        report = led.verify()
        assert not report.ok and report.first_bad_seq == 4
        assert "truncated" in report.reason or "MAC" in report.reason
        with pytest.raises(LedgerIntegrityError):
            led.active_scars()  # the retired scar does not come back: the projection fails closed
    with pytest.raises(LedgerIntegrityError, match="refusing to append"):
        Ledger(path).observe_failure({"x": 1})
    result = cli("verify", str(path))
    assert result.exit_code == 1 and "first bad event 4" in result.output
    no_traceback(result)


@pytest.mark.parametrize("keyed", [True, False])
def test_a_forged_append_with_a_recomputed_hash_and_head_row_is_detected(tmp_path, keyed):
    path = tmp_path / "l.db"
    history(path, keyed=keyed)
    conn = sqlite3.connect(path)
    count, last = conn.execute("SELECT count, last_hash FROM head").fetchone()
    payload = '{"scar_id":"forged"}'
    digest = event_hash(last, _body(count + 1, "merge_decision", None, payload, 99_999, 99_999, None, last))
    conn.execute(
        "INSERT INTO events (seq, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, hash) "
        "VALUES (?, 'merge_decision', NULL, ?, 99999, 99999, NULL, ?, ?)",
        (count + 1, payload, last, digest),
    )
    conn.execute("UPDATE head SET count = ?, last_hash = ?", (count + 1, digest))
    conn.commit()
    conn.close()
    with Ledger(path, read_only=True) as led:
        report = led.verify()
    assert not report.ok and report.first_bad_seq == count + 1
    assert ("MAC" if keyed else "injected") in report.reason


def _rewrite_from(path: Path, seq: int) -> None:
    """Change event ``seq``'s payload and recompute every hash after it and the head row (no key)."""
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT seq, type, subject, payload, tx_time, valid_from, valid_to, prev_hash FROM events ORDER BY seq"
    ).fetchall()
    prev = (
        rows[seq - 2][0] and conn.execute("SELECT hash FROM events WHERE seq = ?", (seq - 1,)).fetchone()[0]
    )
    for s, type_, subject, payload, tx, vf, vt, _ in rows[seq - 1 :]:
        if s == seq:
            payload = payload.replace('"f":"h"', '"f":"forged"')
        digest = event_hash(prev, _body(s, type_, subject, payload, tx, vf, vt, prev))
        conn.execute(
            "UPDATE events SET payload = ?, prev_hash = ?, hash = ? WHERE seq = ?", (payload, prev, digest, s)
        )
        prev = digest
    conn.execute("UPDATE head SET last_hash = ?", (prev,))
    conn.commit()
    conn.close()


def test_a_recomputed_rewrite_of_history_is_named_by_the_mac_and_caught_by_the_head_file(tmp_path):
    keyed, plain = tmp_path / "k.db", tmp_path / "p.db"
    history(keyed, keyed=True)
    history(plain, keyed=False)
    _rewrite_from(keyed, 2)
    _rewrite_from(plain, 2)
    with Ledger(keyed, read_only=True) as led:
        report = led.verify()
        assert (report.ok, report.first_bad_seq) == (False, 2) and "MAC" in report.reason
    with Ledger(plain, read_only=True) as led:
        report = led.verify()
        assert not report.ok and "head file" in report.reason  # the chain alone verifies; its end moved
    # the unkeyed attacker who also rewrites the head file is not caught — except by an anchor kept elsewhere
    with Ledger(plain, read_only=True) as led:
        count, digest = led._db.execute("SELECT count, last_hash FROM head").fetchone()
    side = json.loads(head_file_of(plain).read_text())
    side.update(count=count, hash=digest, pending=None)
    head_file_of(plain).write_text(json.dumps(side))
    with Ledger(plain, read_only=True) as led:
        assert led.verify().ok
    # the keyed attacker cannot: the head file carries a MAC
    with Ledger(keyed, read_only=True) as led:
        count, digest = led._db.execute("SELECT count, last_hash FROM head").fetchone()
    side = json.loads(head_file_of(keyed).read_text())
    side.update(count=count, hash=digest, pending=None)
    head_file_of(keyed).write_text(json.dumps(side))
    with Ledger(keyed, read_only=True) as led:
        assert not led.verify().ok


def test_an_anchor_from_summary_json_catches_a_consistent_rewrite(tmp_path):
    path = tmp_path / "run" / "ledger.sqlite"
    path.parent.mkdir()
    history(path, keyed=False)
    with Ledger(path) as led:
        anchor = led.anchor_text()
    (tmp_path / "run" / "summary.json").write_text(json.dumps({"scars": {"ledger_head": anchor}}))
    assert cli("verify", str(path), "--anchor", anchor).exit_code == 0
    for file in ledger_files(path):
        file.unlink(missing_ok=True)
    history(path, keyed=False, start=5_000)  # same shape, a new ledger: everything verifies on its own
    with Ledger(path, clock=clock(), keyed=False) as led:
        led.observe_failure({"other": True})
    assert cli("verify", str(path)).exit_code == 0
    by_text = cli("verify", str(path), "--anchor", anchor)
    by_file = cli("verify", str(path), "--anchor", str(tmp_path / "run" / "summary.json"))
    for result in (by_text, by_file):
        assert result.exit_code == 1 and "external anchor" in result.output, result.output
        no_traceback(result)
    bad = cli("verify", str(path), "--anchor", "12:xyz")
    assert bad.exit_code == 2 and "COUNT:HASH" in bad.output
    with pytest.raises(LedgerIntegrityError, match="external anchor"):
        Ledger(path, anchor=anchor).active_scars()  # the agent's read path honours an anchor too


CHILD = textwrap.dedent(
    """
    import sys
    from scars.agents.runtime.ledger import Ledger
    ledger = Ledger(sys.argv[1])
    ledger._db.execute("PRAGMA wal_autocheckpoint = 0")  # keep every commit in the -wal file
    i = 0
    while True:
        ledger.observe_failure({"i": i})
        print(i, flush=True)
        i += 1
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_dropping_the_wal_file_of_a_killed_writer_is_detected(tmp_path):
    """Issue 13 #1: deleting the -wal file left by a killed writer silently drops its last commits."""
    path = tmp_path / "w.db"
    history(path)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert child.stdout is not None
    for _ in range(5):
        child.stdout.readline()
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    wal = Path(f"{path}-wal")
    assert wal.exists() and wal.stat().st_size > 0
    kept = tmp_path / "kept"
    kept.mkdir()
    for file in ledger_files(path):
        if file.exists() and not file.name.endswith(("-wal", "-shm")):
            shutil.copy2(file, kept / file.name)
    with Ledger(path, read_only=True) as led:  # with its -wal the killed writer's commits are all there
        assert led.verify().ok
    dropped = kept / path.name
    with Ledger(dropped, read_only=True) as led:
        report = led.verify()
    assert not report.ok and "truncated" in report.reason and "-wal" in report.reason


# ------------------------------------------------------------------------------ 2. read-only audits
def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("kind", ["empty", "other-app", "tables-dropped", "junk"])
def test_audits_never_write_and_reject_a_file_that_is_not_a_ledger(tmp_path, kind):
    """Issue 13 #2: verify/show on these files created empty ledger tables, switched on WAL and said intact."""
    folder = tmp_path / "f"
    folder.mkdir()
    path = folder / "x.db"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "junk":
        path.write_bytes(b"\x00junk" * 200)
    elif kind == "other-app":
        raw(
            path,
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)",
            "INSERT INTO users VALUES (1, 'a')",
        )
    else:
        with Ledger(path, keyed=False) as led:
            led.observe_failure({"a": 1})
        for file in ledger_files(path)[3:]:
            file.unlink(missing_ok=True)
        raw(path, "DROP TABLE events", "DROP TABLE head")
    before = _listing(folder)
    with pytest.raises(LedgerError, match="not a scars ledger"):
        Ledger(path, read_only=True)
    for command in ("verify", "show"):
        result = cli(command, str(path))
        assert result.exit_code == 2 and "not a scars ledger" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
        no_traceback(result)
    assert _listing(folder) == before  # nothing created, nothing changed
    if kind != "empty":  # writing into another application's database is refused too
        with pytest.raises(LedgerError, match="not a scars ledger"):
            Ledger(path)


def test_audit_of_a_missing_path_is_one_line(tmp_path):
    result = cli("verify", str(tmp_path / "nope.db"))
    assert result.exit_code == 2 and "no ledger at" in result.output
    assert not (tmp_path / "nope.db").exists()


# ------------------------------------------------------------------------------ 3. damaged rows
DAMAGE = {
    "payload-not-json": (
        "UPDATE events SET payload = 'not json {' WHERE seq = 2",
        "not valid canonical JSON",
    ),
    "payload-list": ("UPDATE events SET payload = '[1,2]' WHERE seq = 2", "JSON list"),
    "payload-nan": ("UPDATE events SET payload = '{\"x\":NaN}' WHERE seq = 2", "non-finite"),
    "payload-deep": ("UPDATE events SET payload = '" + "[" * 100_000 + "' WHERE seq = 2", "JSON"),
    "payload-blob": ("UPDATE events SET payload = x'ff00fe' WHERE seq = 2", "seq"),
    "payload-number": ("UPDATE events SET payload = 5 WHERE seq = 2", "JSON int"),
    "tx-time-text": ("UPDATE events SET tx_time = 'yesterday' WHERE seq = 2", "not an integer"),
    "valid-from-text": ("UPDATE events SET valid_from = 'soon' WHERE seq = 2", "not an integer"),
    "type-number": ("UPDATE events SET type = 7 WHERE seq = 2", "invalid type"),
    "bad-utf8": ("UPDATE events SET payload = CAST(x'7b2261223a22ff227d' AS TEXT) WHERE seq = 2", "modified"),
    "hash-null": ("UPDATE events SET hash = 3 WHERE seq = 2", "event 2"),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_damaged_rows_are_named_without_a_traceback(tmp_path, name):
    """Issue 13 #3: a payload that is not JSON, a JSON list, NaN, or a text tx_time crashed verify and show."""
    sql, words = DAMAGE[name]
    path = tmp_path / "d.db"
    history(path)
    raw(path, sql)
    with Ledger(path, read_only=True) as led:
        report = led.verify()
        assert not report.ok and report.first_bad_seq == 2, report
        assert words in report.reason or words == "seq", report.reason
        with pytest.raises(LedgerIntegrityError, match="event 2"):
            led.active_scars()
    verify = cli("verify", str(path))
    assert verify.exit_code == 1 and "first bad event 2" in verify.output, verify.output
    shown = cli("show", str(path))
    assert shown.exit_code == 1 and "verification failed at event 2" in shown.output, shown.output
    for result in (verify, shown):
        no_traceback(result)


# ------------------------------------------------------------------------------ keys
def test_a_keyed_ledger_needs_its_key_to_be_written_or_projected(tmp_path, monkeypatch):
    path = tmp_path / "k.db"
    history(path)
    key = Path(f"{path}.key")
    assert key.exists() and oct(key.stat().st_mode & 0o777) == "0o600"
    elsewhere = tmp_path / "vault" / "k.key"
    elsewhere.parent.mkdir()
    key.rename(elsewhere)
    with pytest.raises(LedgerError, match="key file .* is missing"):
        Ledger(path)
    with Ledger(path, read_only=True) as led:
        report = led.verify()
        assert report.ok and report.mac_unchecked and not report.keyed
        assert "MACs NOT checked" in report.reason
        with pytest.raises(LedgerIntegrityError, match="key"):
            led.active_scars()
    with Ledger(path, key_file=elsewhere) as led:
        assert led.verify().keyed and len(led.active_scars()) == 1
    monkeypatch.setenv(KEY_FILE_ENV, str(elsewhere))
    with Ledger(path) as led:
        led.observe_failure({"with": "env key"})
        assert led.verify().ok
    result = cli("verify", str(path), "--key-file", str(tmp_path / "missing.key"))
    assert result.exit_code == 2 and "does not exist" in result.output


def test_a_deleted_database_next_to_its_head_file_is_refused_not_restarted(tmp_path):
    path = tmp_path / "o.db"
    history(path)
    path.unlink()
    with pytest.raises(LedgerIntegrityError, match="commits 4 events"):
        Ledger(path, read_only=True)
    with pytest.raises(LedgerIntegrityError, match="commits 4 events"):
        Ledger(path)
    assert not path.exists() and not list(tmp_path.glob("o.db.head.orphaned-*"))


def test_an_emptied_database_with_a_head_file_is_refused(tmp_path):
    path = tmp_path / "e.db"
    history(path)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"")
    with pytest.raises(LedgerIntegrityError, match="commits 4 events"):
        Ledger(path)


# ------------------------------------------------------------------------------ 5. resurrection loopholes
def test_resurrection_needs_a_fresh_recorded_verdict_of_a_masked_action(tmp_path):
    path = tmp_path / "r.db"
    with Ledger(path, clock=clock()) as led:
        before = led.observe_failure(failure_of("tool", "harvest"))
        scar = Scar(parse_rule(HARVEST), evidence=({"f": "h"},))
        assert led.may_admit(scar) == (True, f"scar {scar.id} is new to this ledger")
        led.admit(scar)
        led.retire(scar.id, "scope expired")
        other = led.observe_failure(failure_of("env", "move"))
        after = led.observe_failure(failure_of("tool", "harvest"))
        cases = {
            "free JSON": {"nonce": 1},
            "predates": verdict_evidence(before),
            "does not mask": verdict_evidence(other),
            "not in this ledger": {"verdict_event": {"seq": 99, "hash": after.hash}},
            "has hash": {"verdict_event": {"seq": after.seq, "hash": "0" * 64}},
            "not a verdict": {"verdict_event": {"seq": 2, "hash": led.events()[1].hash}},
            "is not {": {"verdict_event": {"seq": "3", "hash": after.hash}},
        }
        for words, item in cases.items():
            candidate = Scar(parse_rule(HARVEST.replace("20", "20.0")), evidence=(item,))
            assert candidate.id == scar.id  # `< 20.0` is `< 20`
            allowed, reason = led.may_admit(candidate)
            assert not allowed and words in reason, (words, reason)
            with pytest.raises(ResurrectionRefused, match="verifier-backed"):
                led.admit(candidate)
        good = Scar(scar.rule, evidence=(verdict_evidence(after),))
        assert led.may_admit(good)[0]
        led.admit(good)
        assert [s.id for s in led.active_scars()] == [scar.id]
        led.retire(scar.id, "again")
        allowed, reason = led.may_admit(Scar(scar.rule, evidence=(verdict_evidence(after, note="reused"),)))
        assert not allowed and "predates" in reason  # a verdict serves once, before its retirement
        assert led.verify().ok


def test_admit_cli_verdict_option_and_help_document_the_rule(tmp_path):
    path = tmp_path / "c.db"
    assert cli("admit", str(path), HARVEST).exit_code == 0
    result = cli("admit", str(path), HARVEST, "--verdict", "1")
    assert result.exit_code == 2 and "a scar_admitted event" in result.output
    assert cli("admit", str(path), HARVEST, "--verdict", "9").exit_code == 2
    help_text = cli("admit", "--help").output
    assert "verifier-backed" in help_text and "--verdict" in help_text and "20.0" in help_text
    huge = cli("admit", str(path), HARVEST, "--evidence", '{"n": ' + "9" * 5000 + "}")
    assert huge.exit_code == 2 and "--evidence is not valid JSON" in huge.output
    no_traceback(huge)
    nan = cli("admit", str(path), HARVEST, "--evidence", '{"n": NaN}')
    assert nan.exit_code == 2
    no_traceback(nan)


def test_admit_help_describes_the_mask_check_the_code_makes():
    """Issue 41 #8: the help said the mask check applies "when the failure names its action"; the code reads every
    verdict as a failure (q, F) and requires an action of F the rule's mask covers (any other payload backs nothing)."""
    help_text = " ".join(cli("admit", "--help").output.split())
    assert "when the failure names its action" not in help_text
    assert "with an action in F that the rule's mask covers" in help_text
    assert "whose payload is not a failure (q, F) backs nothing" in help_text


def test_writing_through_a_read_only_handle_is_refused(tmp_path):
    path = tmp_path / "ro.db"
    history(path)
    before = _listing(tmp_path)
    with Ledger(path, read_only=True) as led, pytest.raises(LedgerError, match="read-only"):
        led.observe_failure({"x": 1})
    assert _listing(tmp_path) == before


def test_concurrent_verifier_never_sees_a_false_alarm(tmp_path):
    """A verifier reading while another process appends sees a consistent (database, head file) pair."""
    path = tmp_path / "c.db"
    history(path)
    script = tmp_path / "child.py"
    script.write_text(
        "import sys\nfrom scars.agents.runtime.ledger import Ledger\nled = Ledger(sys.argv[1])\n"
        "for i in range(150):\n    led.observe_failure({'i': i})\n"
    )
    child = subprocess.Popen([sys.executable, str(script), str(path)], env={**os.environ, "PYTHONPATH": ROOT})
    checks = 0
    deadline = time.monotonic() + 60
    while child.poll() is None and time.monotonic() < deadline:
        with Ledger(path, read_only=True) as led:
            report = led.verify()
        assert report.ok, report
        checks += 1
    assert child.wait(timeout=60) == 0 and checks >= 1


def test_a_lone_surrogate_in_a_payload_is_a_config_error_and_appends_nothing(tmp_path):
    """Issue 13 #4, runtime side: such a string cannot be hashed; it used to escape as UnicodeEncodeError."""
    with Ledger(tmp_path / "s.db") as led:
        with pytest.raises(ConfigError, match="lone surrogate"):
            led.observe_failure({"action": "move \ud800"})
        with pytest.raises(ConfigError, match="lone surrogate"):
            Scar(parse_rule(CUP), evidence=({"note": "\udfff"},))
        assert led.head()[0] == 0 and led.verify().ok


@pytest.mark.parametrize("keyed", [True, False])
def test_an_edit_of_the_last_event_under_an_open_writer_stops_its_next_append(tmp_path, keyed):
    """Issue 25 #5: the writer's per-group check compared the stored hash column with the head and never
    recomputed it, so an edit of the last event's payload (hash column left alone) passed the next append. The
    writer's own open handle now refuses it, and nothing is appended."""
    path = tmp_path / "l.db"
    with Ledger(path, clock=clock(), keyed=keyed) as led:
        led.admit(Scar(parse_rule(CUP), evidence=({"f": "cup"},)))
        led.observe_failure({"step": 3})
        raw(
            path,
            "UPDATE events SET payload = ? WHERE seq = 2",
            params=(json.dumps({"context": {"step": 4}}),),
        )
        with pytest.raises(LedgerIntegrityError, match="event 2's content does not match its hash"):
            led.observe_failure({"step": 5})
        assert led.verify().first_bad_seq == 2
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 2
    conn.close()
