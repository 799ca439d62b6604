"""The OpenAI-compatible backend against a real local HTTP server started by the test (loopback only)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from agents.policies import PolicyInput
from agents.policies.openai_server import OpenAICompatiblePolicy, ServerError
from synthesis.dsl import Action


def _token_logprob(token: str) -> float:
    # A toy "model": it likes the sinkbasin, dislikes long words.
    return -0.1 if token == "sinkbasin" else -0.2 * len(token)


class Handler(BaseHTTPRequestHandler):
    requests: list = []

    def log_message(self, *args):
        pass

    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.requests.append((self.path, body))
        if self.path == "/v1/completions" and body.get("echo"):
            text = body["prompt"]
            offsets, tokens, pos = [], [], 0
            for tok in text.split(" "):
                offsets.append(pos)
                tokens.append(tok)
                pos += len(tok) + 1
            lps = [None] + [_token_logprob(t) for t in tokens[1:]]
            logprobs = {"tokens": tokens, "text_offset": offsets, "token_logprobs": lps}
            self._reply(200, {"choices": [{"text": text, "logprobs": logprobs}]})
        elif self.path == "/v1/chat/completions":
            choices = body.get("guided_choice") or []
            content = body["messages"][-1]["content"]
            if choices:
                answer = sorted(choices, key=len)[0]
            elif "Write ONE rule" in content:  # the LLM-only Patch prompt: answer with chatter around a rule
                answer = 'Here is the rule:\nif action.recep == "microwave 1" then forbid_env_action("heat")\nDone.'
            else:  # a reflection
                answer = "I used the broken microwave. Next time I will heat with another microwave."
            self._reply(200, {"choices": [{"message": {"role": "assistant", "content": answer}}]})
        else:
            self._reply(404, {"error": "unknown path"})


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


ACTIONS = (
    Action.env("clean", "clean cup 1 with sinkbasin 1"),
    Action.env("clean", "clean cup 1 with bathtubbasin 1"),
    Action.env("go", "go to fridge 1"),
)


def _inp():
    return PolicyInput("You are in the kitchen.", "clean a cup", {}, ACTIONS)


def test_logprob_choice_scoring_sums_the_command_tokens(server):
    policy = OpenAICompatiblePolicy(server, "toy", mode="logprobs")
    scores = policy.logits(_inp(), np.random.default_rng(0))
    expected = [sum(_token_logprob(t) for t in a.text.split(" ")) for a in ACTIONS]
    np.testing.assert_allclose(scores, expected)
    assert int(np.argmax(scores)) == 2


def test_guided_choice_applies_the_mask_before_choice(server):
    policy = OpenAICompatiblePolicy(server, "toy", mode="guided_choice")
    free = policy.logits(_inp(), np.random.default_rng(0))
    assert int(np.argmax(free)) == 2  # the toy server picks the shortest allowed command
    Handler.requests.clear()
    masked = policy.logits(_inp(), np.random.default_rng(0), masked=[False, False, True])
    assert "go to fridge 1" not in Handler.requests[-1][1]["guided_choice"]
    assert int(np.argmax(masked)) == 0


def test_server_errors_are_named(server):
    with pytest.raises(ServerError, match="404"):
        OpenAICompatiblePolicy(server + "/nope", "toy")._post("/v1/completions", {})


def test_free_text_for_reflections_and_patches(server):
    policy = OpenAICompatiblePolicy(server, "toy")
    assert "microwave" in policy.write_text("Reflect on your failure.")
