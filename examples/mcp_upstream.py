"""A small upstream MCP server (stdio) for the MCP gate's example and test: file tools that write down every call
they receive to the file named by $SCARS_MCP_RECORD (so a test can see which calls reached it), and ``crash``,
which kills the server (to show the gate failing closed)."""

import os

from mcp.server import MCPServer

server = MCPServer("files")


def _record(line: str) -> None:
    path = os.environ.get("SCARS_MCP_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool()
def read_file(path: str) -> str:
    """Read a file (pretend)."""
    _record(f"read_file {path}")
    return f"contents of {path}"


@server.tool()
def delete_file(path: str, force: bool = False) -> str:
    """Delete a file (pretend)."""
    _record(f"delete_file {path}")
    return f"deleted {path}"


@server.tool()
def crash() -> str:
    """Kill this server (the gate must then refuse every call)."""
    _record("crash")
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
