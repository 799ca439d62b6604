"""Audits create and change nothing (issue 28, item 7) — also beside the ``-wal`` and ``-shm`` a killed writer left —
and a killed writer's half-written head file is cleaned by the next writer."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner

from scars.agents.runtime.ledger import Ledger
from scars.experiments.cli import main

ROOT = Path(__file__).resolve().parents[3]


def folder_state(folder: Path) -> dict[str, tuple[int, str, int]]:
    """Every file of the folder: (size, sha256, mtime in ns)."""
    return {
        p.name: (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
    }


def killed_writer(path: Path, events: int = 5) -> None:
    """A writer process that commits ``events`` failures and is killed with SIGKILL (its -wal and -shm stay)."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from scars.agents.runtime.ledger import Ledger
        led = Ledger({str(path)!r})
        for i in range({events}):
            led.observe_failure({{"i": i}})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, timeout=120)
    assert done.returncode == -signal.SIGKILL


def test_verify_and_show_beside_a_killed_writers_wal_create_and_change_nothing(tmp_path):
    path = tmp_path / "ledger.sqlite"
    killed_writer(path)
    assert Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
    before = folder_state(tmp_path)
    runner = CliRunner()
    verified = runner.invoke(main, ["ledger", "verify", str(path)])
    assert verified.exit_code == 0 and "intact: 5 events" in verified.output, verified.output
    for fmt in ("table", "json", "csv"):
        assert runner.invoke(main, ["ledger", "show", str(path), "--format", fmt]).exit_code == 0
    with Ledger(path, read_only=True) as audit:
        assert audit.verify().ok and len(audit.events()) == 5
    assert folder_state(tmp_path) == before  # no file created, none changed (the -shm included)


def test_a_read_only_audit_sees_what_a_live_writer_commits_later(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as writer:
        writer.observe_failure({"i": 0})
        with Ledger(path, read_only=True) as audit:
            assert audit.verify().count == 1
            writer.observe_failure({"i": 1})
            report = audit.verify()
            assert report.ok and report.count == 2


def test_the_next_writer_removes_a_killed_writers_temporary_head_file(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as led:
        led.observe_failure({"i": 0})
    # what a writer killed between writing and renaming its head file leaves: half a file, named by its pid
    stale = tmp_path / f"ledger.sqlite.head.tmp-{2**22 + 7}"
    stale.write_text('{"count": 1, "form')
    before = folder_state(tmp_path)
    assert CliRunner().invoke(main, ["ledger", "verify", str(path)]).exit_code == 0
    assert folder_state(tmp_path) == before  # an audit leaves it (it changes nothing)
    with Ledger(path) as led:
        assert not stale.exists()
        led.observe_failure({"i": 1})
        assert led.verify().ok
    assert not list(tmp_path.glob("*.tmp-*"))
    assert os.path.exists(f"{path}.head")
