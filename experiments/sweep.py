"""Sweeps on Ray Tune (SPEC §8: "many seeds × methods × ablations … on one machine or a Ray cluster").

A sweep is a frozen :class:`SweepSpec`: a tier (``experiments.tiers``), a grid (config field → values; the cross
product is run, minus the points the tier skips, e.g. a scars ablation crossed with a baseline) and fixed fields.
Any field of the tier's config may be varied or fixed (an unknown field is one error listing the allowed ones). A
spec comes from a TOML file (:func:`load_spec`) or the ``scars sweep`` flags. :func:`run_sweep` hands the trials to ``ray.tune.Tuner`` the
way Tune's users expect: every config field of the sweep is a key of ``param_space`` (a grid field as ``tune.choice``
of its values, a fixed field as its value), and the search algorithm picks the points — "grid" (the default) Tune's
``BasicVariantGenerator`` with every grid point as ``points_to_evaluate``, once each; "basic" ``num_samples`` random
draws; "optuna" ``OptunaSearch`` (TPE) on ``metric``. A trial (:class:`TrialRunner`) runs one run and reports with
``tune.report`` after every episode (tiers whose runs report as they go: tier 1) and at the end (the summary's scalar
metrics, ``finished``, the whole summary as ``summary_json``), so a scheduler (``scheduler = "asha"``:
``ASHAScheduler``) can stop trailing trials; a stopped run is a row with status ``stopped``. Tune writes its own
result files (``tune/<run>/result.json``, ``progress.csv``, ``params.json``), so
``tune.ExperimentAnalysis(DIR/tune).dataframe()`` and ``ResultGrid.get_dataframe()`` hold one row per trial with
``config/<field>`` columns. Per trial ``tune.with_resources`` (a GPU per trial for HF backends when the cluster has
GPUs), ``FailureConfig(max_failures)`` retries, a progress callback. The run table comes from the ``ResultGrid`` and
is aggregated over seeds (``experiments.stats``). Output layout of ``DIR``::

    sweep.json                the sweep's spec (a re-run must ask for the same sweep)
    tune/                     Tune's experiment folder: its state (``Tuner.restore`` resumes from it) and one folder
                              per trial with Tune's result files
    runs.parquet/.csv         one row per run: its fields, label, status (ok / failed / stopped), error, summary metrics
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
missing, damaged or not what the run reported is run again, never counted ok. A run that stopped before its end
(another process wrote its ledger: ``complete: false``, ``experiments.stopping``) is a failed trial, never pooled,
and runs again on resume.

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
import re
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
    Trial,
    expand,
    trial_of,
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
from scars.experiments.tracking import Tracker, TrackingSettings

RunFn = Callable[..., dict[str, Any]]

_DIGITS = re.compile(r"[0-9]+")
"""A port as typed: ASCII digits only (``str.isdigit`` also takes "²", which ``int`` refuses)."""


def _finished_summary(directory: Path, cfg: Any) -> dict[str, Any] | None:
    """The summary of this run if it finished earlier with this config (module docstring), else None. A run that
    stopped before its end (``complete: false``, ``experiments.stopping``) did not finish: it runs again."""
    summary = None if _run_folder_problem(directory, cfg) else _read_json(directory / "summary.json")
    return None if summary is None or summary.get("complete") is False else summary


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
    finished: Sequence[Finished], run_fn: RunFn | None, console: Console
) -> dict[str, dict[str, Any]]:
    """Resume re-checks finished runs: every trial Tune counts as finished must still have its run folder intact
    (``_run_folder_problem``); a damaged one is run again here, in this process, and its new summary replaces the
    reported one — a damaged folder is never counted ok. Returns the re-run summaries by run folder name."""
    rerun: dict[str, dict[str, Any]] = {}
    for item in finished:
        if item.summary is None:
            continue
        directory = item.out / "runs" / item.folder
        problem = _run_folder_problem(directory, item.trial.config, item.summary)
        if problem:
            console.print(f"run {item.folder} finished earlier but {problem}: running it again")
            if directory.exists():
                shutil.rmtree(directory)
            tier = get_tier(item.tier)
            rerun[item.folder] = (run_fn or tier.run)(
                item.trial.config, directory, tracking=TrackingSettings(**item.tracking)
            )
    return rerun


def _scalars(values: Mapping[str, Any]) -> dict[str, Any]:
    """The items Tune can keep as result columns: numbers, booleans and strings (None and nested values left out;
    the whole summary travels as ``summary_json``)."""
    return {k: v for k, v in values.items() if isinstance(v, bool | int | float | str)}


@dataclass(frozen=True)
class TrialRunner:
    """The Tune function trainable of a sweep: ``config`` holds the run's config fields as top-level keys (Tune's
    ``param_space``); it runs that point into ``<out>/runs/<folder>`` and reports to Tune after every episode (tiers
    whose runs report: ``Tier.reporting_run``) and once at the end — the run's scalar summary metrics, its
    ``run_name``, ``finished`` and the whole summary as ``summary_json``. A point the tier skips reports
    ``skipped``."""

    spec: SweepSpec
    out: str
    tracking: Mapping[str, Any]
    run_fn: RunFn | None = None

    def __call__(self, config: dict[str, Any]) -> None:
        tier = get_tier(self.spec.tier)
        fields = {k: config[k] for k in tier.fields if k in config}
        trial = trial_of(self.spec, fields)
        folder = folder_name(self.spec, trial.run_name, tune.get_context().get_trial_id())
        base = {"run_name": trial.run_name, "folder": folder}
        if tier.skip(fields):
            tune.report({**base, "skipped": True, "finished": False, self.spec.metric: float("nan")})
            return
        directory = Path(self.out) / "runs" / folder
        summary = _finished_summary(directory, trial.config)
        if summary is None:
            if directory.exists():  # an unfinished earlier attempt: start over (its ledger too)
                shutil.rmtree(directory)
            tracking = TrackingSettings(**self.tracking)
            if self.run_fn is None and tier.reporting_run is not None:

                def report(metrics: Mapping[str, Any]) -> None:
                    tune.report({**_scalars(metrics), **base, "finished": False})

                summary = tier.reporting_run(trial.config, directory, tracking=tracking, report=report)
            else:
                summary = (self.run_fn or tier.run)(trial.config, directory, tracking=tracking)
        if (
            summary.get("complete") is False
        ):  # stopped early (experiments.stopping): a failed trial, never pooled
            raise SweepError(f"{trial.run_name} stopped before its end: {summary.get('stopped')}")
        tune.report(
            {**_scalars(summary), **base, "finished": True, "summary_json": json.dumps(summary, default=str)}
        )


def folder_name(spec: SweepSpec, run_name: str, trial_id: str) -> str:
    """A run's folder (and Tune trial's) name: the run name on a grid (each point once), the run name and Tune's
    trial id under a search algorithm (which may draw a point twice)."""
    return run_name if spec.search_alg == "grid" else f"{run_name}-{trial_id}"


@dataclass(frozen=True)
class TrialNamer:
    """Tune's name and folder for a trial: the run's folder name (``tune/<folder>``)."""

    spec: SweepSpec

    def __call__(self, trial) -> str:
        return folder_name(self.spec, trial_of(self.spec, trial.config).run_name, trial.trial_id)


@dataclass
class _ProgressState:
    total: int = 0
    done: int = 0
    started: float = 0.0


_PROGRESS = _ProgressState()
"""The progress of the sweep this process runs (module state, so the callback Tune pickles with its run config
and unpickles on ``Tuner.restore`` carries none of its own)."""


class ProgressCallback(tune.Callback):
    """One line per finished, stopped or failed trial, with the count so far and the time since the sweep started."""

    def on_trial_complete(self, iteration, trials, trial, **info):
        result = trial.last_result or {}
        self._line(
            "ok" if result.get("finished") else "stopped" if not result.get("skipped") else "skipped", trial
        )

    def on_trial_error(self, iteration, trials, trial, **info):
        self._line("FAILED", trial)

    @staticmethod
    def _line(status: str, trial) -> None:
        _PROGRESS.done += 1
        name = (trial.last_result or {}).get("folder", trial.trial_id)
        elapsed = time.time() - _PROGRESS.started
        # progress on stderr: stdout keeps the sweep's results
        print(
            f"[{_PROGRESS.done}/{_PROGRESS.total}] {status} {name}  ({elapsed:.0f} s)",
            file=sys.stderr,
            flush=True,
        )


@dataclass(frozen=True)
class Finished:
    """One Tune trial as the sweep's tables read it: its point, folder, the summary it reported at the end (None:
    it did not finish), whether a scheduler stopped it early or the tier skipped it, and its error."""

    trial: Trial
    folder: str
    summary: dict[str, Any] | None
    status: str
    error: str
    tier: str
    out: Path
    tracking: Mapping[str, Any]


def collect(grid, spec: SweepSpec, out: Path, tracking: Mapping[str, Any]) -> list[Finished]:
    """The trials of a ``ResultGrid``, in grid order for a grid sweep (the tables' order), else in Tune's order."""
    tier = get_tier(spec.tier)
    items: list[Finished] = []
    for result in grid:
        fields = {k: result.config[k] for k in tier.fields if k in result.config}
        trial = trial_of(spec, fields)
        metrics = result.metrics or {}
        folder = metrics.get("folder") or Path(result.path).name  # Tune's trial folder is named by TrialNamer
        summary, error = None, ""
        if result.error is not None:
            status = "failed"
            error = " ".join(str(result.error).strip().splitlines()[-1:]) or type(result.error).__name__
        elif metrics.get("skipped"):
            status = "skipped"
        elif metrics.get("finished") and isinstance(metrics.get("summary_json"), str):
            status, summary = "ok", json.loads(metrics["summary_json"])
        elif metrics:
            status, error = "stopped", f"stopped early by the {spec.scheduler} scheduler"
        else:
            status, error = "failed", "the trial reported no result"
        items.append(Finished(trial, folder, summary, status, error, spec.tier, out, tracking))
    if spec.search_alg == "grid":
        order = {t.run_name: i for i, t in enumerate(expand(spec))}
        items.sort(key=lambda item: order.get(item.trial.run_name, len(order)))
    return items


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
            gpus = 1.0 if config.get("backend") == "hf" and gpus_available >= 1 else 0.0
        return {"cpu": spec.cpus_per_trial, "gpu": gpus}

    return per_trial


def cluster_address(address: str) -> tuple[str, int] | None:
    """``address`` as (host, port), None for a local Ray instance (``""``, ``auto``, ``local``); a ``SweepError``
    naming it when it is not HOST:PORT (``scars sweep`` checks it before its folder is claimed)."""
    if address in ("", "auto", "local"):
        return None
    target = address.removeprefix("ray://")
    host, sep, port_text = target.rpartition(":")
    if not sep or not host or not _DIGITS.fullmatch(port_text) or not 0 < int(port_text) < 65536:
        raise SweepError(
            f"--address {address!r} is not HOST:PORT (e.g. 127.0.0.1:6379, from `ray start --head`)"
        )
    return host.strip("[]"), int(port_text)


def _probe(address: str, timeout_s: float) -> None:
    """Reach the cluster's address within ``timeout_s`` before handing it to Ray, whose ``ray.init`` waits on an
    address where no cluster answers for minutes: nothing listening, a host that drops packets, a bad address —
    one ``SweepError`` line each."""
    where = cluster_address(address)
    if where is None:
        return
    try:
        with socket.create_connection(where, timeout=timeout_s):
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
    """Join the cluster at ``address``, or start a local Ray instance; True when this call started Ray. The address
    is probed even when Ray is already up in this process (a notebook, an earlier sweep): an address where no
    cluster answers is an error, never silently replaced by the instance at hand."""
    import ray

    _probe(address, timeout_s)
    if ray.is_initialized():
        return False
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
    tune_config = tune_settings(spec, trials)  # a missing optional package fails before Ray starts
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    started_here = connect_ray(spec.address, spec.connect_timeout_s)
    try:
        import ray

        gpus = float(ray.cluster_resources().get("GPU", 0.0))
        runner = TrialRunner(spec, str(out), tracking, run_fn)

        def trainable(config: dict) -> None:
            runner(config)

        trainable.__name__ = f"{spec.tier}_run"
        resourced = tune.with_resources(trainable, _resources(spec, gpus))
        experiment = out / "tune"
        restored = tune.Tuner.can_restore(str(experiment))
        already = 0
        total = len(trials) if spec.search_alg == "grid" else spec.num_samples
        if restored:
            tuner = tune.Tuner.restore(
                str(experiment), trainable=resourced, resume_unfinished=True, restart_errored=True
            )
            runs = out / "runs"
            already = sum(1 for p in runs.iterdir() if (p / "summary.json").is_file()) if runs.is_dir() else 0
            console.print(f"resuming the sweep in {out} (Tuner.restore): {already} of {total} runs finished")
        _PROGRESS.total, _PROGRESS.done, _PROGRESS.started = total, already, time.time()
        if not restored:
            tuner = tune.Tuner(
                resourced,
                param_space=param_space(spec),
                tune_config=tune_config,
                run_config=tune.RunConfig(
                    name="tune",
                    storage_path=str(out),
                    failure_config=tune.FailureConfig(max_failures=spec.max_failures),
                    callbacks=[ProgressCallback(), *callbacks],
                    verbose=0,
                ),
            )
        grid = tuner.fit()
        finished = collect(grid, spec, out, tracking)
        rerun = recheck_finished(finished, run_fn, console)
    finally:
        if started_here:
            import ray

            ray.shutdown()
    runs = runs_frame(finished, rerun)
    return _write_outputs(spec, out, runs, console, restored)


def param_space(spec: SweepSpec) -> dict[str, Any]:
    """Tune's ``param_space``: every config field of the sweep is a key — a grid field's values as a
    ``tune.choice`` (the grid itself is handed to the search algorithm point by point), a fixed field as its value."""
    space: dict[str, Any] = {k: _plain(v) for k, v in spec.fixed.items()}
    space |= {k: tune.choice([_plain(v) for v in values]) for k, values in spec.grid.items()}
    return space


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def tune_settings(spec: SweepSpec, trials: Sequence[Trial]) -> tune.TuneConfig:
    """The search algorithm, scheduler and trial count of the spec as Tune's ``TuneConfig``."""
    from ray.tune.search import BasicVariantGenerator

    tier = get_tier(spec.tier)
    if spec.scheduler != "none" and tier.reporting_run is None:
        raise SweepError(
            f"scheduler = {spec.scheduler!r} needs runs that report as they go; tier {spec.tier}'s runs report "
            "at the end only (use scheduler = 'none')"
        )
    search: Any
    if spec.search_alg == "grid":
        points = [{k: _plain(v) for k, v in t.fields.items()} for t in trials]
        search, samples = BasicVariantGenerator(points_to_evaluate=points), len(points)
    elif spec.search_alg == "basic":
        search, samples = BasicVariantGenerator(random_state=spec.search_seed), spec.num_samples
    else:
        try:
            import optuna
            from ray.tune.search.optuna import OptunaSearch
        except ImportError:
            raise SweepError("search_alg = 'optuna' needs Optuna: pip install -e '.[optuna]'") from None
        sampler = optuna.samplers.TPESampler(seed=spec.search_seed)
        search, samples = OptunaSearch(sampler=sampler), spec.num_samples
    scheduler = None
    if spec.scheduler == "asha":
        from ray.tune.schedulers import ASHAScheduler

        units = max(tier.progress_total(t.config) for t in trials)
        scheduler = ASHAScheduler(
            time_attr="training_iteration", max_t=units + 1, grace_period=1, reduction_factor=2
        )
    optimising = spec.search_alg == "optuna" or scheduler is not None
    return tune.TuneConfig(
        search_alg=search,
        scheduler=scheduler,
        num_samples=samples,
        metric=spec.metric if optimising else None,
        mode=spec.mode if optimising else None,
        max_concurrent_trials=spec.max_concurrent or None,
        reuse_actors=scheduler is None,
        trial_name_creator=TrialNamer(spec),
        trial_dirname_creator=TrialNamer(spec),
    )


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
    log_aggregate(spec, out, aggregate)
    failed = tuple(runs.loc[runs["status"] == "failed", "run_name"])
    result = SweepResult(runs=runs, aggregate=aggregate, failed=failed, restored=restored)
    _report(console, spec, out, result)
    return result


def log_aggregate(spec: SweepSpec, out: Path, aggregate: pd.DataFrame) -> None:
    """With ``spec.wandb``: the sweep's aggregate as one more W&B run in ``OUT/wandb`` (group = the sweep, job type
    ``sweep/aggregate``): the table (n, mean and 95% CI per label and metric) as a ``wandb.Table``, every cell in the
    run's summary (``<label>/<metric>_mean``, ``_ci_low``, ``_ci_high``, ``_n``), bar charts W&B draws of the
    means, and the ablation plot."""
    settings = TrackingSettings(
        enabled=spec.wandb,
        project=spec.wandb_project,
        entity=spec.wandb_entity,
        group=spec.name,
        directory=str(out),
    )
    tracker = Tracker(
        settings, name=f"{spec.name}-aggregate", config=spec.to_dict(), out=out, job_type="sweep/aggregate"
    )
    if not tracker.enabled:
        return
    tracker.log_table("sweep/aggregate", aggregate)
    cells: dict[str, Any] = {}
    for row in aggregate.to_dict("records"):
        for key, value in row.items():
            if key not in ("label", "method", "ablation") and isinstance(value, bool | int | float):
                cells[f"{row['label']}/{key}"] = value
    tracker.summary(cells)
    for metric, title in (("success_rate", "task success, mean over seeds"), ("rvr", "RVR, mean over seeds")):
        tracker.log_bars(f"sweep/{metric}", aggregate, "label", f"{metric}_mean", title)
    tracker.log_images({"ablations": out / "ablations.png"})
    tracker.finish()


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
            f"{row['runs'] - row['failed'] - row.get('stopped', 0)}/{row['runs']}",
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


__all__ = [
    "Finished",
    "ProgressCallback",
    "SweepResult",
    "TrialNamer",
    "TrialRunner",
    "collect",
    "connect_ray",
    "param_space",
    "recheck_finished",
    "run_sweep",
    "tune_settings",
]
