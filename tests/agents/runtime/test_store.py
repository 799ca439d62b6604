"""The self-schema is event-sourced (issue: one agent for every world): the schema store is the only writer of the
ledger and the control plane, and the live plane is the fold of the ledger's events at every step of a run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scars.agents.runtime.scar import Scar
from scars.agents.runtime.store import SchemaIntegrityError, SchemaStore, plane_state, replay
from scars.experiments.config import Tier1Config
from scars.experiments.tier1 import run_tier1
from scars.synthesis.dsl import parse_rule

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("agents", "disequilibrium", "envs", "experiments", "synthesis", "benchmarks")
LEDGER_WRITES = {"admit", "retire", "revoke", "set_temp_mask", "lift_temp_mask", "observe_failure"}
PLANE_WRITES = {"set_temporary_mask", "lift_temporary_mask", "expire"}
PLANE_WRITES_ON_A_PLANE = {"add", "remove"}
OWNERS = {
    "agents/runtime/projection.py",
    "agents/runtime/store.py",
    "agents/runtime/ledger.py",
    "agents/runtime/control.py",
}


def writes_outside_the_store(source: str) -> list[str]:
    """Calls that change a ledger or a control plane: ledger mutators by name; plane mutators by name, and
    ``add``/``remove`` on an expression that names a plane."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, receiver = node.func.attr, ast.unparse(node.func.value)
            if receiver.split(".")[-1] == "store":  # the store's own commands are the one way in
                continue
            if (
                (
                    attr in LEDGER_WRITES
                    or attr in PLANE_WRITES
                    or attr == "record"
                    and "ledger" in receiver.lower()
                )
                or attr in PLANE_WRITES_ON_A_PLANE
                and "plane" in receiver.lower()
            ):
                found.append(f"{receiver}.{attr}(…) at line {node.lineno}")
    return found


def test_the_lint_check_fires_on_a_write_outside_the_store():
    offending = "def f(agent, led, scar):\n    agent.store.plane.add(scar)\n    led.retire('x', 'r')\n    agent.ledger.record('t', {})\n"
    assert len(writes_outside_the_store(offending)) == 3
    assert (
        writes_outside_the_store(
            "def f(s):\n    s.add(1)\n    s.store.apply_merge(r, {})\n    s.store.retire('x')\n"
        )
        == []
    )


def test_no_module_outside_the_schema_store_writes_to_the_ledger_or_the_plane():
    offenders = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in OWNERS and (found := writes_outside_the_store(path.read_text())):
                offenders[rel] = found
    assert offenders == {}


def test_live_plane_equals_the_fold_of_the_ledger_after_every_step(tmp_path):
    checked = []

    def audit(agent, row):
        assert agent.store.consistent(), f"plane and ledger disagree at t={row['t']}"
        checked.append(row["t"])

    cfg = Tier1Config(method="scars", episodes=8, seed=3, schedule="paper", search_iterations=60)
    summary = run_tier1(cfg, tmp_path, on_step=audit).summary
    assert (
        len(checked) == summary["steps"] and summary["scars_admitted"] >= 1 and summary["temp_masks_set"] >= 1
    )


def test_the_consistency_check_fires_when_the_plane_is_changed_behind_the_stores_back(tmp_path):
    with SchemaStore(tmp_path / "l.sqlite") as store:
        store._plane.add(Scar(parse_rule('if action.obj_type == "cup" then forbid_env_action("clean")')))
        assert not store.consistent()
        assert plane_state(replay(store.ledger.events())) != plane_state(store.plane)


def test_opening_a_tampered_ledger_fails_closed(tmp_path):
    import sqlite3

    with SchemaStore(tmp_path / "l.sqlite") as store:
        store.mask_temporarily(
            "tmp:1:x", parse_rule('if action_is("go") then forbid_env_action("go")'), until_step=9, reason="r"
        )
    with sqlite3.connect(tmp_path / "l.sqlite") as conn:
        conn.execute("DELETE FROM events WHERE seq = 1")
    with pytest.raises(SchemaIntegrityError, match="refusing to load"):
        SchemaStore(tmp_path / "l.sqlite")


def test_a_second_writer_is_named_at_once_and_the_store_refuses_to_extend_its_events(tmp_path):
    """Issue 41 #4: another writer's events made the store's plane stale without a word until its next write, which
    then extended them. Now ``foreign_events`` names them (one read of the head row) and the next command refuses
    to append (``ForeignWriteError``, nothing written)."""
    from scars.agents.runtime.errors import ForeignWriteError
    from scars.agents.runtime.ledger import Ledger

    rule = parse_rule('if action.obj_type == "cup" then forbid_env_action("clean")')
    with SchemaStore(tmp_path / "l.sqlite") as store:
        store.admit(Scar(rule, evidence=({"note": "by hand"},)), reason="test")
        assert store.foreign_events() == ()
        with Ledger(tmp_path / "l.sqlite") as other:  # a second connection: another writer
            other.retire(store.scars[0].id, "behind the store's back")
        foreign = store.foreign_events()
        assert [(e.seq, e.type) for e in foreign] == [(2, "scar_retired")]
        with pytest.raises(ForeignWriteError, match=r"another process wrote 1 event.*event 2 scar_retired"):
            store.mask_temporarily("tmp:x", rule, until_step=5, reason="storm")
        assert store.ledger.stored_count() == 2 and store.ledger.verify().ok  # nothing appended
