"""An MCP gate: a proxy MCP server (official ``mcp`` SDK) that forwards an upstream MCP server's tools and refuses
the calls a scar forbids (issue 18).

The proxy connects to the upstream server as an MCP client (``mcp.Client`` over stdio: it launches the upstream
command), lists its tools and declares each one in the gate's context mapping from its ``inputSchema``. To its own
client it offers the upstream tools minus those a rule forbids outright in the proxy's context; a ``tools/call`` is
decided by the gate first — a forbidden call, or one whose arguments do not fit the tool's schema, is answered with
an error result (``isError``) naming the rules or the mismatch and is never forwarded. The context q is the proxy's
(``--context key=value``: the deployment's session state; MCP requests carry no such state). The upstream server
runs in the proxy's environment. Only tools are forwarded (not the upstream's resources or prompts).

If the upstream server dies, every later call (and listing) is refused with one error — "upstream MCP server …
is gone; the gate refuses every call (fail closed)" — and nothing is forwarded. Every wait on the upstream has a
timeout: the handshake and each listing (``handshake_timeout_s``, ``--handshake-timeout``; an upstream silent at the
handshake serves nothing) and each call (``call_timeout_s``, ``--call-timeout``). A call that does not answer in time
is answered with a JSON-RPC error (``REQUEST_TIMEOUT``) and the proxy keeps serving the others; a JSON-RPC error the
upstream itself returns (on ``tools/list`` or ``tools/call``) is passed on as that error — the upstream is not gone.

Run it as ``python -m scars.agents.runtime.adapters.mcp_gate --ledger L [--core FILE] [--context k=v …] -- CMD ARGS…``
(every option has ``--help``); bad options exit 2 with one line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from scars.agents.runtime.gate import ContextMappingError, Gate, GateError, ToolSignature, open_gate
from scars.synthesis.errors import ScarsError

_MAX_PAGES = 1000
"""Pages of an upstream tool listing read at most (a misbehaving upstream cannot loop the proxy)."""


class UpstreamGone(GateError):
    """The upstream MCP server died (its connection closed): the gate refuses every call from now on."""


DEFAULT_HANDSHAKE_TIMEOUT_S = 30.0
DEFAULT_CALL_TIMEOUT_S = 120.0


def _require_mcp():
    try:
        import mcp
        import mcp_types
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ScarsError("the MCP gate needs the optional extra: pip install -e '.[runtime]'") from exc
    return mcp, mcp_types


class McpGate:
    """The proxy (module docstring). ``upstream``: ``mcp.StdioServerParameters`` of the upstream server;
    ``context``: the q every call is decided in."""

    def __init__(
        self,
        gate: Gate,
        upstream: Any,
        *,
        context: Mapping[str, Any] | None = None,
        handshake_timeout_s: float = DEFAULT_HANDSHAKE_TIMEOUT_S,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
    ) -> None:
        for name, value in (("handshake_timeout_s", handshake_timeout_s), ("call_timeout_s", call_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
                raise GateError(f"{name} = {value!r} must be a number of seconds > 0")
        self.gate = gate
        self.upstream = upstream
        self.handshake_timeout_s = float(handshake_timeout_s)
        self.call_timeout_s = float(call_timeout_s)
        self.context = dict(gate.mapping.context(context or {}))
        self._client: Any = None
        self._gone: str | None = None

    def _refusal(self, text: str):
        _, types = _require_mcp()
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    def _upstream_error(self, exc: BaseException, what: str) -> Exception | None:
        """A JSON-RPC error to answer with (None when the upstream is gone): the upstream's own error response,
        or a timeout of this request — neither closes the connection, so the proxy keeps serving."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if not isinstance(exc, MCPError) or exc.code == CONNECTION_CLOSED:
            return None
        if exc.code == REQUEST_TIMEOUT:
            seconds = self.call_timeout_s if what.startswith("tools/call") else self.handshake_timeout_s
            return MCPError(
                code=REQUEST_TIMEOUT,
                message=f"upstream MCP server did not answer {what} within {seconds:g}s; refused (the gate keeps "
                "serving other calls)",
            )
        return MCPError(
            code=exc.code, message=f"upstream MCP server answered {what} with an error: {exc.message}"
        )

    def _lost(self, exc: BaseException) -> str:
        if self._gone is None:
            self._gone = (
                f"upstream MCP server {' '.join([self.upstream.command, *self.upstream.args])!r} is gone "
                f"({type(exc).__name__}: {exc}); the gate refuses every call (fail closed)"
            )
        return self._gone

    async def _list_tools(self, ctx: Any, params: Any):
        _, types = _require_mcp()
        if self._gone is not None:
            raise UpstreamGone(self._gone)
        tools, cursor = [], None
        try:
            for _ in range(_MAX_PAGES):  # every page of the upstream's listing, offered as one
                page = await self._client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except Exception as exc:
            error = self._upstream_error(exc, "tools/list")
            if error is not None:
                raise error from None
            raise UpstreamGone(self._lost(exc)) from None
        for tool in tools:
            self.gate.mapping.declare(ToolSignature.from_json_schema(tool.name, tool.input_schema))
        masked = self.gate.masked_tools([t.name for t in tools], self.context)
        return types.ListToolsResult(tools=[t for t in tools if t.name not in masked])

    async def _call_tool(self, ctx: Any, params: Any):
        if self._gone is not None:
            return self._refusal(self._gone)
        if self.gate.mapping.signature(params.name) is None:
            await self._list_tools(ctx, None)  # a client may call without listing first
        decision = self.gate.check(params.name, params.arguments or {}, self.context)
        if not decision.allowed:
            return self._refusal(f"refused by the scars gate: {decision.reason}")
        try:
            return await self._client.call_tool(
                params.name, params.arguments or {}, read_timeout_seconds=self.call_timeout_s
            )
        except Exception as exc:
            error = self._upstream_error(exc, f"tools/call {params.name!r}")
            if error is not None:
                raise error from None
            return self._refusal(self._lost(exc))

    def server(self):
        """The proxy as an ``mcp.server.lowlevel.Server`` (serve it on any transport while ``connect`` is open)."""
        from mcp.server.lowlevel import Server

        return Server("scars-gate", on_list_tools=self._list_tools, on_call_tool=self._call_tool)

    @contextlib.asynccontextmanager
    async def connect(self):
        """Connect to the upstream server for the duration of the block."""
        mcp, _ = _require_mcp()
        # the client's read timeout bounds the handshake and every listing; calls pass their own
        async with mcp.Client(
            self.upstream, raise_exceptions=True, read_timeout_seconds=self.handshake_timeout_s
        ) as client:
            self._client = client
            try:
                yield self
            finally:
                self._client = None

    async def serve_stdio(self) -> None:
        """Serve the proxy over this process's stdin/stdout."""
        from mcp.server.stdio import stdio_server

        server = self.server()
        async with self.connect(), stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def _parse_context(items: Sequence[str]) -> dict[str, Any]:
    context: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ContextMappingError(f"--context {item!r}: expected KEY=VALUE")
        value: Any = raw
        if raw in ("true", "false"):
            value = raw == "true"
        else:
            for kind in (int, float):
                try:
                    value = kind(raw)
                    break
                except ValueError:
                    continue
        context[key] = value
    return context


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scars.agents.runtime.adapters.mcp_gate",
        description="A proxy MCP server (stdio) that forwards an upstream MCP server's tools and refuses the calls "
        "the scars of LEDGER (and the core schema H) forbid in the given context.",
    )
    parser.add_argument("--ledger", required=True, help="the scars ledger (created if absent; must verify)")
    parser.add_argument("--core", default=None, help="the core schema H: a DSL rule file (one rule per line)")
    parser.add_argument(
        "--context", action="append", default=[], metavar="KEY=VALUE", help="the context q (repeatable)"
    )
    parser.add_argument(
        "--handshake-timeout",
        type=float,
        default=DEFAULT_HANDSHAKE_TIMEOUT_S,
        metavar="S",
        help=f"seconds the upstream may take to answer the handshake and each listing (default {DEFAULT_HANDSHAKE_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=DEFAULT_CALL_TIMEOUT_S,
        metavar="S",
        help=f"seconds a forwarded tool call may take; a slower one is answered with a JSON-RPC error "
        f"(default {DEFAULT_CALL_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "upstream", nargs=argparse.REMAINDER, help="-- then the upstream server's command and args"
    )
    args = parser.parse_args(argv)
    command = args.upstream[1:] if args.upstream[:1] == ["--"] else args.upstream
    if not command:
        parser.error("the upstream server's command is missing (after --)")
    mcp, _ = _require_mcp()
    import anyio

    try:
        context = _parse_context(args.context)
        gate = open_gate(args.ledger, core=args.core or ())
    except (ScarsError, OSError) as exc:
        print(f"mcp_gate: {exc}", file=sys.stderr)
        return 2
    try:
        upstream = mcp.StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ))
        proxy = McpGate(
            gate,
            upstream,
            context=context,
            handshake_timeout_s=args.handshake_timeout,
            call_timeout_s=args.call_timeout,
        )
        anyio.run(proxy.serve_stdio)
    except (ContextMappingError, GateError) as exc:
        print(f"mcp_gate: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the upstream could not be started or reached: nothing is served (fail closed)
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        print(
            f"mcp_gate: the upstream MCP server {' '.join(command)!r} failed: {exc}; nothing is served",
            file=sys.stderr,
        )
        return 1
    finally:
        gate.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
