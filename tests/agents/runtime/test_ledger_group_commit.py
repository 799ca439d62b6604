"""Group commit (``Ledger.group``, ``SchemaStore.group``): several appends in one SQLite transaction, with the same
chain, the same checks and an anchor that never names an event that is not on disk.

The crash side (a SIGKILL at every stage of a group's commit) is in ``tests/agents/runtime/test_ledger_crash.py``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scars.agents.runtime import Scar
from scars.agents.runtime.ledger import Ledger, LifecycleError, ledger_files
from scars.agents.runtime.store import SchemaStore, plane_state, replay
from scars.experiments.config import Tier1Config
from scars.experiments.tier1 import run_tier1
from scars.synthesis.dsl import parse_rule
from scars.synthesis.errors import LedgerError
from scars.synthesis.merge import MergeResult

CUP = 'if action.obj_type == "cup" then forbid_env_action("move")'
MUG = 'if action.obj_type == "mug" then forbid_env_action("move")'


def clock():
    counter = itertools.count(1_000, 7)
    return lambda: next(counter)


def history(led: Ledger) -> None:
    led.observe_failure({"q": {"step": 1}, "F": ["move cup 1"]})
    led.admit(Scar(parse_rule(CUP), evidence=({"fragment": 1},)))
    led.set_temp_mask(parse_rule(MUG), until_step=9)
    led.record("merge_decision", {"active": ["x"], "objective": 1.5})
    led.observe_failure({"q": {"step": 2}, "F": ["move mug 1"]})


def stored(path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT * FROM events ORDER BY seq").fetchall()


def committed_count(path) -> int:
    """What another connection sees: only committed events."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]


def test_a_group_writes_the_same_rows_in_the_same_order_as_one_append_at_a_time(tmp_path):
    one, grouped = tmp_path / "one.db", tmp_path / "grouped.db"
    (tmp_path / "k").write_text("ab" * 32 + "\n")  # one key for both, so the MACs are comparable too
    with Ledger(one, clock=clock(), key_file=tmp_path / "k") as led:
        history(led)
    with Ledger(grouped, clock=clock(), key_file=tmp_path / "k") as led:
        with led.group():
            led.observe_failure({"q": {"step": 1}, "F": ["move cup 1"]})
            with led.group():  # nested: the outermost group commits
                led.admit(Scar(parse_rule(CUP), evidence=({"fragment": 1},)))
                led.set_temp_mask(parse_rule(MUG), until_step=9)
        with led.group():
            led.record("merge_decision", {"active": ["x"], "objective": 1.5})
            led.observe_failure({"q": {"step": 2}, "F": ["move mug 1"]})
        assert led.verify().ok and led.verify().count == 5
    assert stored(grouped) == stored(
        one
    )  # seq, payload, times, hashes and MACs identical: batching changes nothing
    assert [r[0] for r in stored(grouped)] == [1, 2, 3, 4, 5]


def test_a_group_is_invisible_to_other_connections_until_it_commits_and_commits_once(tmp_path, monkeypatch):
    path = tmp_path / "g.db"
    writes = []
    original = Ledger._write_head_file

    def counting(self, committed, pending, **kwargs):
        writes.append((committed[0], None if pending is None else pending[0]))
        return original(self, committed, pending, **kwargs)

    with Ledger(path) as led:
        led.observe_failure({"i": 0})
        monkeypatch.setattr(Ledger, "_write_head_file", counting)
        with led.group():
            for i in range(1, 4):
                led.observe_failure({"i": i})
            assert len(led.events()) == 4  # the writer reads its own group
            assert committed_count(path) == 1  # nobody else sees an uncommitted event
            assert writes == []  # and the head file has not moved
        assert committed_count(path) == 4
        assert writes == [
            (1, 4),
            (4, None),
        ]  # one pending write before COMMIT, one after: per group, not per event
        assert led.verify().ok


def test_reads_that_hand_out_the_head_commit_the_group_first(tmp_path):
    path = tmp_path / "h.db"
    with Ledger(path) as led, led.group():
        led.observe_failure({"i": 1})
        led.observe_failure({"i": 2})
        anchor = led.anchor_text()  # an anchor handed out names durable events only
        assert anchor.startswith("2:") and committed_count(path) == 2
        led.observe_failure({"i": 3})
        assert committed_count(path) == 2
        report = led.verify()  # verifies what is on disk: commits the pending event first
        assert report.ok and report.count == 3 and committed_count(path) == 3
        led.observe_failure({"i": 4})
    assert committed_count(path) == 4
    with Ledger(path, read_only=True) as audit:
        assert audit.verify(anchor=anchor).ok


def test_a_refused_append_inside_a_group_leaves_the_groups_other_events(tmp_path):
    path = tmp_path / "r.db"
    cup = Scar(parse_rule(CUP), evidence=({"fragment": 1},))
    with Ledger(path) as led:
        with led.group():
            led.admit(cup)
            with pytest.raises(LifecycleError):
                led.admit(cup)  # already active, no new evidence
            led.observe_failure({"i": 1})
        assert [(e.seq, e.type) for e in led.events()] == [(1, "scar_admitted"), (2, "failure_observed")]
        assert led.verify().ok


def test_an_exception_in_the_block_still_commits_what_was_appended(tmp_path):
    path = tmp_path / "x.db"
    with Ledger(path) as led:
        with pytest.raises(RuntimeError), led.group():
            led.observe_failure({"i": 1})
            raise RuntimeError("the caller failed after appending")
        assert committed_count(path) == 1 and led.verify().ok


def test_a_failed_commit_loses_the_group_refuses_further_appends_and_the_ledger_still_verifies(
    tmp_path, monkeypatch
):
    path = tmp_path / "f.db"
    with Ledger(path) as led:
        led.observe_failure({"i": 0})

        def disk_full(self, committed, pending, **kwargs):
            raise LedgerError("cannot write the head file: No space left on device")

        monkeypatch.setattr(Ledger, "_write_head_file", disk_full)
        with pytest.raises(LedgerError, match="could not write the head file.*2 event"), led.group():
            led.observe_failure({"i": 1})
            led.observe_failure({"i": 2})
        monkeypatch.undo()
        with pytest.raises(LedgerError, match="refuses further appends"):
            led.observe_failure({"i": 3})
    with Ledger(path, read_only=True) as audit:
        report = audit.verify()
    assert report.ok and report.count == 1  # the group is absent, whole


def test_tampering_with_a_committed_group_is_caught(tmp_path):
    path = tmp_path / "t.db"
    with Ledger(path) as led, led.group():
        history(led)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET payload = replace(payload, 'cup', 'mug') WHERE seq = 2")
    with Ledger(path, read_only=True) as audit:
        report = audit.verify()
    assert not report.ok and report.first_bad_seq == 2 and "modified" in report.reason


@pytest.mark.parametrize("deleted", ["last event", "whole last group"])
def test_removing_events_of_the_last_group_is_caught(tmp_path, deleted):
    path = tmp_path / "d.db"
    with Ledger(path) as led:
        led.observe_failure({"i": 0})
        with led.group():
            history(led)
    with sqlite3.connect(path) as conn:
        cut = 6 if deleted == "last event" else 2
        conn.execute("DELETE FROM events WHERE seq >= ?", (cut,))
        conn.execute(
            "UPDATE head SET count = ?, last_hash = (SELECT hash FROM events WHERE seq = ?)",
            (cut - 1, cut - 1),
        )
    with Ledger(path, read_only=True) as audit:
        report = audit.verify()
    assert not report.ok and "truncated" in report.reason


def test_an_anchor_taken_after_a_group_catches_a_roll_back_to_before_it(tmp_path):
    path, before = tmp_path / "a.db", tmp_path / "before"
    before.mkdir()
    with Ledger(path) as led:
        led.observe_failure({"i": 0})
    for file in ledger_files(path):  # a genuine earlier state of every file
        if file.exists():
            shutil.copy2(file, before / file.name)
    with Ledger(path) as led:
        with led.group():
            history(led)
        anchor = led.anchor_text()
    for file in ledger_files(path):
        file.unlink(missing_ok=True)
    for file in before.iterdir():
        shutil.copy2(file, tmp_path / file.name)
    with Ledger(path, read_only=True) as audit:
        assert audit.verify().ok  # a consistent roll-back of every file: only an external anchor sees it
        report = audit.verify(anchor=anchor)
    assert not report.ok and "below the external anchor" in report.reason


def test_a_store_command_with_several_events_is_one_group_and_the_plane_stays_the_fold(tmp_path, monkeypatch):
    path = tmp_path / "s.db"
    with SchemaStore(path) as store:
        new = {
            s.id: s
            for s in (
                Scar(parse_rule(CUP), evidence=({"fragment": 1},)),
                Scar(parse_rule(MUG), evidence=({"fragment": 2},)),
            )
        }
        result = MergeResult(frozenset(new), frozenset(), frozenset(), 2.0, True, "cp-sat", 0.01, frozenset())
        pending = []
        original = Ledger._write_head_file

        def counting(self, committed, pending_, **kwargs):
            pending.append(pending_)
            return original(self, committed, pending_, **kwargs)

        monkeypatch.setattr(Ledger, "_write_head_file", counting)
        events = store.apply_merge(result, new)
        assert [e.type for e in events] == ["merge_decision", "scar_admitted", "scar_admitted"]
        assert len(pending) == 2 and pending[0][0] == 3  # one group: the pending write names all three
        assert committed_count(path) == 3
        assert plane_state(replay(store.ledger.events())) == plane_state(store.plane)
        with store.group():
            store.retire(sorted(new)[0], reason="by hand")
            # the version names committed events only (a decision logged with it names events on disk)
            assert store.version == 3 and committed_count(path) == 3 and store.ledger.committed == 3
        assert store.version == 4 and committed_count(path) == 4 and store.consistent() and store.verify()


def test_the_scars_agent_commits_each_steps_events_before_the_next_decision(tmp_path):
    seen = []

    def audit(agent, row):  # runs after observe(): the step's group must be on disk for any other reader
        on_disk = committed_count(agent.store.path)
        assert on_disk == agent.store.version, (
            f"t={row['t']}: {on_disk} on disk, {agent.store.version} applied"
        )
        seen.append(on_disk)

    cfg = Tier1Config(method="scars", episodes=6, seed=3, schedule="paper", search_iterations=40)
    summary = run_tier1(cfg, tmp_path, on_step=audit).summary
    assert seen and seen[-1] >= 3 and summary["ledger_verified"]


def test_a_verifier_reading_while_another_process_writes_groups_never_sees_a_false_alarm(tmp_path):
    root = str(Path(__file__).resolve().parents[3])
    path = tmp_path / "c.db"
    with Ledger(path) as led:
        led.observe_failure({"i": -1})
    script = tmp_path / "child.py"
    script.write_text(
        "import sys\nfrom scars.agents.runtime.ledger import Ledger\nled = Ledger(sys.argv[1])\n"
        "for g in range(60):\n    with led.group():\n"
        "        for p in range(3):\n            led.observe_failure({'g': g, 'p': p})\n"
    )
    child = subprocess.Popen([sys.executable, str(script), str(path)], env={**os.environ, "PYTHONPATH": root})
    counts = []
    while child.poll() is None:
        with Ledger(path, read_only=True) as audit:
            report = audit.verify()
        assert report.ok, report
        assert (report.count - 1) % 3 == 0  # a verifier sees whole groups only
        counts.append(report.count)
    assert child.wait(timeout=60) == 0 and counts
    with Ledger(path, read_only=True) as audit:
        assert audit.verify().count == 181
