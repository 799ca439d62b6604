"""Sweeps on Ray Tune (SPEC §8: "many seeds × methods × ablations … on one machine or a Ray cluster").

A sweep is a frozen :class:`SweepSpec`: a tier (``experiments.tiers``), a grid (config field → values; the cross
product is run, minus the points the tier skips, e.g. a scars ablation crossed with a baseline) and fixed fields.
Any field of the tier's config may be varied or fixed (an unknown field is one error listing the allowed ones). A
spec comes from a TOML file (:func:`load_spec`) or the ``scars sweep`` flags. Each grid point is one Tune trial
running one run; :func:`run_sweep` hands them to ``ray.tune.Tuner`` (one grid-search dimension over the trials,
``tune.with_resources`` per trial — a GPU per trial for HF backends when the cluster has GPUs —,
``FailureConfig(max_failures)`` retries, a progress callback), then builds the run table from the ``ResultGrid``
as a pandas frame and aggregates it over seeds (``experiments.stats``). Output layout of ``DIR``::

    sweep.json                the sweep's spec (a re-run must ask for the same sweep)
    tune/                     Tune's experiment folder (its state; ``Tuner.restore`` resumes from it)
    runs.parquet/.csv         one row per run: its fields, label, status (ok / failed), error and summary metrics
    aggregate.parquet/.csv    per label: n, mean and 95% bootstrap CI over seeds of each metric; RVR and success
                              pooled over runs (run-clustered bootstrap) and paired differences vs scars
    aggregate.md              the same as a Markdown table (plus the list of failed runs)
    ablations.png             RVR and success per label, bars with CI error bars and n
    runs/<run_name>/          the run's folder (summary.json, config.json, provenance.json, tables, ledger)
    wandb/                    offline W&B runs (``--wandb``), one per run, grouped by the sweep name

Resume: a sweep that was killed is resumed by re-running the same command: ``Tuner.restore`` keeps every finished
trial and runs the unfinished ones again (``restart_errored``: failed ones too). Tune snapshots its experiment state
periodically (every ≥ 10 s by default; ``TUNE_GLOBAL_CHECKPOINT_S`` sets it); a trial that finished after the last
snapshot is scheduled again by Tune, finds its run's ``summary.json`` (written last, atomically, beside the run's
config) and reports it without running the run again — so no finished run is ever run twice. After the fit, every
run Tune counts as finished is re-checked (``recheck_finished``): a folder whose ``config.json`` or ``summary.json`` is
missing, damaged or not what the run reported is run again, never counted ok.

Confidence intervals: percentile bootstrap over the per-seed values of a metric (runs where it is undefined, e.g.
RVR with no re-exposure, are left out; ``n`` counts the rest), seeded from (``bootstrap_seed``, CRC32 of the label
and the metric), so a group's CI does not depend on which other groups are in the sweep. With n < 2 the CI is
undefined (NaN).

Inside a run, MCTS stays in-process (``Tier1Config.executor`` = "inprocess"): a trial already holds one CPU, and
nesting root-parallel search would oversubscribe it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from ray import tune
from rich.console import Console

from scars.experiments.report import (
    atomic_write_text,
    read_json_object,
    write_json,
    write_table,
)
from scars.experiments.sweep_spec import (
    SweepError,
    SweepSpec,
    expand,
)
from scars.experiments.sweep_tables import (
    _MD_COLUMNS,
    _cell,
    _parquet_safe,
    aggregate_markdown,
    aggregate_runs,
    plot_ablations,
    pooled_runs,
    runs_frame,
)
from scars.experiments.tiers import get_tier
from scars.experiments.tracking import TrackingSettings

RunFn = Callable[..., dict[str, Any]]


def _finished_summary(directory: Path, cfg: Any) -> dict[str, Any] | None:
    """The summary of this run if it finished earlier with this config (module docstring), else None."""
    return None if _run_folder_problem(directory, cfg) else _read_json(directory / "summary.json")


def _run_folder_problem(directory: Path, cfg: Any, reported: Mapping[str, Any] | None = None) -> str:
    """Why the run folder of a finished run cannot be counted ("" when it can): its config.json missing, damaged
    or of another config; its summary.json missing, damaged, not an object, or (``reported``: what the trial
    reported to Tune) not the summary the run reported."""
    for name in ("config.json", "summary.json"):
        path = directory / name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return f"{path} is missing"
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            return f"{path} is damaged (not readable JSON: {str(exc)[:80]})"
        if not isinstance(data, dict):
            return f"{path} is damaged (a JSON {type(data).__name__}, not an object)"
        if name == "config.json" and data != json.loads(json.dumps(asdict(cfg), default=str)):
            return f"{path} is another run's config"
        if name == "summary.json" and reported is not None and data != reported:
            return f"{path} differs from the summary the run reported (replaced or edited)"
    return ""


def recheck_finished(
    grid, points: Sequence[Mapping[str, Any]], run_fn: RunFn | None, console: Console
) -> dict[str, dict[str, Any]]:
    """Resume re-checks finished runs: every trial Tune counts as finished must still have its run folder intact
    (``_run_folder_problem``); a damaged one is run again here, in this process, and its new summary replaces the
    reported one — a damaged folder is never counted ok. Returns the re-run summaries by run name."""
    by_name = {p["run_name"]: p for p in points}
    rerun: dict[str, dict[str, Any]] = {}
    for result in grid:
        name = result.config["trial"]["run_name"]
        text = (result.metrics or {}).get("summary_json")
        if result.error is not None or not isinstance(text, str) or name not in by_name:
            continue
        point = by_name[name]
        tier = get_tier(point["tier"])
        cfg = tier.config(**point["fields"])
        directory = Path(point["out"]) / "runs" / name
        problem = _run_folder_problem(directory, cfg, json.loads(text))
        if problem:
            console.print(f"run {name} finished earlier but {problem}: running it again")
            if directory.exists():
                shutil.rmtree(directory)
            tracking = TrackingSettings(**point["tracking"])
            rerun[name] = (run_fn or tier.run)(cfg, directory, tracking=tracking)
    return rerun


def _trial(params: dict[str, Any], run_fn: RunFn | None = None) -> None:
    """A Tune function trainable: run one grid point into ``<out>/runs/<run_name>`` and report its summary."""
    tier = get_tier(params["tier"])
    cfg = tier.config(**params["fields"])
    directory = Path(params["out"]) / "runs" / params["run_name"]
    summary = _finished_summary(directory, cfg)
    if summary is None:
        if directory.exists():  # an unfinished earlier attempt: start over (its ledger too)
            shutil.rmtree(directory)
        tracking = TrackingSettings(**params["tracking"])
        summary = (run_fn or tier.run)(cfg, directory, tracking=tracking)
    tune.report({"summary_json": json.dumps(summary, default=str), "run_name": params["run_name"]})


@dataclass
class _ProgressState:
    total: int = 0
    done: int = 0
    started: float = 0.0


_PROGRESS = _ProgressState()
"""The progress of the sweep this process runs (module state, so the callback Tune pickles with its run config
and unpickles on ``Tuner.restore`` carries none of its own)."""


class ProgressCallback(tune.Callback):
    """One line per finished or failed trial, with the count so far and the time since the sweep started."""

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._line("ok", trial)

    def on_trial_error(self, iteration, trials, trial, **info):
        self._line("FAILED", trial)

    @staticmethod
    def _line(status: str, trial) -> None:
        _PROGRESS.done += 1
        name = trial.config.get("trial", {}).get("run_name", trial.trial_id)
        elapsed = time.time() - _PROGRESS.started
        print(f"[{_PROGRESS.done}/{_PROGRESS.total}] {status} {name}  ({elapsed:.0f} s)", flush=True)


def trial_name(trial) -> str:
    """Tune's name and folder for a trial: the run's name (``tune/<run_name>``)."""
    return trial.config["trial"]["run_name"]


@dataclass(frozen=True)
class SweepResult:
    runs: pd.DataFrame
    """One row per run (runs.parquet)."""
    aggregate: pd.DataFrame
    """One row per label (aggregate.parquet)."""
    failed: tuple[str, ...]
    restored: bool
    """True when the sweep resumed a killed one (``Tuner.restore``)."""


def _resources(spec: SweepSpec, gpus_available: float) -> Callable[[dict], dict[str, float]]:
    def per_trial(config: dict) -> dict[str, float]:
        gpus = spec.gpus_per_trial
        if gpus is None:
            gpus = 1.0 if config["trial"]["fields"].get("backend") == "hf" and gpus_available >= 1 else 0.0
        return {"cpu": spec.cpus_per_trial, "gpu": gpus}

    return per_trial


def _probe(address: str, timeout_s: float) -> None:
    """Reach the cluster's address within ``timeout_s`` before handing it to Ray, whose ``ray.init`` waits on an
    address where no cluster answers for minutes: nothing listening, a host that drops packets, a bad address —
    one ``SweepError`` line each."""
    if address in ("", "auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, sep, port_text = target.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise SweepError(
            f"--address {address!r} is not HOST:PORT (e.g. 127.0.0.1:6379, from `ray start --head`)"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port_text)), timeout=timeout_s):
            pass
    except TimeoutError:
        raise SweepError(
            f"no Ray cluster answered at {address} within {timeout_s:g}s (connect_timeout_s); is the head up and "
            "reachable?"
        ) from None
    except OSError as exc:
        raise SweepError(
            f"no Ray cluster at {address}: {exc.strerror or exc} (start one with `ray start --head`)"
        ) from None


def connect_ray(address: str, timeout_s: float = 30.0) -> bool:
    """Join the cluster at ``address``, or start a local Ray instance; True when this call started Ray."""
    import ray

    if ray.is_initialized():
        return False
    _probe(address, timeout_s)
    ray.init(address=address or None, include_dashboard=False, log_to_driver=False, configure_logging=False)
    return True


def run_sweep(
    spec: SweepSpec,
    out: Path,
    *,
    run_fn: RunFn | None = None,
    console: Console | None = None,
    callbacks: Sequence[tune.Callback] = (),
) -> SweepResult:
    """Run every trial of the spec on Ray Tune (resuming a killed sweep in ``out``), then write the run table, the
    aggregate over seeds, its Markdown and the ablation plot. A failed run is recorded (``status = failed`` and
    its error) and the sweep goes on; the failures are printed and returned in ``SweepResult.failed``.

    ``run_fn(config, out, *, tracking) -> summary`` replaces the tier's run function (tests pass one to count or
    fail runs); Ray ships it to the workers with cloudpickle. ``callbacks``: further Tune callbacks (e.g. Tune's
    ``WandbLoggerCallback``; ``benchmarks/sweep.py`` compares it with the in-run W&B logging)."""
    console = console or Console(width=None if sys.stdout.isatty() else 140)
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    stored = (
        read_json_object(out / "sweep.json", "this folder's sweep.json")
        if (out / "sweep.json").exists()
        else None
    )
    if stored is not None and stored.get("identity") != json.loads(json.dumps(spec.identity, default=str)):
        raise SweepError(
            f"{out} holds another sweep ({stored.get('identity')}); use another --out or remove it"
        )
    write_json(out / "sweep.json", {"identity": spec.identity, "spec": spec.to_dict()})
    trials = expand(spec)
    tracking = asdict(
        TrackingSettings(
            enabled=spec.wandb,
            project=spec.wandb_project,
            entity=spec.wandb_entity,
            group=spec.name,
            directory=str(out),
        )
    )
    points = [
        {
            "tier": spec.tier,
            "fields": json.loads(json.dumps(dict(t.fields), default=str)),
            "run_name": t.run_name,
            "label": t.label,
            "out": str(out),
            "tracking": tracking,
        }
        for t in trials
    ]
    # no CSV/JSON/TensorBoard history files per trial: a run's result is one report, kept in Tune's experiment state
    # and the ResultGrid (and the run's own summary.json); without them Tune warns once per trial, so it is quietened
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    started_here = connect_ray(spec.address, spec.connect_timeout_s)
    try:
        import ray

        gpus = float(ray.cluster_resources().get("GPU", 0.0))

        def trainable(config: dict) -> None:
            _trial(config["trial"], run_fn)

        trainable.__name__ = f"{spec.tier}_run"
        resourced = tune.with_resources(trainable, _resources(spec, gpus))
        experiment = out / "tune"
        restored = tune.Tuner.can_restore(str(experiment))
        already = 0
        if restored:
            tuner = tune.Tuner.restore(
                str(experiment), trainable=resourced, resume_unfinished=True, restart_errored=True
            )
            already = sum(1 for p in points if (out / "runs" / p["run_name"] / "summary.json").is_file())
            console.print(
                f"resuming the sweep in {out} (Tuner.restore): {already} of {len(points)} runs finished"
            )
        _PROGRESS.total, _PROGRESS.done, _PROGRESS.started = len(points), already, time.time()
        if not restored:
            tuner = tune.Tuner(
                resourced,
                param_space={"trial": tune.grid_search(points)},
                tune_config=tune.TuneConfig(
                    max_concurrent_trials=spec.max_concurrent or None,
                    reuse_actors=True,
                    trial_name_creator=trial_name,
                    trial_dirname_creator=trial_name,
                ),
                run_config=tune.RunConfig(
                    name="tune",
                    storage_path=str(out),
                    failure_config=tune.FailureConfig(max_failures=spec.max_failures),
                    callbacks=[ProgressCallback(), *callbacks],
                    verbose=0,
                ),
            )
        grid = tuner.fit()
        rerun = recheck_finished(grid, points, run_fn, console)
    finally:
        if started_here:
            import ray

            ray.shutdown()
    runs = runs_frame(grid, trials, rerun)
    return _write_outputs(spec, out, runs, console, restored)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_outputs(
    spec: SweepSpec, out: Path, runs: pd.DataFrame, console: Console, restored: bool
) -> SweepResult:
    aggregate = aggregate_runs(runs, samples=spec.bootstrap_samples, seed=spec.bootstrap_seed)
    aggregate = aggregate.merge(
        pooled_runs(runs, samples=spec.bootstrap_samples, seed=spec.bootstrap_seed), on="label", how="left"
    )
    write_table(_parquet_safe(runs), out / "runs")
    write_table(aggregate, out / "aggregate")
    atomic_write_text(out / "aggregate.md", aggregate_markdown(spec, aggregate, runs))
    plot_ablations(aggregate, out / "ablations.png")
    failed = tuple(runs.loc[runs["status"] == "failed", "run_name"])
    result = SweepResult(runs=runs, aggregate=aggregate, failed=failed, restored=restored)
    _report(console, spec, out, result)
    return result


def _report(console: Console, spec: SweepSpec, out: Path, result: SweepResult) -> None:
    from rich.table import Table

    table = Table(title=f"Sweep {spec.name}: mean [95% bootstrap CI] over seeds")
    table.add_column("label")
    table.add_column("runs", justify="right")
    for _, header, _ in _MD_COLUMNS:
        table.add_column(header, justify="right")
    for row in result.aggregate.to_dict("records"):
        table.add_row(
            row["label"],
            f"{row['runs'] - row['failed']}/{row['runs']}",
            *(_cell(row, m, f) for m, _, f in _MD_COLUMNS),
        )
    console.print(table)
    console.print(f"{len(result.runs)} run(s); results: {out / 'aggregate.md'}")
    if result.failed:
        console.print(
            f"[bold red]{len(result.failed)} of {len(result.runs)} RUN(S) FAILED[/] (the sweep went on):"
        )
        for r in result.runs[result.runs["status"] == "failed"].itertuples():
            console.print(f"[red]  {r.run_name}: {r.error}[/]")
        console.print("re-run the same command to retry only the failed runs (Tuner.restore)")


__all__ = ["ProgressCallback", "SweepResult", "connect_ray", "recheck_finished", "run_sweep"]
