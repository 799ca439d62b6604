"""W&B tracking inside the run, live and offline (issue 16): `scars demo --wandb` exits 0 with one W&B run per
method; a run logs per episode as it goes (a crash keeps what was logged); identity (group, job_type, tags); the
folder and the `wandb sync` command are printed; `ledger show --format` for scripts."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from scars.experiments.cli import main
from scars.experiments.config import METHODS, Tier1Config
from scars.experiments.runner import run_tier1_folder
from scars.experiments.tracking import TrackingSettings


def _offline_runs(folder: Path) -> list[Path]:
    return sorted((folder / "wandb").glob("offline-run-*"))


def _records(run: Path, needle: bytes = b"episode/won", wait: float = 15.0) -> bytes:
    """The run's transaction log (wandb's service may still be writing it just after finish(): poll a little)."""
    deadline = time.time() + wait
    while True:
        data = b"".join(p.read_bytes() for p in run.glob("*.wandb"))
        if needle in data or time.time() > deadline:
            return data
        time.sleep(0.2)


def _needle(record) -> bytes:
    """The bytes a W&B protobuf record with these fields starts with in a run's transaction log."""
    return record.SerializeToString()


def _synced(runs: list[Path]) -> list[str]:
    """What ``wandb sync --dry-run`` says it would upload (``--verbose``: it lists only 20 runs otherwise)."""
    done = subprocess.run(
        [sys.executable, "-m", "wandb", "sync", "--dry-run", "--verbose", *map(str, runs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [
        line.split()[-1]
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip().endswith(".wandb")
    ]


def test_every_tier_logs_into_one_folder_with_group_job_type_and_its_own_axis(tmp_path):
    """Tier 1 (x axis: episode), tier 2 (x axis: run) and a sweep's aggregate (its table, CIs in the summary, bar
    charts) land in one offline folder under one group; `wandb sync --dry-run` lists every run."""
    from wandb.proto import wandb_internal_pb2 as pb

    from scars.experiments.config import Tier2Config
    from scars.experiments.sweep import log_aggregate
    from scars.experiments.sweep_spec import SweepSpec
    from scars.experiments.sweep_tables import aggregate_runs
    from scars.experiments.tier2 import run_tier2_to_dir

    settings = TrackingSettings(enabled=True, group="one-folder", directory=str(tmp_path))
    cfg = Tier1Config(method="static_persona", episodes=2, schedule="smoke", max_steps=10)
    run_tier1_folder(cfg, tmp_path / "t1", tracking=settings)
    run_tier2_to_dir(Tier2Config(method="static_persona", runs=2), tmp_path / "t2", tracking=settings)
    spec = SweepSpec(grid={"seed": [0, 1]}, name="one-folder", wandb=True)
    runs_table = pd.DataFrame(
        {"label": ["scars", "scars"], "method": "scars", "ablation": "none", "status": "ok", "seed": [0, 1]}
        | {"success_rate": [0.5, 1.0], "rvr": [0.25, 0.0]}
    )
    log_aggregate(spec, tmp_path, aggregate_runs(runs_table, metrics=("success_rate", "rvr")))
    runs = _offline_runs(tmp_path)
    assert len(runs) == 3 and len(_synced(runs)) == 3
    logs = {run: _records(run, b"tier") for run in runs}
    for job, axis, needle in (
        ("tier1/static_persona", "episode", b"episode/won"),
        ("tier2/static_persona", "run", b"run/cooperative_yield"),
        ("sweep/aggregate", "", b"sweep/aggregate"),
    ):
        (log,) = [data for data in logs.values() if _needle(pb.RunRecord(job_type=job)) in data]
        assert _needle(pb.RunRecord(run_group="one-folder")) in log and needle in log, job
        if axis:
            assert _needle(pb.MetricRecord(glob_name="*", step_metric=axis)) in log, job
    aggregate = next(data for data in logs.values() if b"sweep/aggregate" in data)
    for cell in (
        b"scars/success_rate_mean",
        b"scars/success_rate_ci_low",
        b"scars/rvr_n",
        b"sweep/success_rate",
    ):
        assert cell in aggregate, cell


@pytest.mark.slow
def test_demo_with_wandb_exits_0_with_one_live_run_per_method(tmp_path):
    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--episodes", "2", "--wandb", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "summary.json").is_file()
    runs = _offline_runs(out)
    # tier 1: every method of the comparison, two controls, two protocol variants; tier 2: every method; tier 3: three
    total = 2 * len(METHODS) + 7
    assert len(runs) == total and len(_synced(runs)) == total
    assert result.output.count("wandb sync ") == total
    from wandb.proto import wandb_internal_pb2 as pb

    axes = [_needle(pb.MetricRecord(glob_name="*", step_metric=axis)) for axis in ("episode", "run")]
    for run in (
        runs
    ):  # every run's charts have an axis of their own: episodes (tiers 1 and 3) or arena runs (tier 2)
        records = _records(run, b"_step", wait=1.0)
        assert any(axis in records for axis in axes), run
        assert _needle(pb.RunRecord(run_group="demo")) in records, run
    tier1 = [run for run in runs if b"episode/won" in _records(run, b"episode/won", wait=1.0)]
    assert len(tier1) == len(METHODS) + 4
    for run in tier1:
        records = _records(run, b"plots/comparison_rvr_success")
        assert b"plots/comparison_rvr_success" in records
    scars = next(r for r in runs if b"tier1/scars" in _records(r))
    records = _records(scars, b"tables/scar_events")
    for needle in (
        b"tables/d_t",
        b"tables/scar_events",
        b"ablation:none",
        b"seed:0",
        b"backend:embedded",
        b"demo",
    ):
        assert needle in records, needle
    assert b"ledger.sqlite.key" not in records  # the ledger's secret key never becomes an artifact


class Crash(RuntimeError):
    pass


def test_a_crashed_run_keeps_the_episodes_it_logged(tmp_path):
    cfg = Tier1Config(method="static_persona", episodes=4, schedule="smoke")

    def crash_after_two(done: int, total: int) -> None:
        if done == 2:
            raise Crash("injected crash after episode 2")

    settings = TrackingSettings(enabled=True, group="crash", directory=str(tmp_path))
    with pytest.raises(Crash):
        run_tier1_folder(cfg, tmp_path / "run", tracking=settings, progress=crash_after_two)
    (run,) = _offline_runs(tmp_path)
    records = _records(run, b"episode/success_so_far")
    assert b"episode/won" in records and b"episode/success_so_far" in records
    assert not (tmp_path / "run" / "summary.json").exists()  # the run did not finish
    provenance = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert provenance["ended"] is None  # written at the start: a crashed run still says what it was


def test_ledger_show_formats_for_scripts(tmp_path):
    ledger = tmp_path / "l.sqlite"
    rule = 'if action.obj == "mug 1" then forbid_env_action("take")'
    long_rule = 'if action.obj == "' + "x" * 150 + '" then forbid_env_action("take")'
    for text in (rule, long_rule):
        admitted = CliRunner().invoke(main, ["ledger", "admit", str(ledger), text])
        assert admitted.exit_code == 0, admitted.output
    shown = CliRunner().invoke(main, ["ledger", "show", str(ledger), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["verification"]["ok"] and len(data["active_scars"]) == 2
    assert any("x" * 150 in s["rule"] for s in data["active_scars"])
    rows = list(
        csv.DictReader(
            io.StringIO(CliRunner().invoke(main, ["ledger", "show", str(ledger), "--format", "csv"]).output)
        )
    )
    assert [r["type"] for r in rows] == [e["type"] for e in data["events"]] and len(rows[0]["hash"]) == 64
    table = CliRunner().invoke(main, ["ledger", "show", str(ledger)])  # piped: no 80-column truncation
    assert table.exit_code == 0 and "x" * 150 in table.output
