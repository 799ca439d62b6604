"""``benchmarks/rule_set_census.py`` (issue 40): a suite's census per schedule adds up, a suite paired with itself
differs by nothing, and bad input is one line and exit code 2."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


suite, census = _module("schedule_suite"), _module("rule_set_census")


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    out = tmp_path_factory.mktemp("census-suite")
    suite.run_suite([suite.Cell("smoke", "scars", seed, 4) for seed in (0, 1)], out, in_process=True)
    return out


def test_a_suite_s_census_adds_up_and_pairs_with_itself_at_zero(cells, capsys):
    cell = census.load(cells, "smoke", "scars")
    assert len(cell["clusters"]) == 8 and cell["cells"] == 2
    missed = cell["unsafe"].sum() - cell["masked_unsafe"].sum()
    assert sum(cell["misses"].values()) == pytest.approx(missed, abs=1e-3)
    assert sum(cell["loss"].values()) == pytest.approx(
        cell["masked"].sum() - cell["masked_unsafe"].sum(), abs=1e-3
    )
    assert census.main([str(cells), "--against", str(cells), "--schedules", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "| precision (probes) |" in out and "| recall ceiling |" in out
    assert "0.000 [0.000, 0.000] |" in out  # every paired Δ of a suite against itself


def test_bad_input_is_one_line_and_exit_code_2(cells, tmp_path, capsys):
    assert census.main([str(tmp_path / "nowhere")]) == 2
    assert census.main([str(cells), "--schedules", "paper,paraphrase_heldout"]) == 2
    old = tmp_path / "old"  # a suite from before the census: its summaries have no census keys
    for path in cells.rglob("*"):
        if path.is_file() and path.name in ("summary.json", "episodes.parquet"):
            target = old / path.relative_to(cells)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            if path.name == "summary.json":
                summary = json.loads(data)
                del summary["rule_set"]["probes"]["known_by_episode"]
                data = json.dumps(summary).encode()
            target.write_bytes(data)
    capsys.readouterr()
    assert census.main([str(old), "--schedules", "smoke"]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "known_by_episode" in lines[0] and "allowed:" in lines[0]
