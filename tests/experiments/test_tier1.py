"""The tier-1 experiment end to end: a tiny comparison, reproducibility, every ablation, the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from scars.experiments.cli import main
from scars.experiments.config import ABLATIONS, METHODS, Tier1Config
from scars.experiments.runner import run_many
from scars.experiments.tier1 import run_tier1
from scars.synthesis.errors import ConfigError
from support.extras import require_extra

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


def _cfg(method="scars", **kw):
    return Tier1Config(method=method, episodes=kw.pop("episodes", 6), schedule="smoke", **kw)


def test_tiny_comparison_writes_every_output(tmp_path):
    summary = run_many([_cfg(m) for m in METHODS], tmp_path)
    assert list(summary) == list(METHODS)
    for name in (
        "summary.json",
        "steps.parquet",
        "steps.csv",
        "episodes.parquet",
        "episodes.csv",
        "results.md",
    ):
        assert (tmp_path / name).stat().st_size > 0, name
    for name in ("rvr_success.png", "complexity.png", "svr.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "scars" / "ledger.sqlite").exists()
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    for key in (
        "success_rate",
        "rvr",
        "svr",
        "rvr_covered",
        "complexity_tokens_final",
        "prop1_ok",
        "prop3_ok",
    ):
        assert key in on_disk["scars"], key
    steps = pd.read_parquet(tmp_path / "steps.parquet")
    assert set(steps["method"]) == set(METHODS)
    # the metrics come from the recorded steps: recount the violations
    assert on_disk["rag"]["violations"] == int(
        (steps[steps.method == "rag"]["violated_rules"].fillna("") != "").sum()
    )
    results = (tmp_path / "results.md").read_text()
    assert "| scars |" in results
    # the learned scars against the ground truth, with the same counts as summary.json
    quality = on_disk["scars"]["scar_quality"]
    c = quality["counts"]
    row = (
        f"| scars | {quality['n']} | {c['exact']} | {c['under_general']} | {c['over_broad']} | {c['wrong']} |"
    )
    assert "## Learned scars against the ground truth" in results and row in results
    # the rule set in force beside them (issue 40), the same figures as summary.json
    precision = on_disk["scars"]["rule_set"]["probes"]["precision"]
    assert "## The rule set in force against the rules in force" in results
    assert f"| scars | {precision['estimate']:.3f}" in results


def test_scars_learns_and_the_guarantees_hold(tmp_path):
    scars = run_tier1(_cfg("scars", episodes=8), tmp_path / "s").summary
    persona = run_tier1(_cfg("static_persona", episodes=8), tmp_path / "p").summary
    assert scars["syntheses_admitted"] >= 1 and scars["scars_admitted"] >= 1
    assert scars["prop1_ok"] is True and scars["covered_mass_max"] == 0.0
    assert scars["rvr_covered"] == 0.0 and scars["ledger_verified"] is True
    assert scars["prop3_ok"] is True
    # the smoke schedule's broken microwave, learned exactly, every task won (narrowing, which once had to replace
    # a first scar that blocked every heat task here, is tested where its evidence is built by hand:
    # tests/agents/test_scars_agent.py)
    assert scars["active_rules"] == ['if action.recep == "microwave 1" then forbid_env_action("heat")']
    assert scars["success_rate"] == 1.0
    # the rule set over the run: nothing before the first failure, a first wrong guess (`step > 4`) that masks
    # safe heats too, then the exact scar, which masks what a rule in force forbids and nothing else
    rule_set = scars["rule_set"]
    first, *_, last = rule_set["probes"]["by_episode"]
    assert first[0] == 0.0 and last[0] == last[1] > 0 and rule_set["probes"]["precision"]["clusters"] == 8
    assert scars["rule_set_precision_probes"] < 1.0 and 0.0 < scars["rule_set_recall_probes"] < 1.0
    assert scars["tasks_lost_to_scars"] == 0
    assert persona.get("rule_set") is None  # no scars, no rule set of scars
    assert scars["success_rate"] >= persona["success_rate"] - 0.125  # one episode of 8
    assert scars["repeat_violations"] <= persona["repeat_violations"] + 1


def test_a_rerun_into_the_same_directory_starts_from_an_empty_ledger(tmp_path):
    first = run_tier1(_cfg("scars"), tmp_path).summary
    second = run_tier1(_cfg("scars"), tmp_path).summary
    assert {k: v for k, v in first.items() if k not in TIMING} == {
        k: v for k, v in second.items() if k not in TIMING
    }
    assert (
        len(list(tmp_path.glob("ledger.*.sqlite"))) == 1
    )  # the first run's ledger was set aside, not deleted


def _summary_json(path):
    return {
        method: {k: v for k, v in m.items() if k not in TIMING}
        for method, m in json.loads((path / "summary.json").read_text()).items()
    }


def test_same_seed_same_summary_json(tmp_path):
    configs = [_cfg("scars"), _cfg("rag")]
    run_many(configs, tmp_path / "a")
    run_many(configs, tmp_path / "b")
    assert _summary_json(tmp_path / "a") == _summary_json(tmp_path / "b")
    run_many([_cfg("scars", seed=1), _cfg("rag", seed=1)], tmp_path / "c")
    assert _summary_json(tmp_path / "a") != _summary_json(tmp_path / "c")


def test_wandb_logs_offline_without_an_account(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    run_many([_cfg("reflexion", episodes=2, wandb=True)], tmp_path)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].rglob("*.wandb"))


@pytest.mark.parametrize("ablation", [a for a in ABLATIONS if a != "none"])
def test_every_ablation_runs_and_does_what_it_says(tmp_path, ablation):
    s = run_tier1(_cfg("scars", ablation=ablation), tmp_path).summary
    assert s["method"] == f"scars:{ablation}"
    if ablation == "soft_bias_only":
        assert s["prop1_ok"] is None and s["soft_leak_mass_max"] > 0.0  # the boundary leaks, measured
    else:
        assert s["prop1_ok"] is True
    if ablation == "text_reflection_scar":
        assert s["scars_active_final"] == 0 and s["complexity_tokens_final"] > 0  # rules live in the prompt
    if ablation == "llm_only_patch":
        assert s["synthesis_median_nodes"] == 1.0


def test_bad_config_is_named():
    with pytest.raises(ConfigError, match="tau"):
        Tier1Config(tau=0.9)
    with pytest.raises(ConfigError, match="method"):
        Tier1Config(method="memgpt")
    with pytest.raises(ConfigError, match="ablation"):
        Tier1Config(method="rag", ablation="no_mdl")


def test_cli_help_and_errors(tmp_path):
    runner = CliRunner()
    for args in (["--help"], ["run", "--help"], ["run", "tier1", "--help"], ["demo", "--help"]):
        result = runner.invoke(main, args)
        assert result.exit_code == 0 and "Usage" in result.output
    bad = runner.invoke(main, ["run", "tier1", "--tau", "0.95", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "tau" in bad.output
    ok = runner.invoke(
        main,
        [
            "run",
            "tier1",
            "--method",
            "reflexion",
            "--episodes",
            "2",
            "--schedule",
            "smoke",
            "--out",
            str(tmp_path),
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "summary.json").read_text())["reflexion"]["episodes"] == 2


def test_a_run_plays_alfworld_game_files(tmp_path):
    """Every experiment can run on ALFWorld-format game files (issue 12): here files the exporter wrote (exporting
    reads ALFWorld's PDDL domain from the ``alfworld`` package, README's test command installs it)."""
    require_extra("alfworld", "textworld")
    from scars.envs.household.game_file import export_game
    from scars.envs.household.generator import generate_game

    games = tmp_path / "games"
    for seed in (3, 4):
        spec = generate_game(seed, "pick_heat_then_place_in_recep")
        export_game(spec, games / f"g{seed}" / "game.tw-pddl")
    cfg = Tier1Config(
        method="scars", episodes=3, schedule="smoke", game_files=str(games), search_iterations=40
    )
    result = run_tier1(cfg, tmp_path / "run")
    assert result.summary["episodes"] == 3 and result.summary["steps"] > 0
    assert list(result.episodes["task_type"]) == ["pick_heat_then_place_in_recep"] * 3
    with pytest.raises(ConfigError, match="does not exist"):
        Tier1Config(game_files=str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no"):
        run_tier1(Tier1Config(episodes=1, game_files=str(tmp_path / "empty")), tmp_path / "r2")


def test_rule_set_counts_a_scar_masking_the_expert_s_needed_step(tmp_path):
    """Issue 40, item 1: at a decision, the control actions a scar masked, those a rule in force forbids, and
    whether the masked safe action is the next step of the expert's compliant route (a task a scar may cost)."""
    from types import SimpleNamespace

    from scars.envs.household.expert import expert_next_command
    from scars.experiments.tier1 import Tier1Run, build_policy

    cfg = _cfg("scars")
    run = Tier1Run(cfg, tmp_path, build_policy(cfg))
    run.rule_sets = None
    obs, info = run.env.reset(seed=0, options={"game": run.games[0]})
    decision = run.world.decision(obs, info, t=0)
    needed = expert_next_command(run.env.world, run.env.verifier.active(0, 0, 0))
    i = next(k for k, a in enumerate(decision.actions) if a.text == needed)
    j = next(k for k, a in enumerate(decision.actions) if a.is_control and k != i)
    run.agent.scar_ids = lambda: ("s1",)
    flagged = [["r"] if k == j else [] for k in range(len(decision.actions))]
    choice = SimpleNamespace(governed=SimpleNamespace(fired=[(i, ("s1",)), (j, ("s1",))]))
    counts = run.rule_set(0, decision, choice, flagged)
    assert counts == {
        "scar_masked": 2,
        "scar_masked_unsafe": 1,
        "unsafe_actions": 1,
        "unsafe_known": 0,
        "scar_masked_known": 0,
        "needed_masked": 1,
    }
    run.failed_families.add("r")  # the run was told of r: its forbidden action now counts as known
    choice = SimpleNamespace(governed=SimpleNamespace(fired=[(j, ("s1",))]))
    assert run.rule_set(0, decision, choice, flagged) == {
        **counts,
        "scar_masked": 1,
        "unsafe_known": 1,
        "scar_masked_known": 1,
        "needed_masked": 0,
    }
    run.agent.close()


def test_the_rule_set_census_accounts_for_every_probe_pair_of_the_run(tmp_path):
    """Issue 40: a run's census adds up to its rule-set counts — the masked-but-safe probe pairs charged to scars sum
    to masked − masked unsafe, the misses by reason to unsafe − masked unsafe — and the smoke schedule's one rule
    (the broken microwave) is missed before its first failure; the new figures are in the flat keys and
    results.md."""
    from scars.experiments.metrics import RECALL_MISSES
    from scars.experiments.report import rule_set_markdown

    result = run_tier1(_cfg("scars", episodes=8), tmp_path / "s")
    probes = result.summary["rule_set"]["probes"]
    masked, masked_unsafe = probes["precision"]["denominator"], probes["precision"]["numerator"]
    unsafe = probes["recall"]["denominator"]
    by_scar = probes["safe_masked_by_scar"]
    assert by_scar and all(row["told"] == ["microwave_1_broken"] for row in by_scar)
    assert sum(row["safe_masked"] for row in by_scar) == pytest.approx(masked - masked_unsafe, abs=1e-4)
    assert sum(row["masked"] for row in by_scar) == pytest.approx(masked, abs=1e-4)
    for row in by_scar:  # the smoke schedule keeps world version 0
        assert sum(row["safe_masked_by_world_version"].values()) == pytest.approx(
            row["safe_masked"], abs=1e-4
        )
        assert set(row["safe_masked_by_world_version"]) <= {"0"}
    misses = probes["recall_misses"]
    assert sum(misses.values()) == pytest.approx(unsafe - masked_unsafe, abs=1e-4)
    assert set(misses) == set(RECALL_MISSES) and misses["before_first_failure"] > 0
    after, ceiling = probes["recall_after_first_failure"], probes["recall_ceiling"]
    assert after["numerator"] == pytest.approx(masked_unsafe, abs=1e-4)  # nothing masked before it was failed
    assert ceiling["numerator"] == after["denominator"] and ceiling["denominator"] == unsafe
    assert 0 < ceiling["estimate"] < 1 and after["estimate"] > probes["recall"]["estimate"]
    assert result.summary["rule_set_recall_after_first_failure_probes"] == after["estimate"]
    assert "recall after 1st failure (probes)" in "\n".join(rule_set_markdown({"scars": result.summary}))
