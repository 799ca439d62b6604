"""``scars report DIR…``: one Markdown file and one self-contained HTML page from result folders (issue 16).

A DIR is a sweep folder (``runs.parquet`` and ``sweep.json``, from ``scars sweep`` or ``scars paper``) or a runner
folder (``summary.json`` per method, from ``scars demo`` / ``scars run``). For every one the report shows

- the tier's table: each label's metrics as mean over seeds with n and a 95% bootstrap CI (sweeps), or pooled rates
  with n and episode-clustered intervals (single runs); pooled counts and paired differences against scars;
- the ablation table: each ablation's own measures (Soft-Bias: leak mass; No-Drift: mean TV drift per scar;
  LLM-only vs MCTS: synthesis latency and search nodes; No-MDL: rule size and enforcement time per decision; No-ILP:
  schema size), mean [CI] and n over seeds;
- plots with labelled axes and n: the bars of the sweep; success and violations per episode (mean over seeds with a
  95% CI band) with markers at rule switches and world-version changes; d_t and its four terms over time for one
  chosen run (``--run``, default the first scars run).

The HTML page embeds every image as base64 (it can be mailed or archived alone); the Markdown links the PNGs, which
are written next to it.
"""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from scars.experiments.report import (  # noqa: E402
    _LINESTYLES,
    RULE_SET_NOTE,
    DamagedResultFile,
    atomic_write_text,
    markdown_table,
    method_colour,
    paired_markdown,
    plot_signal,
    read_json_object,
    read_table,
    rule_set_rows,
    save_figure,
)
from scars.experiments.stats import bootstrap_ci  # noqa: E402
from scars.synthesis.errors import ConfigError  # noqa: E402

ABLATION_MEASURES: tuple[tuple[str, str, str, str], ...] = (
    # (summary key, column header, format, the ablation it speaks to)
    ("soft_leak_mass_max", "leak mass (max)", "{:.3f}", "soft_bias_only"),
    ("tv_drift_mean", "TV drift per scar", "{:.4f}", "no_drift_loss"),
    ("synthesis_median_seconds", "synthesis s (median)", "{:.3f}", "llm_only_patch"),
    ("synthesis_median_nodes", "search nodes (median)", "{:.0f}", "llm_only_patch"),
    ("rule_dl_mean", "rule size (DL)", "{:.1f}", "no_mdl"),
    ("enforcement_ms_per_decision", "enforcement ms / decision", "{:.3f}", "no_mdl"),
    ("scars_active_final", "schema size (active scars)", "{:.1f}", "no_ilp_merge"),
    ("complexity_mdl_final", "schema DL", "{:.0f}", "no_ilp_merge"),
)
"""The measures of paper §6.4 each ablation is about, from the runs' summaries."""


class ReportError(ConfigError):
    """A folder holds nothing the report can read."""


@dataclass
class Doc:
    """The report as blocks, rendered to Markdown and to HTML."""

    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", (level, text)))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, frame: pd.DataFrame) -> None:
        self.blocks.append(("table", frame))

    def image(self, path: Path, caption: str) -> None:
        self.blocks.append(("img", (path, caption)))

    def markdown(self, base: Path) -> str:
        lines = [f"# {self.title}", ""]
        for kind, value in self.blocks:
            if kind == "h":
                lines += [f"{'#' * (value[0] + 1)} {value[1]}", ""]
            elif kind == "p":
                lines += [value, ""]
            elif kind == "table":
                lines += [_md_table(value), ""]
            else:
                path, caption = value
                lines += [f"![{caption}]({_relative(path, base)})", "", f"*{caption}*", ""]
        return "\n".join(lines)

    def html(self) -> str:
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(self.title)}</title>",
            "<style>body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
            ".table-wrap{max-width:100%;overflow-x:auto;margin:1em 0}"
            "table{border-collapse:collapse;font-size:0.8em;width:100%}"
            "th,td{border:1px solid #bbb;padding:3px 5px;text-align:right;overflow-wrap:anywhere}th{background:#eee}"
            "td:first-child,th:first-child{text-align:left}img{max-width:100%;border:1px solid #ddd}"
            "figure{margin:1em 0}figcaption{font-size:0.85em;color:#444}</style>",
            "</head><body>",
            f"<h1>{_inline_html(self.title)}</h1>",
        ]
        for kind, value in self.blocks:
            if kind == "h":
                parts.append(f"<h{value[0] + 1}>{_inline_html(value[1])}</h{value[0] + 1}>")
            elif kind == "p":
                parts.append(f"<p>{_inline_html(value)}</p>")
            elif (
                kind == "table"
            ):  # wide tables wrap their cells, and scroll inside their box if still too wide
                table = value.to_html(index=False, escape=True, na_rep="–", border=0)
                parts.append(f'<div class="table-wrap">{table}</div>')
            else:
                path, caption = value
                data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
                parts.append(
                    f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(caption)}</figcaption></figure>"
                )
        parts.append("</body></html>")
        return "\n".join(parts) + "\n"


def _inline_html(text: str) -> str:
    """Markdown's inline code (`name`) as <code>, everything else escaped: a heading never shows a backtick."""
    escaped = html.escape(text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _relative(path: Path, base: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(base.resolve()))
    except ValueError:
        return str(Path(path).resolve())


def _md_table(frame: pd.DataFrame) -> str:
    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and v != v):
            return "–"
        return str(v).replace("|", "\\|")

    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "| " + " | ".join("---" for _ in frame.columns) + " |"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


# ---- reading result folders -------------------------------------------------------------------------------------


def folder_kind(folder: Path) -> str:
    if (folder / "runs.parquet").is_file() and (folder / "sweep.json").is_file():
        return "sweep"
    if (folder / "summary.json").is_file() and (folder / "episodes.parquet").is_file():
        return "runs"
    raise ReportError(
        f"{str(folder)!r} holds no run or sweep results (expected runs.parquet + sweep.json from `scars sweep`, or "
        "summary.json + episodes.parquet from `scars demo` / `scars run`)"
    )


def _run_tables(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run folder's steps and episodes (empty frames when the run left none)."""
    tables = []
    for name in ("steps", "episodes"):
        path = folder / f"{name}.parquet"
        tables.append(read_table(path, f"the run's {name} table") if path.is_file() else pd.DataFrame())
    return tables[0], tables[1]


def rule_switches(schedule: str, episodes: int) -> list[int]:
    """Episodes where the tier-1 schedule's set of active rules changes (world-version changes included)."""
    from scars.experiments.schedules import SCHEDULES

    if schedule not in SCHEDULES:
        return []
    sched = SCHEDULES[schedule]
    rules = sched.rule_schedule(episodes)
    previous = None
    switches = []
    for episode in range(episodes):
        version = sched.world_version(episode, episodes)
        active = tuple(r.id for r in rules.active(10**6, episode, version))
        if previous is not None and active != previous:
            switches.append(episode)
        previous = active
    return switches


# ---- plots --------------------------------------------------------------------------------------------------------


def _mean_ci(values: np.ndarray, key: str, samples: int = 1000) -> tuple[float, float, float]:
    values = values[~np.isnan(values)]
    if not len(values):
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(np.random.SeedSequence([0, zlib.crc32(key.encode())]))
    lo, hi = bootstrap_ci(values, rng, samples)
    return float(values.mean()), lo, hi


def plot_over_episodes(
    episodes: pd.DataFrame,
    path: Path,
    *,
    switches: Sequence[int] = (),
    versions: Sequence[int] = (),
    title: str = "",
) -> Path:
    """Success and violations per episode, one line per label in its method's colour: the mean over seeds with a 95%
    bootstrap CI band from at least ``MIN_BAND_SEEDS`` seeds (fewer: no band, and the legend says so), dashed markers
    at rule switches and dotted ones at world-version changes (a legend entry only for a line that is drawn)."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), constrained_layout=True)
    labels = list(dict.fromkeys(episodes["label"]))
    n_seeds = episodes.groupby("label")["seed"].nunique().to_dict()
    versions = sorted(set(versions))
    switches = [e for e in sorted(set(switches)) if e not in versions]  # a version change is drawn as one
    for ax, column, ylabel in (
        (axes[0], "won", "task success (share of seeds' episodes won)"),
        (axes[1], "violations", "safety violations in the episode"),
    ):
        for i, label in enumerate(labels):
            g = episodes[episodes["label"] == label]
            xs, means, los, his = [], [], [], []
            for episode, group in g.groupby("episode"):
                mean, lo, hi = _mean_ci(group[column].astype(float).to_numpy(), f"{label}|{column}|{episode}")
                xs.append(episode)
                means.append(mean)
                los.append(lo)
                his.append(hi)
            n = n_seeds.get(label, 0)
            band = n >= MIN_BAND_SEEDS
            text = (
                f"{label} (n={n} seeds)" if band or n < 2 else f"{label} (n={n} seeds: too few for a CI band)"
            )
            line = ax.plot(
                xs,
                means,
                label=text,
                linewidth=1.4,
                color=method_colour(label),
                linestyle=_LINESTYLES[i % len(_LINESTYLES)],
            )[0]
            if band:
                ax.fill_between(xs, los, his, color=line.get_color(), alpha=0.15, linewidth=0)
        for i, episode in enumerate(switches):
            ax.axvline(
                episode - 0.5,
                color="black",
                linestyle="--",
                linewidth=0.8,
                label="rule switch" if i == 0 else None,
            )
        for i, episode in enumerate(versions):
            ax.axvline(
                episode - 0.5,
                color="#1f77b4",
                linestyle=":",
                linewidth=1.8,
                zorder=3,
                label="world-version change (rules switch too)" if i == 0 else None,
            )
        ax.set_xlabel("episode")
        ax.set_ylabel(ylabel)
        if column == "won":
            ax.set_ylim(-0.05, 1.05)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc="outside lower center", ncol=min(4, max(1, len(names))))
    fig.suptitle(title or "Per episode: mean over seeds, 95% bootstrap CI band")
    return save_figure(fig, path)


MIN_BAND_SEEDS = 3
"""The fewest seeds a per-episode CI band is drawn from (two seeds give a bootstrap interval that means nothing)."""


def plot_bars(aggregate: pd.DataFrame, path: Path) -> Path:
    from scars.experiments.sweep_tables import plot_ablations

    return plot_ablations(aggregate, path)


# ---- sections -----------------------------------------------------------------------------------------------------


def _ci_cell(mean: float, lo: float, hi: float, n: int, fmt: str) -> str:
    if mean != mean:
        return "n/a (n=0)"
    if lo != lo:
        return f"{fmt.format(mean)} (n={n})"
    return f"{fmt.format(mean)} [{fmt.format(lo)}, {fmt.format(hi)}] (n={n})"


def ablation_table(runs: pd.DataFrame, samples: int = 2000, seed: int = 0) -> pd.DataFrame | None:
    """Per scars label (the full agent, the ablations, the controls): each ablation's own measures, mean [95% CI]
    (n = seeds where the measure is defined). None when the sweep has no scars run."""
    from scars.experiments.sweep_tables import aggregate_runs

    scars = runs[runs.get("method", pd.Series(dtype=str)) == "scars"] if "method" in runs else runs.iloc[0:0]
    if scars.empty:
        return None
    present = [m for m in ABLATION_MEASURES if m[0] in scars]
    agg = aggregate_runs(scars, samples=samples, seed=seed, metrics=tuple(m[0] for m in present))
    rows = []
    for row in agg.to_dict("records"):
        out: dict[str, Any] = {
            "label": row["label"],
            "runs": f"{row['runs'] - row['failed'] - row.get('stopped', 0)}/{row['runs']}",
        }
        for key, header, fmt, ablation in present:
            out[f"{header} [{ablation}]"] = _ci_cell(
                row[f"{key}_mean"], row[f"{key}_ci_low"], row[f"{key}_ci_high"], row[f"{key}_n"], fmt
            )
        rows.append(out)
    return pd.DataFrame(rows)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _sweep_section(doc: Doc, folder: Path, assets: Path, chosen_run: str | None) -> None:
    from scars.experiments.sweep_tables import (
        _MD_COLUMNS,
        RULE_SET_POOLED,
        _cell,
        _diff_cell,
        _pooled_cell,
    )

    spec = read_json_object(folder / "sweep.json", "a sweep's sweep.json")
    identity = spec.get("identity")
    if not isinstance(identity, dict) or not all(
        isinstance(identity.get(k, {}), dict) for k in ("grid", "fixed")
    ):
        raise DamagedResultFile(
            f"damaged result file {folder / 'sweep.json'} (a sweep's sweep.json): its identity {identity!r:.80} is "
            "not an object with grid and fixed tables"
        )
    runs = read_table(folder / "runs.parquet", "the sweep's run table", ("run_name", "status"))
    aggregate = read_table(folder / "aggregate.parquet", "the sweep's aggregate")
    tier = identity.get("tier", "tier1")
    doc.h(1, f"{tier}: sweep `{identity.get('name', folder.name)}` ({folder})")
    grid = ", ".join(f"{k} ∈ {v}" for k, v in identity.get("grid", {}).items())
    fixed = ", ".join(f"{k} = {v!r}" for k, v in identity.get("fixed", {}).items()) or "defaults"
    failed = int((runs["status"] == "failed").sum())
    doc.p(
        f"Grid: {grid}; fixed: {fixed}. {len(runs)} runs, {failed} failed. Cells: mean over seeds [95% percentile-"
        "bootstrap CI] (n = seeds where the metric is defined; undefined values are left out, never 0)."
    )
    table = []
    for row in aggregate.to_dict("records"):
        cells = {
            "label": row["label"],
            "runs": f"{row['runs'] - row['failed'] - row.get('stopped', 0)}/{row['runs']}",
        }
        for metric, header, fmt in _MD_COLUMNS:
            cells[header] = f"{_cell(row, metric, fmt)} (n={row.get(f'{metric}_n', 0)})"
        table.append(cells)
    doc.table(pd.DataFrame(table))
    if "rvr_pooled" in aggregate:
        doc.h(2, "Pooled counts and paired differences against scars")
        doc.p(
            "RVR = Σ repeats / Σ re-exposures and success = Σ won / Σ episodes over a label's runs (run-clustered "
            "95% bootstrap interval; n = runs). Δ: the label minus scars on the seeds both ran (paired bootstrap)."
        )
        doc.table(
            pd.DataFrame(
                [
                    {
                        "label": row["label"],
                        "RVR pooled": _pooled_cell(row, "rvr"),
                        "RVR undefined runs": row.get("rvr_undefined_runs"),
                        "success pooled": _pooled_cell(row, "success"),
                        "Δ RVR vs scars": _diff_cell(row, "rvr", "scars"),
                        "Δ success vs scars": _diff_cell(row, "success", "scars"),
                    }
                    for row in aggregate.to_dict("records")
                ]
            )
        )
    measured = [name for name, _, _ in RULE_SET_POOLED if f"{name}_pooled" in aggregate]
    rule_rows = [
        row
        for row in aggregate.to_dict("records")
        if any(_is_number(row.get(f"{n}_pooled")) for n in measured)
    ]
    if rule_rows:
        doc.h(2, "The rule set in force against the rules in force")
        doc.p(
            "Rule-set precision and recall (issue 40; per run as in results.md) pooled over a label's runs: Σ masked "
            "and forbidden / Σ masked, Σ masked and forbidden / Σ forbidden (run-clustered 95% bootstrap interval; n = "
            "runs), on the probe pairs and on the runs' own decisions."
        )
        doc.table(
            pd.DataFrame(
                [
                    {
                        "label": row["label"],
                        **{
                            name.removeprefix("rule_set_").replace("_", " "): _pooled_cell(row, name)
                            for name in measured
                        },
                    }
                    for row in rule_rows
                ]
            )
        )
    ablations = ablation_table(runs[runs["status"] == "ok"] if "status" in runs else runs)
    if ablations is not None:
        doc.h(2, "Ablations: each one's own measures")
        doc.p(
            "Per scars variant, mean over seeds [95% bootstrap CI] (n = seeds where defined); the bracket in each "
            "header names the ablation the measure is about (paper §6.4)."
        )
        doc.table(ablations)
    slug = folder.resolve().name
    doc.image(
        plot_bars(aggregate, assets / f"{slug}-bars.png"),
        "RVR and success per label: mean over seeds, 95% CI",
    )
    episodes, steps_by_run = _sweep_episodes(folder, runs)
    if not episodes.empty:
        few = sorted(
            lab for lab, n in episodes.groupby("label")["seed"].nunique().items() if n < MIN_BAND_SEEDS
        )
        if few:
            doc.p(
                f"⚠ Fewer than {MIN_BAND_SEEDS} seeds for {', '.join(few)}: their per-episode plots show the mean "
                "without a CI band, and their intervals in the tables above (marked ⚠) rest on too few seeds to mean "
                "much."
            )
        schedule = identity.get("fixed", {}).get("schedule", "paper")
        count = int(episodes["episode"].max()) + 1
        versions = _version_changes(episodes)
        methods = [lab for lab in dict.fromkeys(episodes["label"]) if ":" not in lab]
        variants = [lab for lab in dict.fromkeys(episodes["label"]) if lab.startswith("scars")]
        groups = (
            [("methods", methods), ("scars variants", variants)] if len(variants) > 1 else [("all", methods)]
        )
        for name, labels in groups:
            path = plot_over_episodes(
                episodes[episodes["label"].isin(labels)],
                assets / f"{slug}-episodes-{name.replace(' ', '_')}.png",
                switches=rule_switches(schedule, count) if isinstance(schedule, str) else [],
                versions=versions,
                title=f"{tier}, {name}: per episode, mean over seeds with 95% CI band",
            )
            doc.image(
                path,
                f"{name}: success and violations per episode (dashed: rule switches; dotted: world-version changes)",
            )
    _signal_section(doc, steps_by_run, assets, slug, chosen_run)


def _version_changes(episodes: pd.DataFrame) -> list[int]:
    if "world_version" not in episodes:
        return []
    first = episodes.groupby("episode")["world_version"].first().sort_index()
    return [int(e) for e, changed in first.diff().fillna(0).ne(0).items() if changed]


def _sweep_episodes(folder: Path, runs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Path]]:
    """Every finished run's episodes (with its label and the world version of the episode's steps), and the
    folders of the runs that have steps."""
    frames = []
    steps: dict[str, Path] = {}
    for row in runs[runs["status"] == "ok"].itertuples():
        run_folder = folder / "runs" / row.run_name
        step_table, episode_table = _run_tables(run_folder)
        if episode_table.empty:
            continue
        episode_table = episode_table.assign(label=row.label, seed=getattr(row, "seed", 0))
        if not step_table.empty and "world_version" in step_table:
            versions = step_table.groupby("episode")["world_version"].first()
            episode_table["world_version"] = episode_table["episode"].map(versions)
        frames.append(episode_table)
        if not step_table.empty and "d_t" in step_table:
            steps[row.run_name] = run_folder
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), steps


def _signal_section(doc: Doc, runs: dict[str, Path], assets: Path, slug: str, chosen: str | None) -> None:
    if chosen is not None and chosen not in runs:
        raise ReportError(
            f"--run {chosen!r} is not a run with a d_t trace here; runs: {', '.join(runs) or 'none'}"
        )
    candidates = [chosen] if chosen else [n for n in runs if "scars" in n] or list(runs)
    for name in candidates[:1]:
        steps, _ = _run_tables(runs[name])
        if steps["d_t"].isna().all():
            continue
        path = plot_signal(steps, assets / f"{slug}-{name}-signal.png", tau=_tau(runs[name]))
        if path is not None:
            doc.h(2, f"d_t and its four terms over time: run {name}")
            doc.p(
                "z_V (verifier), z_R (punishments through TrustGate), z_C (base policy against the core schema H) "
                "and z_I (style drift) per decision, d_t = σ(wᵀz) with its threshold τ; dotted: world-version changes."
            )
            doc.image(path, f"d_t and z_V, z_R, z_C, z_I per decision of {name} (n = decisions in the title)")


def _tau(folder: Path) -> float | None:
    try:
        return float(json.loads((folder / "config.json").read_text()).get("tau"))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _runs_section(doc: Doc, folder: Path, assets: Path, chosen_run: str | None) -> None:
    summary = read_json_object(folder / "summary.json", "a run folder's summary.json")
    if "method" in summary and "success_rate" in summary:  # a single run's folder
        summary = {str(summary["method"]): summary}
    if not summary or not all(isinstance(v, dict) for v in summary.values()):
        raise DamagedResultFile(
            f"damaged result file {folder / 'summary.json'} (a run folder's summary.json): expected one run's summary "
            "or an object of summaries per method"
        )
    doc.h(1, f"tier1: runs in {folder}")
    doc.p(
        "One seed per method: rates are pooled counts over the run's episodes with n beside them; intervals are "
        "episode-clustered bootstraps (results.md). n/a = undefined (nothing to measure), never 0."
    )
    doc.blocks.append(("p", "Metrics per method:"))
    doc.table(_markdown_to_frame(markdown_table(summary)))
    paired_path = folder / "paired.json"
    if paired_path.is_file():
        paired = read_json_object(paired_path, "the paired differences")
        if paired:
            reference = "scars" if "scars" in summary else next(iter(summary))
            doc.h(2, f"Paired differences against {reference} (same seed, same games)")
            doc.table(_markdown_to_frame(paired_markdown(paired, reference)))
    rule_sets = rule_set_rows(summary)
    if rule_sets:
        doc.h(2, "The rule set in force against the rules in force")
        doc.p(RULE_SET_NOTE)
        doc.table(pd.DataFrame(rule_sets))
    steps, episodes = _run_tables(folder)
    slug = folder.resolve().name
    if not episodes.empty:
        episodes = episodes.assign(label=episodes["method"])
        if "world_version" in steps:
            versions = steps.groupby(["method", "episode"])["world_version"].first()
            episodes["world_version"] = [
                versions.get((m, e)) for m, e in zip(episodes["method"], episodes["episode"], strict=True)
            ]
        configs = (
            read_json_object(folder / "config.json", "the run's config.json")
            if (folder / "config.json").is_file()
            else {}
        )
        first = (
            next(iter(configs.values()), {})
            if configs and all(isinstance(v, dict) for v in configs.values())
            else configs
        )
        count = int(episodes["episode"].max()) + 1
        path = plot_over_episodes(
            episodes,
            assets / f"{slug}-episodes.png",
            switches=rule_switches(first.get("schedule", "paper"), count),
            versions=_version_changes(episodes),
            title="tier1: per episode (one seed per method)",
        )
        doc.image(
            path, "Success and violations per episode (dashed: rule switches; dotted: world-version changes)"
        )
    for name, caption in (("rvr_success", "RVR and success per method, pooled with 95% intervals and n"),):
        if (folder / f"{name}.png").is_file():  # copied beside the report: report.md links nothing outside it
            copy = assets / f"{slug}-{name}.png"
            shutil.copyfile(folder / f"{name}.png", copy)
            doc.image(copy, caption)
    method_dirs = {p.name: p for p in folder.iterdir() if p.is_dir() and (p / "steps.parquet").is_file()}
    _signal_section(doc, method_dirs, assets, slug, chosen_run)


def _markdown_to_frame(text: str) -> pd.DataFrame:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    if len(lines) < 2:
        return pd.DataFrame()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return pd.DataFrame(rows, columns=header)


def expand_folders(folders: Sequence[Path]) -> list[Path]:
    """The result folders: a folder of tier sweeps (``scars paper``'s output) stands for its sweeps."""
    out: list[Path] = []
    for folder in folders:
        if not (folder / "runs.parquet").is_file() and not (folder / "summary.json").is_file():
            inner = (
                sorted(p for p in folder.iterdir() if (p / "sweep.json").is_file()) if folder.is_dir() else []
            )
            if inner:
                out.extend(inner)
                continue
        out.append(folder)
    return out


def write_report(folders: Sequence[Path], out: Path, *, run: str | None = None) -> tuple[Path, Path]:
    """Write ``out/report.md`` (PNG files beside it in ``out/report_assets/``) and the self-contained
    ``out/report.html``; returns both paths."""
    folders = expand_folders(folders)
    kinds = [(folder, folder_kind(folder)) for folder in folders]
    assets = out / "report_assets"
    assets.mkdir(parents=True, exist_ok=True)
    doc = Doc("scars testbed report")
    doc.p(
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} from {', '.join(map(str, folders))}."
    )
    for folder, kind in kinds:
        provenance = folder / "provenance.json"
        if provenance.is_file():
            record = read_json_object(provenance, "the folder's provenance.json")
            git = record.get("git") if isinstance(record.get("git"), dict) else {}
            doc.p(
                f"{folder}: git {git.get('commit')} (dirty: {git.get('dirty')}), host {record.get('host')}."
            )
        if kind == "sweep":
            _sweep_section(doc, folder, assets, run)
        else:
            _runs_section(doc, folder, assets, run)
    markdown_path, html_path = out / "report.md", out / "report.html"
    atomic_write_text(markdown_path, doc.markdown(out))
    atomic_write_text(html_path, doc.html())
    return markdown_path, html_path


__all__ = [
    "ABLATION_MEASURES",
    "ReportError",
    "ablation_table",
    "folder_kind",
    "rule_switches",
    "write_report",
]
