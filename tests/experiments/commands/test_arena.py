"""``scars arena run`` through click's CliRunner."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from scars.experiments.cli import main


@pytest.mark.parametrize(
    ("scenario", "arena"), [("fishery", "A"), ("pasture", "B"), ("pollution", "malicious")]
)
def test_arena_run_prints_months_metrics_and_karma(scenario, arena):
    result = CliRunner().invoke(
        main,
        [
            "arena",
            "run",
            "--scenario",
            scenario,
            "--arena",
            arena,
            "--months",
            "6",
            "--seed",
            "3",
            "--runs",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "month by month" in out and "metrics (GovSim" in out and "karma trajectory" in out
    assert "survival rate" in out and "over 2 run(s)" in out


def test_arena_run_with_a_population_reports_the_survival_of_cooperators():
    result = CliRunner().invoke(main, ["arena", "run", "--population", "coop:5", "--runs", "2"])
    assert result.exit_code == 0, result.output
    assert "survival rate 1.000 over 2 run(s)" in result.output
    assert "efficiency 1.000" in result.output


def test_arena_run_rejects_a_bad_population_with_the_allowed_kinds():
    result = CliRunner().invoke(main, ["arena", "run", "--population", "coop:4,pirate:1"])
    assert result.exit_code != 0
    assert "unknown population kind 'pirate'" in result.output
    result = CliRunner().invoke(main, ["arena", "run", "--arena", "C"])
    assert result.exit_code != 0 and "'C' is not one of" in result.output
