"""W&B tracking inside the run, live and offline (issue 16): `scars demo --wandb` exits 0 with one W&B run per
method; a run logs per episode as it goes (a crash keeps what was logged); identity (group, job_type, tags); the
folder and the `wandb sync` command are printed; `ledger show --format` for scripts."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

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


@pytest.mark.slow
def test_demo_with_wandb_exits_0_with_one_live_run_per_method(tmp_path):
    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--episodes", "2", "--wandb", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "summary.json").is_file()
    runs = _offline_runs(out)
    # every method of the comparison, the two controls and the two information-protocol rows
    assert len(runs) == len(METHODS) + 4
    assert (
        result.output.count("wandb sync ") == len(METHODS) + 7
    )  # and the demo's tier-3 section's three runs
    for run in runs:
        records = _records(run, b"plots/comparison_rvr_success")
        assert b"episode/won" in records and b"plots/comparison_rvr_success" in records
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
