"""Weights & Biases tracking from inside a run, live, offline by default (CleanRL style: opt-in behind one flag).

``--wandb`` turns logging on; the mode stays ``offline`` unless ``WANDB_MODE`` says otherwise, so nothing needs a
W&B account or a network. The run logs as it goes (per episode, or per month in the commons), so a crashed run keeps
what it logged; at the end it adds tables, plots, its summary and its files as artifacts. Offline runs land in
``<dir>/wandb/``; :meth:`Tracker.finish` prints the folder and the ``wandb sync`` command that uploads it.

Each run is its own W&B run (``reinit="create_new"``: several may be open in one process, e.g. the demo's six
methods, which all receive the comparison plots at the end). Identity: project, entity, group (the sweep or the
demo), job_type (``<tier>/<method label>``, ``sweep/aggregate``) and tags (ablation, seed, backend). A run's charts
have its own x axis (``define_metric``): ``episode`` for tier 1, ``run`` for tier 2 (``step_metric``).
Metric names are grouped by prefix (``episode/…``, ``signal/…``, ``scars/…``, ``run/…``). One folder holds every
tier's runs when the callers share a ``TrackingSettings.directory`` (``scars demo --wandb``: ``OUT/wandb``; a sweep:
``OUT/wandb``, with its aggregate table, confidence intervals and bar charts in one more run).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class TrackingSettings:
    """Where and under what identity runs are logged (not part of any experiment config: it changes no result)."""

    enabled: bool = False
    project: str = "scars-testbed"
    entity: str = ""
    """W&B entity (user or team); empty: the default of the W&B login (offline runs need none)."""
    group: str = ""
    """W&B group: the sweep's or the demo's name."""
    directory: str = ""
    """Folder that receives ``wandb/`` (offline runs); empty: the run folder."""


class Tracker:
    """A handle over one wandb run; every method is a no-op when tracking is off."""

    def __init__(
        self,
        settings: TrackingSettings,
        *,
        name: str,
        config: Mapping[str, Any],
        out: Path,
        job_type: str = "",
        tags: Iterable[str] = (),
        step_metric: str = "",
    ):
        self.run = None
        self.settings = settings
        self.step_metric = step_metric
        if not settings.enabled:
            return
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        directory = Path(settings.directory) if settings.directory else out
        directory.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=settings.project,
            entity=settings.entity or None,
            name=name,
            group=settings.group or None,
            job_type=job_type or None,
            tags=[t for t in tags if t],
            config=dict(config),
            dir=str(directory),
            reinit="create_new",
            settings=wandb.Settings(console="off", x_disable_stats=True),
        )
        if step_metric:  # every chart of the run against its own unit (episode, run), not W&B's _step
            self.run.define_metric(step_metric)
            self.run.define_metric("*", step_metric=step_metric)

    @property
    def enabled(self) -> bool:
        return self.run is not None

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Log ``metrics``; ``step`` is the value of the run's ``step_metric`` (its x axis) when it has one."""
        if self.run is None:
            return
        if step is not None and self.step_metric:
            self.run.log({**metrics, self.step_metric: step})
        else:
            self.run.log(dict(metrics), step=step)

    def log_table(self, key: str, frame: pd.DataFrame) -> None:
        """A pandas frame as a W&B table (values W&B cannot type become text)."""
        if self.run is None:
            return
        import wandb

        clean = frame.copy()
        for col in clean.columns:
            if pd.api.types.is_object_dtype(clean[col].dtype):
                clean[col] = clean[col].map(lambda v: None if v is None else str(v))
        self.run.log({key: wandb.Table(dataframe=clean.reset_index(drop=True))})

    def log_images(self, images: Mapping[str, Path]) -> None:
        """The plots (PNG files) that exist, as images under ``plots/``."""
        if self.run is not None:
            import wandb

            shown = {f"plots/{k}": wandb.Image(str(v)) for k, v in images.items() if Path(v).is_file()}
            if shown:
                self.run.log(shown)

    def log_bars(self, key: str, frame: pd.DataFrame, label: str, value: str, title: str) -> None:
        """A bar chart W&B draws itself (``wandb.plot.bar``) of ``value`` per ``label`` (rows with a value only)."""
        if self.run is None:
            return
        import wandb

        rows = frame[[label, value]].dropna()
        table = wandb.Table(
            data=[[str(a), float(b)] for a, b in rows.itertuples(index=False)], columns=[label, value]
        )
        self.run.log({key: wandb.plot.bar(table, label, value, title=title)})

    def log_artifact(self, name: str, kind: str, paths: Iterable[Path]) -> None:
        """Files of the run (ledger, Parquet tables) as one artifact; missing paths are skipped."""
        if self.run is None:
            return
        import wandb

        files = [p for p in paths if p.is_file()]
        if not files:
            return
        artifact = wandb.Artifact(name=_artifact_name(name), type=kind)
        for path in files:
            artifact.add_file(str(path), name=path.name)
        self.run.log_artifact(artifact)

    def summary(self, values: Mapping[str, Any]) -> None:
        if self.run is not None:
            for k, v in values.items():
                if v is None or isinstance(v, bool | int | float | str):
                    self.run.summary[k] = v

    @property
    def offline_dir(self) -> str | None:
        """The run's local folder (``…/wandb/offline-run-…``), what ``wandb sync`` takes."""
        if self.run is None:
            return None
        directory = getattr(self.run, "dir", None)
        return str(Path(directory).parent) if directory else None

    def finish(self, echo: bool = True) -> str | None:
        """Finish the run; returns (and prints, unless ``echo`` is False) its local folder and the sync command."""
        if self.run is None:
            return None
        folder = self.offline_dir
        offline = self.run.settings.mode == "offline" if hasattr(self.run, "settings") else True
        self.run.finish()
        self.run = None
        if echo and folder:
            verb = "offline W&B run" if offline else "W&B run (local copy)"
            print(f"{verb}: {folder}  (upload: wandb sync {folder})", flush=True)
        return folder


def _artifact_name(name: str) -> str:
    """W&B artifact names allow letters, digits, '-', '_' and '.'."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


__all__ = ["Tracker", "TrackingSettings"]
