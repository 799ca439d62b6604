"""Calibration of the composite signal on labelled validation trajectories (paper §3.2): data in, config out.

The validation trajectories are step tables with the four signals (``z_V``, ``z_R``, ``z_C``, ``z_I`` — every
run's ``steps.parquet``/``steps.csv`` has them for the scars agent) and a label saying which steps *should* trigger
accommodation. ``--label violation`` (the default) labels a step positive when the world's verifier flagged its
action (``violated_rules`` non-empty); ``--label COLUMN`` reads a boolean column the user wrote. The grid search
itself is ``disequilibrium.calibration.calibrate``; the result is a JSON file that ``scars run tier1
--signal-config FILE`` reads back into a ``DisequilibriumConfig``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from scars.disequilibrium.calibration import CalibrationResult, calibrate
from scars.disequilibrium.composite import SIGNAL_NAMES, DisequilibriumConfig
from scars.experiments.report import atomic_write_text
from scars.synthesis.errors import ConfigError

SIGNAL_CONFIG_FORMAT = "scars-signal-config/1"


def read_trajectories(paths: list[Path], label: str = "violation") -> pd.DataFrame:
    """Step tables (Parquet or CSV) → one frame with the four signals and ``accommodate``; steps without a reading
    (methods without a monitor) are dropped."""
    frames = []
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{path} is not a file; expected a run's steps.parquet or steps.csv")
        try:
            frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
        except Exception as exc:  # pandas raises many types for a file that is not a table
            detail = " ".join(str(exc).split())  # one line, whatever the parser printed
            raise ConfigError(
                f"{path} is not a readable step table ({type(exc).__name__}: {detail})"
            ) from exc
        missing = [c for c in SIGNAL_NAMES if c not in frame.columns]
        if missing:
            raise ConfigError(
                f"{path} lacks the signal columns {missing}; it is not a step table of a scars run"
            )
        if label == "violation":
            if "violated_rules" not in frame.columns:
                raise ConfigError(f"{path} has no 'violated_rules' column for --label violation")
            frame["accommodate"] = frame["violated_rules"].fillna("").astype(str) != ""
        elif label in frame.columns:
            column = frame[label]
            odd = [v for v in column.dropna().unique() if str(v).lower() not in ("true", "false", "1", "0")]
            if odd:
                raise ConfigError(
                    f"{path}: label column {label!r} holds {odd[0]!r:.40}; a label is boolean (true/false or 1/0)"
                )
            frame["accommodate"] = column.map(lambda v: str(v).lower() in ("true", "1")).astype(bool)
        else:
            raise ConfigError(f"label column {label!r} is not in {path}; columns: {', '.join(frame.columns)}")
        for (
            column
        ) in SIGNAL_NAMES:  # each signal is a number in [0, 1]; text or anything else is a damaged table
            values = pd.to_numeric(frame[column], errors="coerce")
            bad = frame[column][values.isna() & frame[column].notna()]
            if not bad.empty or not values.dropna().between(0.0, 1.0).all():
                example = bad.iloc[0] if not bad.empty else values[~values.between(0.0, 1.0)].dropna().iloc[0]
                raise ConfigError(
                    f"{path}: column {column!r} holds {example!r:.40}; a signal column holds numbers in [0, 1] "
                    "(or is empty where a step has no reading)"
                )
            frame[column] = values
        frames.append(frame.dropna(subset=list(SIGNAL_NAMES)))
    data = pd.concat(frames, ignore_index=True)
    if data.empty:
        raise ConfigError("the step tables hold no step with a disequilibrium reading (run the scars method)")
    return data


def calibrate_files(paths: list[Path], *, label: str = "violation", grid_k: int = 10) -> CalibrationResult:
    return calibrate(read_trajectories(paths, label), grid_k=grid_k)


def write_signal_config(result: CalibrationResult, path: Path, sources: list[str]) -> dict[str, Any]:
    """Write the calibrated weights and τ (plus the fit's figures and its sources) atomically as JSON."""
    record = {
        "format": SIGNAL_CONFIG_FORMAT,
        "weights": list(result.weights),
        "tau": result.tau,
        "gain": result.gain,
        "bias": result.bias,
        "fit": {
            "f1": result.f1,
            "precision": result.precision,
            "recall": result.recall,
            "margin": result.margin,
            "n_steps": result.n_steps,
            "n_positive": result.n_positive,
            "grid_points": result.grid_points,
        },
        "sources": sources,
    }
    atomic_write_text(path, json.dumps(record, indent=2))
    return record


def load_signal_config(path: Path) -> DisequilibriumConfig:
    """A ``DisequilibriumConfig`` from a file ``write_signal_config`` wrote (validated like any config)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{path} is not a readable signal config ({exc})") from exc
    if not isinstance(record, dict) or record.get("format") != SIGNAL_CONFIG_FORMAT:
        raise ConfigError(f"{path} is not a signal config (expected format {SIGNAL_CONFIG_FORMAT!r})")
    try:
        return DisequilibriumConfig(
            weights=tuple(record["weights"]), tau=record["tau"], gain=record["gain"], bias=record["bias"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path} lacks a field of a signal config ({exc})") from exc
