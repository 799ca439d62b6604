"""The OpenAI-compatible backend against a real local HTTP server started by the test (loopback only)."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from scars.agents.policies import PolicyInput
from scars.agents.policies.openai_server import OpenAICompatiblePolicy, ServerError, gbnf_choice
from scars.synthesis.dsl import Action
from support.openai_server import Handler, serve, token_logprob


@pytest.fixture(scope="module")
def server():
    with serve() as url:
        yield url


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
    expected = [sum(token_logprob(t) for t in a.text.split(" ")) for a in ACTIONS]
    np.testing.assert_allclose(scores, expected)
    assert int(np.argmax(scores)) == 2
    # one request with the list of prompts, or one request per command (sent concurrently)
    assert len(Handler.requests) == (1 if list_prompts else len(ACTIONS))


@pytest.mark.parametrize("list_prompts", [True, False])
def test_a_text_scored_once_is_not_sent_again(server, list_prompts):
    """Echoed log-probs depend on the text alone: re-scoring the same decision (a re-plan the prompt does not show)
    sends nothing; a decision with one new command sends only that command's text."""
    Handler.list_prompts = list_prompts
    policy = OpenAICompatiblePolicy(server, "toy")
    first = policy.logits(_inp(), np.random.default_rng(0))
    Handler.requests.clear()
    np.testing.assert_array_equal(policy.logits(_inp(), np.random.default_rng(1)), first)
    assert Handler.requests == []
    more = PolicyInput("You are in the kitchen.", "clean a cup", {}, (*ACTIONS, Action.env("look", "look")))
    scores = policy.logits(more, np.random.default_rng(0))
    np.testing.assert_array_equal(scores[:3], first)
    sent = [body["prompt"] for _, body in Handler.requests]
    assert (
        sent in ([[sent[0][0]]], [sent[0]]) and str(sent).count("look") == 1 and policy.scored_requests == 4
    )
    policy.cache_size = 2
    policy.logits(_inp(), np.random.default_rng(0))
    assert len(policy._scored) == 3  # bounded, but never below one decision's texts


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

    from scars.experiments.cli import main

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
