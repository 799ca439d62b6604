"""A process SIGKILLed in the middle of admissions leaves a valid ledger (seed 000 §3.1; issue 2).

A child process admits scars in a loop and prints each id after its transaction commits; the parent kills it
with SIGKILL after a random delay, reopens the ledger and checks: the chain verifies, every admission the child
reported is there in full, at most one more (committed but not yet reported) is there, and nothing half-written
exists. Repeated several times on the same file, so later rounds append to a ledger that survived a kill.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from scars.agents.runtime import Scar
from scars.agents.runtime.ledger import GENESIS_HASH, Ledger

CHILD = textwrap.dedent(
    """
    import sys
    from scars.agents.runtime.ledger import Ledger
    from scars.agents.runtime import Scar, Provenance
    from scars.synthesis.dsl import parse_rule

    path, start = sys.argv[1], int(sys.argv[2])
    ledger = Ledger(path)
    print("ready", flush=True)
    i = start
    while True:
        rule = parse_rule(f'if step == {i} and action.obj_type == "cup" then forbid_env_action("move")')
        scar = Scar(rule, evidence=({"round_item": i, "padding": "x" * 2000},), provenance=Provenance(seed=i))
        ledger.observe_failure({"i": i})
        ledger.admit(scar)
        print(scar.id, flush=True)
        i += 1
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_sigkill_during_admissions_leaves_each_admission_fully_there_or_absent(tmp_path):
    rng = np.random.default_rng(20240611)
    path = tmp_path / "crash.db"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    # the child imports this checkout's code (not whatever an editable install points at)
    root = str(Path(__file__).resolve().parents[3])
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))),
    }
    reported: list[str] = []
    start = 0
    for _ in range(5):
        child = subprocess.Popen(
            [sys.executable, str(script), str(path), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.stderr.read() if child.stderr else ""
        time.sleep(float(rng.uniform(0.05, 0.35)))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL
        this_round = [line for line in out.split() if line]
        reported.extend(this_round)

        with Ledger(path) as led:
            report = led.verify()
            assert report.ok, report
            active = {s.id: s for s in led.active_scars()}
            admitted = [e for e in led.events() if e.type == "scar_admitted"]
            # every reported admission is durable; at most one more committed before the kill landed
            assert set(reported) <= set(active)
            assert len(active) - len(reported) in (0, 1)
            # each admission event is complete: its payload rebuilds the scar it is about
            for event in admitted:
                scar = Scar.from_json(event.payload)
                assert scar.id == event.subject and scar.evidence[0]["padding"] == "x" * 2000
            start = max(e.payload["evidence"][0]["round_item"] for e in admitted) + 1 if admitted else start
            reported = sorted(active)  # the next round continues from what is actually there
    assert len(reported) > 5  # the child really got work done between kills


# ---------------------------------------------------------------------------------------------- group commit
GROUP_CHILD = textwrap.dedent(
    """
    import sys
    from scars.agents.runtime.ledger import Ledger

    path, start = sys.argv[1], int(sys.argv[2])
    ledger = Ledger(path)
    print("ready", flush=True)
    i = start
    while True:
        with ledger.group():  # three events, one transaction: all there or none
            for part in range(3):
                ledger.observe_failure({"group": i, "part": part, "padding": "x" * 3000})
        print(i, flush=True)
        i += 1
    """
)


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[3])
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))),
    }


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_sigkill_during_group_commits_leaves_every_group_whole_or_absent(tmp_path):
    rng = np.random.default_rng(7)
    path = tmp_path / "groups.db"
    script = tmp_path / "child.py"
    script.write_text(GROUP_CHILD)
    reported: list[int] = []
    start = 0
    for _ in range(4):
        child = subprocess.Popen(
            [sys.executable, str(script), str(path), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_env(),
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.stderr.read() if child.stderr else ""
        time.sleep(float(rng.uniform(0.05, 0.3)))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        reported.extend(int(line) for line in out.split() if line)
        with Ledger(path, read_only=True) as audit:
            report = audit.verify()
            assert report.ok, report
            events = audit.events()
        groups = [(e.payload["group"], e.payload["part"]) for e in events]
        # whole groups, in order, no event dropped or reordered inside a group
        assert len(groups) % 3 == 0
        assert groups == [(g, p) for g in sorted({g for g, _ in groups}) for p in range(3)]
        present = {g for g, _ in groups}
        assert set(reported) <= present and len(present - set(reported)) <= 1  # at most the one in flight
        start = max(present) + 1 if present else start
        reported = sorted(present)
    assert len(reported) > 5


# A child that kills itself at one stage of its second group's commit: while appending (nothing committed yet),
# after the head file names the group as pending, right after COMMIT, and half-way through the head-file update.
STAGE_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from scars.agents.runtime.ledger import Ledger
    from scars.agents.runtime import ledger as module

    path, stage = sys.argv[1], sys.argv[2]
    led = Ledger(path)
    with led.group():
        for i in range(3):
            led.observe_failure({"group": 0, "part": i})

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    write, replace, append = module.Ledger._write_head_file, module.os.replace, module.Ledger._append

    def write_then_die(self, committed, pending, **kw):
        if stage == "before-commit" and pending is not None:
            write(self, committed, pending, **kw)
            die()
        if stage == "after-commit" and pending is None:
            die()  # COMMIT has run; the head file still names the group as pending
        return write(self, committed, pending, **kw)

    def replace_then_die(src, dst):
        if stage == "mid-head-update" and not led._db.in_transaction:
            die()  # the new head file is written and fsynced, not yet renamed over
        return replace(src, dst)

    def append_then_die(self, *a, **kw):
        event = append(self, *a, **kw)
        if stage == "mid-group" and event.seq == 5:
            die()
        return event

    module.Ledger._write_head_file = write_then_die
    module.os.replace = replace_then_die
    module.Ledger._append = append_then_die
    with led.group():
        for i in range(3):
            led.observe_failure({"group": 1, "part": i})
    print("not killed", flush=True)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
@pytest.mark.parametrize(
    ("stage", "survives"),
    [("mid-group", False), ("before-commit", False), ("after-commit", True), ("mid-head-update", True)],
)
def test_a_kill_at_each_stage_of_a_group_commit_verifies_and_a_later_truncation_is_caught(
    tmp_path, stage, survives
):
    path = tmp_path / "stage.db"
    script = tmp_path / "child.py"
    script.write_text(STAGE_CHILD)
    child = subprocess.run(
        [sys.executable, str(script), str(path), stage], capture_output=True, text=True, env=_child_env()
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    expected = 6 if survives else 3
    with Ledger(path, read_only=True) as audit:  # the audit changes nothing, and accepts what is there
        report = audit.verify()
        assert report.ok and report.count == expected, report
        assert [e.payload["group"] for e in audit.events()] == [0] * 3 + [1] * 3 * survives
    # the next writer settles the head file, so removing the last group is now caught like any truncation
    with Ledger(path) as led:
        assert led.verify().ok
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events WHERE seq > ?", (expected - 3,))
        conn.execute(
            "UPDATE head SET count = ?, last_hash = COALESCE((SELECT hash FROM events WHERE seq = ?), ?)",
            (expected - 3, expected - 3, GENESIS_HASH),
        )
    with Ledger(path, read_only=True) as audit:
        report = audit.verify()
    assert not report.ok and "truncated" in report.reason
