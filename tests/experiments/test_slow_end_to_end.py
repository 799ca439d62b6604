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
    "synthesis_median_seconds_by_kind",
    "synthesis_wait_seconds",
    "synthesis_wait_share",
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
    assert scars["prop1_ok"] is True and scars["ledger_verified"] is True
    # Prop. 3 as the paper states it (the configured ε) holds; a scar's own, tighter bound sqrt(L_drift/2) — its
    # synthesis' estimate on the data it had — can fail out of sample and is reported (docs/tiers/tier1.md, Prop. 1–3)
    assert scars["prop3"]["exceeds_configured_bound"] == 0
    # Prop. 2 may exceed its bound under the information protocol (one rule per object type, *What MDL prefers*)
    violated = [line for line in result.output.splitlines() if "GUARANTEE VIOLATED" in line]
    own_bound_only = scars["prop3_ok"] or scars["prop3"]["exceeds_own_l_drift_bound"] > 0
    assert all("Prop. 2" in line or ("Prop. 3" in line and own_bound_only) for line in violated), violated
    assert summary["scars+oracle"]["prop2_ok"] is True
    assert scars["success_rate"] >= 0.8


def test_the_headline_holds_pooled_over_seeds(tmp_path):
    """README's headline on the embedded model: enforced scars repeat violations less than every text memory —
    pooled over seeds 0–4 (repeats / re-exposures summed, as README and docs/tiers/tier1.md state it), not on one
    seed, where a single game order can tip it. (Pooled over seeds 0–2 alone it no longer holds since narrowing's
    re-syntheses run: Insight repeats 0.259 against scars' 0.287 there; the paired interval over five seeds includes
    0, which docs/tiers/tier1.md says.)"""
    pooled = {}
    for method in METHODS:
        runs = [
            run_tier1(Tier1Config(method=method, seed=s), tmp_path / f"{method}-{s}").summary
            for s in (0, 1, 2, 3, 4)
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
