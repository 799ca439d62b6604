"""The audit ledger (seed 000 §3; SPEC §1, §5): lifecycle, no resurrection, bitemporal projection, tampering."""

from __future__ import annotations

import itertools
import sqlite3

import pytest

from scars.agents.runtime import Scar, Scope
from scars.agents.runtime.events import event_body as _body
from scars.agents.runtime.ledger import (
    GENESIS_HASH,
    Ledger,
    LifecycleError,
    ResurrectionRefused,
    event_hash,
    ledger_files,
    verdict_evidence,
)
from scars.synthesis.dsl import Action, parse_rule
from scars.synthesis.errors import ConfigError, LedgerError, LedgerIntegrityError
from support.failures import failure_of

CUP_RULE = 'if action.obj_type == "cup" and action.recep == "sinkbasin 1" then forbid_env_action("move")'
HARVEST_RULE = 'if pool_resource_level < 30 and tool_is("harvest") then forbid_tool_call("harvest")'


def stepping_clock(start: int = 1_000, step: int = 10):
    counter = itertools.count(start, step)
    return lambda: next(counter)


def scar(text: str = CUP_RULE, evidence_tag: str = "e1", **scope) -> Scar:
    return Scar(parse_rule(text), evidence=({"fragment": evidence_tag},), scope=Scope(**scope))


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "agent.db", clock=stepping_clock()) as led:
        yield led


def fill(led: Ledger) -> list[Scar]:
    """A small realistic history: 2 failures, 2 admissions, a retirement, a merge decision, a temporary mask."""
    cup, harvest = scar(), scar(HARVEST_RULE, "h1", env_version="v1")
    led.observe_failure({"q": {"step": 3}, "F": ["move cup 1 to sinkbasin 1"]})
    led.admit(cup)
    led.observe_failure({"q": {"pool_resource_level": 20}, "F": ["harvest 10"]})
    led.admit(harvest)
    led.record("merge_decision", {"active": [cup.id, harvest.id], "objective": 12.5})
    led.set_temp_mask(parse_rule('if step > 5 then forbid_env_action("clean")'), until_step=40)
    led.retire(harvest.id, "env_version v1 -> v2")
    return [cup, harvest]


def test_lifecycle_and_projection(ledger):
    cup, harvest = fill(ledger)
    assert ledger.verify().ok and ledger.verify().count == 7
    assert ledger.active_scars() == (cup,)
    assert [e.type for e in ledger.events()] == [
        "failure_observed",
        "scar_admitted",
        "failure_observed",
        "scar_admitted",
        "merge_decision",
        "temp_mask_set",
        "scar_retired",
    ]
    plane = ledger.control_plane()
    assert plane.active_ids == (cup.id,)
    assert len(plane.temporary_mask_ids) == 1
    assert plane.masked({"step": 6}, [Action.env("clean")], step=39) == [True]
    ledger.lift_temp_mask(plane.temporary_mask_ids[0], "scar admitted")
    assert ledger.control_plane().temporary_mask_ids == ()
    # retiring is not forgetting: the evidence stays in the ledger
    admitted = [e for e in ledger.events() if e.type == "scar_admitted" and e.subject == harvest.id]
    assert admitted[0].payload["evidence"] == [{"fragment": "h1"}]


def test_projection_is_deterministic_across_reopen(tmp_path):
    path = tmp_path / "a.db"
    with Ledger(path) as led:
        fill(led)
        first = led.active_scars()
    with Ledger(path) as led:
        assert led.active_scars() == first
        assert led.verify().ok


def test_transaction_time_never_decreases_and_chain_links(ledger):
    times = iter([500, 400, 900, 100])
    ledger._clock = lambda: next(times)
    for i in range(4):
        ledger.observe_failure({"i": i})
    events = ledger.events()
    assert [e.tx_time for e in events] == [500, 500, 900, 900]
    assert events[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(events))


def test_no_resurrection_without_new_evidence(ledger):
    cup = scar()
    ledger.admit(cup)
    with pytest.raises(LifecycleError, match="already active"):
        ledger.admit(cup)
    ledger.retire(cup.id, "scope expired")
    with pytest.raises(ResurrectionRefused, match="retired"):
        ledger.admit(cup)
    with pytest.raises(ResurrectionRefused):  # evidence reordered / repeated is not new
        ledger.admit(Scar(cup.rule, evidence=cup.evidence * 2))
    with pytest.raises(ResurrectionRefused, match="free JSON"):  # made-up "new evidence" (issue 13)
        ledger.admit(Scar(cup.rule, evidence=({"fragment": "e2"},)))
    assert ledger.active_scars() == ()
    verdict = ledger.observe_failure(failure_of("env", "move", step=9))
    renewed = Scar(cup.rule, evidence=(verdict_evidence(verdict, fragment="e2"),))
    assert ledger.may_admit(renewed)[0]
    event = ledger.admit(renewed)
    assert event.type == "scar_admitted" and ledger.active_scars() == (renewed,)
    counter = verdict_evidence(verdict, note="move cup 1 to sinkbasin 1 was safe")
    ledger.revoke(renewed.id, [counter], reason="verified safe")
    with pytest.raises(ResurrectionRefused, match="revoked"):
        ledger.admit(renewed)
    with pytest.raises(ResurrectionRefused):
        ledger.admit(Scar(cup.rule, evidence=({"fragment": "e1"},)))  # the first evidence is not new either
    # nor its own counter-evidence
    with pytest.raises(ResurrectionRefused, match="counter-evidence that revoked"):
        ledger.admit(Scar(cup.rule, evidence=(counter,)))


def test_active_scar_accumulates_new_evidence_without_a_second_activation(ledger):
    cup = scar()
    ledger.admit(cup)
    more = Scar(cup.rule, evidence=({"fragment": "e1"}, {"fragment": "e3"}))
    ledger.admit(more)
    assert ledger.active_scars() == (more,)


def test_lifecycle_preconditions(ledger):
    with pytest.raises(LifecycleError, match="never admitted"):
        ledger.retire("0123456789abcdef", "x")
    cup = scar()
    ledger.admit(cup)
    ledger.revoke(cup.id, {"counter": 1})
    with pytest.raises(LifecycleError, match="already revoked"):
        ledger.retire(cup.id, "x")
    with pytest.raises(ConfigError, match="counter-evidence"):
        ledger.revoke(cup.id, [])
    with pytest.raises(LifecycleError, match="not set"):
        ledger.lift_temp_mask("tmp:nope")
    with pytest.raises(ConfigError, match="lifecycle event"):
        ledger.record("scar_admitted", {"id": "forged"})
    with pytest.raises(ConfigError, match="snake_case"):
        ledger.record("Bad Type", {})
    with pytest.raises(ConfigError, match="canonical-JSON"):
        ledger.record("merge_decision", {"objective": float("inf")})
    # refused operations append nothing
    assert [e.type for e in ledger.events()] == ["scar_admitted", "scar_revoked"]


@pytest.mark.parametrize("event_type", ["scar_admitted\n", "merge_decision\n", "failure_observed\n", "ok\n"])
def test_event_types_are_matched_whole(ledger, event_type):
    """Issue 41 #3: the snake_case check's ``$`` matched before a trailing newline, so ``"scar_admitted\\n"`` was
    recorded (and ``scars ledger show`` listed it as ``scar_admitted``). The name is matched whole."""
    with pytest.raises(ConfigError, match="snake_case"):
        ledger.record(event_type, {"id": "forged"})
    assert ledger.events() == ()


def test_a_stored_type_with_a_trailing_newline_fails_verification(tmp_path):
    path = tmp_path / "agent.db"
    with Ledger(path, keyed=False) as led:
        led.record("merge_decision", {"x": 1})
    with sqlite3.connect(path) as db:  # the type edited in place, its hash recomputed: only the name is wrong
        row = db.execute(
            "SELECT seq, subject, payload, tx_time, valid_from, valid_to, prev_hash FROM events"
        ).fetchone()
        seq, subject, payload, tx, vf, vt, prev = row
        digest = event_hash(prev, _body(seq, "scar_admitted\n", subject, payload, tx, vf, vt, prev))
        db.execute("UPDATE events SET type = ?, hash = ? WHERE seq = 1", ("scar_admitted\n", digest))
        db.execute("UPDATE head SET last_hash = ?", (digest,))
    (tmp_path / "agent.db.head").unlink()
    with Ledger(path, read_only=True) as led:
        report = led.verify()
    assert not report.ok and report.first_bad_seq == 1 and "invalid type" in report.reason, report


def test_a_verdict_reference_is_a_whole_hash():
    from scars.agents.runtime.events import verdict_ref

    digest = "a" * 64
    assert verdict_ref({"verdict_event": {"seq": 1, "hash": digest}}) == (1, digest)
    assert verdict_ref({"verdict_event": {"seq": 1, "hash": digest + "\n"}}) is None


def test_bitemporal_queries(ledger):
    cup, harvest = scar(), scar(HARVEST_RULE, "h1")
    ledger.admit(cup, valid_from=100)  # tx 1000
    ledger.admit(harvest, valid_from=150, valid_to=400)  # tx 1010
    ledger.retire(cup.id, "expired", valid_from=300)  # tx 1020
    assert ledger.active_scars(valid_at=50) == ()
    assert ledger.active_scars(valid_at=120) == (cup,)
    assert set(ledger.active_scars(valid_at=200)) == {cup, harvest}
    assert ledger.active_scars(valid_at=350) == (harvest,)
    assert ledger.active_scars(valid_at=400) == ()
    # transaction time: what the ledger knew then
    assert ledger.active_scars(as_of_tx=1000) == (cup,)
    assert set(ledger.active_scars(as_of_tx=1010)) == {cup, harvest}
    assert ledger.active_scars() == (harvest,)
    with pytest.raises(ConfigError, match="valid_to"):
        ledger.admit(scar(evidence_tag="z"), valid_from=10, valid_to=5)


def test_not_a_ledger_file_is_a_ledger_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(LedgerError, match="not a scars ledger"):
        Ledger(path)


# ---------------------------------------------------------------------------------------------- tampering
def tampered(tmp_path, sql: str, params: tuple = ()) -> Ledger:
    path = tmp_path / "t.db"
    with Ledger(path, clock=stepping_clock()) as led:
        fill(led)
    raw = sqlite3.connect(path)
    raw.executescript(sql) if not params else raw.execute(sql, params)
    raw.commit()
    raw.close()
    return Ledger(path)


@pytest.mark.parametrize(
    ("sql", "first_bad", "word"),
    [
        ("UPDATE events SET payload = replace(payload, 'e1', 'e9') WHERE seq = 2", 2, "modified"),
        ("UPDATE events SET tx_time = tx_time + 1 WHERE seq = 4", 4, "modified"),
        ("UPDATE events SET type = 'scar_revoked' WHERE seq = 7", 7, "modified"),
        ("DELETE FROM events WHERE seq = 3", 3, "deleted"),
        ("DELETE FROM events WHERE seq = 7", 7, "truncated"),
        ("DELETE FROM events WHERE seq >= 5", 5, "truncated"),
        (
            # reorder: swap the contents of events 3 and 4, keeping their sequence numbers
            "UPDATE events SET seq = -3 WHERE seq = 3; UPDATE events SET seq = 3 WHERE seq = 4; "
            "UPDATE events SET seq = 4 WHERE seq = -3;",
            3,
            "reordered",
        ),
        (
            # inject in the middle: shift the tail up by one and put a copy of event 2 at seq 3
            "UPDATE events SET seq = seq + 100 WHERE seq >= 3; UPDATE events SET seq = seq - 99 WHERE seq >= 103; "
            "INSERT INTO events SELECT 3, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, hash, mac "
            "FROM events WHERE seq = 2;",
            3,
            "injected",
        ),
        ("UPDATE head SET count = 6", 7, "injected"),
        ("UPDATE head SET last_hash = 'ff'", 7, "head commits"),
    ],
    ids=[
        "modify-payload",
        "modify-tx",
        "modify-type",
        "delete",
        "delete-last",
        "truncate",
        "reorder",
        "inject-mid",
        "head-count",
        "head-hash",
    ],
)
def test_tampering_is_detected_at_the_first_bad_event_and_reads_fail_closed(tmp_path, sql, first_bad, word):
    with tampered(tmp_path, sql) as led:
        report = led.verify()
        assert not report.ok
        assert report.first_bad_seq == first_bad, report
        assert word in report.reason
        with pytest.raises(LedgerIntegrityError, match=f"event {first_bad}"):
            led.active_scars()
        with pytest.raises(LedgerIntegrityError):
            led.control_plane()


def test_injection_after_the_head_with_a_valid_looking_hash_is_detected(tmp_path):
    path = tmp_path / "i.db"
    with Ledger(path, clock=stepping_clock(), keyed=False) as led:  # the chain and head alone (no MACs)
        fill(led)
        count, last = led.head()
    forged_payload = '{"scar_id":"x"}'
    body = _body(count + 1, "merge_decision", None, forged_payload, 99_999, 99_999, None, last)
    raw = sqlite3.connect(path)
    raw.execute(
        "INSERT INTO events (seq, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            count + 1,
            "merge_decision",
            None,
            forged_payload,
            99_999,
            99_999,
            None,
            last,
            event_hash(last, body),
        ),
    )
    raw.commit()
    raw.close()
    with Ledger(path) as led:
        report = led.verify()
        assert (report.ok, report.first_bad_seq) == (False, count + 1)
        assert "injected" in report.reason
        with pytest.raises(LedgerIntegrityError, match="refusing to append"):
            led.observe_failure({"after": "tamper"})


def test_a_rewritten_event_with_a_recomputed_hash_breaks_the_next_link(tmp_path):
    path = tmp_path / "r.db"
    with Ledger(path, clock=stepping_clock(), keyed=False) as led:  # the chain alone (no MACs)
        fill(led)
    raw = sqlite3.connect(path)
    seq, type_, subject, payload, tx, vf, vt, prev, _ = raw.execute(
        "SELECT seq, type, subject, payload, tx_time, valid_from, valid_to, prev_hash, hash FROM events WHERE seq = 2"
    ).fetchone()
    payload = payload.replace("e1", "e9")
    raw.execute(
        "UPDATE events SET payload = ?, hash = ? WHERE seq = 2",
        (payload, event_hash(prev, _body(seq, type_, subject, payload, tx, vf, vt, prev))),
    )
    raw.commit()
    raw.close()
    with Ledger(path) as led:
        report = led.verify()
        assert (report.ok, report.first_bad_seq) == (False, 3)
        assert "does not link" in report.reason


def test_external_anchor_detects_a_consistent_rewrite(tmp_path):
    path = tmp_path / "anchor.db"
    with Ledger(path, clock=stepping_clock()) as led:
        fill(led)
        anchor = led.head()
    with Ledger(path) as led:
        assert led.verify(anchor=anchor).ok
    # rewrite the whole ledger consistently with different content (every file of it, key included): only the
    # anchor can tell
    for file in ledger_files(path):
        file.unlink(missing_ok=True)
    with Ledger(path, clock=stepping_clock(start=5)) as led:
        fill(led)
        assert led.verify().ok
        assert not led.verify(anchor=anchor).ok


def test_a_verified_prefix_is_not_recomputed_but_any_change_to_it_is_still_caught(ledger, monkeypatch):
    """Verification recomputes only the events after the prefix the last verification passed, when that prefix is
    byte for byte what it judged (issue 39: the in-run check at every episode end grew with the whole history);
    a prefix that changed in any column is judged again from the genesis."""
    import scars.agents.runtime.ledger as ledger_module

    fill(ledger)
    assert ledger.verify().ok
    hashed: list[int] = []
    real = ledger_module.event_hash
    monkeypatch.setattr(ledger_module, "event_hash", lambda prev, body: hashed.append(1) or real(prev, body))
    ledger.record("merge_decision", {"active": [], "objective": 1.0})
    ledger.flush()
    hashed.clear()
    report = ledger.verify()
    assert report.ok and report.count == 8
    assert len(hashed) == 1  # the new event only
    ledger.flush()
    with sqlite3.connect(ledger.path) as db:  # a payload edited in place, its stored hash left as it was
        db.execute("UPDATE events SET payload = ? WHERE seq = 2", ('{"x":1}',))
    hashed.clear()
    report = ledger.verify()
    assert not report.ok and report.first_bad_seq == 2
    assert len(hashed) >= 1


def test_a_verification_reads_only_the_rows_after_its_verified_prefix_and_any_other_change_is_read_again(
    ledger,
):
    """Issue 39: the in-run check at every episode end read the whole history to compare it with the prefix it had
    judged. It now reads only the rows after that prefix while SQLite says nothing but this handle's own appends
    changed the database (``PRAGMA data_version``: no other connection committed; ``total_changes``: no other
    statement through this connection, nor a trigger, changed a row); any other change reads and judges it all."""
    fill(ledger)
    for i in range(100):
        ledger.record("merge_decision", {"i": i})
    assert ledger.verify().ok
    decoded: list[bytes] = []
    ledger._db.text_factory = lambda raw: decoded.append(raw) or raw.decode("utf-8", "replace")

    def verify_counting() -> tuple:
        decoded.clear()
        report = ledger.verify()
        return report, len(decoded)

    ledger.record("merge_decision", {"i": "new"})
    report, texts = verify_counting()
    assert report.ok and report.count == 108
    assert (
        texts < 40
    )  # the new row, the head row, the head table's columns; not the 107 rows before (5 or 6 texts each)
    # an edit through the ledger's own connection (not one of its appends): read again, caught
    (original,) = ledger._db.execute("SELECT payload FROM events WHERE seq = 2").fetchone()
    ledger._db.execute("UPDATE events SET payload = ? WHERE seq = 2", ('{"x":1}',))
    report, texts = verify_counting()
    assert (report.ok, report.first_bad_seq) == (False, 2) and texts > 500

    # a trigger another connection plants changes nothing itself (read again, intact); the ledger's own next
    # append fires it: that append's change count is off by the trigger's, so everything is read again, caught
    ledger._db.execute("UPDATE events SET payload = ? WHERE seq = 2", (original,))
    with sqlite3.connect(ledger.path) as db:
        db.execute(
            "CREATE TRIGGER rewrite AFTER INSERT ON events BEGIN "
            "UPDATE events SET payload = '{\"x\":1}' WHERE seq = 3; END"
        )
    assert verify_counting()[0].ok
    ledger.record("merge_decision", {"active": [], "objective": 1.0})
    report, texts = verify_counting()
    assert (report.ok, report.first_bad_seq) == (False, 3) and texts > 500
