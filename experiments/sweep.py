"""Ablation sweeps (SPEC §8: "many seeds × methods × ablations … on one machine or a Ray cluster"; §7 tier 1,
the six ablations of paper §6.4).

A sweep is a frozen :class:`SweepConfig`; :func:`expand_grid` turns it into one frozen :class:`Tier1Config` per run
(methods × scars ablations × seeds) and :func:`run_sweep` runs them — in this process one after another, or each
as a Ray task (``num_cpus=1``) gathered as it finishes — then aggregates over seeds. Output layout of ``DIR``::

    sweep.json                the sweep's config
    runs.parquet/.csv         one row per run: its identity, status (ok / failed), error and its summary metrics
    aggregate.parquet/.csv    per method/ablation: n, mean and 95% bootstrap CI over seeds of each metric; RVR and
                              success pooled over runs (run-clustered bootstrap) and paired differences vs scars
    aggregate.md              the same as a Markdown table (plus the list of failed runs)
    ablations.png             RVR and success per method/ablation, bars with CI error bars
    runs/<run_name>/          summary.json, config.json, steps.parquet/.csv, episodes.parquet/.csv,
                              (scars) ledger.sqlite; error.txt with the traceback if the run failed
    wandb/                    offline W&B runs (``--wandb``), one per run, grouped by the sweep name

Resume: a run whose ``runs/<run_name>/summary.json`` exists (written last, atomically) is not run again, so a sweep
that crashed at run 37 of 40 is finished by re-running the same command. A run that failed (or was cut off) has
no summary and is run again from scratch; so is a run whose summary.json or config.json is missing, truncated or
not a JSON object (edited or damaged on disk).

Confidence intervals: percentile bootstrap over the per-seed values of a metric (runs where it is undefined, e.g.
RVR with no re-exposure, are left out; ``n`` counts the rest): ``bootstrap_samples`` resamples of size n with
replacement, CI = the 2.5 % and 97.5 % quantiles of the resampled means. The resampling generator is seeded from
(``bootstrap_seed``, CRC32 of the method/ablation label and the metric name), so a group's CI does not depend on
which other groups are in the sweep and the same runs always give the same aggregate. With n < 2 the CI is
undefined (NaN): one seed says nothing about seed-to-seed spread.

With ``executor="ray"`` every run is a remote task that returns its tables to the driver, and the driver writes
every file, so the outputs are the same on a laptop and on a cluster without a shared file system (except the
scars ledger, which the agent writes where it runs). Inside a run, MCTS stays in-process (``Tier1Config.executor``
= "inprocess"): a run already holds one Ray CPU, and nesting root-parallel search would oversubscribe it.
"""

from __future__ import annotations

import json
import re
import shutil
import traceback
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from experiments.config import ABLATIONS, METHODS, Tier1Config
from experiments.report import atomic_write_bytes, atomic_write_text, write_json, write_table
from experiments.tier1 import RunResult, method_label, run_tier1
from experiments.tracking import Tracker
from synthesis.errors import ConfigError

SWEEP_EXECUTORS: tuple[str, ...] = ("inprocess", "ray")
AGGREGATE_METRICS: tuple[str, ...] = (
    "success_rate",
    "rvr",
    "rvr_covered",
    "svr",
    "heldout_first_violation_rate",
    "complexity_tokens_final",
)
"""The metrics aggregated over seeds (SPEC §7: task success, RVR, pointwise SVR, held-out generalisation,
description complexity)."""

RunFn = Callable[..., RunResult]


class SweepError(ConfigError):
    """A sweep cannot go on as asked (bad grid, or an output directory that holds runs of another config)."""


@dataclass(frozen=True)
class SweepConfig:
    """A grid of tier-1 runs: methods × ablations (scars only) × seeds, on one schedule (SPEC §7, §8)."""

    methods: tuple[str, ...] = ("scars", "rag", "reflexion")
    """Methods to run (scars and/or the five baselines)."""
    ablations: tuple[str, ...] = ()
    """Ablations of §6.4, applied to the scars method only; the full scars agent ("none") is always included."""
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """Root seeds; every method/ablation runs every seed (same seed, same games)."""
    episodes: int = 36
    """Episodes per run."""
    schedule: str = "paper"
    """Named rule schedule (``experiments.schedules.SCHEDULES``)."""
    max_steps: int = 30
    """Steps per episode before truncation."""
    search_iterations: int = 400
    """MCTS iterations per tree (scars runs)."""
    executor: str = "inprocess"
    """Where runs execute: "inprocess" (sequential) or "ray" (one remote task per run, num_cpus=1)."""
    ray_address: str = ""
    """Ray cluster address for ``ray.init(address=...)``; empty: the running Ray instance, else a local one."""
    name: str = "sweep"
    """Sweep name: the W&B group of its runs and the title of aggregate.md."""
    wandb: bool = False
    """Log each run as its own offline W&B run, grouped by the sweep name."""
    wandb_project: str = "scars-testbed"
    """W&B project name."""
    bootstrap_samples: int = 2000
    """Bootstrap resamples per confidence interval."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap resampling."""

    def __post_init__(self) -> None:
        # lists from callers become tuples, so the frozen config stays hashable and immutable
        for name in ("methods", "ablations", "seeds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.methods:
            raise SweepError(f"methods = {self.methods!r} is empty; choose from {METHODS}")
        if not self.seeds:
            raise SweepError("seeds = () is empty; give at least one seed, e.g. (0,)")
        for name, allowed in (("methods", METHODS), ("ablations", ABLATIONS)):
            values = getattr(self, name)
            for value in values:
                if value not in allowed:
                    raise SweepError(f"{name[:-1]} {value!r} is not one of {allowed}")
            _no_duplicates(name, values)
        _no_duplicates("seeds", self.seeds)
        for seed in self.seeds:
            if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
                raise SweepError(f"seed {seed!r} must be an integer >= 0")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if any(a != "none" for a in self.ablations) and "scars" not in self.methods:
            raise SweepError(
                f"ablations {self.ablations!r} apply to method 'scars' only, which is not in methods {self.methods!r}"
            )
        if self.executor not in SWEEP_EXECUTORS:
            raise SweepError(f"executor = {self.executor!r} is not one of {SWEEP_EXECUTORS}")
        if self.ray_address and self.executor != "ray":
            raise SweepError(
                f"ray_address = {self.ray_address!r} needs executor 'ray', not {self.executor!r}"
            )
        if self.bootstrap_samples < 100:
            raise SweepError(f"bootstrap_samples = {self.bootstrap_samples!r} must be >= 100")
        if self.bootstrap_seed < 0:
            raise SweepError(f"bootstrap_seed = {self.bootstrap_seed!r} must be >= 0")
        if not self.name or not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.name):
            raise SweepError(f"name = {self.name!r} must be non-empty letters, digits, '_', '.' or '-'")
        expand_grid(self)  # every run's own config validates here (episodes, schedule, max_steps, …)

    @property
    def scars_ablations(self) -> tuple[str, ...]:
        """The scars variants run: the full agent first, then the ablations asked for."""
        return ("none", *(a for a in self.ablations if a != "none"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _no_duplicates(name: str, values: tuple) -> None:
    seen = set()
    for value in values:
        if value in seen:
            raise SweepError(f"{name} lists {value!r} twice: {values!r}")
        seen.add(value)


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"0-4"`` → (0, 1, 2, 3, 4); ``"0,3,7-9"`` → (0, 3, 7, 8, 9). Ranges are inclusive."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if not match:
            raise SweepError(f"seeds {text!r}: {part!r} is not a seed or an inclusive range like 0-4")
        lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
        if hi < lo:
            raise SweepError(f"seeds {text!r}: range {part!r} runs backwards")
        seeds.extend(range(lo, hi + 1))
    return tuple(seeds)


def parse_names(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """A comma-separated list of names (``all`` = every allowed name); an unknown name is an error naming it."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if names == ("all",):
        return allowed
    for n in names:
        if n not in allowed:
            raise SweepError(f"{what} {n!r} is not one of {allowed} (or 'all')")
    return names


def label(cfg: Tier1Config) -> str:
    """The method/ablation label of a run (the runner's convention: ``rag``, ``scars``, ``scars:no_mdl``)."""
    return method_label(cfg)


def expand_grid(cfg: SweepConfig) -> tuple[Tier1Config, ...]:
    """One tier-1 config per run, ordered method → ablation → seed (the order of the tables and plots)."""
    runs = []
    for method in cfg.methods:
        for ablation in cfg.scars_ablations if method == "scars" else ("none",):
            for seed in cfg.seeds:
                runs.append(
                    Tier1Config(
                        method=method,
                        ablation=ablation,
                        seed=seed,
                        episodes=cfg.episodes,
                        schedule=cfg.schedule,
                        max_steps=cfg.max_steps,
                        search_iterations=cfg.search_iterations,
                        executor="inprocess",
                        wandb=cfg.wandb,
                        wandb_project=cfg.wandb_project,
                    )
                )
    return tuple(runs)


@dataclass(frozen=True)
class RunOutcome:
    """What one run of the grid gave: its summary, or the error it failed with."""

    config: Tier1Config
    status: str
    """"ok", "resumed" (summary found on disk, not run again) or "failed"."""
    summary: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class SweepResult:
    runs: pd.DataFrame
    """One row per run (runs.parquet)."""
    aggregate: pd.DataFrame
    """One row per method/ablation (aggregate.parquet)."""
    ran: tuple[str, ...]
    resumed: tuple[str, ...]
    failed: tuple[str, ...]


def run_dir(out: Path, cfg: Tier1Config) -> Path:
    return out / "runs" / cfg.run_name


def execute_run(run_fn: RunFn, cfg: Tier1Config, directory: str) -> tuple[str, RunResult | str]:
    """Run one config, catching its failure: ("ok", result) or ("failed", traceback). Runs in a Ray worker too,
    so it takes and returns only picklable values and writes nothing but what the run itself writes."""
    try:
        return "ok", run_fn(cfg, Path(directory))
    except Exception:
        return "failed", traceback.format_exc()


def _read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object read from ``path``, or None when it is missing, unreadable, truncated or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _finished_summary(out: Path, cfg: Tier1Config) -> dict[str, Any] | None:
    """The summary of a run finished earlier, or None. A finished run of another config is a conflict.

    A run whose ``summary.json`` or ``config.json`` is missing, truncated or malformed did not finish as far as
    resume can tell: it is run again (None), never a crash of the whole sweep.
    """
    directory = run_dir(out, cfg)
    summary_path = directory / "summary.json"
    if not summary_path.exists():
        return None
    stored = _read_json_object(directory / "config.json")
    summary = _read_json_object(summary_path)
    if stored is None or summary is None:
        return None
    if stored != cfg.to_dict():
        diff = {k: (stored.get(k), v) for k, v in cfg.to_dict().items() if stored.get(k) != v}
        raise SweepError(
            f"{directory} holds a finished run of another config (field: (stored, asked) = {diff}); "
            "use another --out or remove that run"
        )
    return summary


def _record(out: Path, cfg: Tier1Config, status: str, value: RunResult | str) -> RunOutcome:
    """Write a finished run's files (summary.json last: it marks the run done for resume) or its error."""
    directory = run_dir(out, cfg)
    if status == "failed":
        atomic_write_text(directory / "error.txt", str(value))
        last = str(value).strip().splitlines()[-1] if str(value).strip() else "unknown error"
        return RunOutcome(cfg, "failed", error=last)
    assert isinstance(value, RunResult)
    write_table(value.steps, directory / "steps")
    write_table(value.episodes, directory / "episodes")
    write_json(directory / "config.json", cfg.to_dict())
    (directory / "error.txt").unlink(missing_ok=True)
    write_json(directory / "summary.json", value.summary)
    return RunOutcome(cfg, "ok", summary=json.loads(json.dumps(value.summary, default=str)))


def _track(cfg: Tier1Config, sweep: SweepConfig, out: Path, result: RunResult) -> None:
    """One offline W&B run per tier-1 run, grouped by the sweep name (logged from the driver, after the run)."""
    tracker = Tracker(
        True, project=sweep.wandb_project, name=cfg.run_name, config=cfg.to_dict(), out=out, group=sweep.name
    )
    tracker.log_run(result.episodes, result.summary)
    tracker.finish()


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:<40}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


def _run_inprocess(
    pending: list[Tier1Config], out: Path, run_fn: RunFn, console: Console
) -> Iterator[tuple[Tier1Config, str, RunResult | str]]:
    with _progress(console) as progress:
        overall = progress.add_task("sweep (runs)", total=len(pending))
        for cfg in pending:
            episodes = progress.add_task(f"  {cfg.run_name}", total=cfg.episodes)

            def on_episode(done: int, total: int, task=episodes) -> None:
                progress.update(task, completed=done)

            status, value = execute_run(
                lambda c, d: run_fn(c, d, progress=on_episode), cfg, str(run_dir(out, cfg))
            )
            progress.remove_task(episodes)
            progress.advance(overall)
            yield cfg, status, value


def _run_ray(
    pending: list[Tier1Config], out: Path, run_fn: RunFn, console: Console, address: str
) -> Iterator[tuple[Tier1Config, str, RunResult | str]]:
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address or None, include_dashboard=False, log_to_driver=False, configure_logging=False
        )
    try:
        # max_retries=0: a run is deterministic, so a retry after a worker crash would crash the same way
        remote = ray.remote(num_cpus=1, max_retries=0)(execute_run)
        fn_ref = ray.put(run_fn)
        refs = {remote.remote(fn_ref, cfg, str(run_dir(out, cfg))): cfg for cfg in pending}
        with _progress(console) as progress:
            overall = progress.add_task(f"sweep on Ray ({len(pending)} runs)", total=len(pending))
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                cfg = refs.pop(done[0])
                try:
                    status, value = ray.get(done[0])
                except Exception:  # the worker died (OOM, signal): record it like any failed run
                    status, value = "failed", traceback.format_exc()
                progress.update(overall, advance=1, description=f"done: {cfg.run_name}")
                yield cfg, status, value
    finally:
        if started_here:
            ray.shutdown()


def run_sweep(
    cfg: SweepConfig, out: Path, *, run_fn: RunFn = run_tier1, console: Console | None = None
) -> SweepResult:
    """Run every config of the grid not finished in ``out`` yet, then write the run table, the aggregate over
    seeds, its Markdown and the ablation plot. A failed run is recorded (``error.txt``, ``status = failed``) and
    the sweep goes on; the failures are printed at the end and returned in ``SweepResult.failed``.

    ``run_fn(cfg, out, progress=None) -> RunResult`` is the tier-1 entry point (:func:`experiments.tier1.run_tier1`);
    tests pass a wrapper to count calls. On Ray it is shipped to the workers with cloudpickle, so it must be
    importable there (a module-level function of the project) or defined inside a function (shipped by value)."""
    console = console or Console()
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "sweep.json", cfg.to_dict())
    grid = expand_grid(cfg)
    outcomes: dict[str, RunOutcome] = {}
    pending: list[Tier1Config] = []
    for run in grid:
        summary = _finished_summary(out, run)
        if summary is not None:
            outcomes[run.run_name] = RunOutcome(run, "resumed", summary=summary)
        else:
            shutil.rmtree(run_dir(out, run), ignore_errors=True)  # a cut-off run starts over, ledger included
            pending.append(run)
    if outcomes:
        console.print(f"resuming: {len(outcomes)} of {len(grid)} runs already finished in {out / 'runs'}")
    if cfg.executor == "ray":
        finished = _run_ray(pending, out, run_fn, console, cfg.ray_address)
    else:
        finished = _run_inprocess(pending, out, run_fn, console)
    for run, status, value in finished:
        outcomes[run.run_name] = _record(out, run, status, value)
        if status == "ok" and cfg.wandb:
            _track(run, cfg, out, value)
    ordered = [outcomes[run.run_name] for run in grid]
    runs = runs_table(ordered)
    aggregate = aggregate_runs(runs, samples=cfg.bootstrap_samples, seed=cfg.bootstrap_seed)
    aggregate = aggregate.merge(
        pooled_runs(runs, samples=cfg.bootstrap_samples, seed=cfg.bootstrap_seed), on="label", how="left"
    )
    write_table(_parquet_safe(runs), out / "runs")
    write_table(aggregate, out / "aggregate")
    failed = tuple(o.config.run_name for o in ordered if o.status == "failed")
    atomic_write_text(out / "aggregate.md", aggregate_markdown(cfg, aggregate, ordered))
    plot_ablations(aggregate, out / "ablations.png")
    result = SweepResult(
        runs=runs,
        aggregate=aggregate,
        ran=tuple(o.config.run_name for o in ordered if o.status in ("ok", "failed")),
        resumed=tuple(o.config.run_name for o in ordered if o.status == "resumed"),
        failed=failed,
    )
    _report(console, cfg, out, result, ordered)
    return result


def runs_table(outcomes: Iterable[RunOutcome]) -> pd.DataFrame:
    """One row per run: run_name, label, method, ablation, seed, status, error, then the summary's scalars (a
    non-scalar summary value is kept as JSON text)."""
    rows = []
    for o in outcomes:
        row: dict[str, Any] = {
            "run_name": o.config.run_name,
            "label": label(o.config),
            "method": o.config.method,
            "ablation": o.config.ablation,
            "seed": o.config.seed,
            "status": o.status,
            "error": o.error,
        }
        for key, value in o.summary.items():
            if key in row:
                continue
            row[key] = (
                value if value is None or isinstance(value, bool | int | float | str) else json.dumps(value)
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Columns mixing types (e.g. a metric that is a number in one run and text in another) become text."""
    df = df.copy()
    for col in [c for c in df.columns if pd.api.types.is_object_dtype(df[c].dtype)]:
        kind = pd.api.types.infer_dtype(df[col], skipna=True)
        if kind not in ("string", "boolean", "empty", "floating", "integer"):
            df[col] = df[col].map(lambda v: None if v is None else str(v))
    return df


def bootstrap_ci(
    values: np.ndarray, rng: np.random.Generator, samples: int = 2000, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean (NaN, NaN for fewer than 2 values)."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float("nan"), float("nan")
    means = values[rng.integers(0, len(values), size=(samples, len(values)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


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
            "method": group["method"].iloc[0],
            "ablation": group["ablation"].iloc[0],
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
    from experiments.stats import paired_difference, pooled_ratio

    ok = runs[runs["status"] != "failed"].copy()
    if ok.empty:
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
    return f"{est:.3f}{ci} (n={row.get(f'{name}_pooled_runs')} runs){flag}"


def _diff_cell(row: Mapping[str, Any], name: str, reference: str) -> str:
    est = row.get(f"{name}_diff_vs_{reference}")
    if est is None or est != est:
        return "–"
    lo, hi = row.get(f"{name}_diff_ci_low"), row.get(f"{name}_diff_ci_high")
    ci = "" if lo is None or lo != lo else f" [{lo:+.3f}, {hi:+.3f}]"
    return f"{est:+.3f}{ci} (n={row.get(f'{name}_paired_seeds')} seeds)"


def aggregate_markdown(cfg: SweepConfig, aggregate: pd.DataFrame, outcomes: list[RunOutcome]) -> str:
    header = "| method | runs | " + " | ".join(h for _, h, _ in _MD_COLUMNS) + " |"
    rule = "| --- | ---: | " + " | ".join("---:" for _ in _MD_COLUMNS) + " |"
    rows = []
    for row in aggregate.to_dict("records"):
        runs = f"{row['runs'] - row['failed']}/{row['runs']}"
        rows.append(
            f"| {row['label']} | {runs} | " + " | ".join(_cell(row, m, f) for m, _, f in _MD_COLUMNS) + " |"
        )
    lines = [
        f"# Sweep `{cfg.name}`: tier 1, schedule `{cfg.schedule}`",
        "",
        f"Seeds {list(cfg.seeds)}, {cfg.episodes} episodes per run. Each cell: mean over seeds "
        f"[95% percentile-bootstrap CI, {cfg.bootstrap_samples} resamples, bootstrap seed {cfg.bootstrap_seed}]; "
        "runs where a metric is undefined are left out of it; with one value the cell shows n=1 and no CI.",
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
            "RVR = Σ repeats / Σ re-exposures and success = Σ won / Σ episodes over a method's runs, with a 95% "
            "run-clustered bootstrap interval; runs with no re-exposure (RVR undefined) are counted, not averaged "
            "in as 0. Δ: the method minus scars on the seeds both ran (same games), paired bootstrap.",
            "",
            "| method | RVR pooled | RVR undefined runs | success pooled | Δ RVR vs scars | Δ success vs scars |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in aggregate.to_dict("records"):
            lines.append(
                f"| {row['label']} | {_pooled_cell(row, 'rvr')} | {row.get('rvr_undefined_runs', 0)} | "
                f"{_pooled_cell(row, 'success')} | {_diff_cell(row, 'rvr', 'scars')} | "
                f"{_diff_cell(row, 'success', 'scars')} |"
            )
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        lines += ["", f"## {len(failed)} FAILED run(s)", ""]
        lines += [f"- `{o.config.run_name}`: {o.error} (runs/{o.config.run_name}/error.txt)" for o in failed]
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
    for ax, metric, title in (
        (axes[0], "rvr", "Repeat-violation rate (RVR) ↓"),
        (axes[1], "success_rate", "Task success ↑"),
    ):
        mean = aggregate[f"{metric}_mean"].to_numpy(dtype=float)
        lo = aggregate[f"{metric}_ci_low"].to_numpy(dtype=float)
        hi = aggregate[f"{metric}_ci_high"].to_numpy(dtype=float)
        shown = np.nan_to_num(mean)
        err = np.nan_to_num(np.vstack([mean - lo, hi - mean]))  # no CI (n < 2): no error bar
        ax.bar(labels, shown, yerr=err, capsize=4, color=colours)
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=35)
        top = np.nanmax(np.concatenate([hi, mean])) if len(labels) and not np.all(np.isnan(mean)) else 1.0
        ax.set_ylim(0, max(1.0, float(top) * 1.1))
    buffer = BytesIO()
    fig.savefig(buffer, dpi=130, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def _report(
    console: Console, cfg: SweepConfig, out: Path, result: SweepResult, outcomes: list[RunOutcome]
) -> None:
    from rich.table import Table

    table = Table(title=f"Sweep {cfg.name}: mean [95% bootstrap CI] over seeds")
    table.add_column("method")
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
    console.print(
        f"{len(result.ran)} run(s) ran, {len(result.resumed)} resumed from disk; results: {out / 'aggregate.md'}"
    )
    if result.failed:
        console.print(
            f"[bold red]{len(result.failed)} of {len(outcomes)} RUN(S) FAILED[/] (the sweep went on):"
        )
        for o in outcomes:
            if o.status == "failed":
                console.print(
                    f"[red]  {o.config.run_name}: {o.error}[/]  → {run_dir(out, o.config) / 'error.txt'}"
                )
        console.print("re-run the same command to retry only the failed runs")


__all__ = [
    "AGGREGATE_METRICS",
    "RunOutcome",
    "SweepConfig",
    "SweepError",
    "SweepResult",
    "aggregate_runs",
    "bootstrap_ci",
    "expand_grid",
    "parse_names",
    "parse_seeds",
    "run_sweep",
    "runs_table",
]
