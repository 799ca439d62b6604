"""A toy OpenAI-compatible server on loopback for the backend tests (``tests/agents/policies/test_openai.py``,
``tests/experiments/test_llm_backends.py``)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def token_logprob(token: str) -> float:
    # A toy "model": it likes the sinkbasin, dislikes long words.
    return -0.1 if token == "sinkbasin" else -0.2 * len(token)


class Handler(BaseHTTPRequestHandler):
    """A toy OpenAI-compatible server. Class attributes switch its behaviour for the fault tests: ``list_prompts``
    (does /v1/completions score a list of prompts in one request), ``echo`` (does it return prompt log-probs),
    ``honour_choice`` (does it obey ``structured_outputs``), ``owner`` (``owned_by`` in /v1/models)."""

    requests: list = []
    list_prompts = True
    echo = True
    honour_choice = True
    owner = "vllm"
    key = ""

    def log_message(self, *args):
        pass

    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self):
        if Handler.key and self.headers.get("Authorization") != f"Bearer {Handler.key}":
            self._reply(401, {"error": "invalid api key"})
            return False
        return True

    def do_GET(self):
        Handler.requests.append((self.path, None))
        if not self._authorised():
            return
        if self.path == "/v1/models":
            self._reply(200, {"object": "list", "data": [{"id": "toy", "owned_by": Handler.owner}]})
        else:
            self._reply(404, {"error": "unknown path"})

    @staticmethod
    def _echo(text):
        offsets, tokens, pos = [], [], 0
        for tok in text.split(" "):
            offsets.append(pos)
            tokens.append(tok)
            pos += len(tok) + 1
        lps = [None] + [token_logprob(t) for t in tokens[1:]]
        return {"tokens": tokens, "text_offset": offsets, "token_logprobs": lps}

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.requests.append((self.path, body))
        if not self._authorised():
            return
        if self.path == "/v1/completions" and body.get("echo"):
            if not Handler.echo:  # llama.cpp's C++ server: echo is not supported
                self._reply(400, {"error": {"message": "Only no echo is supported"}})
                return
            prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
            if len(prompts) > 1 and not Handler.list_prompts:
                self._reply(500, {"error": "only one prompt per request"})
                return
            choices = [{"index": i, "text": p, "logprobs": self._echo(p)} for i, p in enumerate(prompts)]
            self._reply(200, {"choices": choices})
        elif self.path == "/v1/completions":  # generate mode: a structured-output choice
            choices = (body.get("structured_outputs") or {}).get("choice") or []
            answer = (
                sorted(choices, key=len)[0] if choices and Handler.honour_choice else " I will go to the moon"
            )
            self._reply(200, {"choices": [{"index": 0, "text": " " + answer}]})
        elif self.path == "/v1/chat/completions":
            content = body["messages"][-1]["content"]
            if "Write ONE rule" in content:  # the LLM-only Patch prompt: answer with chatter around a rule
                answer = 'Here is the rule:\nif action.recep == "microwave 1" then forbid_env_action("heat")\nDone.'
            else:  # a reflection
                answer = "I used the broken microwave. Next time I will heat with another microwave."
            self._reply(200, {"choices": [{"message": {"role": "assistant", "content": answer}}]})
        else:
            self._reply(404, {"error": "unknown path"})


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler] = Handler) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port for the block's duration; yields the base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
