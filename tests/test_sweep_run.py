"""A tiny in-process sweep end to end: files, sane aggregates, resume, determinism, failed runs, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from rich.console import Console

import experiments.sweep as sweep_module
from experiments.cli import main
from experiments.sweep import SweepConfig, SweepError, run_sweep
from experiments.tier1 import run_tier1

TINY = SweepConfig(
    methods=("static_persona", "reflexion"), seeds=(0, 1), episodes=2, schedule="smoke", name="tiny"
)
METRICS = (
    "success_rate",
    "rvr",
    "rvr_covered",
    "svr",
    "heldout_first_violation_rate",
    "complexity_tokens_final",
)


class CountingRun:
    """The real tier-1 entry point, counting calls (and failing the runs named in ``fail``)."""

    def __init__(self, fail: tuple[str, ...] = ()):
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, cfg, out, progress=None):
        self.calls.append(cfg.run_name)
        if cfg.run_name in self.fail:
            raise RuntimeError(f"simulated crash in {cfg.run_name}")
        return run_tier1(cfg, out, progress=progress)


def quiet() -> Console:
    return Console(quiet=True)


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    run = CountingRun()
    result = run_sweep(TINY, out, run_fn=run, console=quiet())
    return out, result, run


def test_tiny_sweep_writes_every_file(tiny_sweep):
    out, result, run = tiny_sweep
    assert len(run.calls) == 4 and result.failed == () and len(result.ran) == 4
    for name in (
        "runs.parquet",
        "runs.csv",
        "aggregate.parquet",
        "aggregate.csv",
        "aggregate.md",
        "sweep.json",
    ):
        assert (out / name).stat().st_size > 0, name
    assert (out / "ablations.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert SweepConfig(**json.loads((out / "sweep.json").read_text())) == TINY
    for name in result.ran:
        directory = out / "runs" / name
        for f in (
            "summary.json",
            "config.json",
            "steps.parquet",
            "steps.csv",
            "episodes.parquet",
            "episodes.csv",
        ):
            assert (directory / f).exists(), (name, f)
        episodes = pd.read_parquet(directory / "episodes.parquet")
        assert len(episodes) == 2
    assert not list(out.rglob(".*.tmp")), "an atomic write left its temporary file behind"


def test_runs_table_has_one_row_per_run_with_its_summary(tiny_sweep):
    out, result, _ = tiny_sweep
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(runs["run_name"]) == list(result.ran)
    assert list(runs["label"]) == ["static_persona"] * 2 + ["reflexion"] * 2
    assert list(runs["seed"]) == [0, 1, 0, 1] and set(runs["status"]) == {"ok"}
    for row in runs.itertuples():
        summary = json.loads((out / "runs" / row.run_name / "summary.json").read_text())
        assert row.success_rate == summary["success_rate"] and row.svr == summary["svr"]
    assert len(pd.read_csv(out / "runs.csv")) == 4


def test_aggregate_is_the_mean_over_seeds_inside_its_ci(tiny_sweep):
    out, result, _ = tiny_sweep
    agg = pd.read_parquet(out / "aggregate.parquet").set_index("label")
    runs = result.runs
    assert list(agg.index) == ["static_persona", "reflexion"]
    for lab in agg.index:
        assert agg.loc[lab, "runs"] == 2 and agg.loc[lab, "failed"] == 0
        for metric in METRICS:
            values = runs.loc[runs["label"] == lab, metric].astype(float).dropna()
            assert agg.loc[lab, f"{metric}_n"] == len(values)
            if len(values) == 0:
                assert np.isnan(agg.loc[lab, f"{metric}_mean"])
                continue
            assert agg.loc[lab, f"{metric}_mean"] == pytest.approx(values.mean())
            if len(values) >= 2:
                lo, hi = agg.loc[lab, f"{metric}_ci_low"], agg.loc[lab, f"{metric}_ci_high"]
                assert values.min() <= lo <= agg.loc[lab, f"{metric}_mean"] <= hi <= values.max()
        assert 0.0 <= agg.loc[lab, "success_rate_mean"] <= 1.0
        assert 0.0 <= agg.loc[lab, "svr_mean"] <= 1.0
    md = (out / "aggregate.md").read_text()
    assert "| static_persona | 2/2 |" in md and "| reflexion | 2/2 |" in md and "FAILED" not in md


def test_resume_skips_finished_runs(tiny_sweep, tmp_path):
    out, first, _ = tiny_sweep
    again = CountingRun()
    result = run_sweep(TINY, out, run_fn=again, console=quiet())
    assert again.calls == []
    assert result.resumed == first.ran and result.ran == ()
    pd.testing.assert_frame_equal(result.aggregate, first.aggregate)


def test_resume_after_a_crash_runs_only_the_missing_runs(tiny_sweep, tmp_path):
    out, first, _ = tiny_sweep
    import shutil

    shutil.copytree(out, tmp_path / "crashed")
    crashed = tmp_path / "crashed"
    # the sweep died during the last run: its tables may be there, its summary (written last) is not
    last = first.ran[-1]
    (crashed / "runs" / last / "summary.json").unlink()
    again = CountingRun()
    result = run_sweep(TINY, crashed, run_fn=again, console=quiet())
    assert again.calls == [last]
    assert result.resumed == first.ran[:-1]
    pd.testing.assert_frame_equal(result.aggregate, first.aggregate)


def test_same_seeds_give_the_same_aggregate(tiny_sweep, tmp_path):
    _, first, _ = tiny_sweep
    result = run_sweep(TINY, tmp_path / "again", run_fn=run_tier1, console=quiet())
    pd.testing.assert_frame_equal(result.aggregate, first.aggregate)
    timing = [c for c in first.runs.columns if "seconds" in c]
    pd.testing.assert_frame_equal(result.runs.drop(columns=timing), first.runs.drop(columns=timing))


def test_a_failed_run_is_recorded_and_the_sweep_goes_on(tmp_path):
    cfg = SweepConfig(methods=("static_persona",), seeds=(0, 1), episodes=2, schedule="smoke")
    bad = "tier1-smoke-static_persona-s0"
    run = CountingRun(fail=(bad,))
    console = Console(record=True, width=200)
    result = run_sweep(cfg, tmp_path, run_fn=run, console=console)
    assert run.calls == [bad, "tier1-smoke-static_persona-s1"]
    assert result.failed == (bad,)
    assert "simulated crash" in (tmp_path / "runs" / bad / "error.txt").read_text()
    assert not (tmp_path / "runs" / bad / "summary.json").exists()
    runs = pd.read_parquet(tmp_path / "runs.parquet").set_index("run_name")
    assert runs.loc[bad, "status"] == "failed" and "simulated crash" in runs.loc[bad, "error"]
    agg = result.aggregate.set_index("label")
    assert agg.loc["static_persona", "failed"] == 1 and agg.loc["static_persona", "success_rate_n"] == 1
    assert "FAILED" in (tmp_path / "aggregate.md").read_text()
    assert "1 of 2 RUN(S) FAILED" in console.export_text()
    # re-running retries only the failed run
    retry = CountingRun()
    result = run_sweep(cfg, tmp_path, run_fn=retry, console=quiet())
    assert retry.calls == [bad] and result.failed == ()
    assert not (tmp_path / "runs" / bad / "error.txt").exists()


def test_a_finished_run_of_another_config_is_a_conflict_not_a_skip(tiny_sweep):
    out, _, _ = tiny_sweep
    longer = SweepConfig(**{**TINY.to_dict(), "episodes": 3})
    run = CountingRun()
    with pytest.raises(SweepError, match="episodes"):
        run_sweep(longer, out, run_fn=run, console=quiet())
    assert run.calls == []


def test_cli_runs_a_sweep_and_exits_1_when_a_run_failed(tmp_path, monkeypatch):
    runner = CliRunner()
    args = ["sweep", "--methods", "static_persona", "--seeds", "0", "--episodes", "2", "--schedule", "smoke"]
    ok = runner.invoke(main, [*args, "--out", str(tmp_path / "ok")])
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "ok" / "sweep.json").read_text())["name"] == "ok"
    assert (tmp_path / "ok" / "aggregate.md").exists()

    real = sweep_module.run_sweep
    monkeypatch.setattr(
        sweep_module,
        "run_sweep",
        lambda cfg, out: real(cfg, out, run_fn=CountingRun(fail=("tier1-smoke-static_persona-s0",))),
    )
    failed = runner.invoke(main, [*args, "--out", str(tmp_path / "bad")])
    assert failed.exit_code == 1, failed.output
    assert "FAILED" in failed.output


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--seeds", "3-1"], "3-1"),
        (["--methods", "rag,gpt4"], "gpt4"),
        (["--methods", "rag", "--ablations", "no_mdl"], "no_mdl"),
        (["--ablations", "none"], "none"),
        (["--ray-address", "auto"], "auto"),
    ],
)
def test_cli_bad_input_exits_2_naming_the_value(tmp_path, extra, named):
    result = CliRunner().invoke(main, ["sweep", "--out", str(tmp_path), *extra])
    assert result.exit_code == 2
    assert named in result.output and "Traceback" not in result.output


def test_cli_help_lists_the_options():
    result = CliRunner().invoke(main, ["sweep", "--help"])
    assert result.exit_code == 0
    for option in (
        "--methods",
        "--ablations",
        "--seeds",
        "--episodes",
        "--out",
        "--executor",
        "--ray-address",
        "--wandb",
    ):
        assert option in result.output


def test_wandb_logs_each_run_offline_grouped_by_the_sweep_name(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = SweepConfig(
        methods=("static_persona", "reflexion"),
        seeds=(0,),
        episodes=2,
        schedule="smoke",
        name="grp-7",
        wandb=True,
    )
    result = run_sweep(cfg, tmp_path, console=quiet())
    assert result.failed == ()
    offline = sorted((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(offline) == 2
    names = set()
    for log in offline:
        data = log.read_bytes()
        assert b"grp-7" in data
        names |= {n for n in result.ran if n.encode() in data}
    assert names == set(result.ran)


@pytest.mark.parametrize(
    "damage",
    ["truncated-summary", "summary-not-an-object", "missing-config", "malformed-config", "binary-summary"],
)
def test_resume_reruns_a_finished_run_whose_files_are_damaged(tiny_sweep, tmp_path, damage):
    """Issue 13 #8: a truncated or malformed summary.json, or a missing config.json, crashed the resume; that run
    is now simply run again (and only that run)."""
    out, first, _ = tiny_sweep
    import shutil

    shutil.copytree(out, tmp_path / "damaged")
    damaged = tmp_path / "damaged"
    victim = damaged / "runs" / first.ran[0]
    summary, config = victim / "summary.json", victim / "config.json"
    if damage == "truncated-summary":
        summary.write_text(summary.read_text()[:25])
    elif damage == "summary-not-an-object":
        summary.write_text("[1, 2, 3]")
    elif damage == "binary-summary":
        summary.write_bytes(b"\xff\xfe\x00garbage")
    elif damage == "missing-config":
        config.unlink()
    else:
        config.write_text('{"method": "static_persona", ')
    again = CountingRun()
    result = run_sweep(TINY, damaged, run_fn=again, console=quiet())
    assert again.calls == [first.ran[0]]
    assert result.resumed == first.ran[1:]
    assert json.loads(summary.read_text()) and json.loads(config.read_text())
    pd.testing.assert_frame_equal(result.aggregate, first.aggregate)
