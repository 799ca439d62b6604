"""OpenAI tool calling under the scars gate, with the real ``openai`` client and a local OpenAI-compatible server
(started here in a thread; no network): a tool forbidden outright is not offered, a forbidden returned call becomes
the fallback before execution. Needs the 'runtime' extra."""

import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai

from scars.agents.runtime import open_gate
from scars.agents.runtime.adapters.openai_tools import OpenAIToolGate

TOOLS = [
    {
        "type": "function",
        "function": {"name": n, "parameters": {"type": "object", "properties": p, "required": r}},
    }
    for n, p, r in [
        ("get_weather", {"city": {"type": "string"}}, ["city"]),
        ("book_flight", {"to": {"type": "string"}, "seats": {"type": "integer"}}, ["to", "seats"]),
        ("close_account", {"reason": {"type": "string"}}, []),
    ]
]


class Handler(BaseHTTPRequestHandler):
    """Answers every chat completion with two tool calls, whatever it is offered."""

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        print("server was offered:", [t["function"]["name"] for t in body.get("tools", [])])
        calls = [("get_weather", {"city": "Oslo"}), ("book_flight", {"to": "Oslo", "seats": 40})]
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, (n, a) in enumerate(calls)
            ],
        }
        raw = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
client = openai.OpenAI(
    base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="local", max_retries=0
)

core = ['if user_tier == "basic" then forbid_tool_call("close_account")']  # H: never offered to a basic user
with open_gate(Path(tempfile.mkdtemp()) / "ledger.sqlite", core=core) as gate:
    gate.admit_rule(
        'if action.seats > 9 then forbid_tool_call("book_flight")', reason="group bookings need a human"
    )
    middleware = OpenAIToolGate(gate)
    context = {"user_tier": "basic"}
    completion = middleware.create(
        client, context=context, model="any", messages=[{"role": "user", "content": "trip"}], tools=TOOLS
    )
    print("returned calls:", [c.function.name for c in completion.choices[0].message.tool_calls])
    executed = []
    functions = {
        "get_weather": lambda city: executed.append(city) or f"sunny in {city}",
        "book_flight": lambda to, seats: executed.append(to) or "booked",
    }
    for message in middleware.run_tool_calls(completion, functions, context):
        print(message["tool_call_id"], "->", message["content"])
    assert executed == ["Oslo"]  # the forbidden booking never ran
server.shutdown()
