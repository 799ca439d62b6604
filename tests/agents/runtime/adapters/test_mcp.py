"""The MCP gate with a real MCP client and real MCP server processes over stdio (both from the official SDK): the
proxy forwards the upstream's tools, refuses what a rule forbids (the upstream never sees it), refuses arguments that
do not fit a tool's schema, and fails closed with one error once the upstream dies."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

mcp = pytest.importorskip("mcp", reason="the 'runtime' extra (mcp) is not installed")
anyio = pytest.importorskip("anyio")

ROOT = Path(__file__).resolve().parents[4]


def proxy_params(tmp_path, *extra: str):
    core = tmp_path / "core.dsl"
    core.write_text('if role == "guest" then forbid_tool_call("delete_file")\n')
    env = dict(os.environ, SCARS_MCP_RECORD=str(tmp_path / "received.txt"), PYTHONPATH=str(ROOT))
    args = [
        "-m",
        "scars.agents.runtime.adapters.mcp_gate",
        "--ledger",
        str(tmp_path / "ledger.sqlite"),
        "--core",
        str(core),
    ]
    args += [*extra, "--", sys.executable, str(ROOT / "examples" / "mcp_upstream.py")]
    return mcp.StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


def received(tmp_path) -> list[str]:
    path = tmp_path / "received.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_forbidden_calls_never_reach_the_upstream_and_a_dead_upstream_fails_closed(tmp_path):
    async def session():
        async with mcp.Client(proxy_params(tmp_path, "--context", "role=guest")) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            ok = await client.call_tool("read_file", {"path": "/a"})
            blocked = await client.call_tool("delete_file", {"path": "/a"})
            misfit = await client.call_tool("read_file", {"path": 3})
            await client.call_tool("crash", {})
            after = await client.call_tool("read_file", {"path": "/b"})
            return names, ok, blocked, misfit, after

    names, ok, blocked, misfit, after = anyio.run(session)
    assert names == ["read_file", "crash"]  # delete_file is forbidden outright for a guest: not offered
    assert not ok.is_error and ok.content[0].text == "contents of /a"
    assert blocked.is_error and "refused by the scars gate: blocked by H:" in blocked.content[0].text
    assert (
        misfit.is_error and "argument 'path' = 3 is a int; the mapping declares str" in misfit.content[0].text
    )
    assert after.is_error and "is gone" in after.content[0].text and "fail closed" in after.content[0].text
    assert received(tmp_path) == ["read_file /a", "crash"]  # neither the blocked nor the misfit call arrived


def test_an_admin_may_delete_and_a_bad_option_exits_2(tmp_path):
    async def session():
        async with mcp.Client(proxy_params(tmp_path, "--context", "role=admin")) as client:
            return await client.call_tool("delete_file", {"path": "/x"})

    assert not anyio.run(session).is_error and received(tmp_path) == ["delete_file /x"]
    from scars.agents.runtime.adapters.mcp_gate import main

    with pytest.raises(SystemExit) as info:
        main(["--ledger", str(tmp_path / "l.sqlite")])
    assert info.value.code == 2
    assert main(["--ledger", str(tmp_path / "l2.sqlite"), "--context", "novalue", "--", "true"]) == 2


def test_an_upstream_that_cannot_start_is_one_line_and_nothing_is_served(tmp_path):
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scars.agents.runtime.adapters.mcp_gate",
            "--ledger",
            str(tmp_path / "l.sqlite"),
            "--",
            str(tmp_path / "no_such_server"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "no_such_server' failed" in done.stderr


MISBEHAVING = ROOT / "tests" / "support" / "mcp_misbehaving_upstream.py"


def misbehaving_proxy(tmp_path, mode: str, *extra: str):
    env = dict(os.environ, SCARS_MCP_MODE=mode, PYTHONPATH=str(ROOT))
    args = [
        "-m",
        "scars.agents.runtime.adapters.mcp_gate",
        "--ledger",
        str(tmp_path / "ledger.sqlite"),
        *extra,
    ]
    args += ["--", sys.executable, str(MISBEHAVING)]
    return mcp.StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


def test_an_upstream_silent_at_the_handshake_times_out_in_one_line(tmp_path):
    import subprocess
    import time

    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scars.agents.runtime.adapters.mcp_gate",
            "--ledger",
            str(tmp_path / "l.sqlite"),
            "--handshake-timeout",
            "1",
            "--",
            sys.executable,
            str(MISBEHAVING),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT), SCARS_MCP_MODE="silent"),
        stdin=subprocess.DEVNULL,
    )
    assert time.monotonic() - started < 60
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert (
        done.stderr.strip().count("\n") == 0
        and "timed out" in done.stderr
        and "nothing is served" in done.stderr
    )


def test_a_hung_call_is_a_json_rpc_error_and_the_proxy_keeps_serving(tmp_path):
    from mcp.shared.exceptions import MCPError
    from mcp_types import REQUEST_TIMEOUT

    async def session():
        async with mcp.Client(misbehaving_proxy(tmp_path, "", "--call-timeout", "1")) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            try:
                await client.call_tool("hang", {})
                hung = None
            except MCPError as exc:
                hung = exc
            after = await client.call_tool("echo", {"text": "still here"})
            return names, hung, after

    names, hung, after = anyio.run(session)
    assert names == ["echo", "hang"]
    assert hung is not None and hung.code == REQUEST_TIMEOUT and "within 1s" in hung.message
    assert not after.is_error and after.content[0].text == "echo still here"


def test_an_upstream_json_rpc_error_on_listing_is_passed_on_not_taken_for_gone(tmp_path):
    from mcp.shared.exceptions import MCPError

    async def session():
        async with mcp.Client(misbehaving_proxy(tmp_path, "list-error")) as client:
            errors = []
            for _ in range(2):
                try:
                    await client.list_tools()
                except MCPError as exc:
                    errors.append(exc)
            return errors

    errors = anyio.run(session)
    assert len(errors) == 2  # the second listing asks the upstream again: it is not gone
    for error in errors:
        assert error.code == -32042 and "listing refused by the upstream's policy" in error.message
        assert "is gone" not in error.message
