"""A missing ledger is a tamper, not a fresh start (issue 28, item 2), and a deleted head row is a typed refusal.

Faults are injected the way an attacker or a careless operator would: ``rm`` the database (alone, or with its
``-wal``/``-shm``), truncate it to 0 bytes, replace it with another file, delete the head row with sqlite3, copy an
earlier genuine state of every file back.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from scars.agents.runtime import ContextMapping, MissingLedgerError, Scar, ToolSignature, open_gate
from scars.agents.runtime.ledger import Ledger, ledger_files
from scars.agents.runtime.store import SchemaIntegrityError, SchemaStore
from scars.experiments.cli import main
from scars.synthesis.dsl import parse_rule
from scars.synthesis.errors import LedgerIntegrityError
from support.failures import failure_of

RULE = 'if role == "guest" then forbid_tool_call("refund")'
GUEST = {"role": "guest"}
MAPPING = ContextMapping([ToolSignature("refund")])


def cli(*args: str):
    return CliRunner().invoke(main, ["ledger", *args])


def one_error_line(result, code: int) -> str:
    assert result.exit_code == code, result.output
    assert (
        "Traceback" not in result.output
        and result.exception is None
        or isinstance(result.exception, SystemExit)
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


def a_ledger_with_a_scar(path: Path) -> str:
    with SchemaStore(path) as store:
        scar = Scar(parse_rule(RULE), evidence=({"f": 1},))
        store.admit(scar, reason="operator")
        store.record_failure(failure_of("tool", "refund", role="guest"))
        return scar.id


def rm_database(path: Path, *, with_journal: bool) -> None:
    path.unlink()
    if with_journal:
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("with_journal", [False, True])
def test_a_deleted_database_next_to_its_head_file_is_refused_everywhere(tmp_path, with_journal):
    path = tmp_path / "ledger.sqlite"
    a_ledger_with_a_scar(path)
    rm_database(path, with_journal=with_journal)
    for opener in (Ledger, SchemaStore, lambda p: open_gate(p, mapping=MAPPING, decision_log=False)):
        with pytest.raises(MissingLedgerError, match="commits 2 events"):
            opener(path)
    assert not path.exists()  # nothing was created in its place
    with pytest.raises(MissingLedgerError):
        Ledger(path, read_only=True)
    assert "commits 2 events" in one_error_line(cli("admit", str(path), RULE), 1)
    assert "deleted" in one_error_line(cli("verify", str(path)), 1)
    assert not path.exists()


def test_a_deleted_database_and_head_file_with_the_key_left_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite"
    a_ledger_with_a_scar(path)
    rm_database(path, with_journal=True)
    Path(f"{path}.head").unlink()
    with pytest.raises(MissingLedgerError, match="key file"):
        SchemaStore(path)
    one_error_line(cli("admit", str(path), RULE), 1)
    # moving every file away is how a new ledger starts here
    for file in ledger_files(path):
        file.unlink(missing_ok=True)
    with SchemaStore(path) as store:
        assert store.scars == ()


@pytest.mark.parametrize("replacement", ["empty", "garbage", "other-sqlite", "fresh-ledger"])
def test_an_emptied_or_replaced_database_is_refused(tmp_path, replacement):
    path = tmp_path / "ledger.sqlite"
    a_ledger_with_a_scar(path)
    rm_database(path, with_journal=True)
    if replacement == "empty":
        path.write_bytes(b"")
    elif replacement == "garbage":
        path.write_bytes(b"not a database at all\n" * 100)
    elif replacement == "other-sqlite":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (x TEXT)")
        conn.commit()
        conn.close()
    else:  # a genuine, empty ledger made elsewhere and copied over the real one
        other = tmp_path / "elsewhere" / "ledger.sqlite"
        other.parent.mkdir()
        Ledger(other, keyed=False).close()
        shutil.copy(other, path)
    error = SchemaIntegrityError if replacement == "fresh-ledger" else MissingLedgerError
    with pytest.raises(error):
        SchemaStore(path)
    with pytest.raises(error):
        open_gate(path, mapping=MAPPING, decision_log=False)
    one_error_line(cli("admit", str(path), RULE), 1)


def test_a_database_deleted_under_a_running_gate_is_noticed_at_the_next_write(tmp_path):
    path = tmp_path / "ledger.sqlite"
    gate = open_gate(path, mapping=MAPPING, decision_log=False)
    try:
        gate.admit_rule(RULE, reason="operator")
        assert not gate.check("refund", {}, GUEST).allowed
        path.unlink()  # `rm ledger.sqlite` while the agent runs
        report = gate.verify()
        assert not report.ok and "deleted" in report.reason
        with pytest.raises(MissingLedgerError, match="deleted"):
            gate.admit_rule('if role == "x" then forbid_tool_call("refund")', reason="operator")
        assert not gate.check("refund", {}, GUEST).allowed  # the scars it holds still hold
    finally:
        gate.close()
    with pytest.raises(MissingLedgerError):  # and after a restart nothing is silently reset
        open_gate(path, mapping=MAPPING, decision_log=False)


def test_a_database_replaced_under_a_running_store_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with SchemaStore(path) as store:
        store.admit(Scar(parse_rule(RULE)), reason="r")
        copy = tmp_path / "copy.sqlite"
        shutil.copy(path, copy)
        copy.replace(path)  # same content, another file
        with pytest.raises(MissingLedgerError, match="replaced"):
            store.record_failure(failure_of("tool", "refund"))
        assert "replaced" in store.ledger.verify().reason


def delete_head_row(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM head")
    conn.commit()
    conn.close()


def test_a_deleted_head_row_is_a_typed_refusal_for_every_writer(tmp_path):
    path = tmp_path / "ledger.sqlite"
    a_ledger_with_a_scar(path)
    delete_head_row(path)
    with pytest.raises(LedgerIntegrityError, match="head record is missing"):
        Ledger(path)
    with pytest.raises(LedgerIntegrityError, match="head record is missing"):
        SchemaStore(path)
    with pytest.raises(LedgerIntegrityError, match="head record is missing"):
        open_gate(path, mapping=MAPPING, decision_log=False)
    assert "head record is missing" in one_error_line(cli("admit", str(path), RULE), 1)
    assert "head record is missing" in one_error_line(cli("verify", str(path)), 1)


def test_open_gate_with_an_anchor_refuses_a_roll_back_of_every_file(tmp_path):
    path = tmp_path / "ledger.sqlite"
    saved = tmp_path / "saved"
    saved.mkdir()
    gate = open_gate(path, mapping=MAPPING, decision_log=False)
    gate.admit_rule('if role == "x" then forbid_tool_call("refund")', reason="first")
    gate.close()
    for file in ledger_files(path):  # a genuine earlier copy of every file
        if file.exists():
            shutil.copy(file, saved / file.name)
    gate = open_gate(path, mapping=MAPPING, decision_log=False)
    gate.admit_rule(RULE, reason="second")
    anchor = gate.anchor()
    gate.close()
    for file in ledger_files(path):
        file.unlink(missing_ok=True)
    for file in saved.iterdir():
        shutil.copy(file, tmp_path / file.name)
    rolled = open_gate(path, mapping=MAPPING, decision_log=False)  # without the anchor, nothing can tell
    assert rolled.check("refund", {}, GUEST).allowed and rolled.verify().ok
    rolled.close()
    with pytest.raises(SchemaIntegrityError, match="anchor"):
        open_gate(path, mapping=MAPPING, decision_log=False, anchor=anchor)
    with pytest.raises(SchemaIntegrityError, match="anchor"):
        SchemaStore(path, anchor=anchor)


def test_the_docs_state_what_each_loss_gives():
    """docs/ledger.md's table of the database lost and the head row lists exactly the damages this file reproduces."""
    import re

    section = (Path(__file__).resolve().parents[3] / "docs" / "ledger.md").read_text(encoding="utf-8")
    table = section.split("| damage |", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^\| `([a-z-]+)`", table, flags=re.M)
    assert names == [
        "delete-database",
        "empty-or-replace-database",
        "replace-with-a-fresh-ledger",
        "delete-database-under-a-running-writer",
        "delete-head-row",
        "roll-back-all-files",
    ]
