"""scars-runtime (issue 18): the gate, its context mapping, the decorator, the decision log and the background
accommodation loop; every bad input fails closed with one clear error, and a blocked call never reaches the tool."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from scars.agents.runtime import (
    ContextMapping,
    ContextMappingError,
    GateError,
    ScarBlocked,
    ToolSignature,
    Verdict,
    open_gate,
)
from scars.agents.runtime.ledger import Ledger
from scars.agents.runtime.store import SchemaIntegrityError
from scars.synthesis.errors import DSLSyntaxError

CORE = ['if role == "guest" then forbid_tool_call("delete_file")']


@pytest.fixture
def gate(tmp_path):
    g = open_gate(tmp_path / "ledger.sqlite", core=CORE)
    yield g
    g.close()


def make_tools(gate, calls):
    @gate.tool
    def delete_file(path: str, force: bool = False) -> str:
        calls.append(("delete_file", path))
        return "deleted"

    @gate.tool(fallback="refused")
    def send_mail(to: str, body: str, attachments: list | None = None) -> str:
        calls.append(("send_mail", to))
        return "sent"

    return delete_file, send_mail


def test_the_core_schema_blocks_before_the_tool_runs_and_the_fallback_is_configurable(gate):
    calls = []
    delete_file, send_mail = make_tools(gate, calls)
    with gate.using({"role": "admin"}):
        assert delete_file("/tmp/x") == "deleted"
    with gate.using({"role": "guest"}), pytest.raises(ScarBlocked, match="delete_file"):
        delete_file("/tmp/y")
    assert calls == [("delete_file", "/tmp/x")]  # the blocked call never reached the tool
    gate.admit_rule('if action.to == "eve@x" then forbid_tool_call("send_mail")', reason="operator")
    assert send_mail("eve@x", "hi") == "refused" and send_mail("bob@x", "hi", attachments=["a"]) == "sent"
    assert calls[-1] == ("send_mail", "bob@x") and len(calls) == 2


def test_calls_that_do_not_fit_the_mapping_are_blocked_with_one_clear_error(gate):
    calls = []
    delete_file, _ = make_tools(gate, calls)
    with pytest.raises(ContextMappingError, match=r"argument 'path' = 3 is a int; the mapping declares str"):
        delete_file(3)
    with pytest.raises(ContextMappingError, match=r"context value 'role' = \['a'\] is a list"):
        gate.enforce("delete_file", {"path": "/x"}, {"role": ["a"]})
    with pytest.raises(ContextMappingError, match="tool 'rm' is not declared"):
        gate.enforce("rm", {"path": "/x"}, {})
    with pytest.raises(ContextMappingError, match="undeclared argument 'mode'"):
        gate.enforce("delete_file", {"path": "/x", "mode": 1}, {})
    with pytest.raises(ContextMappingError, match="missing required argument"):
        gate.enforce("delete_file", {}, {})
    decision = gate.check("delete_file", {"path": 3}, {})
    assert not decision.allowed and decision.error is not None
    assert calls == []


def test_a_ledger_that_fails_verification_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with open_gate(path, core=CORE) as g:
        g.admit_rule('if action.path == "/etc" then forbid_tool_call("delete_file")', reason="operator")
        assert g.verify().ok
    conn = sqlite3.connect(path)
    conn.execute("UPDATE events SET payload = replace(payload, '/etc', '/usr') WHERE seq = 1")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaIntegrityError, match="fails verification at event 1"):
        open_gate(path, core=CORE)


def test_a_rule_file_that_does_not_parse_names_file_line_and_column(tmp_path):
    rules = tmp_path / "core.dsl"
    rules.write_text(
        '# H\nif role == "guest" then forbid_tool_call("x")\n  if role == then forbid_tool_call("x")\n'
    )
    with pytest.raises(DSLSyntaxError, match=r"line 3, column 14: unexpected 'then'.*core\.dsl") as info:
        open_gate(tmp_path / "l.sqlite", core=rules)
    assert (info.value.line, info.value.column) == (3, 14)


def test_signatures_from_functions_and_json_schemas():
    def f(a: str, b: int | None = None, c: float = 1.0, d: dict | None = None, *rest, **kw): ...

    sig = ToolSignature.from_function(f)
    assert sig.params == {"a": (str,), "b": (int,), "c": (int, float)} and sig.opaque == {"d"}
    assert sig.required == {"a"}
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer"}, "tags": {"type": "array"}},
        "required": ["q"],
    }
    js = ToolSignature.from_json_schema("search", schema)
    assert js.params == {"q": (str,), "n": (int,)} and js.opaque == {"tags"}
    mapping = ContextMapping([js], context_keys={"user": str})
    assert mapping.action("search", {"q": "x", "n": 2, "tags": [1]}).args == (("n", 2), ("q", "x"))
    with pytest.raises(ContextMappingError, match="is a bool; the mapping declares int"):
        mapping.action("search", {"q": "x", "n": True})
    with pytest.raises(ContextMappingError, match="context key 'team' is not declared"):
        mapping.context({"team": "a"})


def test_a_reported_failure_is_synthesised_merged_written_and_enforced(tmp_path):
    calls = []
    with open_gate(tmp_path / "ledger.sqlite", core=CORE) as gate:
        delete_file, _ = make_tools(gate, calls)
        with gate.using({"role": "admin", "env": "prod"}):
            for path in ("/tmp/a", "/tmp/b", "/home/u/c", "/data/old"):
                delete_file(path)
            future = gate.report_failure(
                {"role": "admin", "env": "prod"},
                ("delete_file", {"path": "/data/old", "force": False}),
                Verdict("no_data_deletion", "deleted a data set", "backup_audit"),
            )
            outcome = future.result(timeout=60)
            assert outcome.crossed and outcome.admitted, outcome
            with pytest.raises(ScarBlocked):
                delete_file("/data/old")
            assert delete_file("/tmp/a") == "deleted"  # the learned rule does not block what succeeded
        assert calls.count(("delete_file", "/data/old")) == 1
        assert gate.verify().ok and [s.id for s in gate.scars] == list(outcome.admitted)
        gate.flush()
        rows = gate.log.rows()
        assert [r["allowed"] for r in rows] == [True] * 4 + [False, True]
        assert (
            rows[4]["fired"] == list(outcome.admitted)
            and rows[4]["schema_version"] > rows[0]["schema_version"]
        )
    with Ledger(tmp_path / "ledger.sqlite", read_only=True) as ledger:
        events = [e.type for e in ledger.events()]
    assert events[:1] == ["failure_observed"] and "scar_admitted" in events and "merge_decision" in events


def test_close_writes_every_queued_decision(tmp_path):
    gate = open_gate(tmp_path / "ledger.sqlite", core=CORE)
    calls = []
    delete_file, _ = make_tools(gate, calls)
    session = {"role": "guest"}
    with gate.using(session):
        for i in range(300):
            with pytest.raises(ScarBlocked):
                delete_file(f"/f{i}")
    session["role"] = "admin"  # the framework changes its state later: what was decided stays recorded
    assert not gate.check("delete_file", {"path": "/x"}, {1: object()}).allowed  # logged, the writer survives
    gate.close()
    conn = sqlite3.connect(tmp_path / "ledger.sqlite.decisions.sqlite")
    rows = conn.execute("SELECT allowed, fired, context FROM decisions").fetchall()
    conn.close()
    assert len(rows) == 301 and {r[0] for r in rows} == {0} and calls == []
    assert rows[0][2] == '{"role": "guest"}' and rows[0][1].startswith('["H:')
    with pytest.raises(GateError, match="closed"):
        gate.check("delete_file", {"path": "/x"}, {})


def test_a_gate_left_open_closes_cleanly_at_interpreter_exit(tmp_path):
    """The gate's exit hook runs after concurrent.futures has stopped the accommodation worker: no error, and the
    ledger (the scar admitted in the background) and every decision are on disk."""
    script = f"""
from scars.agents.runtime import Verdict, open_gate
gate = open_gate({str(tmp_path / "ledger.sqlite")!r}, core=[])
@gate.tool
def refund(amount: int) -> str:
    return "ok"
with gate.using({{"role": "agent"}}):
    refund(20), refund(5000)
    outcome = gate.report_failure(None, ("refund", {{"amount": 5000}}), Verdict("limit", "", "f")).result()
print(outcome.rule)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.strip() == 'if action.amount == 5000 then forbid_tool_call("refund")'
    with open_gate(tmp_path / "ledger.sqlite", core=[]) as gate:
        assert gate.verify().ok and [s.control_text for s in gate.scars] == [done.stdout.strip()]
    conn = sqlite3.connect(tmp_path / "ledger.sqlite.decisions.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM decisions").fetchone()[0] == 2
    conn.close()


def test_with_a_verifier_the_failure_is_cut_by_counterfactual_questions(tmp_path):
    asked = []

    def verifier(q, a):  # the framework's own check: deleting under /data in production violates
        asked.append((dict(q), a))
        return (
            a.name == "delete_file" and q.get("env") == "prod" and str(a.arg("path", "")).startswith("/data")
        )

    calls = []
    with open_gate(tmp_path / "ledger.sqlite", core=CORE, verifier=verifier) as gate:
        delete_file, _ = make_tools(gate, calls)
        for env in ("dev", "prod"):
            with gate.using({"role": "admin", "env": env, "team": "x"}):
                delete_file("/tmp/a")
                if env == "dev":
                    delete_file("/data/old")
        with gate.using({"role": "admin", "env": "prod", "team": "x"}):
            delete_file("/data/old")
            outcome = gate.report_failure(
                None,
                ("delete_file", {"path": "/data/old", "force": False}),
                Verdict("no_prod_data", "", "ops"),
            ).result(timeout=60)
            assert outcome.admitted, outcome
            with pytest.raises(ScarBlocked):
                delete_file("/data/old")
            assert delete_file("/tmp/a") == "deleted"
        with gate.using({"role": "admin", "env": "dev", "team": "x"}):
            assert delete_file("/data/old") == "deleted"  # the what-if answers kept env in the rule
        assert "prod" in outcome.rule and len(asked) > 3
