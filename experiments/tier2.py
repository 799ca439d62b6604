"""Tier 2 (paper §6.2; SPEC §7 tier 2) as a protocol: one configuration run into a run folder, and its place in the
tier registry (``scars sweep --tier tier2``, ``scars paper``). The run itself — the seats, the loop, the metrics — is
``experiments.commons_run.run_tier2``; its tables and plots are ``experiments.tier2_report``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scars.experiments.commons_run import Tier2Result, run_tier2
from scars.experiments.commons_seats import check_transfer
from scars.experiments.config import Tier2Config
from scars.experiments.provenance import write_provenance
from scars.experiments.report import write_json
from scars.experiments.tier2_report import write_tier2
from scars.experiments.tracking import Tracker, TrackingSettings
from scars.synthesis.errors import ConfigError


def log_tier2(cfg: Tier2Config, out: Path, result: Tier2Result, settings: TrackingSettings) -> None:
    """One tier-2 run (of ``cfg.runs`` arena runs) as a W&B run: a chart point per arena run (x axis ``run``), the
    numeric summary, the plots in ``out`` and the tables as artifacts. Nothing when tracking is off."""
    tags = (f"arena:{cfg.arena}", f"setup:{cfg.setup}", f"ablation:{cfg.ablation}", f"seed:{cfg.seed}")
    tracker = Tracker(
        settings,
        name=cfg.run_name,
        config=cfg.to_dict(),
        out=out,
        job_type=f"tier2/{cfg.method_label}",
        tags=(*tags, f"backend:{cfg.backend}"),
        step_metric="run",
    )
    if not tracker.enabled:
        return
    keys = ("survival_time", "cooperative_yield", "over_usage", "efficiency", "learner_gain")
    for row in result.runs.to_dict("records"):
        tracker.log({f"run/{k}": float(row[k]) for k in keys}, step=int(row["run"]))
    tracker.summary({k: v for k, v in result.summary.items() if isinstance(v, int | float | bool)})
    tracker.log_images({name: out / f"{name}.png" for name in ("resource", "harvest", "karma")})
    tracker.log_artifact(
        f"{cfg.run_name}-tables", "tables", [out / f"{n}.parquet" for n in ("steps", "months", "runs")]
    )
    tracker.finish()


def run_tier2_to_dir(
    cfg: Tier2Config,
    out: Path,
    progress: Callable[[int, int], None] | None = None,
    *,
    tracking: Any = None,
) -> dict[str, Any]:
    """``run_tier2`` and ``write_tier2`` into ``out`` — provenance.json first, summary.json last (the tier
    registry's run-folder contract, ``experiments.tiers.RunFolder``); returns the summary. With tracking on, every
    finished run (of ``cfg.runs``) is logged to W&B (``log_tier2``), with the summary, the plots and the tables."""

    started = time.time()
    check_transfer(cfg, out)  # refuse a bad transfer_from before the first file is written
    out.mkdir(parents=True, exist_ok=True)
    write_provenance(out, cfg.to_dict(), tier="tier2", started=started)
    result = run_tier2(cfg, out, progress)
    write_tier2(out, {cfg.method_label: result}, {cfg.method_label: cfg})
    log_tier2(cfg, out, result, tracking or TrackingSettings(enabled=cfg.wandb, project=cfg.wandb_project))
    write_provenance(out, cfg.to_dict(), tier="tier2", started=started, ended=time.time())
    write_json(out / "summary.json", result.summary)  # last: its presence marks a finished run
    return result.summary


def _register_tier2() -> None:
    """Tier 2 in the tier registry (``scars sweep --tier tier2``, ``scars paper``)."""
    from scars.experiments.tiers import Tier, ablation_on_a_baseline, register_tier

    def protocol(scale: str) -> tuple[dict[str, tuple], dict[str, Any]]:
        """The §6.2 homogeneous arena-A protocol: every method of the comparison × seeds (smoke: 2 seeds × 2 runs of 6 months and
        a small search budget; full: 5 seeds × 10 runs of 12 months). The anti-collusion and transfer studies
        have their own commands (``scars run tier2-collusion``, ``tier2-transfer``)."""
        from scars.experiments.config import METHODS

        if scale == "smoke":
            return (
                {"method": METHODS, "seed": (0, 1)},
                {"runs": 2, "months": 6, "search_iterations": 60},
            )
        if scale == "full":
            return ({"method": METHODS, "seed": (0, 1, 2, 3, 4)}, {"runs": 10, "months": 12})
        raise ConfigError(f"scale {scale!r} is not one of ('smoke', 'full')")

    register_tier(
        Tier(
            name="tier2",
            config=Tier2Config,
            run=lambda cfg, out, *, tracking=None, progress=None: run_tier2_to_dir(
                cfg, out, progress, tracking=tracking
            ),
            label=lambda cfg: cfg.method_label,
            tags=lambda cfg: (f"arena:{cfg.arena}", f"setup:{cfg.setup}", f"seed:{cfg.seed}"),
            protocol=protocol,
            skip=ablation_on_a_baseline,
            progress_total=lambda cfg: cfg.runs,
        )
    )


_register_tier2()
