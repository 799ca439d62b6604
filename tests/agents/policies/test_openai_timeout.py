"""A model server that accepts the connection and then says nothing is one error line after ``server_timeout``
seconds, never a hang — at the backend and through the CLI."""

from __future__ import annotations

import socket
import threading
import time

from click.testing import CliRunner

from scars.agents.policies.openai_server import OpenAICompatiblePolicy, ServerError
from scars.experiments.cli import main


def _silent_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held = []

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)  # read nothing, answer nothing

    threading.Thread(target=accept, daemon=True).start()
    return server, held


def test_a_silent_server_is_a_server_error_after_the_timeout():
    server, held = _silent_server()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        started = time.monotonic()
        try:
            OpenAICompatiblePolicy(url, "toy", timeout=1.0)
        except ServerError as exc:
            assert "did not answer" in str(exc) and "within 1 s" in str(exc)
        else:
            raise AssertionError("a silent server was accepted")
        assert time.monotonic() - started < 10
    finally:
        server.close()
        for conn in held:
            conn.close()


def test_the_cli_says_it_in_one_line_and_writes_nothing(tmp_path):
    server, held = _silent_server()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        out = tmp_path / "o"
        result = CliRunner().invoke(
            main,
            ["run", "tier1", "--backend", "openai", "--server-url", url, "--server-model", "toy"]
            + ["--server-timeout", "1", "--episodes", "1", "--out", str(out)],
        )
        assert (
            result.exit_code == 2 and "did not answer" in result.output and "Traceback" not in result.output
        )
        assert not out.exists() or not any(out.iterdir())
    finally:
        server.close()
        for conn in held:
            conn.close()
