"""``scars ledger`` with click's CliRunner: admit, retire, show, verify, bad input, tampered files."""

from __future__ import annotations

import sqlite3

from click.testing import CliRunner

from scars.agents.runtime.ledger import Ledger
from scars.experiments.cli import main
from support.failures import failure_of

RULE = 'if pool_resource_level < 30 and tool_is("harvest") then forbid_tool_call("harvest")'


def run(*args: str):
    return CliRunner().invoke(main, ["ledger", *args], env={"COLUMNS": "250"})


def test_admit_show_retire_verify(tmp_path):
    path = str(tmp_path / "agent.db")
    result = run(
        "admit", path, RULE, "--scope", '{"env_version": "v1", "confidence": 0.9}', "--evidence", '{"q": 1}'
    )
    assert result.exit_code == 0, result.output
    scar_id = result.output.split()[1]
    with Ledger(path) as led:
        (scar,) = led.active_scars()
    assert scar.id == scar_id and scar.scope.env_version == "v1" and scar.evidence == ({"q": 1},)

    shown = run("show", path)
    assert shown.exit_code == 0
    assert "scar_admitted" in shown.output and scar_id in shown.output and "intact: 1 events" in shown.output

    assert run("verify", path).exit_code == 0
    retired = run("retire", path, scar_id, "--reason", "env_version v1 -> v2")
    assert retired.exit_code == 0, retired.output
    with Ledger(path) as led:
        assert led.active_scars() == ()
    # no resurrection: neither the same evidence nor made-up "new evidence" brings it back (issue 13)
    again = run("admit", path, RULE, "--evidence", '{"q": 1}')
    assert again.exit_code == 1 and "re-admission needs fresh verifier-backed evidence" in again.output
    nonce = run("admit", path, RULE, "--evidence", '{"nonce": 1}')
    assert nonce.exit_code == 1 and "free JSON" in nonce.output
    float_twin = run("admit", path, RULE.replace("30", "30.0"), "--evidence", '{"nonce": 2}')
    assert float_twin.exit_code == 1 and scar_id in float_twin.output  # `< 30.0` is the same scar as `< 30`
    # a failure the verifier recorded after the retirement can
    with Ledger(path) as led:
        verdict = led.observe_failure(failure_of("tool", "harvest"))
    back = run("admit", path, RULE, "--verdict", str(verdict.seq))
    assert back.exit_code == 0, back.output
    assert run("admit", path, RULE, "--verdict", str(verdict.seq)).exit_code == 1  # active, nothing new


def test_bad_rule_exits_2_with_the_dsl_error_and_no_traceback(tmp_path):
    result = run("admit", str(tmp_path / "a.db"), 'if tool_is("harvest") then')
    assert result.exit_code == 2
    assert "bad rule" in result.output and "line 1, column" in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_bad_json_and_bad_scope_exit_2(tmp_path):
    path = str(tmp_path / "a.db")
    bad_json = run("admit", path, RULE, "--evidence", "{not json")
    assert bad_json.exit_code == 2 and "--evidence is not valid JSON" in bad_json.output
    bad_scope = run("admit", path, RULE, "--scope", '{"confidence": 7}')
    assert bad_scope.exit_code == 2 and "confidence" in bad_scope.output
    unknown_id = run("admit", path, RULE)
    assert unknown_id.exit_code == 0
    missing = run("retire", path, "ffffffffffffffff", "--reason", "x")
    assert missing.exit_code == 1 and "never admitted" in missing.output


def test_verify_names_the_first_bad_event_and_admission_fails_closed(tmp_path):
    path = tmp_path / "a.db"
    for i in range(3):
        assert run("admit", str(path), RULE.replace("30", str(10 + i))).exit_code == 0
    raw = sqlite3.connect(path)
    raw.execute("UPDATE events SET payload = replace(payload, '11', '99') WHERE seq = 2")
    raw.commit()
    raw.close()
    result = run("verify", str(path))
    assert result.exit_code == 1
    assert "first bad event 2" in result.output and "scar_admitted" in result.output
    assert run("admit", str(path), RULE).exit_code == 1
    shown = run("show", str(path))
    assert "verification failed at event 2" in shown.output and "fail closed" in shown.output


def test_help_on_every_command():
    for args in ([], ["admit"], ["retire"], ["show"], ["verify"]):
        result = run(*args, "--help")
        assert result.exit_code == 0 and "Usage" in result.output
