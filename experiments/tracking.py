"""Weights & Biases tracking, offline by default (CleanRL style: opt-in behind one flag).

``--wandb`` turns logging on; the mode stays ``offline`` unless ``WANDB_MODE`` says otherwise, so nothing needs a
W&B account or a network. Offline runs land in ``<out>/wandb/`` and sync later with ``wandb sync <dir>``.
Metric names are grouped by prefix (``charts/…``, ``synthesis/…``, ``props/…``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class Tracker:
    """A thin handle over a wandb run; a no-op when tracking is off."""

    def __init__(
        self, enabled: bool, *, project: str, name: str, config: Mapping[str, Any], out: Path, group: str = ""
    ):
        self.run = None
        if not enabled:
            return
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        out.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=project,
            name=name,
            group=group or None,
            config=dict(config),
            dir=str(out),
            reinit="finish_previous",
            settings=wandb.Settings(console="off", x_disable_stats=True),
        )

    @property
    def enabled(self) -> bool:
        return self.run is not None

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        if self.run is not None:
            self.run.log(dict(metrics), step=step)

    def log_images(self, images: Mapping[str, Path]) -> None:
        if self.run is not None:
            import wandb

            self.run.log({k: wandb.Image(str(v)) for k, v in images.items()})

    def log_run(self, episodes, summary: Mapping[str, Any]) -> None:
        """A finished tier-1 run: per-episode charts (step = episode) and the numeric summary."""
        if self.run is None:
            return
        for row in episodes.itertuples():
            self.log(
                {
                    "charts/won": float(row.won),
                    "charts/violations": row.violations,
                    "charts/memory_tokens": row.memory_tokens,
                    "charts/svr": row.svr,
                },
                step=int(row.episode),
            )
        self.summary({k: v for k, v in summary.items() if isinstance(v, int | float | bool)})

    def summary(self, values: Mapping[str, Any]) -> None:
        if self.run is not None:
            for k, v in values.items():
                self.run.summary[k] = v

    def finish(self) -> str | None:
        """Finish the run; returns the offline run directory (to ``wandb sync``) or None."""
        if self.run is None:
            return None
        directory = getattr(self.run, "dir", None)
        self.run.finish()
        self.run = None
        return str(Path(directory).parent) if directory else None
