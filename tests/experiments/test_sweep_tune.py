"""Sweeps on Ray Tune (experiments/sweep.py): one trial per grid point, results from the ResultGrid, FailureConfig
retries, failed runs recorded, ``Tuner.restore`` after a kill (no finished run rerun, none duplicated), a sweep
against a ``ray start --head`` cluster, and the CLI on the real tier 1. The in-process tests share the session's
local Ray (``ray_session``) and use a counting stand-in for the tier's run function (shipped by value)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from rich.console import Console

from scars.experiments.cli import main
from scars.experiments.report import DamagedResultFile
from scars.experiments.sweep import run_sweep
from scars.experiments.sweep_spec import SweepError, SweepSpec

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def counting_run(fail_seeds=(), fail_first_attempt=False, stopped_seeds=()):
    """A stand-in for a tier's run function: records each call, writes config.json and summary.json like a real
    run, and fails for ``fail_seeds`` (always) or on a run's first attempt (``fail_first_attempt``); for
    ``stopped_seeds`` it writes a summary marked stopped (``experiments.stopping``)."""

    def run(cfg, out, *, tracking=None, progress=None):
        calls = out.parent.parent / "calls"
        calls.mkdir(exist_ok=True)
        log = calls / out.name
        with open(log, "a") as fh:
            fh.write("call\n")
        if cfg.seed in fail_seeds:
            raise RuntimeError(f"injected failure for seed {cfg.seed}")
        if fail_first_attempt and len(log.read_text().splitlines()) == 1:
            raise RuntimeError("injected first-attempt failure")
        out.mkdir(parents=True, exist_ok=True)
        summary = {
            "success_rate": 0.5 + 0.1 * cfg.seed,
            "episodes": cfg.episodes,
            "repeat_violations": cfg.seed,
            "reexposures": 4,
            "rvr": cfg.seed / 4,
            "nested": {"a": 1},
        }
        if cfg.seed in stopped_seeds:
            summary |= {"complete": False, "stopped": "at decision 7 the ledger holds 1 event(s) …"}
        (out / "config.json").write_text(json.dumps(asdict(cfg)))
        (out / "summary.json").write_text(json.dumps(summary))
        return summary

    return run


def check_tune_result_files(out: Path, result) -> None:
    """Every config field is a key of Tune's param_space, and Tune writes its result files: ExperimentAnalysis over
    the sweep folder and the ResultGrid's frame give one row per trial with config/<field> columns."""
    from ray import tune

    frame = tune.ExperimentAnalysis(str(out / "tune")).dataframe()
    assert len(frame) == 4
    for field in ("method", "seed", "episodes", "schedule"):
        assert f"config/{field}" in frame.columns, field
    rows = frame.set_index("folder").loc[list(result.runs["run_name"])]
    assert list(rows["config/method"]) == ["scars", "scars", "rag", "rag"]
    assert list(rows["config/seed"]) == [0, 1, 0, 1] and set(rows["config/episodes"]) == {2}
    assert list(rows["success_rate"]) == pytest.approx([0.5, 0.6, 0.5, 0.6]) and rows["finished"].all()

    def tier1_run(config):  # restore only reads the results: any trainable of the sweep's name
        raise AssertionError("not run")

    grid = tune.Tuner.restore(str(out / "tune"), trainable=tier1_run).get_results()
    frame = grid.get_dataframe()
    assert len(frame) == 4 and {"config/method", "config/seed", "success_rate"} <= set(frame.columns)
    for trial in (out / "tune").iterdir():
        if trial.is_dir():
            assert (trial / "result.json").is_file() and (trial / "params.json").is_file(), trial


def _calls(out: Path) -> dict[str, int]:
    return {p.name: len(p.read_text().splitlines()) for p in (out / "calls").iterdir()}


SPEC = dict(grid={"method": ["scars", "rag"], "seed": [0, 1]}, fixed={"episodes": 2, "schedule": "smoke"})


def test_each_trial_runs_once_and_the_results_come_from_the_result_grid(ray_session, tmp_path):
    out = tmp_path / "sweep"
    result = run_sweep(SweepSpec(**SPEC, name="t"), out, run_fn=counting_run(), console=Console(quiet=True))
    assert list(result.runs["run_name"]) == [
        "tier1-scars-s0",
        "tier1-scars-s1",
        "tier1-rag-s0",
        "tier1-rag-s1",
    ]
    assert (result.runs["status"] == "ok").all() and not result.failed and not result.restored
    assert _calls(out) == dict.fromkeys(result.runs["run_name"], 1)
    assert list(result.runs["success_rate"]) == pytest.approx([0.5, 0.6, 0.5, 0.6])
    assert json.loads(result.runs["nested"].iloc[0]) == {"a": 1}  # non-scalars kept as JSON text
    agg = result.aggregate.set_index("label")
    assert agg.loc["scars", "success_rate_n"] == 2 and agg.loc["scars", "success_rate_mean"] == pytest.approx(
        0.55
    )
    assert agg.loc["rag", "rvr_diff_vs_scars"] == pytest.approx(0.0)
    for name in (
        "sweep.json",
        "runs.parquet",
        "runs.csv",
        "aggregate.parquet",
        "aggregate.md",
        "ablations.png",
    ):
        assert (out / name).is_file(), name
    assert (out / "tune" / "tuner.pkl").is_file()
    assert pd.read_parquet(out / "runs.parquet")["run_name"].tolist() == result.runs["run_name"].tolist()
    check_tune_result_files(out, result)

    # the same command again: Tuner.restore, nothing rerun, the same results
    again = run_sweep(SweepSpec(**SPEC, name="t"), out, run_fn=counting_run(), console=Console(quiet=True))
    assert again.restored and _calls(out) == dict.fromkeys(result.runs["run_name"], 1)
    assert again.runs["success_rate"].tolist() == result.runs["success_rate"].tolist()

    # another sweep into the same folder is refused, not mixed in
    with pytest.raises(SweepError, match="another sweep"):
        run_sweep(
            SweepSpec(grid={"seed": [0]}, name="t"), out, run_fn=counting_run(), console=Console(quiet=True)
        )


def test_resume_rechecks_finished_runs_and_reruns_a_damaged_one(ray_session, tmp_path):
    """Issue 28 item 6: a finished run whose summary.json was truncated or replaced, or whose config.json was
    deleted, is run again on resume (never counted ok from Tune's memory); an intact one is not."""
    out = tmp_path / "sweep"
    spec = SweepSpec(**SPEC, name="r")
    first = run_sweep(spec, out, run_fn=counting_run(), console=Console(quiet=True))
    assert (first.runs["status"] == "ok").all()
    runs = out / "runs"
    (runs / "tier1-scars-s0" / "summary.json").write_text('{"success_rate": 0.')  # truncated
    (runs / "tier1-scars-s1" / "summary.json").write_text("[1, 2, 3]")  # replaced by another shape
    (runs / "tier1-rag-s0" / "config.json").unlink()  # deleted
    again = run_sweep(spec, out, run_fn=counting_run(), console=Console(quiet=True))
    assert again.restored and (again.runs["status"] == "ok").all()
    assert _calls(out) == {"tier1-scars-s0": 2, "tier1-scars-s1": 2, "tier1-rag-s0": 2, "tier1-rag-s1": 1}
    for name in ("tier1-scars-s0", "tier1-scars-s1", "tier1-rag-s0"):
        assert isinstance(json.loads((runs / name / "summary.json").read_text()), dict)
        assert (runs / name / "config.json").is_file()
    assert again.runs["success_rate"].tolist() == first.runs["success_rate"].tolist()


def test_a_damaged_sweep_json_is_refused_not_overwritten(tmp_path):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text("[not, a, sweep")
    with pytest.raises(DamagedResultFile, match="sweep.json"):
        run_sweep(SweepSpec(**SPEC, name="d"), out, run_fn=counting_run(), console=Console(quiet=True))
    assert (out / "sweep.json").read_text() == "[not, a, sweep"


@pytest.mark.slow
def test_a_failed_run_is_recorded_and_failure_config_retries_it(ray_session, tmp_path):
    out = tmp_path / "fail"
    spec = SweepSpec(grid={"seed": [0, 1]}, fixed={"method": "rag", "episodes": 1}, name="f")
    result = run_sweep(spec, out, run_fn=counting_run(fail_seeds=(1,)), console=Console(quiet=True))
    assert result.failed == ("tier1-rag-s1",)
    row = result.runs.set_index("run_name").loc["tier1-rag-s1"]
    assert row["status"] == "failed" and "injected failure for seed 1" in row["error"]
    assert "FAILED" in (out / "aggregate.md").read_text()

    retried = tmp_path / "retry"
    spec = SweepSpec(grid={"seed": [0]}, fixed={"method": "rag", "episodes": 1}, name="r", max_failures=1)
    result = run_sweep(
        spec, retried, run_fn=counting_run(fail_first_attempt=True), console=Console(quiet=True)
    )
    assert not result.failed and _calls(retried) == {"tier1-rag-s0": 2}  # FailureConfig(max_failures=1)


def test_a_run_stopped_by_another_process_is_a_failed_trial_and_runs_again_on_resume(ray_session, tmp_path):
    """A run another process's ledger write stopped (its summary marked ``complete: false``) is a failed trial,
    never pooled; re-running the sweep runs it again (before, a stopped tier-2 or tier-3 run raised, and a stopped
    tier-1 run was counted ok)."""
    out = tmp_path / "stopped"
    spec = SweepSpec(grid={"seed": [0, 1]}, fixed={"method": "rag", "episodes": 1}, name="s")
    result = run_sweep(spec, out, run_fn=counting_run(stopped_seeds=(1,)), console=Console(quiet=True))
    assert result.failed == ("tier1-rag-s1",)
    row = result.runs.set_index("run_name").loc["tier1-rag-s1"]
    assert row["status"] == "failed" and "stopped before its end" in row["error"]
    result = run_sweep(spec, out, run_fn=counting_run(), console=Console(quiet=True))
    assert not result.failed and _calls(out) == {"tier1-rag-s0": 1, "tier1-rag-s1": 2}


DRIVER = textwrap.dedent(
    """
    import json, sys, time
    from dataclasses import asdict
    from pathlib import Path
    from rich.console import Console
    from scars.experiments.sweep_spec import SweepSpec
    from scars.experiments.sweep import run_sweep

    def slow_run(cfg, out, *, tracking=None, progress=None):
        calls = out.parent.parent / "calls"
        calls.mkdir(exist_ok=True)
        with open(calls / out.name, "a") as fh:
            fh.write("call\\n")
        time.sleep(SECONDS)
        out.mkdir(parents=True, exist_ok=True)
        summary = {"success_rate": 1.0, "episodes": 1, "repeat_violations": 0, "reexposures": 0}
        (out / "config.json").write_text(json.dumps(asdict(cfg)))
        (out / "summary.json").write_text(json.dumps(summary))
        return summary

    spec = SweepSpec(grid={"seed": list(range(6))}, fixed={"method": "rag", "episodes": 1}, name="k",
                     max_concurrent=1, address=ADDRESS)
    result = run_sweep(spec, Path(sys.argv[1]), run_fn=slow_run, console=Console(quiet=True))
    print("RESTORED" if result.restored else "FRESH", len(result.runs), len(result.failed))
    """
)


def _driver(tmp_path: Path, seconds: float, address: str = "") -> Path:
    path = tmp_path / "driver.py"
    path.write_text(DRIVER.replace("SECONDS", repr(seconds)).replace("ADDRESS", repr(address)))
    return path


def _env() -> dict[str, str]:
    # RAY_AUTH_MODE=disabled: the test's head and driver need no shared token (Ray >= 2.5x enables token auth)
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "WANDB_MODE": "offline",
        "RAY_DEDUP_LOGS": "0",
        "RAY_AUTH_MODE": "disabled",
    }


@pytest.mark.slow
def test_a_killed_sweep_resumes_with_tuner_restore_and_reruns_no_finished_trial(tmp_path):
    out = tmp_path / "killed"
    driver = _driver(tmp_path, 1.5)
    proc = subprocess.Popen(
        [PYTHON, str(driver), str(out)],
        cwd=REPO,
        env=_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(list((out / "runs").glob("*/summary.json"))) < 2:
            time.sleep(0.2)
        assert len(list((out / "runs").glob("*/summary.json"))) >= 2, "the sweep did not get going"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its local Ray and its trials, mid-sweep
        proc.wait()
    finished_before = {p.parent.name for p in (out / "runs").glob("*/summary.json")}
    assert 2 <= len(finished_before) < 6
    done = subprocess.run(
        [PYTHON, str(driver), str(out)], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["RESTORED", "6", "0"] or done.stdout.strip().endswith("RESTORED 6 0")
    calls = _calls(out)
    assert all(calls[name] == 1 for name in finished_before), calls  # none rerun
    assert set(calls) == {f"tier1-rag-s{i}" for i in range(6)}
    runs = pd.read_parquet(out / "runs.parquet")
    assert (
        sorted(runs["run_name"]) == sorted(calls) and (runs["status"] == "ok").all()
    )  # one result per trial


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_sweep_runs_against_a_ray_start_head_cluster(tmp_path):
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay < 108 characters
    head = subprocess.Popen(
        [
            str(Path(PYTHON).with_name("ray")),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        cwd=REPO,
        env=_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline and head.poll() is None:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        assert head.poll() is None, "ray start --head exited"
        out = tmp_path / "cluster"
        done = subprocess.run(
            [PYTHON, str(_driver(tmp_path, 0.1, f"127.0.0.1:{port}")), str(out)],
            cwd=REPO,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip().endswith("FRESH 6 0")
        assert _calls(out) == {f"tier1-rag-s{i}": 1 for i in range(6)}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)  # the head's GCS, raylet and workers: its own process group
        head.wait()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_cli_sweeps_the_real_tier1(ray_session, tmp_path):
    out = tmp_path / "cli"
    args = ["sweep", "--grid", "method=static_persona", "--grid", "seed=0-1", "--set", "episodes=1"]
    result = CliRunner().invoke(main, [*args, "--set", "schedule=smoke", "--out", str(out)])
    assert result.exit_code == 0, result.output
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(runs["run_name"]) == ["tier1-static_persona-s0", "tier1-static_persona-s1"]
    assert (runs["status"] == "ok").all() and runs["success_rate"].notna().all()
    for name in ("summary.json", "config.json", "provenance.json", "steps.parquet"):
        assert (out / "runs" / "tier1-static_persona-s0" / name).is_file(), name


def test_random_search_draws_num_samples_trials_from_the_grid_s_values(ray_session, tmp_path):
    out = tmp_path / "random"
    spec = SweepSpec(**SPEC, name="random", search_alg="basic", num_samples=3, search_seed=1)
    result = run_sweep(spec, out, run_fn=counting_run(), console=Console(quiet=True))
    assert len(result.runs) == 3 and (result.runs["status"] == "ok").all()
    assert result.runs["run_name"].str.match(r"tier1-(scars|rag)-s[01]-[0-9a-f_]+$").all(), result.runs
    assert set(result.runs["method"]) <= {"scars", "rag"} and set(result.runs["seed"]) <= {0, 1}
    assert len(set(result.runs["run_name"])) == 3  # a point drawn twice still gets its own folder
    for name in result.runs["run_name"]:
        assert (out / "runs" / name / "summary.json").is_file()


def test_an_asha_sweep_stops_trailing_trials_on_the_per_episode_reports(ray_session, tmp_path):
    """The real tier 1 reports after every episode; ASHA (reduction factor 2) halts the trailing half at the first
    rung. A stopped run is a row with status 'stopped', left out of the aggregate."""
    from ray import tune

    out = tmp_path / "asha"
    spec = SweepSpec(
        grid={"method": ["static_persona", "voyager"], "seed": [0]},
        fixed={"episodes": 3, "schedule": "smoke", "max_steps": 5},
        name="asha",
        scheduler="asha",
        metric="success_rate",
        mode="max",
    )
    result = run_sweep(spec, out, console=Console(quiet=True))
    frame = tune.ExperimentAnalysis(str(out / "tune")).dataframe()
    assert len(frame) == 2 and {"config/method", "config/episodes"} <= set(frame.columns)
    reports = {
        row["config/method"]: row["training_iteration"] for row in frame.to_dict("records")
    }  # a finished trial reported each of its 3 episodes and its end
    statuses = dict(zip(result.runs["method"], result.runs["status"], strict=True))
    assert set(statuses.values()) <= {"ok", "stopped"} and "ok" in statuses.values()
    for method, status in statuses.items():
        assert (reports[method] == 4) == (status == "ok"), (reports, statuses)
    assert set(result.aggregate["runs"] - result.aggregate["failed"] - result.aggregate["stopped"]) <= {0, 1}


def test_an_optuna_search_optimises_the_metric(ray_session, tmp_path):
    pytest.importorskip("optuna")
    out = tmp_path / "optuna"
    spec = SweepSpec(**SPEC, name="optuna", search_alg="optuna", num_samples=3, metric="success_rate")
    result = run_sweep(spec, out, run_fn=counting_run(), console=Console(quiet=True))
    assert len(result.runs) == 3 and (result.runs["status"] == "ok").all()


def test_a_scheduler_on_a_tier_whose_runs_report_only_at_the_end_is_refused(tmp_path):
    spec = SweepSpec(tier="tier2", grid={"seed": [0]}, name="x", scheduler="asha")
    with pytest.raises(SweepError, match="report as they go"):
        run_sweep(spec, tmp_path / "x", console=Console(quiet=True))


@pytest.mark.parametrize(
    "bad, named",
    [
        (["--grid", "methd=scars"], "'methd'"),
        (["--grid", "seed=x"], "'x'"),
        (["--grid", "seed=0", "--set", "tau=2"], "tau"),
        (["--grid", "seed=0", "--tier", "tier9"], "'tier9'"),
        ([], "nothing to sweep"),
        (["--grid", "seed=0", "--search-alg", "hyperopt"], "'hyperopt'"),
        (["--grid", "seed=0", "--scheduler", "pbt"], "'pbt'"),
    ],
)
def test_cli_bad_sweep_input_exits_2_naming_the_value(tmp_path, bad, named):
    result = CliRunner().invoke(main, ["sweep", *bad, "--out", str(tmp_path / "bad")])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output
    assert not (tmp_path / "bad").exists()  # nothing half-written


@pytest.mark.slow
def test_paper_runs_each_tiers_protocol_on_tune_and_writes_the_report(ray_session, tmp_path, monkeypatch):
    import dataclasses

    from scars.experiments import tiers

    tiny = dataclasses.replace(
        tiers.TIERS["tier1"],
        protocol=lambda scale: (
            {"method": ["scars", "rag"], "seed": [0, 1]},
            {"episodes": 1, "schedule": "smoke"},
        ),
    )
    monkeypatch.setitem(tiers.TIERS, "tier1", tiny)
    out = tmp_path / "paper"
    result = CliRunner().invoke(main, ["paper", "--scale", "smoke", "--tiers", "tier1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "4 runs (0 failed)" in result.output
    assert (out / "tier1" / "runs.parquet").is_file() and (out / "report.html").is_file()
    assert "tier1: sweep `paper-smoke-tier1`" in (out / "report.md").read_text()
    bad = CliRunner().invoke(main, ["paper", "--tiers", "tier9", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "'tier9'" in bad.output and not (tmp_path / "x").exists()
