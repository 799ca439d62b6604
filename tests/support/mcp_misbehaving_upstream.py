"""An upstream MCP server (stdio, official SDK) that misbehaves on purpose, for the MCP gate's timeout tests.

$SCARS_MCP_MODE picks how: ``silent`` never answers anything (not even the handshake); ``list-error`` answers
``tools/list`` with a JSON-RPC error; otherwise it serves ``hang`` (a tool call that never returns) and ``echo``.
"""

import os
import sys
import time

MODE = os.environ.get("SCARS_MCP_MODE", "")

if MODE == "silent":  # reads the handshake and never answers
    for _ in sys.stdin:
        pass
    time.sleep(3600)
    sys.exit(0)

import anyio  # noqa: E402
from mcp.server import MCPServer  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

server = MCPServer("misbehaving")

if MODE == "list-error":

    async def _refuse_listing() -> None:
        raise MCPError(code=-32042, message="listing refused by the upstream's policy")

    server.list_tools = _refuse_listing  # type: ignore[method-assign]


@server.tool()
async def hang() -> str:
    """Never returns (a hung tool)."""
    await anyio.sleep(3600)
    return "never"


@server.tool()
def echo(text: str) -> str:
    """Answers at once."""
    return f"echo {text}"


if __name__ == "__main__":
    server.run("stdio")
