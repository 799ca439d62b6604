"""Reading a sweep spec (issue 28): every field of the spec itself is type-checked before anything starts (one
error line naming the field, the value and the type), and joining a cluster has a timeout."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest
from click.testing import CliRunner

from scars.experiments.cli import main
from scars.experiments.sweep import _probe, connect_ray
from scars.experiments.sweep_spec import SweepError, SweepSpec

BAD_SPECS = {
    "grid-is-a-string": ('grid = "abc"\n', "grid = 'abc' is str"),
    "max-failures-text": ('[grid]\nseed = [0, 1]\n[tune]\nmax_failures = "x"\n', "max_failures = 'x' is str"),
    "name-is-a-number": ("name = 5\n[grid]\nseed = [0, 1]\n", "name = 5 is int"),
    "tune-not-a-table": ("tune = 3\n[grid]\nseed = [0, 1]\n", "tune = 3 is int"),
    "address-number": ("[grid]\nseed = [0, 1]\n[tune]\naddress = 7\n", "address = 7 is int"),
    "fixed-is-a-list": ("fixed = [1, 2]\n[grid]\nseed = [0, 1]\n", "fixed = [1, 2] is list"),
    "bool-as-int": (
        "[grid]\nseed = [0, 1]\n[tune]\nmax_concurrent = true\n",
        "max_concurrent = True is bool",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_a_spec_field_of_the_wrong_type_is_one_error_line_before_anything_starts(tmp_path, case):
    text, words = BAD_SPECS[case]
    spec = tmp_path / "s.toml"
    spec.write_text(text)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert not (out / "tune").exists() and not (out / "sweep.json").exists()  # Ray never started


def test_a_config_field_of_the_wrong_type_is_refused_before_ray_starts(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[grid]\nseed = [0, 1]\n[fixed]\nepisodes = "abc"\n')
    result = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "grid point" in result.stderr and "Traceback" not in result.output
    with pytest.raises(SweepError):
        SweepSpec(grid={"seed": [0]}, connect_timeout_s=0)


def test_an_address_where_no_cluster_listens_is_one_line_at_once(tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    started = time.monotonic()
    result = CliRunner().invoke(
        main, ["sweep", "--grid", "seed=0,1", "--address", f"127.0.0.1:{port}", "--out", str(tmp_path / "o")]
    )
    assert time.monotonic() - started < 20
    assert result.exit_code == 2 and "no Ray cluster at 127.0.0.1" in result.stderr, result.output
    bad = CliRunner().invoke(
        main, ["sweep", "--grid", "seed=0,1", "--address", "nohost", "--out", str(tmp_path / "o2")]
    )
    assert bad.exit_code == 2 and "is not HOST:PORT" in bad.stderr


def test_an_address_that_never_answers_times_out():
    """A head whose accept queue is full drops the SYN, like a host behind a firewall: the timeout fires."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fill = []
        for _ in range(4):
            client = socket.socket()
            client.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                client.connect(("127.0.0.1", port))
            fill.append(client)
        time.sleep(0.2)
        started = time.monotonic()
        with pytest.raises(SweepError, match="within 0.5s"):
            _probe(f"127.0.0.1:{port}", 0.5)
        assert time.monotonic() - started < 5
        for client in fill:
            client.close()


def test_paper_probes_its_address_too(tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    started = time.monotonic()
    result = CliRunner().invoke(
        main, ["paper", "--scale", "smoke", "--address", f"127.0.0.1:{port}", "--out", str(tmp_path / "p")]
    )
    assert time.monotonic() - started < 30
    assert result.exit_code == 2 and "no Ray cluster at 127.0.0.1" in result.stderr, result.output


def test_an_unreachable_address_is_refused_even_with_ray_already_up_in_this_process():
    """A notebook or an earlier sweep left Ray running here: an explicit address where no cluster listens is still
    one error line, never silently replaced by the local instance (and the order of test files cannot hide the
    probe)."""
    import ray

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        with pytest.raises(SweepError, match="no Ray cluster at 127.0.0.1"):
            connect_ray(f"127.0.0.1:{port}", 5.0)
        assert connect_ray("", 5.0) is False  # the local instance at hand is used as before
    finally:
        if started:
            ray.shutdown()
