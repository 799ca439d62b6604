"""The OpenAI-compatible backend against a real local HTTP server started by the test (loopback only)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from agents.policies import PolicyInput
from agents.policies.openai_server import OpenAICompatiblePolicy, ServerError, gbnf_choice
from synthesis.dsl import Action


def _token_logprob(token: str) -> float:
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
        lps = [None] + [_token_logprob(t) for t in tokens[1:]]
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


@pytest.fixture(autouse=True)
def default_server_behaviour():
    yield
    Handler.list_prompts, Handler.echo, Handler.honour_choice, Handler.owner, Handler.key = (
        True,
        True,
        True,
        "vllm",
        "",
    )


@pytest.mark.parametrize("list_prompts", [True, False])
def test_logprob_choice_scoring_sums_the_command_tokens(server, list_prompts):
    Handler.list_prompts = list_prompts
    policy = OpenAICompatiblePolicy(server, "toy")
    assert policy.batched_prompts is list_prompts  # detected at construction
    Handler.requests.clear()
    scores = policy.logits(_inp(), np.random.default_rng(0))
    expected = [sum(_token_logprob(t) for t in a.text.split(" ")) for a in ACTIONS]
    np.testing.assert_allclose(scores, expected)
    assert int(np.argmax(scores)) == 2
    # one request with the list of prompts, or one request per command (sent concurrently)
    assert len(Handler.requests) == (1 if list_prompts else len(ACTIONS))


def test_generate_mode_tells_the_server_only_the_unmasked_commands(server):
    policy = OpenAICompatiblePolicy(server, "toy", policy_mode="generate")
    assert policy.choice_param == "structured_outputs"  # detected from owned_by "vllm"
    free = policy.generate(_inp(), [False, False, False])
    assert free.index == 2 and free.constrained  # the toy server picks the shortest allowed command
    Handler.requests.clear()
    written = policy.generate(_inp(), [False, False, True])
    sent = Handler.requests[-1][1]["structured_outputs"]["choice"]
    assert "go to fridge 1" not in sent and written.index == 0


def test_a_server_that_ignores_the_choice_parameter_fails_closed(server):
    Handler.honour_choice = False
    policy = OpenAICompatiblePolicy(server, "toy", policy_mode="generate", choice_param="structured_outputs")
    with pytest.raises(ServerError, match="ignored the structured-output parameter 'structured_outputs'"):
        policy.generate(_inp(), [False, False, True])


def test_choice_parameter_per_server(server):
    Handler.owner = "llamacpp"
    assert OpenAICompatiblePolicy(server, "toy", policy_mode="generate").choice_param == "grammar"
    Handler.owner = "someone"
    with pytest.raises(ServerError, match="set --choice-param"):
        OpenAICompatiblePolicy(server, "toy", policy_mode="generate")
    fields = OpenAICompatiblePolicy(server, "toy", policy_mode="generate", choice_param="guided_choice")
    assert fields._choice_fields(["a"]) == {"guided_choice": ["a"]}


def test_gbnf_choice_escapes_quotes():
    assert gbnf_choice(['say "hi"', "go"]) == 'root ::= " "? ("say \\"hi\\"" | "go")'


def test_server_errors_are_named(server):
    with pytest.raises(ServerError, match="is not served by .*it serves: toy"):
        OpenAICompatiblePolicy(server, "gpt-9")
    with pytest.raises(ServerError, match="404"):
        OpenAICompatiblePolicy(server + "/nope", "toy")
    with pytest.raises(ServerError, match="cannot reach the model server"):
        OpenAICompatiblePolicy("http://127.0.0.1:9", "toy", timeout=2)
    Handler.echo = False
    with pytest.raises(ServerError, match="use --policy-mode generate"):
        OpenAICompatiblePolicy(server, "toy")
    OpenAICompatiblePolicy(server, "toy", policy_mode="generate")  # generate mode needs no echo


def test_the_api_key_is_sent(server):
    Handler.key = "sk-test"
    with pytest.raises(ServerError, match="refused the API key .*OPENAI_API_KEY"):
        OpenAICompatiblePolicy(server, "toy")
    policy = OpenAICompatiblePolicy(server, "toy", api_key="sk-test")
    assert policy.logits(_inp(), np.random.default_rng(0)).shape == (3,)


def test_free_text_for_reflections_and_patches(server):
    policy = OpenAICompatiblePolicy(server, "toy")
    assert "microwave" in policy.write_text("Reflect on your failure.")


class NotAnAPI(BaseHTTPRequestHandler):
    """A web server that is not the API: every path answers an HTML page."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        data = b"<html><body>Welcome to nginx!</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_a_url_that_is_not_the_api_is_one_error_line_and_nothing_is_written(tmp_path):
    from click.testing import CliRunner

    from experiments.cli import main

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), NotAnAPI)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with pytest.raises(ServerError, match="not an OpenAI-compatible API"):
            OpenAICompatiblePolicy(url, "toy")
        out = tmp_path / "run"
        argv = [
            "run",
            "tier1",
            "--backend",
            "openai",
            "--server-url",
            url,
            "--server-model",
            "toy",
            "--out",
            str(out),
        ]
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 2 and "not an OpenAI-compatible API" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
    finally:
        httpd.shutdown()
