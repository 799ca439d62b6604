"""Slow end-to-end runs (``pytest -m slow``; CI runs them): the demo (README's first command), and scars on Ray."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from scars.experiments.cli import main
from scars.experiments.config import METHODS, Tier1Config
from scars.experiments.tier1 import run_tier1

pytestmark = pytest.mark.slow
TIMING = {
    "wall_seconds",
    "synthesis_median_seconds",
    "merge_median_seconds",
    "enforcement_ms_per_decision",
    "ledger_head",
}  # the head hash covers transaction times


def test_scars_demo_end_to_end(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    controls = {"scars:hard_blocklist", "scars:storm_only", "scars+state", "scars+oracle"}
    assert set(summary) == set(METHODS) | controls
    scars = summary["scars"]
    assert scars["prop1_ok"] is True and scars["prop3_ok"] is True and scars["ledger_verified"] is True
    # under the information protocol the agent keeps one rule per object type and exceeds Prop. 2's bound (docs/tiers/tier1.md,
    # *What MDL prefers*): reported, and the only guarantee that may fire
    violated = [line for line in result.output.splitlines() if "GUARANTEE VIOLATED" in line]
    assert all("Prop. 2" in line for line in violated), violated
    assert summary["scars+oracle"]["prop2_ok"] is True
    assert scars["success_rate"] >= 0.8


def test_the_headline_holds_pooled_over_seeds(tmp_path):
    """The paper's headline on the embedded model: enforced scars repeat violations less than every text memory —
    pooled over seeds 0–2 (repeats / re-exposures summed), not on one seed, where a single game order can tip it."""
    pooled = {}
    for method in METHODS:
        runs = [
            run_tier1(Tier1Config(method=method, seed=s), tmp_path / f"{method}-{s}").summary
            for s in (0, 1, 2)
        ]
        pooled[method] = sum(r["repeat_violations"] for r in runs) / sum(r["reexposures"] for r in runs)
    assert pooled["scars"] < min(v for m, v in pooled.items() if m != "scars"), pooled


def test_scars_on_ray_gives_the_same_run_as_in_process(tmp_path, ray_session):
    local = run_tier1(Tier1Config(method="scars", episodes=18), tmp_path / "local").summary
    ray = run_tier1(
        Tier1Config(method="scars", episodes=18, executor="ray", workers=2), tmp_path / "ray"
    ).summary
    assert local["syntheses"] >= 1
    assert {k: v for k, v in local.items() if k not in TIMING} == {
        k: v for k, v in ray.items() if k not in TIMING
    }
