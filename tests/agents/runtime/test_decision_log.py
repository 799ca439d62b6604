"""The decision log cannot vanish silently (issue 28, item 7): a log file deleted or replaced under a running gate
stops the gate (every call refused, fail closed) at its next batch, and ``flush`` says why."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from scars.agents.runtime import ContextMapping, GateError, ToolSignature, open_gate


@pytest.mark.parametrize("fault", ["deleted", "replaced"])
def test_a_decision_log_removed_under_a_running_gate_fails_closed(tmp_path, fault):
    ledger = tmp_path / "ledger.sqlite"
    gate = open_gate(ledger, mapping=ContextMapping([ToolSignature("lookup")]))
    log = Path(f"{ledger}.decisions.sqlite")
    try:
        assert gate.check("lookup", {}, {"role": "x"}).allowed
        gate.flush()
        assert len(gate.log.rows()) == 1
        if fault == "deleted":
            log.unlink()  # `rm ledger.sqlite.decisions.sqlite` while the agent runs
        else:
            replacement = tmp_path / "other.sqlite"
            replacement.write_bytes(log.read_bytes())
            replacement.replace(log)
        gate.check("lookup", {}, {"role": "x"})  # queued: the log finds out at its next batch
        deadline = time.monotonic() + 10
        while gate.log.error is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gate.log.error is not None and fault in gate.log.error
        with pytest.raises(GateError, match="every call is refused"):
            gate.check("lookup", {}, {"role": "x"})
        with pytest.raises(GateError, match=fault):
            gate.flush()
    finally:
        with pytest.raises(GateError):
            gate.close()


def test_a_relative_ledger_path_keeps_its_log_where_it_was_opened(tmp_path, monkeypatch):
    """The writer thread connects after open; a chdir in between (a notebook, a test runner) must not move the log.

    This happened: the README example run in a temporary folder left an empty log in the repository root."""
    opened, elsewhere = tmp_path / "opened", tmp_path / "elsewhere"
    opened.mkdir(), elsewhere.mkdir()
    monkeypatch.chdir(opened)
    gate = open_gate("ledger.sqlite", mapping=ContextMapping([ToolSignature("lookup")]))
    try:
        monkeypatch.chdir(elsewhere)
        assert gate.check("lookup", {}, {"role": "x"}).allowed
        gate.flush()
    finally:
        gate.close()
    assert (opened / "ledger.sqlite.decisions.sqlite").stat().st_size > 0
    assert list(elsewhere.iterdir()) == []
