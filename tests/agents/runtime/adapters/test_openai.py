"""The OpenAI tool-calling middleware against a local OpenAI-compatible chat-completions server (started here, in a
thread) through the real ``openai`` client: masked tools are not offered, masked tool calls become the fallback
before execution and never reach the tool."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

openai = pytest.importorskip("openai", reason="the 'runtime' extra (openai) is not installed")

from scars.agents.runtime import ContextMappingError, GateError, ScarBlocked, open_gate  # noqa: E402
from scars.agents.runtime.adapters.openai_tools import OpenAIToolGate  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "transfer",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}},
                "required": ["to", "amount"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "wipe_disk",
            "parameters": {"type": "object", "properties": {"device": {"type": "string"}}},
        },
    },
]


class FakeServer:
    """A tiny OpenAI-compatible /v1/chat/completions server: replies with the tool calls it is told to."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.reply_calls: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                calls = [
                    {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                    for i, (n, a) in enumerate(outer.reply_calls)
                ]
                data = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "tool_calls",
                            "message": {"role": "assistant", "content": None, "tool_calls": calls},
                        }
                    ],
                }
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture
def gate(tmp_path):
    g = open_gate(
        tmp_path / "ledger.sqlite", core=['if mode == "readonly" then forbid_tool_call("wipe_disk")']
    )
    g.admit_rule('if action.to == "mallory" then forbid_tool_call("transfer")', reason="operator")
    yield g
    g.close()


def test_masked_tools_are_not_offered_and_masked_calls_never_run(server, gate):
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
    middleware = OpenAIToolGate(gate)
    executed = []
    functions = {
        "transfer": lambda to, amount: executed.append(("transfer", to, amount)) or "done",
        "wipe_disk": lambda device=None: executed.append(("wipe_disk", device)) or "wiped",
    }
    server.reply_calls = [
        ("transfer", json.dumps({"to": "bob", "amount": 5})),
        ("transfer", json.dumps({"to": "mallory", "amount": 5})),
        ("wipe_disk", json.dumps({"device": "sda"})),
        ("transfer", json.dumps({"to": "bob", "amount": "lots"})),
        ("transfer", "{not json"),
    ]
    context = {"mode": "readonly"}
    completion = middleware.create(
        client, context=context, model="m", messages=[{"role": "user", "content": "go"}], tools=TOOLS
    )
    offered = [t["function"]["name"] for t in server.requests[-1]["tools"]]
    assert offered == ["transfer"]  # wipe_disk is forbidden outright in this context
    names = [c.function.name for c in completion.choices[0].message.tool_calls]
    assert names == ["transfer", "safe_refusal", "safe_refusal", "safe_refusal", "safe_refusal"]
    refusals = [json.loads(c.function.arguments) for c in completion.choices[0].message.tool_calls[1:]]
    assert refusals[0]["refused"] == "transfer" and refusals[0]["rules"]
    assert "the mapping declares int" in refusals[2]["reason"] and "not JSON" in refusals[3]["reason"]
    messages = middleware.run_tool_calls(completion, functions, context)
    assert executed == [("transfer", "bob", 5)]  # only the allowed call reached a tool
    assert [m["tool_call_id"] for m in messages] == [f"call_{i}" for i in range(5)]
    assert messages[1]["content"].startswith("refused by the scars gate")


def test_an_unscreened_completion_fails_closed_at_execution(server, gate):
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
    server.reply_calls = [("transfer", json.dumps({"to": "mallory", "amount": 1}))]
    raw = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS)
    middleware = OpenAIToolGate(gate)
    middleware.declare(TOOLS)
    executed = []
    with pytest.raises(ScarBlocked):
        middleware.run_tool_calls(raw, {"transfer": lambda **kw: executed.append(kw)}, {"mode": "rw"})
    assert executed == []
    with pytest.raises(ContextMappingError, match="not an OpenAI function tool"):
        middleware.declare([{"type": "function"}])
    with pytest.raises(GateError, match="stream=True"):
        middleware.create(client, model="m", messages=[], tools=TOOLS, stream=True)
    assert len(server.requests) == 1  # the streamed request was never sent
