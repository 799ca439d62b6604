"""``benchmarks/schedule_suite.py`` (issue 39, item 6): the (schedule, method, seed) cells as Ray tasks give the same
results as in one process, cell for cell, and a suite resumes — a cell whose results verify is skipped, one whose
results were damaged or never finished is run again."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("schedule_suite", ROOT / "benchmarks" / "schedule_suite.py")
suite = importlib.util.module_from_spec(_spec)
sys.modules["schedule_suite"] = suite
_spec.loader.exec_module(suite)

CELLS = [suite.Cell("smoke", m, seed, 2) for m in ("static_persona", "rag") for seed in (0, 1)]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite-local")
    assert suite.run_suite(CELLS, out, in_process=True) == CELLS
    return out


def _episodes(out: Path, cell) -> pd.DataFrame:
    return pd.read_parquet(cell.folder(out) / "episodes.parquet")


def test_a_finished_suite_runs_nothing_again_and_a_damaged_cell_is_run_again(in_process):
    assert all(suite.is_done(c, in_process) for c in CELLS)
    assert suite.run_suite(CELLS, in_process, in_process=True) == []
    damaged, unfinished = CELLS[1], CELLS[2]
    before = _episodes(in_process, damaged)
    with open(damaged.folder(in_process) / "episodes.parquet", "ab") as f:
        f.write(b"\0")
    (unfinished.folder(in_process) / suite.MANIFEST).unlink()
    assert not suite.is_done(damaged, in_process) and not suite.is_done(unfinished, in_process)
    assert suite.run_suite(CELLS, in_process, in_process=True) == [damaged, unfinished]
    pd.testing.assert_frame_equal(_episodes(in_process, damaged), before)


def test_a_manifest_of_another_cell_does_not_verify(in_process, tmp_path):
    cell = CELLS[0]
    other = suite.Cell(cell.schedule, cell.method, cell.seed, cell.episodes + 1)
    folder = other.folder(tmp_path)
    folder.mkdir(parents=True)
    for name in (*suite.RESULT_FILES, suite.MANIFEST):
        (folder / name).write_bytes((cell.folder(in_process) / name).read_bytes())
    assert not suite.is_done(other, tmp_path)


def test_cells_on_ray_give_the_results_of_one_process(in_process, tmp_path):
    """On the suite's own local cluster when none is up (``run_suite`` starts and shuts it down, as the script runs
    it; left up, it would change what later tests of an unreachable ``--address`` see)."""
    import ray

    was_up = ray.is_initialized()
    ray.cloudpickle.register_pickle_by_value(suite)  # a script, not a module Ray's workers can import
    assert suite.run_suite(CELLS, tmp_path, workers=2) == CELLS
    assert ray.is_initialized() == was_up
    for cell in CELLS:
        pd.testing.assert_frame_equal(_episodes(tmp_path, cell), _episodes(in_process, cell))
    assert (
        suite.main(
            [
                "--out",
                str(tmp_path),
                "--schedules",
                "smoke",
                "--methods",
                "static_persona,rag",
                "--seeds",
                "0-1",
                "--episodes",
                "2",
            ]
        )
        == 0
    )  # everything done: the report only
    assert "static_persona" in (tmp_path / "suite.md").read_text()
