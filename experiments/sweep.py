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

import itertools
import json
import logging
import math
import os
import re
import shutil
import socket
import sys
import time
import tomllib
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ray import tune
from rich.console import Console

from scars.experiments.report import (
    atomic_write_text,
    read_json_object,
    save_figure,
    write_json,
    write_table,
)
from scars.experiments.stats import bootstrap_ci
from scars.experiments.tiers import get_tier
from scars.experiments.tracking import TrackingSettings
from scars.synthesis.errors import ConfigError

AGGREGATE_METRICS: tuple[str, ...] = (
    "success_rate",
    "rvr",
    "rvr_covered",
    "svr",
    "heldout_first_violation_rate",
    "complexity_tokens_final",
)
"""The metrics aggregated over seeds (SPEC §7: task success, RVR, pointwise SVR, held-out generalisation,
description complexity); a tier without one leaves its column empty (n = 0)."""

LABEL_FIELDS: tuple[str, ...] = ("method", "ablation", "seed")
"""Fields the tier's label already shows (or, for the seed, that runs are aggregated over)."""

RunFn = Callable[..., dict[str, Any]]


class SweepError(ConfigError):
    """A sweep cannot go on as asked (bad spec, or an output folder that holds another sweep)."""


@dataclass(frozen=True)
class SweepSpec:
    """A grid of runs of one tier, and how Tune runs them."""

    tier: str = "tier1"
    grid: Mapping[str, tuple] = field(default_factory=dict)
    """Config field → the values to sweep (cross product, in the order given)."""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    """Config field → one value for every run."""
    name: str = "sweep"
    """Sweep name: the W&B group of its runs, the Tune experiment's name and the title of aggregate.md."""
    max_failures: int = 0
    """Tune's FailureConfig: how often a failed trial is retried (a run is deterministic: 0 by default)."""
    max_concurrent: int = 0
    """Trials running at once (0: as many as the cluster's CPUs allow)."""
    cpus_per_trial: float = 1.0
    gpus_per_trial: float | None = None
    """GPUs per trial; None: one per trial of an HF backend when the cluster has GPUs, else 0."""
    address: str = ""
    """Ray cluster address (``ray start --head`` prints it); empty: a local Ray instance."""
    connect_timeout_s: float = 30.0
    """How long joining the cluster at ``address`` may take before the sweep gives up with one error line."""
    wandb: bool = False
    wandb_project: str = "scars-testbed"
    wandb_entity: str = ""
    bootstrap_samples: int = 2000
    bootstrap_seed: int = 0

    def __post_init__(self) -> None:
        _check_spec_types(self)
        grid = {k: tuple(v) if isinstance(v, list | tuple) else (v,) for k, v in dict(self.grid).items()}
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "fixed", dict(self.fixed))
        tier = get_tier(self.tier)
        from scars.experiments.provenance import check_fields

        check_fields(grid, tier.config, "sweep grid")
        check_fields(self.fixed, tier.config, "sweep fixed fields")
        for key, values in grid.items():
            if not values:
                raise SweepError(f"grid field {key!r} has no values")
            if len(set(map(repr, values))) != len(values):
                raise SweepError(f"grid field {key!r} lists a value twice: {list(values)!r}")
        both = set(grid) & set(self.fixed)
        if both:
            raise SweepError(f"field(s) {sorted(both)} are both swept and fixed")
        if not self.name or not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.name):
            raise SweepError(f"name = {self.name!r} must be non-empty letters, digits, '_', '.' or '-'")
        if self.max_failures < 0 or self.max_concurrent < 0:
            raise SweepError("max_failures and max_concurrent must be >= 0")
        if self.cpus_per_trial <= 0 or (self.gpus_per_trial is not None and self.gpus_per_trial < 0):
            raise SweepError("cpus_per_trial must be > 0 and gpus_per_trial >= 0")
        if self.bootstrap_samples < 100:
            raise SweepError(f"bootstrap_samples = {self.bootstrap_samples!r} must be >= 100")
        if self.bootstrap_seed < 0:
            raise SweepError(f"bootstrap_seed = {self.bootstrap_seed!r} must be >= 0")
        if not expand(self):
            raise SweepError("the grid has no run left (every point is skipped by the tier)")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["grid"] = {k: list(v) for k, v in self.grid.items()}
        return data

    @property
    def identity(self) -> dict[str, Any]:
        """What makes two sweeps the same sweep (a resume must ask for the same runs)."""
        return {
            "tier": self.tier,
            "grid": self.to_dict()["grid"],
            "fixed": dict(self.fixed),
            "name": self.name,
        }


_SPEC_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "tier": ((str,), "a string"),
    "name": ((str,), "a string"),
    "max_failures": ((int,), "an integer"),
    "max_concurrent": ((int,), "an integer"),
    "cpus_per_trial": ((int, float), "a number"),
    "gpus_per_trial": ((int, float, type(None)), "a number"),
    "address": ((str,), "a string (HOST:PORT)"),
    "connect_timeout_s": ((int, float), "a number of seconds"),
    "wandb": ((bool,), "true or false"),
    "wandb_project": ((str,), "a string"),
    "wandb_entity": ((str,), "a string"),
    "bootstrap_samples": ((int,), "an integer"),
    "bootstrap_seed": ((int,), "an integer"),
}


def _check_spec_types(spec: SweepSpec) -> None:
    """Every field of the spec itself has its declared type, before anything starts: one error naming the field,
    the value and the type (a TOML file or a caller may hand anything). Config fields in ``grid``/``fixed`` are
    the tier config's to check (``expand`` builds every point's config before Ray starts)."""
    for name, (types, what) in _SPEC_TYPES.items():
        value = getattr(spec, name)
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise SweepError(
                f"sweep spec field {name} = {value!r:.80} is {type(value).__name__}; it must be {what}"
            )
    for name in ("grid", "fixed"):
        value = getattr(spec, name)
        if not isinstance(value, Mapping):
            raise SweepError(
                f"sweep spec field {name} = {value!r:.80} is {type(value).__name__}; it must be a table of config "
                f"fields ([{name}] in a TOML file)"
            )
        for key in value:
            if not isinstance(key, str):
                raise SweepError(
                    f"sweep spec {name} key {key!r:.80} is {type(key).__name__}; it must be a field name"
                )
    if not math.isfinite(float(spec.connect_timeout_s)) or spec.connect_timeout_s <= 0:
        raise SweepError(
            f"sweep spec field connect_timeout_s = {spec.connect_timeout_s!r} must be > 0 seconds"
        )


@dataclass(frozen=True)
class Trial:
    """One grid point: the run's config, its name (its folder) and its label (its group in the tables)."""

    fields: Mapping[str, Any]
    config: Any
    run_name: str
    label: str


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.=\-]+", "_", str(value))


def expand(spec: SweepSpec) -> tuple[Trial, ...]:
    """One trial per grid point the tier runs, ordered as the grid lists its values (the tables' order). A point
    whose config the tier refuses is an error naming the point."""
    tier = get_tier(spec.tier)
    keys = list(spec.grid)
    varied = [k for k in keys if k not in LABEL_FIELDS and len(spec.grid[k]) > 1]
    trials: list[Trial] = []
    seen: set[str] = set()
    for values in itertools.product(*(spec.grid[k] for k in keys)):
        fields = {**spec.fixed, **dict(zip(keys, values, strict=True))}
        if tier.skip(fields):
            continue
        try:
            cfg = tier.config(**fields)
        except (ConfigError, TypeError, ValueError, OverflowError) as exc:  # a wrong type: before Ray starts
            raise SweepError(f"grid point {dict(zip(keys, values, strict=True))}: {exc}") from None
        extra = " ".join(f"{k}={fields[k]}" for k in varied)
        label = tier.label(cfg) + (f" {extra}" if extra else "")
        seed = fields.get(tier.seed_field, getattr(cfg, tier.seed_field, 0))
        run_name = _slug(f"{tier.name}-{label.replace(':', '-').replace(' ', '-')}-s{seed}")
        if run_name in seen:
            continue
        seen.add(run_name)
        trials.append(Trial(fields, cfg, run_name, label))
    return tuple(trials)


def load_spec(path: Path, **overrides: Any) -> SweepSpec:
    """A spec from a TOML file::

        tier = "tier1"
        name = "ablations"
        [grid]
        method = ["scars", "rag"]
        ablation = ["none", "no_mdl"]
        seed = [0, 1, 2]
        [fixed]
        episodes = 12
        [tune]            # optional: max_failures, max_concurrent, cpus_per_trial, gpus_per_trial, address
        max_failures = 1

    ``overrides`` (from flags) replace top-level keys."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SweepError(f"sweep spec {str(path)!r} is not a readable TOML file ({exc})") from None
    allowed_top = {"tier", "name", "grid", "fixed", "tune", "wandb", "bootstrap"}
    unknown = set(data) - allowed_top
    if unknown:
        raise SweepError(
            f"sweep spec {str(path)!r}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed_top)}"
        )
    kwargs: dict[str, Any] = {k: data[k] for k in ("tier", "name", "grid", "fixed") if k in data}
    for section, prefix in (("tune", ""), ("wandb", "wandb_"), ("bootstrap", "bootstrap_")):
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise SweepError(
                f"sweep spec {str(path)!r}: {section} = {table!r:.80} is {type(table).__name__}; it must be a "
                f"table ([{section}])"
            )
        for key, value in table.items():
            name = key if section == "tune" or key == "enabled" else f"{prefix}{key}"
            name = "wandb" if (section, key) == ("wandb", "enabled") else name
            if name not in SweepSpec.__dataclass_fields__ or name in ("tier", "name", "grid", "fixed"):
                raise SweepError(f"sweep spec {str(path)!r}: unknown key {key!r} in [{section}]")
            kwargs[name] = value
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    return SweepSpec(**kwargs)


# ---- one trial ---------------------------------------------------------------------------------------------------


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


def _scalar(value: Any) -> Any:
    return (
        value
        if value is None or isinstance(value, bool | int | float | str)
        else json.dumps(value, default=str)
    )


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


# ---- the sweep ---------------------------------------------------------------------------------------------------


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


def _connect(address: str, timeout_s: float = 30.0) -> bool:
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
    started_here = _connect(spec.address, spec.connect_timeout_s)
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


def runs_frame(
    grid, trials: tuple[Trial, ...], rerun: Mapping[str, Mapping[str, Any]] | None = None
) -> pd.DataFrame:
    """One row per trial from Tune's ``ResultGrid`` (each result's reported summary, or its error), in grid order: run_name, label, the fields, status,
    error, then the summary's scalars (a non-scalar value is kept as JSON text)."""
    summaries: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for result in grid:
        name = result.config["trial"]["run_name"]
        text = (result.metrics or {}).get("summary_json")
        if result.error is None and isinstance(text, str):
            summaries[name] = json.loads(text)
        elif result.error is not None:
            errors[name] = (
                " ".join(str(result.error).strip().splitlines()[-1:]) or type(result.error).__name__
            )
    summaries |= {name: dict(summary) for name, summary in (rerun or {}).items()}
    rows = []
    for t in trials:
        row: dict[str, Any] = {"run_name": t.run_name, "label": t.label}
        row |= {k: _scalar(v) for k, v in t.fields.items()}
        for key in LABEL_FIELDS:
            row.setdefault(key, _scalar(getattr(t.config, key, None)))
        summary = summaries.get(t.run_name)
        if summary is None:
            row |= {"status": "failed", "error": errors.get(t.run_name, "the trial reported no result")}
        else:
            row |= {"status": "ok", "error": ""}
            row |= {k: _scalar(v) for k, v in summary.items() if k not in row}
        rows.append(row)
    return pd.DataFrame(rows)


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


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Columns mixing types (e.g. a metric that is a number in one run and text in another) become text."""
    df = df.copy()
    for col in [c for c in df.columns if pd.api.types.is_object_dtype(df[c].dtype)]:
        kind = pd.api.types.infer_dtype(df[col], skipna=True)
        if kind not in ("string", "boolean", "empty", "floating", "integer"):
            df[col] = df[col].map(lambda v: None if v is None else str(v))
    return df


def aggregate_runs(
    runs: pd.DataFrame, *, samples: int = 2000, seed: int = 0, metrics: tuple[str, ...] = AGGREGATE_METRICS
) -> pd.DataFrame:
    """Per method/ablation (in grid order): runs, failed runs, and for each metric n, mean, ci_low, ci_high over
    the seeds of the successful runs (module docstring: how the bootstrap is seeded)."""
    rows = []
    for lab, group in runs.groupby("label", sort=False):
        ok = group[group["status"] != "failed"]
        row: dict[str, Any] = {
            "label": lab,
            "method": group["method"].iloc[0] if "method" in group else None,
            "ablation": group["ablation"].iloc[0] if "ablation" in group else None,
            "runs": len(group),
            "failed": int((group["status"] == "failed").sum()),
        }
        for metric in metrics:
            column = ok[metric] if metric in ok else pd.Series(dtype=float)
            values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
            values = values[~np.isnan(values)]
            rng = np.random.default_rng(
                np.random.SeedSequence([seed, zlib.crc32(f"{lab}|{metric}".encode())])
            )
            lo, hi = bootstrap_ci(values, rng, samples)
            row[f"{metric}_n"] = len(values)
            row[f"{metric}_mean"] = float(values.mean()) if len(values) else float("nan")
            row[f"{metric}_ci_low"] = lo
            row[f"{metric}_ci_high"] = hi
        rows.append(row)
    return pd.DataFrame(rows)


_MD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("success_rate", "success ↑", "{:.2f}"),
    ("rvr", "RVR ↓", "{:.3f}"),
    ("rvr_covered", "RVR covered ↓", "{:.3f}"),
    ("svr", "SVR ↓", "{:.3f}"),
    ("heldout_first_violation_rate", "held-out 1st-exposure viol. ↓", "{:.2f}"),
    ("complexity_tokens_final", "memory tokens", "{:.0f}"),
)


def _cell(row: Mapping[str, Any], metric: str, fmt: str) -> str:
    mean, lo, hi = row[f"{metric}_mean"], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
    if mean != mean:
        return "–"
    if lo != lo:
        return f"{fmt.format(mean)} (n={row[f'{metric}_n']})"
    return f"{fmt.format(mean)} [{fmt.format(lo)}, {fmt.format(hi)}]"


POOLED: tuple[tuple[str, str, str], ...] = (
    # (name, numerator, denominator) from each run's summary: pooled over runs, runs as clusters
    ("rvr", "repeat_violations", "reexposures"),
    ("success", "episodes_won", "episodes"),
)


def pooled_runs(
    runs: pd.DataFrame, *, samples: int = 2000, seed: int = 0, reference: str = "scars"
) -> pd.DataFrame:
    """Per method/ablation: RVR and success as counts pooled over its runs with a run-clustered bootstrap interval
    (``experiments.stats``), the number of runs where RVR was undefined (no re-exposure: left out, never 0), and the
    paired difference against ``reference`` on the seeds both ran (same seeds, same games), with its interval."""
    from scars.experiments.stats import paired_difference, pooled_ratio

    ok = runs[runs["status"] != "failed"].copy()
    needed = {"success_rate", "episodes", "repeat_violations", "reexposures", "seed"}
    if ok.empty or not needed <= set(ok.columns):  # a tier without these counts has no pooled rates
        return pd.DataFrame({"label": pd.Series(dtype=str)})
    ok["episodes_won"] = pd.to_numeric(ok["success_rate"], errors="coerce") * pd.to_numeric(ok["episodes"])
    for col in ("repeat_violations", "reexposures", "episodes"):
        ok[col] = pd.to_numeric(ok[col], errors="coerce").fillna(0)
    by_label = {lab: g.set_index("seed").sort_index() for lab, g in ok.groupby("label", sort=False)}
    ref = by_label.get(reference)
    rows = []
    for lab, g in by_label.items():
        row: dict[str, Any] = {"label": lab, "rvr_undefined_runs": int((g["reexposures"] == 0).sum())}
        for name, num, den in POOLED:
            rng = np.random.default_rng(
                np.random.SeedSequence([seed, zlib.crc32(f"{lab}|pooled|{name}".encode())])
            )
            iv = pooled_ratio(g[num], g[den], rng, samples)
            row |= {
                f"{name}_pooled": iv.estimate,
                f"{name}_pooled_ci_low": iv.low,
                f"{name}_pooled_ci_high": iv.high,
                f"{name}_pooled_runs": iv.clusters,
                f"{name}_pooled_few_runs": iv.few_clusters,
            }
            if ref is not None and lab != reference:
                common = sorted(set(g.index) & set(ref.index))
                rng = np.random.default_rng(
                    np.random.SeedSequence([seed, zlib.crc32(f"{lab}|paired|{name}".encode())])
                )
                diff = paired_difference(
                    (g.loc[common, num], g.loc[common, den]),
                    (ref.loc[common, num], ref.loc[common, den]),
                    rng,
                    samples,
                )
                row |= {
                    f"{name}_diff_vs_{reference}": diff.estimate,
                    f"{name}_diff_ci_low": diff.low,
                    f"{name}_diff_ci_high": diff.high,
                    f"{name}_paired_seeds": diff.clusters,
                }
        rows.append(row)
    return pd.DataFrame(rows)


def _pooled_cell(row: Mapping[str, Any], name: str) -> str:
    est = row.get(f"{name}_pooled")
    if est is None or est != est:
        return "n/a"
    lo, hi = row.get(f"{name}_pooled_ci_low"), row.get(f"{name}_pooled_ci_high")
    flag = " ⚠ <5 runs" if row.get(f"{name}_pooled_few_runs") else ""
    ci = "" if lo is None or lo != lo else f" [{lo:.3f}, {hi:.3f}]"
    return f"{est:.3f}{ci} (n={int(row.get(f'{name}_pooled_runs') or 0)} runs){flag}"


def _diff_cell(row: Mapping[str, Any], name: str, reference: str) -> str:
    est = row.get(f"{name}_diff_vs_{reference}")
    if est is None or est != est:
        return "–"
    lo, hi = row.get(f"{name}_diff_ci_low"), row.get(f"{name}_diff_ci_high")
    ci = "" if lo is None or lo != lo else f" [{lo:+.3f}, {hi:+.3f}]"
    return f"{est:+.3f}{ci} (n={int(row.get(f'{name}_paired_seeds') or 0)} seeds)"


def aggregate_markdown(spec: SweepSpec, aggregate: pd.DataFrame, runs: pd.DataFrame) -> str:
    header = "| label | runs | " + " | ".join(h for _, h, _ in _MD_COLUMNS) + " |"
    rule = "| --- | ---: | " + " | ".join("---:" for _ in _MD_COLUMNS) + " |"
    rows = []
    for row in aggregate.to_dict("records"):
        count = f"{row['runs'] - row['failed']}/{row['runs']}"
        rows.append(
            f"| {row['label']} | {count} | " + " | ".join(_cell(row, m, f) for m, _, f in _MD_COLUMNS) + " |"
        )
    grid = ", ".join(f"{k} ∈ {list(v)}" for k, v in spec.grid.items())
    fixed = ", ".join(f"{k} = {v!r}" for k, v in spec.fixed.items()) or "defaults"
    lines = [
        f"# Sweep `{spec.name}`: {spec.tier}",
        "",
        f"Grid: {grid}; fixed: {fixed}. Each cell: mean over seeds [95% percentile-bootstrap CI, "
        f"{spec.bootstrap_samples} resamples, bootstrap seed {spec.bootstrap_seed}]; runs where a metric is "
        "undefined are left out of it; with one value the cell shows n=1 and no CI.",
        "",
        header,
        rule,
        *rows,
    ]
    if "rvr_pooled" in aggregate:
        lines += [
            "",
            "## Pooled counts and paired differences",
            "",
            "RVR = Σ repeats / Σ re-exposures and success = Σ won / Σ episodes over a label's runs, with a 95% "
            "run-clustered bootstrap interval; runs with no re-exposure (RVR undefined) are counted, not averaged "
            "in as 0. Δ: the label minus scars on the seeds both ran (same games), paired bootstrap.",
            "",
            "| label | RVR pooled | RVR undefined runs | success pooled | Δ RVR vs scars | Δ success vs scars |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in aggregate.to_dict("records"):
            lines.append(
                f"| {row['label']} | {_pooled_cell(row, 'rvr')} | {row.get('rvr_undefined_runs', 0)} | "
                f"{_pooled_cell(row, 'success')} | {_diff_cell(row, 'rvr', 'scars')} | "
                f"{_diff_cell(row, 'success', 'scars')} |"
            )
    failed = runs[runs["status"] == "failed"]
    if len(failed):
        lines += ["", f"## {len(failed)} FAILED run(s)", ""]
        lines += [f"- `{r.run_name}`: {r.error}" for r in failed.itertuples()]
    return "\n".join(lines) + "\n"


def plot_ablations(aggregate: pd.DataFrame, path: Path) -> Path:
    """RVR and task success per method/ablation: bars at the mean over seeds, error bars = the bootstrap CI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(aggregate["label"])
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 1.1 * len(labels) + 3), 3.8), constrained_layout=True)
    colours = [
        "#c0392b" if lab == "scars" else "#e67e22" if lab.startswith("scars:") else "#7f8c8d"
        for lab in labels
    ]
    for ax, metric, title, ylabel in (
        (axes[0], "rvr", "Repeat-violation rate (RVR) ↓", "RVR, mean over seeds (95% CI)"),
        (axes[1], "success_rate", "Task success ↑", "success rate, mean over seeds (95% CI)"),
    ):
        mean = aggregate[f"{metric}_mean"].to_numpy(dtype=float)
        lo = aggregate[f"{metric}_ci_low"].to_numpy(dtype=float)
        hi = aggregate[f"{metric}_ci_high"].to_numpy(dtype=float)
        shown = np.nan_to_num(mean)
        err = np.nan_to_num(np.vstack([mean - lo, hi - mean]))  # no CI (n < 2): no error bar
        ax.bar(labels, shown, yerr=err, capsize=4, color=colours)
        for i, n in enumerate(aggregate[f"{metric}_n"]):
            text = f"n={int(n)}" if mean[i] == mean[i] else "n/a"
            ax.text(i, 0.01, text, ha="center", va="bottom", fontsize=7, transform=ax.get_xaxis_transform())
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("method / ablation (n = seeds with a defined value)")
        ax.tick_params(axis="x", rotation=35)
        top = np.nanmax(np.concatenate([hi, mean])) if len(labels) and not np.all(np.isnan(mean)) else 1.0
        ax.set_ylim(0, max(1.0, float(top) * 1.1))
    return save_figure(fig, path)


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


__all__ = [
    "AGGREGATE_METRICS",
    "ProgressCallback",
    "SweepError",
    "SweepResult",
    "SweepSpec",
    "Trial",
    "aggregate_runs",
    "bootstrap_ci",
    "expand",
    "load_spec",
    "parse_values",
    "pooled_runs",
    "run_sweep",
    "runs_frame",
]


def parse_values(tier_name: str, text: str, *, many: bool) -> tuple[str, tuple]:
    """``FIELD=V1,V2`` (``many``) or ``FIELD=VALUE``: the field must be one of the tier's config fields; values
    take the field's type (int fields accept inclusive ranges: ``seed=0-4``; bools: true/false)."""
    tier = get_tier(tier_name)
    name, sep, raw = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name:
        raise SweepError(f"{text!r} is not FIELD=VALUE{'[,VALUE…]' if many else ''}")
    from scars.experiments.provenance import check_fields

    check_fields({name: None}, tier.config, f"tier {tier.name}")
    default = tier.config.__dataclass_fields__[name].default
    if isinstance(default, tuple):  # a tuple field (tier 3's seeds): one value, integers and ranges
        if many:
            raise SweepError(f"{name} is a list field: give it once with --set {name}=0-4 (or 0,1,2)")
        items: list[int] = []
        for part in (p.strip() for p in raw.split(",") if p.strip()):
            match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
            if not match:
                raise SweepError(f"{name}={raw!r} is not a list of integers or ranges like 0-4")
            items.extend(range(int(match.group(1)), int(match.group(2) or match.group(1)) + 1))
        return name, (tuple(items),)
    parts = [p.strip() for p in raw.split(",")] if many else [raw.strip()]
    values: list[Any] = []
    for part in parts:
        if isinstance(default, bool):
            if part.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise SweepError(f"{name}={part!r} is not a boolean (true or false)")
            values.append(part.lower() in ("true", "1", "yes"))
        elif isinstance(default, int):
            match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
            if not match:
                raise SweepError(f"{name}={part!r} is not an integer or an inclusive range like 0-4")
            lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
            if hi < lo or hi - lo >= 10_000:
                raise SweepError(f"{name}={part!r}: a range must run upwards and hold at most 10,000 values")
            values.extend(range(lo, hi + 1) if many else [lo])
        elif isinstance(default, float):
            try:
                number = float(part)
            except ValueError:
                raise SweepError(f"{name}={part!r} is not a number") from None
            if number != number or number in (float("inf"), float("-inf")):
                raise SweepError(f"{name}={part!r} is not a finite number")
            values.append(number)
        else:
            values.append(part)
    return name, tuple(values)
