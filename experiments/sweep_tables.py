"""A sweep's tables: the run table from the trials' summaries, the aggregate over seeds (mean and 95% bootstrap
CI per metric, ``experiments.stats``), pooled rates with paired differences vs scars, its Markdown and the
ablation plot."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scars.experiments.report import (
    method_colour,
    save_figure,
)
from scars.experiments.stats import bootstrap_ci
from scars.experiments.sweep_spec import (
    LABEL_FIELDS,
    SweepSpec,
)

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


NOT_COUNTED: tuple[str, ...] = ("failed", "stopped", "skipped")
"""Run statuses without a summary to aggregate: failed, stopped early by a scheduler, skipped by the tier."""


def _scalar(value: Any) -> Any:
    return (
        value
        if value is None or isinstance(value, bool | int | float | str)
        else json.dumps(value, default=str)
    )


def runs_frame(finished, rerun: Mapping[str, Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """One row per Tune trial (``experiments.sweep.collect``: its point, the summary it reported at the end or why it
    has none), in grid order: run_name, label, the fields, status (ok / failed / stopped / skipped), error, then the
    summary's scalars (a non-scalar value is kept as JSON text). ``rerun``: summaries of runs re-run on resume, by
    folder."""
    rows = []
    for item in finished:
        t = item.trial
        row: dict[str, Any] = {"run_name": item.folder, "label": t.label}
        row |= {k: _scalar(v) for k, v in t.fields.items()}
        for key in LABEL_FIELDS:
            row.setdefault(key, _scalar(getattr(t.config, key, None)))
        summary = (rerun or {}).get(item.folder, item.summary)
        if summary is None:
            row |= {"status": item.status, "error": item.error}
        else:
            row |= {"status": "ok", "error": ""}
            row |= {k: _scalar(v) for k, v in summary.items() if k not in row}
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


def aggregate_runs(
    runs: pd.DataFrame, *, samples: int = 2000, seed: int = 0, metrics: tuple[str, ...] = AGGREGATE_METRICS
) -> pd.DataFrame:
    """Per method/ablation (in grid order): runs, failed runs, and for each metric n, mean, ci_low, ci_high over
    the seeds of the successful runs (module docstring: how the bootstrap is seeded)."""
    rows = []
    counted = runs[runs["status"] != "skipped"] if "status" in runs else runs
    for lab, group in counted.groupby("label", sort=False):
        ok = group[~group["status"].isin(NOT_COUNTED)]
        row: dict[str, Any] = {
            "label": lab,
            "method": group["method"].iloc[0] if "method" in group else None,
            "ablation": group["ablation"].iloc[0] if "ablation" in group else None,
            "runs": len(group),
            "failed": int((group["status"] == "failed").sum()),
            "stopped": int((group["status"] == "stopped").sum()),
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


FEW_SEEDS = 3
"""An interval over fewer seeds than this is flagged ⚠ (a bootstrap over two values means little)."""


def _cell(row: Mapping[str, Any], metric: str, fmt: str) -> str:
    mean, lo, hi = row[f"{metric}_mean"], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
    if mean != mean:
        return "–"
    if lo != lo:
        return f"{fmt.format(mean)} (n={row[f'{metric}_n']})"
    flag = " ⚠" if row[f"{metric}_n"] < FEW_SEEDS else ""
    return f"{fmt.format(mean)} [{fmt.format(lo)}, {fmt.format(hi)}]{flag}"


POOLED: tuple[tuple[str, str, str], ...] = (
    # (name, numerator, denominator) from each run's summary: pooled over runs, runs as clusters
    ("rvr", "repeat_violations", "reexposures"),
    ("success", "episodes_won", "episodes"),
)


RULE_SET_POOLED: tuple[tuple[str, str, str], ...] = tuple(
    (f"rule_set_{name}_{where}", f"rule_set_masked_unsafe_{where}", f"rule_set_{den}_{where}")
    for where in ("probes", "decisions")
    for name, den in (("precision", "masked"), ("recall", "unsafe"))
) + (
    # tier 1's census (issue 40): recall where the protocol had told the run of the rule, and that share of all
    (
        "rule_set_recall_after_first_failure_probes",
        "rule_set_masked_known_probes",
        "rule_set_unsafe_known_probes",
    ),
    ("rule_set_recall_ceiling_probes", "rule_set_unsafe_known_probes", "rule_set_unsafe_probes"),
)
"""Rule-set quality (issue 40) pooled over runs, runs as clusters: only labels whose runs measured it (scars)."""


def _pooled_columns(name: str, iv) -> dict:
    """A pooled ratio's columns in the sweep table: the estimate, its interval and how many runs it pools."""
    return {
        f"{name}_pooled": iv.estimate,
        f"{name}_pooled_ci_low": iv.low,
        f"{name}_pooled_ci_high": iv.high,
        f"{name}_pooled_runs": iv.clusters,
        f"{name}_pooled_few_runs": iv.few_clusters,
    }


def pooled_runs(
    runs: pd.DataFrame, *, samples: int = 2000, seed: int = 0, reference: str = "scars"
) -> pd.DataFrame:
    """Per method/ablation: RVR and success as counts pooled over its runs with a run-clustered bootstrap interval
    (``experiments.stats``), the number of runs where RVR was undefined (no re-exposure: left out, never 0), and the
    paired difference against ``reference`` on the seeds both ran (same seeds, same games), with its interval (tier
    1); and rule-set precision and recall pooled the same way in every tier whose runs measured them (issue 40)."""
    from scars.experiments.stats import pooled_ratio

    ok = runs[~runs["status"].isin(NOT_COUNTED)].copy()
    needed = {"success_rate", "episodes", "repeat_violations", "reexposures", "seed"}
    measured = [r for r in RULE_SET_POOLED if {r[1], r[2], "seed"} <= set(ok.columns)]
    rates = needed <= set(ok.columns)  # a tier without these counts (tiers 2 and 3) has no pooled rates
    if ok.empty or not (rates or measured):
        return pd.DataFrame({"label": pd.Series(dtype=str)})
    if rates:
        ok["episodes_won"] = pd.to_numeric(ok["success_rate"], errors="coerce") * pd.to_numeric(
            ok["episodes"]
        )
        for col in ("repeat_violations", "reexposures", "episodes"):
            ok[col] = pd.to_numeric(ok[col], errors="coerce").fillna(0)
    by_label = {lab: g.set_index("seed").sort_index() for lab, g in ok.groupby("label", sort=False)}
    ref = by_label.get(reference)
    rows = []
    for lab, g in by_label.items():
        row: dict[str, Any] = {"label": lab}
        if rates:
            row |= _pooled_rates(g, lab, ref, reference, samples, seed)
        for name, num, den in measured:  # rule-set quality (issue 40), every tier that measures it
            if g[den].isna().all():
                continue
            rng = np.random.default_rng(
                np.random.SeedSequence([seed, zlib.crc32(f"{lab}|pooled|{name}".encode())])
            )
            inside = g[g[den].notna()]
            iv = pooled_ratio(inside[num].astype(float), inside[den].astype(float), rng, samples)
            row |= _pooled_columns(name, iv)
        rows.append(row)
    return pd.DataFrame(rows)


def _pooled_rates(g: pd.DataFrame, lab: str, ref, reference: str, samples: int, seed: int) -> dict[str, Any]:
    """A tier-1 label's pooled RVR and success over its runs (indexed by seed), with the paired differences
    against ``reference``'s runs ``ref``."""
    from scars.experiments.stats import paired_difference, pooled_ratio

    row: dict[str, Any] = {"rvr_undefined_runs": int((g["reexposures"] == 0).sum())}
    for name, num, den in POOLED:
        rng = np.random.default_rng(
            np.random.SeedSequence([seed, zlib.crc32(f"{lab}|pooled|{name}".encode())])
        )
        iv = pooled_ratio(g[num], g[den], rng, samples)
        row |= _pooled_columns(name, iv)
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
    return row


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
        count = f"{row['runs'] - row['failed'] - row.get('stopped', 0)}/{row['runs']}"
        rows.append(
            f"| {row['label']} | {count} | " + " | ".join(_cell(row, m, f) for m, _, f in _MD_COLUMNS) + " |"
        )
    grid = ", ".join(f"{k} ∈ {list(v)}" for k, v in spec.grid.items())
    fixed = ", ".join(f"{k} = {v!r}" for k, v in spec.fixed.items()) or "defaults"
    lines = [
        f"# Sweep {spec.name}: {spec.tier}",
        "",
        f"Grid: {grid}; fixed: {fixed}. Each cell: mean over seeds [95% percentile-bootstrap CI, "
        f"{spec.bootstrap_samples} resamples, bootstrap seed {spec.bootstrap_seed}]; runs where a metric is "
        f"undefined are left out of it; with one value the cell shows n=1 and no CI; ⚠: an interval over fewer than "
        f"{FEW_SEEDS} seeds.",
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
    colours = [method_colour(lab) for lab in labels]
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
