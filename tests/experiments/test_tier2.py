"""Tier 2 end to end: scars and the baselines as seats of the commons arena (issue 14)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from scars.agents.runtime.ledger import Ledger
from scars.agents.runtime.scar import Scar
from scars.envs.commons import commons_v0
from scars.envs.commons.adapter import CommonsAdapter
from scars.envs.commons.dynamics import DynamicsConfig
from scars.experiments.cli import main
from scars.experiments.commons_run import run_tier2
from scars.experiments.commons_seats import STATE_FILE
from scars.experiments.commons_summary import inappropriate_scars, tier2_rvr
from scars.experiments.config import Tier2Config
from scars.synthesis.dsl import Action, canonical_text, parse_rule
from scars.synthesis.dsl.semantics import fires
from scars.synthesis.errors import ConfigError

FAST = {"months": 12, "search_iterations": 60}


def _comparable(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in ("wall_seconds", "months_per_second", "per_seat")}


def test_done_when_a_focal_scars_agent_learns_a_harvest_limit_from_punishment_and_over_harvests_less(
    tmp_path,
):
    """Issue 14's "done when": arena A, one scars seat among scripted peers who punish over-harvests, the verifier
    silent until a collapse (so only punishment can teach it before then), a fixed seed. The agent accommodates on
    punishment, admits a scar that limits harvesting, and its over-usage falls after the admission."""
    cfg = Tier2Config(
        method="scars",
        setup="focal",
        arena="A",
        overuse_verdicts=False,
        punishment_attribution="context",
        runs=3,
        seed=1,
        **FAST,
    )
    result = run_tier2(cfg, tmp_path / "run")
    seat = result.seats[0]
    stats = result.summary["per_seat"][seat.seat]
    assert stats["accommodations_by_punishment"] >= 1 and stats["accommodations_by_verdict"] == 0
    with Ledger(seat.ledger_path, read_only=True) as ledger:
        admitted = [Scar.from_json(e.payload) for e in ledger.events() if e.type == "scar_admitted"]
    from_punishment = [
        s for s in admitted if any(str(e.get("theta", "")).startswith("punished:") for e in s.evidence)
    ]
    assert from_punishment, [s.evidence for s in admitted]
    harvest = result.steps[result.steps["phase"] == "harvest"]
    template = {"phase": "harvest", "pool_resource_level": 100, "sustainable_share": 10.0}
    scar = from_punishment[0]
    assert any(fires(scar.rule, template, Action.tool("harvest", amount=a)) for a in range(1, 31))
    print(f"scar admitted from punishment: {canonical_text(scar.rule)}")
    before = harvest[harvest["scars_active"] == 0]["over"].mean()
    after = harvest[harvest["scars_active"] > 0]["over"].mean()
    print(
        f"over-usage before {before:.2f} (n={int((harvest['scars_active'] == 0).sum())}), after {after:.2f}"
    )
    assert after < before


def test_anti_collusion_the_gates_keep_the_coalitions_punishments_from_writing_inappropriate_scars(tmp_path):
    """The malicious arena: a three-seat coalition punishes the focal seat's (mostly sustainable) harvests every
    month. Gates on: its punishments are rejected and no inappropriate scar appears. Gates off (the fault the gates
    exist for): the coalition's punishments count and the agent admits a scar forbidding sustainable harvests."""
    base = Tier2Config(
        method="scars", setup="focal", arena="malicious", habits="sustainable", runs=2, seed=0, **FAST
    )
    on = run_tier2(base, tmp_path / "on").summary
    off = run_tier2(dataclasses.replace(base, gates=False), tmp_path / "off").summary
    assert on["inappropriate_scars"] == 0
    assert off["inappropriate_scars"] >= 1, off["active_rules"]
    assert (
        off["per_seat"]["agent_0"]["accommodations_by_punishment"]
        > on["per_seat"]["agent_0"]["accommodations_by_punishment"]
    )
    assert off["learner_gain_lost_mean"] > on["learner_gain_lost_mean"]


def test_every_method_plays_a_homogeneous_arena_and_the_same_seed_gives_the_same_numbers(tmp_path):
    for method in ("static_persona", "rag", "reflexion", "scg_mem", "voyager"):
        cfg = Tier2Config(method=method, runs=2, seed=3, **FAST)
        a = run_tier2(cfg, tmp_path / f"{method}-a")
        b = run_tier2(cfg, tmp_path / f"{method}-b")
        assert _comparable(a.summary) == _comparable(b.summary)
        assert a.summary["runs"] == 2 and a.summary["learning_seats"] == 5
        assert len(a.seats) == 5 and all(s.memory_path for s in a.seats)
        pd.testing.assert_frame_equal(a.months, b.months)


def test_the_embedded_policy_is_calibrated_to_govsim_most_homogeneous_groups_collapse(tmp_path):
    """GovSim: most models over-harvest and collapse the resource; its best survive. The govsim habits collapse in
    most runs; the sustainable habits survive in most (the calibration check can fail either way)."""
    greedy = run_tier2(Tier2Config(method="static_persona", runs=10, seed=0, **FAST), tmp_path / "g").summary
    careful = run_tier2(
        Tier2Config(method="static_persona", runs=10, seed=0, habits="sustainable", **FAST), tmp_path / "s"
    ).summary
    assert greedy["survival_rate"] <= 0.3 and greedy["over_usage"] > 0.5
    assert careful["survival_rate"] >= 0.5


def test_transfer_carries_a_baseline_memory_and_a_scars_ledger_into_arena_b(tmp_path):
    a_cfg = Tier2Config(method="reflexion", runs=2, seed=0, **FAST)
    a = run_tier2(a_cfg, tmp_path / "A")
    assert a.seats[0].memory["reflections"]
    b = run_tier2(dataclasses.replace(a_cfg, arena="B", transfer_from=str(tmp_path / "A")), tmp_path / "B")
    first = b.steps.sort_values("t").groupby("seat").head(1)
    assert (first["memory_tokens"] > 0).all()  # the A reflections are in context from B's first decision
    fresh = run_tier2(dataclasses.replace(a_cfg, arena="B"), tmp_path / "B0")
    assert (fresh.steps.sort_values("t").groupby("seat").head(1)["memory_tokens"] == 0).all()

    s_cfg = Tier2Config(
        method="scars",
        setup="focal",
        overuse_verdicts=False,
        punishment_attribution="context",
        runs=2,
        seed=1,
        **FAST,
    )
    s = run_tier2(s_cfg, tmp_path / "SA")
    assert s.summary["scars_admitted"] >= 1
    sb = run_tier2(dataclasses.replace(s_cfg, arena="B", transfer_from=str(tmp_path / "SA")), tmp_path / "SB")
    assert sb.steps.sort_values("t")["scars_active"].iloc[0] >= 1
    assert sb.steps["t"].min() == s.seats[0].t_end  # the transferred agent's clock continues
    assert sb.summary["active_rules"] and sb.summary["scars_admitted"] == 0  # carried, not admitted in B


def _tamper(ledger_path) -> None:
    with sqlite3.connect(ledger_path) as db:
        seq = db.execute("SELECT MIN(seq) FROM events").fetchone()[0]
        db.execute("UPDATE events SET payload = ? WHERE seq = ?", ('{"forged": true}', seq))


@pytest.mark.parametrize(
    "fault", ["no-manifest", "missing-ledger", "tampered-ledger", "other-method", "same-folder"]
)
def test_transfer_from_a_bad_folder_is_refused_and_nothing_is_written(tmp_path, fault):
    source = tmp_path / "A"
    cfg = Tier2Config(
        method="scars",
        setup="focal",
        overuse_verdicts=False,
        punishment_attribution="context",
        runs=1,
        seed=1,
        **FAST,
    )
    run_tier2(cfg, source)
    ledger = source / "agent_0" / "ledger.sqlite"
    method = "scars"
    if fault == "no-manifest":
        (source / STATE_FILE).unlink()
    elif fault == "missing-ledger":
        ledger.unlink()
    elif fault == "tampered-ledger":
        _tamper(ledger)
    elif fault == "other-method":
        method = "rag"
    out = source if fault == "same-folder" else tmp_path / "B"
    before = sorted(p.name for p in source.rglob("*"))
    args = ["run", "tier2", "--method", method, "--setup", "focal", "--arena", "B", "--runs", "1"]
    result = CliRunner().invoke(main, [*args, "--transfer-from", str(source), "--out", str(out)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.lower().startswith("error")]
    assert len(errors) == 1 and "transfer_from" in errors[0], result.stderr
    assert sorted(p.name for p in source.rglob("*")) == before  # nothing written, nothing moved
    assert fault == "same-folder" or not out.exists()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--seats", "4"], "exactly 5 seats"),
        (["--population", "coop:4"], "has 4 seats"),
        (["--method", "nonsense"], "Invalid value for '--method'"),
        (["--gates", "maybe"], "Invalid value for '--gates'"),
        (["--outsider-month", "1"], "outsider_month = 1 must be 0 (off) or a month in [2, 12]"),
        (["--outsider-month", "13"], "outsider_month = 13"),
        (["--outsider-habits", "shy"], "Invalid value for '--outsider-habits'"),
    ],
)
def test_bad_tier2_input_is_one_line_and_exit_code_2(tmp_path, argv, words):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", "tier2", "--runs", "1", *argv, "--out", str(out)])
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.lower().startswith("error")]
    assert len(errors) == 1 and words in errors[0], result.stderr
    assert not (out / "summary.json").exists()


def test_an_unknown_method_in_the_config_names_the_known_ones():
    with pytest.raises(ConfigError, match="known: .*scars"):
        Tier2Config(method="nonsense")


def test_inappropriate_scars_follow_the_arenas_ground_truth():
    dyn = DynamicsConfig()
    template = {"phase": "harvest", "pool_resource_level": 100}
    fair_cap = parse_rule('if action.amount > 10 then forbid_tool_call("harvest")')
    too_tight = parse_rule(
        'if action.amount > 3 then forbid_tool_call("harvest")'
    )  # forbids 4..10 at pool 100
    low_pool = parse_rule(
        'if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")'
    )
    above_h = parse_rule('if action.amount > 20 then forbid_tool_call("harvest")')
    bad = inappropriate_scars([fair_cap, too_tight, low_pool, above_h], template, dyn, {})
    assert len(bad) == 2 and "3" in bad[0] and "20" in bad[1]


def test_tier2_rvr_counts_repeats_after_the_first_verified_over_harvest_or_validated_punishment():
    rows = [
        # seat, t, run, phase, over, justified punishments received
        ("a", 0, 0, "harvest", False, 0),
        ("a", 1, 0, "punishment", False, 1),  # a validated punishment arms RVR
        ("a", 2, 0, "harvest", True, 0),  # repeat
        ("a", 3, 1, "harvest", False, 0),
        ("b", 0, 0, "harvest", True, 0),  # first over-harvest arms (not itself a repeat)
        ("b", 1, 0, "harvest", True, 0),  # repeat
    ]
    steps = pd.DataFrame(rows, columns=["seat", "t", "run", "phase", "over", "justified_received"])
    rvr = tier2_rvr(steps)
    assert (rvr["repeat_over"], rvr["reexposures"]) == (2, 3)
    assert rvr["by_run"] == {0: (2, 2), 1: (0, 1)}


def test_the_adapter_reports_over_usage_and_each_runs_punishments_afresh():
    env = commons_v0.CommonsParallelEnv(commons_v0.CommonsConfig(arena="A"))
    adapter = CommonsAdapter(env, "agent_0", overuse_verdicts=True)
    for run in range(2):
        obs, infos = env.reset(seed=run)
        adapter.reset(run)
        decision = adapter.decision(obs["agent_0"], infos["agent_0"], t=0)
        greedy = next(a for a in decision.actions if a.arg("amount") == 15)
        actions = {a: {"harvest": 10} for a in env.agents} | {"agent_0": adapter.command(decision, greedy)}
        obs, _, _, _, infos = env.step(actions)
        assert [v.rule_id for v in adapter.verdicts(infos["agent_0"])] == ["over_harvest"]
        talk = {a: {"message": 0, "limit": 0, "about": 0} for a in env.agents}
        obs, _, _, _, infos = env.step(talk)
        vec = np.zeros(5, dtype=np.int8)
        vec[0] = 1
        obs, _, _, _, infos = env.step({a: {"punish": vec} for a in env.agents})
        assert (
            len(adapter.punishments(infos["agent_0"])) == 4
        )  # every run's month-1 punishments, not deduplicated away
        assert adapter.punishments(infos["agent_0"]) == ()  # each once


def test_the_state_manifest_names_every_learning_seat(tmp_path):
    cfg = Tier2Config(method="rag", setup="focal", runs=1, **FAST)
    run_tier2(cfg, tmp_path)
    run_tier2(cfg, tmp_path)  # again into the same folder: the earlier seat folder is set aside, not reused
    assert len(list(tmp_path.glob("agent_0.*"))) == 1
    manifest = json.loads((tmp_path / STATE_FILE).read_text())
    assert [s["seat"] for s in manifest["seats"]] == ["agent_0"] and manifest["seats"][0]["method"] == "rag"


def test_govsim_details_allocation_requests_regrowth_and_texts():
    """Checked against GovSim's code: proportional leftovers go with replacement (weighted by what is still
    wanted), a request above the stock is valid (the allocation caps it), regrowth caps at the initial stock, and
    its harvest report and universalization line reach every policy's prompt."""
    from scars.envs.commons.dynamics import allocate, harvest_month, regrow

    # 5 units for three requests of 3: floor gives 1 each, 2 leftover units; with replacement one agent can get both
    outcomes = {allocate([3, 3, 3], 5, "proportional", np.random.default_rng(s)) for s in range(200)}
    assert any(max(o) == 3 for o in outcomes) and all(sum(o) == 5 for o in outcomes)
    dyn = DynamicsConfig(initial_stock=60)
    out = harvest_month(20, [50, 0, 0, 0, 0], dyn, np.random.default_rng(0))
    assert out.catches[0] == 20 and out.collapsed
    assert regrow(40, dyn) == 60  # doubled to 80, capped at the initial stock 60 (not the capacity 100)

    env = commons_v0.CommonsParallelEnv(commons_v0.CommonsConfig(arena="B"))
    adapter = CommonsAdapter(env, "agent_0", share_hint="universalization")
    obs, infos = env.reset(seed=0)
    decision = adapter.decision(obs["agent_0"], infos["agent_0"], t=0)
    assert (
        "if everyone fishes more than 10 tons, the lake population will shrink next month"
        in decision.observation
    )
    obs, _, _, _, infos = env.step({a: {"harvest": 12} for a in env.agents})
    assert (
        infos["agent_0"]["harvest_report"] == "agent_0 wanted to catch 12 tons of fish, and caught 12 tons."
    )
    assert "wanted to catch 12 tons" in adapter.decision(obs["agent_0"], infos["agent_0"], t=1).observation


def test_the_no_language_variant_has_no_discussion_and_hides_the_others_catches(tmp_path):
    env = commons_v0.CommonsParallelEnv(commons_v0.CommonsConfig(arena="A", language=False))
    obs, infos = env.reset(seed=0)
    obs, _, _, _, infos = env.step({a: {"harvest": 5 + i} for i, a in enumerate(env.agents)})
    assert infos["agent_1"]["phase"] == "punishment" and infos["agent_1"]["mayor_report"] == ""
    assert list(obs["agent_1"]["catches"]) == [0, 6, 0, 0, 0]
    result = run_tier2(Tier2Config(method="rag", language=False, runs=1, **FAST), tmp_path)
    assert not (result.steps["phase"] == "discussion").any()


def test_scars_sweep_accepts_tier_2_on_tune_and_resumes(tmp_path):
    """Tier 2 is a tier of the registry: ``scars sweep --tier tier2`` varies its config fields on Ray Tune and a
    re-run resumes without running a finished trial again."""
    argv = [
        "sweep",
        "--tier",
        "tier2",
        "--grid",
        "method=rag,static_persona",
        "--set",
        "runs=1",
        "--set",
        "months=3",
        "--max-concurrent",
        "1",
        "--out",
        str(tmp_path),
    ]
    first = CliRunner().invoke(main, argv)
    assert first.exit_code == 0, first.output
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 2 and sorted(runs["method"]) == ["rag", "static_persona"]
    assert (runs["status"] == "ok").all() and runs["survival_rate"].notna().all()
    summary = json.loads((tmp_path / "runs" / runs["run_name"][0] / "summary.json").read_text())
    assert summary["runs"] == 1 and (tmp_path / "runs" / runs["run_name"][0] / "provenance.json").is_file()
    again = CliRunner().invoke(main, argv)
    assert again.exit_code == 0, again.output
    assert pd.read_csv(tmp_path / "runs.csv")["survival_rate"].tolist() == runs["survival_rate"].tolist()


@pytest.mark.slow
def test_a_real_model_backend_drives_a_seat_through_the_policy_protocol(tmp_path):
    """A (tiny, randomly initialised) HuggingFace causal LM in the focal seat: scored choice among the admissible
    actions with the scars mask applied by the controller, its own generated utterances. No habit prior is read."""
    torch = pytest.importorskip("torch", reason="the 'hf' extra (torch, transformers) is not installed")
    transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")
    from tokenizers import Tokenizer, models, pre_tokenizers

    from scars.agents.policies.hf import HFPolicy
    from scars.agents.registry import BACKENDS, register_backend

    if "tiny_hf_commons" not in BACKENDS:
        words = (
            "month harvest phase the pool holds of catch tons fish punish nobody agent 1 2 3 4 5 10 .".split()
        )
        vocab = {"[UNK]": 0, "[EOS]": 1, **{w: i + 2 for i, w in enumerate(dict.fromkeys(words))}}
        tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
        )
        fast = transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]"
        )
        torch.manual_seed(0)
        config = transformers.GPT2Config(
            vocab_size=len(vocab), n_positions=512, n_embd=16, n_layer=1, n_head=2
        )
        model = transformers.GPT2LMHeadModel(config)
        register_backend("tiny_hf_commons")(lambda settings: HFPolicy(model, fast))
    cfg = Tier2Config(
        method="scars", setup="focal", backend="tiny_hf_commons", runs=1, months=2, search_iterations=20
    )
    result = run_tier2(cfg, tmp_path)
    steps = result.steps
    assert len(steps) >= 3 and set(steps["phase"]) >= {"harvest", "discussion"}
    harvest = steps[steps["phase"] == "harvest"]
    assert (harvest["amount"] <= 20).all()  # H's cap holds whatever the model prefers
    assert result.summary["plane_ledger_ok"] is not False


def test_the_same_seed_gives_the_same_scars_run(tmp_path):
    """Reproducible asynchrony: syntheses are collected at a fixed step, so a scars run repeats exactly."""
    cfg = Tier2Config(method="scars", setup="focal", runs=2, seed=2, **FAST)
    a = run_tier2(cfg, tmp_path / "a")
    b = run_tier2(cfg, tmp_path / "b")
    assert _comparable(a.summary) == _comparable(b.summary)
    pd.testing.assert_frame_equal(a.steps, b.steps)


def test_the_collusion_table_of_a_method_without_scars_says_n_a_not_zero(tmp_path):
    from scars.experiments.tier2_studies import run_collusion

    table = run_collusion(Tier2Config(method="rag", habits="sustainable", runs=1, **FAST), [0, 1], tmp_path)
    assert table["inappropriate_scars_per_seed"].isna().all()
    assert "| gates on | 2 | 2 | n/a | n/a | n/a |" in (tmp_path / "collusion.md").read_text()


def _retire_after_first_run(out, retired: list[tuple[int, str]]):
    """A progress callback: after the first run, another process retires the focal seat's first active scar."""
    from support.second_writer import retire_from_another_process

    def progress(done, total):
        if done != 1:
            return
        ledger = out / "agent_0" / "ledger.sqlite"
        with Ledger(ledger, read_only=True) as audit:
            active = [s.id for s in audit.active_scars()]
        if active:
            retire_from_another_process(ledger, active[0])
            retired.append((done, active[0]))

    return progress


def test_a_second_process_retiring_a_scar_stops_a_tier2_run_with_what_it_recorded(tmp_path):
    """Issue 41 #4 in tier 2: a foreign process retires the focal seat's active scar between two runs. The next
    decision sees it (the monitor reads the ledger's head) and the run stops there, fail closed, with every step and
    month recorded until then kept and the summary marked incomplete; before, ``run_tier2`` raised and nothing was
    written out."""
    out = tmp_path / "run"
    retired: list[tuple[int, str]] = []
    cfg = Tier2Config(method="scars", setup="focal", runs=3, months=6, search_iterations=60)
    result = run_tier2(cfg, out, _retire_after_first_run(out, retired))
    assert retired, "the focal seat admitted nothing to retire"
    _, scar_id = retired[0]
    s = result.summary
    first_decision_after = len(result.steps)  # the seat's decisions are numbered on across runs
    assert s["complete"] is False and f"at decision {first_decision_after}" in s["stopped"]
    assert f"scar_retired {scar_id}" in s["stopped"] and "another process" in s["stopped"]
    assert set(result.steps["run"]) == {0} and set(result.months["run"]) == {0}
    assert len(result.months) == cfg.months  # the first run is whole
    with Ledger(out / "agent_0" / "ledger.sqlite", read_only=True) as audit:
        assert audit.verify().ok
        last = audit.events()[-1]
    assert (last.type, last.subject) == ("scar_retired", scar_id)  # the stopped agent wrote nothing after it


def test_scars_run_tier2_stopped_by_a_second_process_writes_its_files_and_exits_1(tmp_path, monkeypatch):
    """``scars run tier2`` stops as ``scars run tier1`` does: RUN STOPPED, the files written (summary.json marked
    ``complete: false``), exit 1 (before: one error line, exit 2, no summary.json)."""
    import scars.experiments.tier2 as tier2

    real = tier2.run_tier2
    retired: list[tuple[int, str]] = []

    def run_with_a_second_writer(cfg, out, progress=None):
        foreign = _retire_after_first_run(out, retired)

        def both(done, total):
            foreign(done, total)
            if progress is not None:
                progress(done, total)

        return real(cfg, out, both)

    monkeypatch.setattr(tier2, "run_tier2", run_with_a_second_writer)
    out = tmp_path / "out"
    args = ["run", "tier2", "--method", "scars", "--setup", "focal", "--runs", "3", "--months", "6"]
    result = CliRunner().invoke(main, [*args, "--search-iterations", "60", "--out", str(out)])
    assert retired, "the focal seat admitted nothing to retire"
    assert result.exit_code == 1, result.output
    assert "RUN STOPPED" in result.output and "stopped before its end" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and "scar_retired" in summary["stopped"]
    assert (out / "results.md").exists() and (out / "steps.parquet").exists()
