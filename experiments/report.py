"""Results a researcher puts in a paper: a Markdown table and PNG plots from a run's tables (pandas, matplotlib).

Writes are atomic (temporary file + ``os.replace``), so a crash mid-write never leaves a half-written results file.
``tempfile.mkstemp`` creates its file mode 0600 whatever the umask; every write here sets the user's mode
(0666 minus the umask, like ``open``) before the rename, so collaborators can read the results.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

from scars.synthesis.errors import ConfigError

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def file_mode() -> int:
    """The mode ``open()`` gives a new file: 0666 minus the process umask (Linux reports the umask in
    /proc/self/status, read without touching it; elsewhere it is set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            mask = next(int(line.split()[1], 8) for line in fh if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


class DamagedResultFile(ConfigError):
    """A result file (``summary.json``, ``sweep.json``, ``config.json``, a table) that does not have the shape its
    writer gives it: truncated, replaced or edited. The message names the file."""


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in the result file ``path`` (``what``: which file it should be, for the message); a file
    that is not readable JSON, or holds anything but an object, is a ``DamagedResultFile`` naming it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DamagedResultFile(
            f"damaged result file {path} ({what}): not readable JSON ({str(exc)[:120]})"
        ) from None
    if not isinstance(data, dict):
        raise DamagedResultFile(
            f"damaged result file {path} ({what}): holds a JSON {type(data).__name__}, not an object"
        )
    return data


def read_table(path: Path, what: str, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """The Parquet table in ``path`` with at least ``columns``; ``DamagedResultFile`` naming it otherwise."""
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises its own types for a damaged file (ArrowInvalid, OSError, ...)
        raise DamagedResultFile(
            f"damaged result file {path} ({what}): not a Parquet table ({str(exc)[:120]})"
        ) from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DamagedResultFile(f"damaged result file {path} ({what}): column(s) {missing} missing")
    return frame


def write_table(df: pd.DataFrame, stem: Path) -> None:
    """``stem.parquet`` and ``stem.csv``, each written atomically."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    for suffix, writer in (
        (".parquet", lambda p: df.to_parquet(p, index=False)),
        (".csv", lambda p: df.to_csv(p, index=False)),
    ):
        target = stem.with_suffix(suffix)
        fd, tmp = tempfile.mkstemp(dir=stem.parent, prefix=f".{target.name}.", suffix=suffix)
        os.close(fd)
        try:
            writer(tmp)
            os.chmod(tmp, file_mode())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (summary key, column header, format)
    ("success_rate", "success", "{:.2f}"),
    ("episodes", "n episodes", "{:.0f}"),
    ("rvr", "RVR ↓", "{:.3f}"),
    ("reexposures", "n re-exposures", "{:.0f}"),
    ("rvr_episode", "RVR per episode ↓", "{:.3f}"),
    ("reexposed_episodes", "n re-exposed episodes", "{:.0f}"),
    ("rvr_covered", "RVR covered ↓", "{:.3f}"),
    ("svr", "SVR ↓", "{:.3f}"),
    ("heldout_first_violation_rate", "held-out 1st-exposure viol. ↓", "{:.2f}"),
    ("heldout_rules_seen", "n held-out rules seen", "{:.0f}"),
    ("complexity_tokens_final", "memory tokens", "{:.0f}"),
    ("scars_active_final", "active scars", "{:.0f}"),
    ("scars_exact_or_under_general", "scars exact or under-general", "{:.2f}"),
    ("synthesis_median_seconds", "synth. s (median)", "{:.3f}"),
    ("verifier_calls", "method's verifier questions", "{:.0f}"),
    ("replan_decisions", "model re-plans", "{:.0f}"),
    ("replan_mask", "re-plans: masked", "{:.0f}"),
    ("replan_text", "re-plans: told", "{:.0f}"),
    ("replan_refused_route", "re-plans around refusals", "{:.0f}"),
    ("verifier_calls_per_action", "verifier calls / executed action", "{:.2f}"),
    ("enforcement_ok", "enforced = ledger", "{}"),
    ("plane_ledger_ok", "plane = ledger", "{}"),
    ("ledger_verified", "ledger verified", "{}"),
    ("prop1_ok", "Prop.1", "{}"),
    ("prop2_ok", "Prop.2", "{}"),
    ("prop2_K", "K (failure patterns)", "{:.0f}"),
    ("prop2_growth_exponent", "C(S_t) growth exponent", "{:.2f}"),
    ("prop3_ok", "Prop.3", "{}"),
    ("prop3_own_bound_exceeded", "scars above own L_drift bound", "{:.0f}"),
)


def markdown_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per method, the paper's metrics as columns."""
    header = "| method | " + " | ".join(h for _, h, _ in TABLE_COLUMNS) + " |"
    rule = "| --- | " + " | ".join("---:" for _ in TABLE_COLUMNS) + " |"
    rows = []
    for method, m in summary.items():
        cells = []
        for key, _, fmt in TABLE_COLUMNS:
            value = m.get(key)
            if value is None or (isinstance(value, float) and value != value):
                cells.append("n/a" if key.startswith(("rvr", "svr")) else "–")
            elif isinstance(value, bool):
                cells.append("✓" if value else "✗ VIOLATED")
            else:
                cells.append(fmt.format(value))
        rows.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join([header, rule, *rows])


def _interval_cell(iv: Mapping[str, Any] | None) -> str:
    """A pooled ratio (``Interval.to_json``) as "0.968 [0.959, 0.978] (n = 1839 / 1899)"; n/a when undefined."""
    if not iv or iv.get("estimate") is None:
        return "n/a"
    ci = iv.get("ci")
    spread = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    return f"{iv['estimate']:.3f}{spread} (n = {iv['numerator']:.0f} / {iv['denominator']:.0f})"


RULE_SET_NOTE = (
    "At each decision the union of the active scars against the union of the schedule's rules in force "
    "(`experiments/tier1_summary.py`, `rule_set_quality_of`): precision = share of the masked control actions a rule "
    "in force forbids, recall = share of the forbidden ones masked (*known*: of those breaking a rule the run had "
    "been told of; *after 1st failure*: of the forbidden probe pairs of rules the run had failed before, the share "
    "masked; *ceiling*: the share of the forbidden probe pairs that are such — the information protocol gives "
    "nothing to learn a rule from before its first failure). On the probe pairs each decision's rule set is read on every probe (n = probe pairs, each "
    "episode's mean over its decisions); on the run's own decisions n = admissible control actions. 95% "
    "episode-clustered intervals. *Needed step masked*: decisions at which a scar masked the next step of the "
    "expert's compliant route; *tasks lost*: lost episodes with such a decision."
)


ARENA_RULE_SET_NOTE = (
    "At each decision the union of a learning seat's active scars against the arena's rule in force, the "
    "sustainability norm its verifier judges (no request above the share f(t)/|I(t)|; "
    "`experiments/arena_rule_set.py`): precision = share of the masked control actions the norm forbids, recall = "
    "share of the forbidden ones masked (*known*: after the seat's first verdict or justified punishment). On the "
    "probe pairs (every request at every resource level and group size in the seat's first extraction context, and "
    "at every extraction context met) each decision's rule set is read on every probe; on the runs' own decisions "
    "n = admissible control actions. 95% intervals clustered by {clusters}. *Needed step masked*: decisions at which "
    "a scar masked the largest request the norm allows; *asked below the share*: those at which the seat then asked "
    "for less."
)


def rule_set_rows(summary: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every scars method's rule set in force against the rules in force (issue 40; ``summary["rule_set"]``,
    ``experiments.metrics.rule_set_quality``: tier 1's schedule, tiers 2 and 3's norm), one row per method:
    precision and recall on the probe pairs and on the run's own decisions with their intervals, and the masked
    safe steps and what they cost (results.md and ``scars report``)."""
    rows = []
    for label, m in summary.items():
        r = m.get("rule_set")
        if not r:
            continue
        p, d = r["probes"], r["decisions"]
        clusters = next(c for c in ("episodes", "runs") if c in d)
        row = {
            "method": label,
            "precision (probes)": _interval_cell(p["precision"]),
            "recall (probes)": _interval_cell(p["recall"]),
            "precision (decisions)": _interval_cell(d["precision"]),
            "recall (decisions)": _interval_cell(d["recall"]),
            "recall, known rules": _interval_cell(d["recall_known"]),
        }
        if "recall_after_first_failure" in p:  # tier 1's census: recall where the protocol had told the run
            row["recall after 1st failure (probes)"] = _interval_cell(p["recall_after_first_failure"])
            row["recall ceiling (probes)"] = _interval_cell(p["recall_ceiling"])
        row |= {
            "masked safe (decisions)": d["safe_masked"],
            f"needed step masked ({clusters})": f"{d['needed_masked']} ({d[f'needed_masked_{clusters}']})",
        }
        if "tasks_lost_to_scars" in d:  # tier 1: a task to lose
            row["tasks lost to scars"] = f"{d['tasks_lost_to_scars']} / {d[clusters]}"
        else:  # tiers 2 and 3: a share to fall short of
            row["asked below the share"] = d["short_by_scars"]
            row[f"n {clusters}"] = d[clusters]
        rows.append(row)
    return rows


def rule_set_markdown(summary: Mapping[str, Mapping[str, Any]], note: str = RULE_SET_NOTE) -> list[str]:
    """:func:`rule_set_rows` as a results.md section (none without a scars method), under ``note``."""
    rows = rule_set_rows(summary)
    if not rows:
        return []
    header = list(dict.fromkeys(h for row in rows for h in row))  # a row without the census shows "–" there
    lines = ["## The rule set in force against the rules in force", "", note, ""]
    lines += ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    lines += ["| " + " | ".join(str(row.get(h, "–")) for h in header) + " |" for row in rows]
    lines.append("")
    return lines


PAIRED_METRICS: tuple[tuple[str, str, str, str], ...] = (
    # (name, numerator column, denominator column, header) over the per-episode counts of episodes.parquet
    ("rvr", "repeat_violations", "reexposures", "Δ RVR"),
    ("svr", "violating_steps", "exposed_steps", "Δ SVR"),
    ("success_rate", "won", "", "Δ success"),
)


def paired_differences(
    episodes: pd.DataFrame, reference: str, seed: int = 0, samples: int = 2000
) -> dict[str, dict[str, dict]]:
    """Every method against ``reference`` on the same episodes (same seed, same games): the difference of the pooled
    rates with an episode-paired cluster-bootstrap interval (``experiments.stats.paired_difference``)."""
    from scars.experiments.stats import paired_difference

    groups = {m: g.sort_values("episode") for m, g in episodes.groupby("method", sort=False)}
    if reference not in groups:
        return {}
    ref = groups[reference]
    out: dict[str, dict[str, dict]] = {}
    for method, g in groups.items():
        if method == reference or list(g["episode"]) != list(ref["episode"]):
            continue
        out[method] = {}
        for name, num, den, _ in PAIRED_METRICS:
            rng = np.random.default_rng(
                np.random.SeedSequence([seed, zlib.crc32(f"{method}|{name}".encode())])
            )
            ones = np.ones(len(g))
            a = (g[num].astype(float), g[den].astype(float) if den else ones)
            b = (ref[num].astype(float), ref[den].astype(float) if den else ones)
            out[method][name] = paired_difference(a, b, rng, samples).to_json()
    return out


def paired_markdown(paired: Mapping[str, Mapping[str, Mapping[str, Any]]], reference: str) -> str:
    if not paired:
        return ""
    headers = [h for *_, h in PAIRED_METRICS]
    lines = [
        f"| method − {reference} | " + " | ".join(headers) + " | n (paired episodes) |",
        "| --- | " + " | ".join("---:" for _ in headers) + " | ---: |",
    ]
    for method, metrics in paired.items():
        cells = []
        clusters = 0
        for name, *_ in PAIRED_METRICS:
            m = metrics[name]
            clusters = m["clusters"]
            if m["estimate"] is None:
                cells.append("n/a")
            elif m["ci"] is None:
                cells.append(f"{m['estimate']:+.3f}")
            else:
                flag = " (few clusters)" if m["few_clusters"] else ""
                cells.append(f"{m['estimate']:+.3f} [{m['ci'][0]:+.3f}, {m['ci'][1]:+.3f}]{flag}")
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {clusters} |")
    return "\n".join(lines)


METHOD_COLOURS: dict[str, str] = {
    "scars": "#c0392b",
    "static_persona": "#7f8c8d",
    "rag": "#2980b9",
    "reflexion": "#8e44ad",
    "scg_mem": "#16a085",
    "voyager": "#d35400",
    "no_memory": "#34495e",
    "scars:hard_blocklist": "#f5b041",
    "scars:storm_only": "#a04000",
    "scars+state": "#922b21",
    "scars+oracle": "#f1948a",
}
"""Each method's colour in every figure (a scars variant — an ablation, a control, a protocol row — is a shade of
scars' red)."""
_VARIANT_SHADES = ("#e67e22", "#f1948a", "#a93226", "#f5b041", "#922b21", "#e59866", "#cd6155", "#dc7633")
_OTHER = ("#27ae60", "#2c3e50", "#b7950b", "#1abc9c", "#5d6d7e", "#6c3483")


def method_colour(label: str) -> str:
    """The colour of a method's label (``scars``, ``rag``, ``scars:no_mdl``, ``scars+state``, ``rag tau=0.6``): the
    method's own colour, a stable shade of red for a scars variant, a stable colour for anything else."""
    import zlib

    if label in METHOD_COLOURS:
        return METHOD_COLOURS[label]
    base = label.split(" ", 1)[0]
    if base.startswith("scars") and base != "scars":
        return _VARIANT_SHADES[zlib.crc32(base.encode()) % len(_VARIANT_SHADES)]
    if base in METHOD_COLOURS:
        return METHOD_COLOURS[base]
    return _OTHER[zlib.crc32(base.encode()) % len(_OTHER)]


_LINESTYLES = ("-", "--", "-.", ":")


def plot_rvr_success(summary: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """RVR and task success per method: pooled rates with their episode-clustered 95% intervals and n under each
    bar; an undefined rate gets no bar and the label "n/a" (never a bar at 0)."""
    methods = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(max(10.0, 0.9 * len(methods) + 4), 4.4), constrained_layout=True)
    for ax, key, ci_key, n_key, title, ylabel in (
        (axes[0], "rvr", "rvr_ci", "reexposures", "Repeat-violation rate (RVR) ↓", "repeats / re-exposures"),
        (axes[1], "success_rate", "success_ci", "episodes", "Task success ↑", "episodes won / episodes"),
    ):
        ticks = []
        for i, m in enumerate(methods):
            value = summary[m].get(key)
            ci = (summary[m].get(ci_key) or {}).get("ci")
            ticks.append(f"{m}\nn={summary[m].get(n_key, 0)}")  # n under its own tick: no label collides
            if value is None:
                ax.text(i, 0.02, "n/a", ha="center", fontsize=8)
                continue
            err = None if ci is None else [[value - ci[0]], [ci[1] - value]]
            ax.bar(i, value, color=method_colour(m), yerr=err, capsize=3)
        ax.set_xticks(range(len(methods)), ticks, rotation=40, ha="right", rotation_mode="anchor", fontsize=7)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 1.0)
    return save_figure(fig, path)


def plot_complexity(steps: pd.DataFrame, path: Path) -> Path:
    """Active-memory tokens against global step t, one line per method."""
    fig, ax = plt.subplots(figsize=(8, 3.8), constrained_layout=True)
    for i, (method, group) in enumerate(steps.groupby("method", sort=False)):
        g = group.sort_values("t")
        smooth = g["memory_tokens"].rolling(25, min_periods=1).mean()
        ax.plot(
            g["t"],
            smooth,
            label=method,
            color=method_colour(method),
            linestyle=_LINESTYLES[i % len(_LINESTYLES)],
            linewidth=2.2 if method == "scars" else 1.2,
        )
    ax.set_xlabel("step t")
    ax.set_ylabel("tokens of active memory")
    ax.set_title("Description complexity vs t (rolling mean, 25 steps)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path)


def plot_svr(episodes: pd.DataFrame, path: Path) -> Path:
    """SVR per episode (rolling mean over 5), one small panel per method on a shared y axis: methods whose curves
    coincide stay apart (one axis with every method drew them on one line)."""
    methods = list(dict.fromkeys(episodes["method"]))
    cols = min(4, max(1, len(methods)))
    rows = -(-len(methods) // cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(3.2 * cols, 2.4 * rows + 0.6),
        sharex=True,
        sharey=True,
        squeeze=False,
        constrained_layout=True,
    )
    for ax, method in zip(axes.flat, methods, strict=False):
        g = episodes[episodes["method"] == method].sort_values("episode")
        ax.plot(g["episode"], g["svr"].rolling(5, min_periods=1).mean(), color=method_colour(method))
        ax.set_title(f"{method} (n = {len(g)} episodes)", fontsize=8)
        ax.set_xlabel("episode", fontsize=8)
        ax.set_ylabel("SVR, rolling mean of 5", fontsize=8)
    for ax in list(axes.flat)[len(methods) :]:
        ax.set_visible(False)
    fig.suptitle("Pointwise safety-violation rate per episode")
    return save_figure(fig, path)


def plot_signal(steps: pd.DataFrame, path: Path, tau: float | None = None) -> Path | None:
    """The composite signal over time for every method with a disequilibrium monitor: z_V, z_R, z_C, z_I (left axis)
    and d_t with τ (right axis), one panel per method, world-version changes marked. None when no method has one."""
    if "d_t" not in steps or steps["d_t"].isna().all():
        return None
    methods = [m for m, g in steps.groupby("method", sort=False) if g["d_t"].notna().any()]
    fig, axes = plt.subplots(
        len(methods), 1, figsize=(10, 2.8 * len(methods)), squeeze=False, constrained_layout=True
    )
    for ax, method in zip(axes[:, 0], methods, strict=True):
        g = steps[steps["method"] == method].sort_values("t")
        for name, colour in (("z_V", "#c0392b"), ("z_R", "#8e44ad"), ("z_C", "#2980b9"), ("z_I", "#27ae60")):
            ax.plot(g["t"], g[name].astype(float), label=name, color=colour, linewidth=1.0)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("step t")
        ax.set_ylabel("signal z ∈ [0, 1]")
        right = ax.twinx()
        right.plot(g["t"], g["d_t"].astype(float), color="black", linewidth=0.8, label="d_t")
        if tau is not None:
            right.axhline(tau, color="black", linestyle="--", linewidth=0.8, label=f"τ = {tau:g}")
        right.set_ylabel("d_t")
        changes = list(g.loc[g["world_version"].diff().fillna(0) != 0, "t"])
        for i, t in enumerate(changes):  # a legend entry only when there is such a line
            ax.axvline(
                t,
                color="grey",
                linestyle=":",
                linewidth=1.2,
                label="world-version change" if i == 0 else None,
            )
        n = int(g["d_t"].notna().sum())
        ax.set_title(f"{method}: d_t = σ(wᵀz) and its terms (n = {n} decisions)", fontsize=9)
        lines = ax.get_legend_handles_labels()
        extra = right.get_legend_handles_labels()
        ax.legend(
            lines[0] + extra[0], lines[1] + extra[1], fontsize=7, loc="upper left", bbox_to_anchor=(1.08, 1.0)
        )
    return save_figure(fig, path)


def save_figure(fig, path: Path) -> Path:
    """The one way a plot is saved: a PNG at 130 dpi, written atomically (a reader never sees half a file), the
    figure closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=130, format="png")
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)
    return path
