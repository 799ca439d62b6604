"""Tier 1 over several schedules, methods and seeds, pooled (issue 24: the paper schedule and the paraphrase suite),
each (schedule, method, seed) cell a Ray task (issue 39, item 6).

    python benchmarks/schedule_suite.py --out runs/suite [--schedules paper,paraphrase_a,...] [--methods ...]
    (a method is a name of the comparison or ``scars:<ablation>``, e.g. ``scars:no_narrowing``)
        [--seeds 0-4] [--episodes 36] [--workers N] [--in-process] [--report-only]

Each cell is one ``run_tier1`` into ``OUT/<schedule>/<method>/s<seed>``: ``episodes.parquet``, ``summary.json`` and,
written last, ``cell.json`` (the cell and the SHA-256 of both files). A cell whose ``cell.json`` names the same cell and
whose files still hash to it is skipped, so an interrupted suite resumes; anything else is run again. The cells run
as Ray tasks (``num_cpus=1`` each, a local cluster of ``--workers`` CPUs, default every core) behind a progress bar;
``--in-process`` runs them one after another in this process (the tests; the same results, cell for cell). Each
(schedule, seed) game pool is built once, by one task every cell of it waits for, into the user cache
(``scars.experiments.cache``), which every worker then reads.

``suite.md`` pools every method's episodes over the seeds (clusters = (seed, episode)): success, RVR with its n
(re-exposures), SVR, each with a 95% episode-clustered bootstrap interval, and the paired difference of every
baseline against scars on the same episodes (same seed, same games).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from scars.experiments.config import METHODS, Tier1Config
from scars.experiments.stats import paired_difference, pooled_ratio

RATES = (
    ("success", "won", None),
    ("rvr", "repeat_violations", "reexposures"),
    ("svr", "violating_steps", "exposed_steps"),
)
RESULT_FILES = ("episodes.parquet", "summary.json")
MANIFEST = "cell.json"


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",")]


def _named(schedule: str) -> bool:
    """A schedule of the registry (``paper``, ``smoke``); any other name is a schedule file (shipped or a path)."""
    from scars.experiments.schedules import SCHEDULES

    return schedule in SCHEDULES


@dataclass(frozen=True)
class Cell:
    """One run of the suite. ``method`` is a method name or ``scars:<ablation>`` (its folder ``scars-<ablation>``)."""

    schedule: str
    method: str
    seed: int
    episodes: int
    verdicts: str = "executed"

    def folder(self, out: Path) -> Path:
        label = self.method.replace(":", "-")
        return (
            out
            / self.schedule
            / (label if self.verdicts == "executed" else f"{label}+{self.verdicts}")
            / f"s{self.seed}"
        )

    def config(self) -> Tier1Config:
        name, _, ablation = self.method.partition(":")
        where = {"schedule": self.schedule} if _named(self.schedule) else {"schedule_file": self.schedule}
        return Tier1Config(
            method=name,
            ablation=ablation or "none",
            seed=self.seed,
            episodes=self.episodes,
            verdicts=self.verdicts,
            **where,
        )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def is_done(cell: Cell, out: Path) -> bool:
    """The cell's results exist and verify: its manifest names this cell and every result file hashes to it."""
    folder = cell.folder(out)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        return manifest.get("cell") == asdict(cell) and all(
            manifest.get("sha256", {}).get(name) == _sha256(folder / name) for name in RESULT_FILES
        )
    except (OSError, ValueError, AttributeError):
        return False


def run_cell(cell: Cell, out: Path) -> Cell:
    """Run one cell into its folder; the manifest is written last, so a cell stopped halfway is run again."""
    from scars.experiments.tier1 import run_tier1

    folder = cell.folder(out)
    (folder / MANIFEST).unlink(missing_ok=True)
    result = run_tier1(cell.config(), folder)
    _atomic(folder / "episodes.parquet", lambda p: result.episodes.to_parquet(p))
    keep = {k: v for k, v in result.summary.items() if not isinstance(v, dict | list) or k == "active_rules"}
    keep["scar_quality"] = result.summary.get("scar_quality")
    keep["rule_set"] = result.summary.get("rule_set")
    _atomic(folder / "summary.json", lambda p: p.write_text(json.dumps(keep, indent=1, default=str)))
    manifest = {"cell": asdict(cell), "sha256": {name: _sha256(folder / name) for name in RESULT_FILES}}
    _atomic(folder / MANIFEST, lambda p: p.write_text(json.dumps(manifest, indent=1)))
    return cell


def build_pool(schedule: str, seed: int) -> None:
    """The (schedule, seed) game pool, built into the user cache (a no-op when it is there)."""
    from scars.experiments.schedules import game_pool, resolve_schedule

    key, _ = resolve_schedule(schedule) if _named(schedule) else resolve_schedule("paper", schedule)
    game_pool(key, seed)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cells"),
        TimeElapsedColumn(),
    )


def run_suite(
    cells: Sequence[Cell], out: Path, *, workers: int | None = None, in_process: bool = False
) -> list[Cell]:
    """Run every cell that is not done (:func:`is_done`); returns the cells run. On Ray (``in_process`` False) the
    longest cells (the scars variants) are submitted first and each waits only for its own game pool."""
    todo = [c for c in cells if not is_done(c, out)]
    with _progress() as progress:
        bar = progress.add_task("schedule suite", total=len(cells), completed=len(cells) - len(todo))
        if in_process:
            for cell in todo:
                build_pool(cell.schedule, cell.seed)
                run_cell(cell, out)
                progress.advance(bar)
            return todo
        import ray

        started = not ray.is_initialized()
        if started:
            ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False, log_to_driver=False)
        try:
            pool_task = ray.remote(num_cpus=1)(build_pool)
            cell_task = ray.remote(num_cpus=1)(lambda cell, out, _pool: run_cell(cell, out))
            pools = {(c.schedule, c.seed): None for c in todo}
            pool_refs = {k: pool_task.remote(*k) for k in pools}
            order = sorted(
                todo, key=lambda c: (not c.method.startswith("scars"), c.schedule, c.seed, c.method)
            )
            pending = [cell_task.remote(c, out, pool_refs[(c.schedule, c.seed)]) for c in order]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready)  # a failed cell raises here, with its traceback
                progress.advance(bar)
        finally:
            if started:
                ray.shutdown()
    return todo


def _num_den(e: pd.DataFrame, num: str, den: str | None) -> tuple[np.ndarray, np.ndarray]:
    n = e[num].astype(float).to_numpy()
    d = np.ones(len(e)) if den is None else e[den].astype(float).to_numpy()
    return n, d


def pooled_rule_set(folder: Path, seeds: list[int]) -> str | None:
    """Rule-set quality (issue 40) pooled over the seeds' episodes (clusters = (seed, episode)): precision and
    recall on the probe pairs (each episode's mean rule set, ``summary.json``) and on the runs' own decisions
    (``episodes.parquet``), with 95% intervals, and the tasks lost to a scar that masked the expert's needed step."""
    probes, decisions = [], []
    for s in seeds:
        path = folder / f"s{s}" / "summary.json"
        if not path.is_file():
            return None
        rule_set = json.loads(path.read_text()).get("rule_set")
        if not rule_set:
            return None
        probes += rule_set["probes"]["by_episode"]
        decisions.append(pd.read_parquet(folder / f"s{s}" / "episodes.parquet"))
    p = np.asarray(probes, dtype=float).reshape(-1, 3)
    e = pd.concat(decisions, ignore_index=True)

    def cell(num, den, name: str) -> str:
        rng = np.random.default_rng(np.random.SeedSequence([4040, len(name)]))
        iv = pooled_ratio(num, den, rng)
        if iv.estimate is None:
            return f"{name} n/a"
        return f"{name} {iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}] (n = {iv.denominator:.0f})"

    lost = int(((~e["won"].astype(bool)) & (e["needed_masked"] > 0)).sum())
    return "; ".join(
        [
            cell(p[:, 1], p[:, 0], "probes: precision"),
            cell(p[:, 1], p[:, 2], "recall"),
            cell(e["scar_masked_unsafe"], e["scar_masked"], "decisions: precision"),
            cell(e["scar_masked_unsafe"], e["unsafe_actions"], "recall"),
            cell(e["scar_masked_known"], e["unsafe_known"], "recall on told rules"),
            f"masked safe {int((e['scar_masked'] - e['scar_masked_unsafe']).sum())}",
            f"tasks lost to a scar masking the needed step {lost} / {len(e)}",
        ]
    )


def report(out: Path, schedules: list[str], labels: list[str], seeds: list[int]) -> str:
    lines = []
    for schedule in schedules:
        frames = {}
        for label in labels:
            parts = [out / schedule / label / f"s{s}" / "episodes.parquet" for s in seeds]
            if all(p.is_file() for p in parts):
                frames[label] = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
        if not frames:
            continue
        lines += [
            f"### {schedule} (seeds {seeds[0]}–{seeds[-1]}, {len(next(iter(frames.values())))} episodes per method)",
            "",
            "| method | success | RVR (n) | SVR | Δ success vs scars | Δ RVR vs scars | Δ SVR vs scars |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        ref = frames.get("scars")
        for label, e in frames.items():
            cells = []
            for name, num, den in RATES:
                rng = np.random.default_rng(np.random.SeedSequence([0, len(name), len(label)]))
                iv = pooled_ratio(*_num_den(e, num, den), rng)
                n = f" ({int(iv.denominator)})" if name == "rvr" else ""
                cells.append(
                    "n/a"
                    if iv.estimate is None
                    else f"{iv.estimate:.3f}{n} [{iv.low:.3f}, {iv.high:.3f}]"
                    if iv.low is not None
                    else f"{iv.estimate:.3f}{n}"
                )
            diffs = []
            for name, num, den in RATES:
                if ref is None or label == "scars":
                    diffs.append("–")
                    continue
                rng = np.random.default_rng(np.random.SeedSequence([1, len(name), len(label)]))
                d = paired_difference(_num_den(e, num, den), _num_den(ref, num, den), rng)
                diffs.append(
                    "n/a" if d.estimate is None else f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
                )
            lines.append(f"| {label} | " + " | ".join(cells + diffs) + " |")
        lines.append("")
        for label in [x for x in labels if x.startswith("scars")]:
            quality: dict[str, int] = {}
            for s in seeds:
                path = out / schedule / label / f"s{s}" / "summary.json"
                if path.is_file():
                    summary = json.loads(path.read_text())
                    for k, v in ((summary.get("scar_quality") or {}).get("counts") or {}).items():
                        quality[k] = quality.get(k, 0) + v
                    lines.append(
                        f"- {label} s{s}: Prop. 2 {'holds' if summary.get('prop2_ok') else 'FAILS'}; "
                        f"active: {'; '.join(summary.get('active_rules') or [])}"
                    )
            if quality:
                lines.append(f"- {label} scar quality (all seeds, learned scars): {quality}")
            rule_set = pooled_rule_set(out / schedule / label, seeds)
            if rule_set:
                lines.append(
                    f"- {label} rule set in force (all seeds, clusters = (seed, episode)): {rule_set}"
                )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--schedules", default="paper,paraphrase_a,paraphrase_b,paraphrase_c")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--seeds", default="0-4")
    p.add_argument("--episodes", type=int, default=36)
    p.add_argument("--verdicts", default="executed", choices=("executed", "state"))
    p.add_argument("--workers", type=int, default=None, help="Ray CPUs (default: every core)")
    p.add_argument(
        "--in-process", action="store_true", help="run the cells one after another in this process"
    )
    p.add_argument("--report-only", action="store_true")
    a = p.parse_args(argv)
    if a.workers is not None and a.workers < 1:
        p.error(f"--workers {a.workers}: give a whole number >= 1")
    schedules, methods, seeds = a.schedules.split(","), a.methods.split(","), _seeds(a.seeds)
    if not a.report_only:
        cells = [
            Cell(s, m, seed, a.episodes, a.verdicts) for s in schedules for m in methods for seed in seeds
        ]
        t0 = time.perf_counter()
        ran = run_suite(cells, a.out, workers=a.workers, in_process=a.in_process)
        print(
            f"{len(ran)} cells run, {len(cells) - len(ran)} already done, {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
    labels = sorted(
        {d.name for s in schedules for d in (a.out / s).glob("*") if d.is_dir()},
        key=lambda x: (x != "scars", x),
    )
    text = report(a.out, schedules, labels, seeds)
    (a.out / "suite.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
