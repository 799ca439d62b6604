"""The MCP gate: a real MCP client talks (stdio) to the scars proxy, which launches the upstream MCP server
(``examples/mcp_upstream.py``) and refuses what the core schema forbids for a guest; then the upstream dies and the
gate fails closed. Needs the 'runtime' extra."""

import os
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
work = Path(tempfile.mkdtemp())
(work / "core.dsl").write_text('if role == "guest" then forbid_tool_call("delete_file")\n')
proxy = StdioServerParameters(
    command=sys.executable,
    args=[
        "-m",
        "scars.agents.runtime.adapters.mcp_gate",
        "--ledger",
        str(work / "ledger.sqlite"),
        "--core",
        str(work / "core.dsl"),
        "--context",
        "role=guest",
        "--",
        sys.executable,
        str(ROOT / "examples" / "mcp_upstream.py"),
    ],
    env={**os.environ, "PYTHONPATH": str(ROOT)},
    cwd=str(ROOT),
)


async def main() -> None:
    async with Client(proxy) as client:
        print("offered:", [t.name for t in (await client.list_tools()).tools])
        for name, args in [
            ("read_file", {"path": "notes.txt"}),
            ("delete_file", {"path": "notes.txt"}),
            ("crash", {}),
            ("read_file", {"path": "notes.txt"}),
        ]:
            result = await client.call_tool(name, args)
            print(f"{name}: {'ERROR ' if result.is_error else ''}{result.content[0].text}")


anyio.run(main)
