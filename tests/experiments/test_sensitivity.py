"""``scars sensitivity``: the frontier table, the claims (which can go either way) and bad input."""

from __future__ import annotations

import pandas as pd
from click.testing import CliRunner

from scars.experiments.cli import main
from scars.experiments.sensitivity import claims


def _table(rows):
    return pd.DataFrame(
        [
            {
                "method": m,
                "influence_gain": g,
                "compliance": 1.0,
                "replan_competence": 1.0,
                "success": s,
                "svr": v,
                "rvr": r,
            }
            for m, g, s, v, r in rows
        ]
    )


def test_claims_say_where_the_reference_is_beaten_and_where_it_leads():
    table = _table(
        [
            ("scars", 12.0, 0.9, 0.10, 0.10),
            ("rag", 12.0, 0.8, 0.20, 0.30),
            ("scars", 96.0, 0.9, 0.10, 0.10),
            ("rag", 96.0, 0.95, 0.05, None),  # RVR undefined for rag there: never a win for anyone
        ]
    )
    rvr, svr, success, frontier = claims(table)
    assert rvr.startswith("RVR (lower is better): scars is best at 2 of 2 grid points.")
    assert "best at 1 of 2" in svr and "gain 96, compliance 1, re-plan 1: scars 0.100 > rag 0.050" in svr
    assert "best at 1 of 2" in success and "rag 0.950" in success
    assert "dominated at 1 (method, grid point) pairs: rag at gain 96" in frontier
    assert "It dominates 1" in frontier


def test_a_small_sweep_writes_the_frontier_and_bad_values_are_one_line(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(main, ["sensitivity", "--compliance", "2", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "compliance" in bad.output and "Traceback" not in bad.output
    assert not (tmp_path / "bad").exists()
    out = tmp_path / "s"
    args = ["sensitivity", "--methods", "static_persona,reflexion", "--influence-gain", "12"]
    result = runner.invoke(
        main,
        [
            *args,
            "--compliance",
            "1",
            "--replan-competence",
            "0,1",
            "--episodes",
            "2",
            "--seeds",
            "0",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "frontier.csv")
    assert len(table) == 4 and set(table["n_episodes"]) == {2}
    assert set(table["replan_competence"]) == {0.0, 1.0} and (table["replans"] >= 0).all()
    assert "| replan_competence |" in (out / "frontier.md").read_text()
    assert (out / "frontier.png").stat().st_size > 0 and "Frontier" in (out / "claims.md").read_text()
