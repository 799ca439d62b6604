"""Every guarantee check fires on the fault it exists to catch (issue: checks and metrics that can fail)."""

from __future__ import annotations

import pytest

from scars.agents.registry import METHODS, MethodSpec, register_method
from scars.agents.runtime.equilibration import equilibrate
from scars.agents.runtime.scar import Provenance, Scar
from scars.agents.runtime.store import SchemaStore
from scars.agents.scars_agent import ScarsAgent, make_scars
from scars.envs.api import Decision
from scars.experiments.config import Tier1Config
from scars.experiments.guarantees import GuaranteeMonitor
from scars.experiments.tier1 import run_tier1
from scars.synthesis.dsl import Action, parse_rule
from scars.synthesis.failure import Failure, FailureSource
from support.second_writer import retire_from_another_process

SINK = Action.env("clean", "clean cup 1 with sinkbasin 1", obj_type="cup", recep="sinkbasin 1")
TUB = Action.env("clean", "clean cup 1 with bathtubbasin 1", obj_type="cup", recep="bathtubbasin 1")
GO = Action.env("go", "go to fridge 1", recep="fridge 1")
CUP_RULE = parse_rule(
    'if action.obj_type == "cup" and action.recep == "sinkbasin 1" then forbid_env_action("clean")'
)


def _scar(rule=CUP_RULE, theta="no_cup_in_sink", step=3, drift=(0.5, 0.0)) -> Scar:
    failure = Failure({"location": "sinkbasin 1"}, (SINK,), theta, FailureSource(episode=0, step=step))
    settings = (("drift_budget", drift[0]), ("l_drift", drift[1]))
    return Scar(rule, (failure.to_json(),), Provenance(synthesiser_settings=settings))


def _decide(monitor, store, t, actions=(SINK, TUB, GO), logits=(2.0, 0.0, 0.0), flagged=None):
    q = {"location": "sinkbasin 1", "step": t}
    d = Decision("", "", "", q, actions, t, 0, t)
    monitor.before_decision(t)
    governed = store.plane.govern(q, actions, logits, t)
    monitor.after_step(t, d, logits, governed, flagged if flagged is not None else [[] for _ in actions])
    return governed


@pytest.fixture
def store(tmp_path):
    with SchemaStore(tmp_path / "l.sqlite") as st:
        yield st


def test_a_clean_history_passes_every_check(store):
    monitor = GuaranteeMonitor(store)
    store.record_failure(Failure({"location": "sinkbasin 1"}, (SINK,), "no_cup_in_sink"))
    equilibrate(store, [_scar()], [], merge_mode="append")
    for t in range(5):
        _decide(monitor, store, t)
    s = monitor.summary()
    assert s["plane_ledger_ok"] and s["prop1_ok"] and s["prop2_ok"]
    assert s["prop1"]["checks"] > 0 and s["plane_ledger"]["checks"] == 10  # before and after each decision


def test_unloading_a_scar_behind_the_ledgers_back_fires_consistency_and_prop1(store):
    monitor = GuaranteeMonitor(store)
    scar = _scar()
    equilibrate(store, [scar], [], merge_mode="append")
    _decide(monitor, store, 0)
    store._plane.remove(scar.id)  # the fault: the plane changes, no event is written
    governed = _decide(monitor, store, 1)
    assert governed.probs[0] > 0  # the failed action is back on the table
    s = monitor.summary()
    assert s["plane_ledger_ok"] is False and s["plane_ledger"]["first"]["t"] == 1
    assert s["prop1_ok"] is False and s["prop1"]["first"]["action"] == SINK.text


def test_a_scar_retired_for_scope_is_no_longer_owed(store):
    from scars.agents.runtime.equilibration import prune
    from scars.agents.runtime.scar import Scope

    monitor = GuaranteeMonitor(store)
    scoped = Scar(CUP_RULE, _scar().evidence, _scar().provenance, Scope(env_version="0"))
    equilibrate(store, [scoped], [], merge_mode="append")
    _decide(monitor, store, 0)
    prune(store, env_version="1")
    _decide(monitor, store, 1)
    assert monitor.summary()["prop1_ok"] is True and monitor.summary()["plane_ledger_ok"] is True


def test_a_merge_that_reports_an_owed_failure_uncovered_does_not_excuse_it(store):
    """Issue 25 #2: a merge (a bug in it, or in its model) drops the scar covering a failure and *reports* the
    failure uncovered. Before, the report excused the failure; now it stays owed and the report is the named cause."""
    from scars.synthesis.merge import MergeResult

    monitor = GuaranteeMonitor(store)
    scar = _scar()
    equilibrate(store, [scar], [], merge_mode="append")
    _decide(monitor, store, 0)
    failure_id = Failure.from_json(scar.evidence[0]).id
    dropped = MergeResult(
        frozenset(), frozenset({scar.id}), frozenset(), 0.0, True, "cp_sat", 0.0, frozenset({failure_id})
    )
    store.apply_merge(dropped, {})
    _decide(monitor, store, 1)
    s = monitor.summary()
    assert s["prop1_ok"] is False and s["prop1"]["merge_reported_uncovered"] == 1
    assert s["prop1"]["first"]["where"] == "a merge reported it uncovered" and s["prop1"]["first"]["t"] == 1


def test_a_scar_that_masks_none_of_its_failure_fails_prop1_while_a_temporary_mask_covers_it(store):
    """Issue 41 #5: Prop. 1 is F(q) ⊆ U_{S_t}(q) — the scars. Storm control's temporary mask for the failure lasts
    200 steps (longer than a run); checked against the whole live plane, a scar masking none of its own failure
    passed while that mask lasted. Checked against S_t it fails at once, on replay and at the decision."""
    monitor = GuaranteeMonitor(store)
    store.mask_temporarily("tmp:sink", CUP_RULE, until_step=200, reason="storm control")
    tub_only = parse_rule(
        'if action.obj_type == "cup" and action.recep == "bathtubbasin 1" then forbid_env_action("clean")'
    )
    wrong = _scar(rule=tub_only)  # brings the sink failure as evidence, masks only the tub
    equilibrate(store, [wrong], [], merge_mode="append")
    governed = _decide(monitor, store, 0)
    assert governed.masked[0]  # the temporary mask still masks the failed action
    s = monitor.summary()
    assert s["prop1_ok"] is False and s["prop1"]["first"]["scar"] == wrong.id
    assert s["prop1"]["first"]["where"] == "on replay" and s["prop1"]["first"]["action"] == SINK.text
    assert s["prop1"]["uncovered"] >= 2  # on replay and at the decision


def test_a_scar_admitted_without_failure_evidence_is_a_prop1_violation(store):
    """Issue 25 #2: a scar admitted with evidence that is no recorded failure (q, F) would owe nothing."""
    monitor = GuaranteeMonitor(store)
    store.admit(Scar(CUP_RULE, ({"note": "trust me"},)), reason="no evidence")
    _decide(monitor, store, 0)
    s = monitor.summary()
    assert s["prop1_ok"] is False and s["prop1"]["first"]["where"] == "admitted without (q, F) evidence"


def test_admitting_duplicates_past_k_times_c_max_fires_prop2(store):
    monitor = GuaranteeMonitor(store)
    store.record_failure(Failure({"location": "sinkbasin 1"}, (SINK,), "no_cup_in_sink"))  # K = 1
    rules = [
        parse_rule(
            f'if action.obj_type == "cup" and action.recep == "sinkbasin {i}" then forbid_env_action("clean")'
        )
        for i in range(1, 4)
    ]
    equilibrate(store, [_scar(r) for r in rules], [], merge_mode="append")  # three scars, one failure pattern
    _decide(monitor, store, 0)
    s = monitor.summary()
    assert s["prop2_ok"] is False and s["prop2"]["first"]["K"] == 1


def _bloated(n: int):
    """The cup rule with ``n`` extra conjuncts that change nothing it masks (receptacles it never names)."""
    extra = "".join(f' and action.recep != "shelf {i}"' for i in range(n))
    return parse_rule(
        f'if action.obj_type == "cup" and action.recep == "sinkbasin 1"{extra} then forbid_env_action("clean")'
    )


def test_a_scar_that_keeps_growing_for_one_failure_pattern_fires_prop2s_growth_check(store):
    """Issue 25 #6, injected as a bug would appear: K = 1 all run, but each decision the scar is re-admitted
    larger (a synthesiser that keeps adding conjuncts). C(S_t) ≤ K·C_max still holds — C_max grows with it — so
    only the growth exponent (b ≥ 1 where K is finite) catches it."""
    monitor = GuaranteeMonitor(store)
    store.record_failure(Failure({"location": "sinkbasin 1"}, (SINK,), "no_cup_in_sink"))  # K = 1, at t = 0
    current = None
    for t in range(40):
        if current is not None:
            store.retire(current.id, reason="replaced")
        current = _scar(_bloated(t + t * t // 8))
        store.admit(current, reason="re-synthesised")
        _decide(monitor, store, t)
    s = monitor.summary()
    assert s["prop2"]["violations"] == 0  # the bound alone is fooled
    assert s["prop2"]["growth_checked"] and s["prop2"]["growth_exponent"] >= 1
    assert s["prop2_ok"] is False and s["prop2"]["growth_ok"] is False


def test_a_scar_set_that_stops_growing_passes_prop2s_growth_check(store):
    monitor = GuaranteeMonitor(store)
    store.record_failure(Failure({"location": "sinkbasin 1"}, (SINK,), "no_cup_in_sink"))
    equilibrate(store, [_scar()], [], merge_mode="append")
    for t in range(40):
        _decide(monitor, store, t)
    s = monitor.summary()
    assert s["prop2"]["growth_checked"] and s["prop2"]["growth_ok"] is True and s["prop2_ok"] is True


def test_a_scar_widened_to_fire_off_failure_fires_prop3(store):
    monitor = GuaranteeMonitor(store)
    wide = parse_rule('if action_is("clean") then forbid_env_action("clean")')  # every basin, every object
    equilibrate(store, [_scar(wide, drift=(0.02, 0.0))], [], merge_mode="append")
    _decide(monitor, store, 0)
    for t in range(1, 6):  # off-failure: no admissible action breaks the scar's rule family
        _decide(monitor, store, t, actions=(TUB, GO), logits=(3.0, 0.0))
    s = monitor.summary()["prop3"]
    assert monitor.summary()["prop3_ok"] is False and s["exceeds_configured_bound"] == 1
    assert s["max_mean_tv"] > 0.9 and s["per_scar"][next(iter(s["per_scar"]))]["n"] == 5


def test_a_scar_over_only_its_own_l_drift_bound_leaves_prop3_as_stated_holding(store):
    """Issue 41 #8: one meaning per cell. With the configured ε bound holding and only the scar's own sqrt(L_drift/2)
    exceeded, ``prop3_ok`` said False (and results.md "✗ VIOLATED" under Prop. 3). Prop. 3 is the configured bound;
    the own bound is a diagnostic with its own key, reported as a note, never as a violated guarantee."""
    from scars.experiments.guarantees import broken_guarantees, diagnostic_notes

    monitor = GuaranteeMonitor(store)
    wide = parse_rule('if action_is("clean") then forbid_env_action("clean")')
    equilibrate(
        store, [_scar(wide, drift=(2.0, 0.0))], [], merge_mode="append"
    )  # sqrt(ε/2) = 1: TV ≤ 1 holds
    _decide(monitor, store, 0)
    for t in range(1, 6):
        _decide(monitor, store, t, actions=(TUB, GO), logits=(3.0, 0.0))
    s = monitor.summary()
    assert s["prop3"]["max_mean_tv"] > 0.9 and s["prop3"]["exceeds_configured_bound"] == 0
    assert s["prop3_ok"] is True and s["prop3_own_bound_exceeded"] == 1
    assert not any("Prop. 3" in line for line in broken_guarantees(s))
    assert diagnostic_notes(s) == [
        "1 of 1 scars drift off-failure above their own sqrt(L_drift/2) (their synthesis' estimate; Prop. 3's "
        "configured bound is checked apart)"
    ]


def test_exposure_to_the_scars_own_rule_is_not_off_failure(store):
    monitor = GuaranteeMonitor(store)
    equilibrate(store, [_scar(drift=(0.02, 0.0))], [], merge_mode="append")
    _decide(monitor, store, 0)
    for t in range(1, 4):
        _decide(monitor, store, t, flagged=[["no_cup_in_sink"], [], []])
    assert monitor.summary()["prop3"]["scars_measured"] == 0


class UnloadingScars(ScarsAgent):
    """A faulty scars agent: it silently unloads its scars at the start of every episode."""

    def begin_episode(self, decision):
        for scar_id in list(self.store.plane.active_ids):
            self.store._plane.remove(scar_id)


@register_method("unloading_scars")
def make_unloading(spec: MethodSpec) -> UnloadingScars:
    agent = make_scars(spec)
    agent.__class__ = UnloadingScars
    return agent


def test_a_faulty_run_reports_the_violation_and_the_cli_prints_the_alert(tmp_path):
    cfg = Tier1Config(method="unloading_scars", episodes=12, seed=0, search_iterations=60)
    summary = run_tier1(cfg, tmp_path / "run").summary
    assert summary["plane_ledger_ok"] is False
    assert summary["prop1_ok"] is False and summary["prop1"]["uncovered"] > 0
    from rich.console import Console

    from scars.experiments.runner import run_many

    console = Console(record=True, width=160)
    run_many([cfg], tmp_path / "cli", console=console)
    text = console.export_text()
    assert "GUARANTEE VIOLATED" in text and "unloading_scars" in text
    assert "unloading_scars" in METHODS


def test_the_governed_mass_check_still_applies(tmp_path):
    summary = run_tier1(
        Tier1Config(method="scars", episodes=6, seed=0, search_iterations=60), tmp_path
    ).summary
    assert (
        summary["covered_mass_max"] == 0.0
        and summary["prop1_ok"] is True
        and summary["plane_ledger_ok"] is True
    )


def test_a_second_process_retiring_an_active_scar_is_seen_at_the_next_decision(tmp_path):
    """Issue 41 #4: a foreign process retired an active scar mid-run; the plane = ledger monitor saw it only when the
    agent's own store next wrote (47 decisions later), and the run then died (exit 2) before summary.json was
    written. Now the monitor reads the ledger's head at every decision: the foreign event is named at the very next
    decision, the run stops there, and everything recorded so far is kept, the summary marked incomplete."""
    from scars.agents.runtime.ledger import Ledger

    retired: list[tuple[int, str]] = []

    def second_writer(agent, row):
        if not retired and agent.scar_ids():
            scar_id = agent.scar_ids()[0]
            retire_from_another_process(agent.store.ledger.path, scar_id)
            retired.append((row["t"], scar_id))

    cfg = Tier1Config(method="scars", episodes=12, seed=0, search_iterations=60)
    result = run_tier1(cfg, tmp_path / "run", on_step=second_writer)
    assert retired, "the run admitted nothing to retire"
    t, scar_id = retired[0]
    s = result.summary
    assert s["complete"] is False and f"at decision {t + 1}" in s["stopped"]
    assert f"scar_retired {scar_id}" in s["stopped"] and "another process" in s["stopped"]
    assert s["plane_ledger_ok"] is False and s["plane_ledger"]["first"]["t"] == t + 1
    assert s["plane_ledger"]["first"]["foreign_events"][0]["type"] == "scar_retired"
    # nothing lost: every decision up to the foreign write is in the tables; the agent wrote nothing after it
    assert list(result.steps["t"]) == list(range(t + 1))
    assert set(result.episodes["episode"]) == set(
        result.steps["episode"]
    )  # a partial episode has its row too
    assert result.episodes["complete"].tolist()[:-1] == [True] * (len(result.episodes) - 1)
    with Ledger(tmp_path / "run" / "ledger.sqlite", read_only=True) as audit:
        assert audit.verify().ok
        last = audit.events()[-1]
    assert (last.type, last.subject) == ("scar_retired", scar_id)


def test_a_stopped_run_is_written_out_marked_incomplete_and_the_cli_exits_1(tmp_path, monkeypatch):
    """The runner writes a stopped run like any other (tables, results.md, summary.json with ``complete: false``);
    ``scars run tier1`` then exits 1 naming why, after the files are written."""
    import json

    from click.testing import CliRunner

    import scars.experiments.runner as runner
    from scars.experiments.cli import main

    real = runner.run_tier1_folder
    stopped_at: list[int] = []

    def progress_then_foreign(cfg, out, **kw):
        inner = kw.get("progress")

        def progress(done, total):
            if inner is not None:
                inner(done, total)
            from scars.agents.runtime.ledger import Ledger

            if not stopped_at and done >= 4:
                with Ledger(out / "ledger.sqlite") as other:  # a second connection: another writer
                    active = other.active_scars()
                    if active:
                        other.retire(active[0].id, "retired behind the agent's back")
                        stopped_at.append(done)

        return real(cfg, out, **{**kw, "progress": progress})

    monkeypatch.setattr(runner, "run_tier1_folder", progress_then_foreign)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "run",
            "tier1",
            "--method",
            "scars",
            "--episodes",
            "12",
            "--search-iterations",
            "60",
            "--out",
            str(out),
        ],
    )
    assert stopped_at, "the run admitted nothing to retire"
    assert result.exit_code == 1, result.output
    assert "stopped before its end" in result.output and "scar_retired" in result.output
    summary = json.loads((out / "summary.json").read_text())["scars"]
    assert summary["complete"] is False and "another process" in summary["stopped"]
    assert summary["episodes"] == stopped_at[0]  # the next episode's first decision stopped it
    assert (out / "results.md").exists() and (out / "scars" / "steps.parquet").exists()


def test_a_ledger_edited_during_a_run_stops_it_at_the_next_episode_end(tmp_path):
    """Issue 25 #5, from the outside: another process edits a recorded event's payload (its hash column left
    alone) while the run goes on. Before, the summary said ``ledger_verified: false`` at the end and the run went
    on; now the episode end's verification stops it, naming the event (the CLI prints a ``ScarsError`` as one
    line, exit 2)."""
    import json
    import sqlite3

    from scars.synthesis.errors import LedgerIntegrityError

    edited = []

    def tamper(agent, row):
        if edited:
            return
        with sqlite3.connect(agent.store.ledger.path) as db:
            first = db.execute("SELECT seq, payload FROM events ORDER BY seq LIMIT 1").fetchone()
            if first is None:
                return
            forged = json.loads(first[1]) | {"forged": True}
            db.execute(
                "UPDATE events SET payload = ? WHERE seq = ?", (json.dumps(forged, sort_keys=True), first[0])
            )
        edited.append(row["episode"])

    cfg = Tier1Config(method="scars", episodes=12, seed=0, search_iterations=60)
    with pytest.raises(LedgerIntegrityError, match=r"fails verification at event 1 .*the run stops"):
        run_tier1(cfg, tmp_path / "run", on_step=tamper)
    assert edited, "the run admitted nothing to tamper with"


def test_scars_widened_to_forbid_their_verb_trip_prop3_in_a_run(tmp_path, monkeypatch):
    """Issue 25 #3, injected as a bug would appear: the synthesiser's rule is widened to forbid its whole verb
    (every basin, every drawer …) before admission. Measured on the re-planned logits this left Prop. 3 green
    (TV 0.0019) while success fell; on the base policy's proposal the drift on the scars' off-failure decisions is
    seen: above every scar's own sqrt(L_drift/2) (the configured ε, 0.5, is too loose to see it)."""
    import dataclasses

    import scars.agents.scars_agent as scars_agent
    from scars.synthesis.dsl import ForbidEnvAction, Rule
    from scars.synthesis.dsl.ast import Named

    real = scars_agent.scar_from_synthesis

    def widened(result, fragment, **kw):
        scar = real(result, fragment, **kw)
        mask = scar.rule.mask
        if not isinstance(mask, ForbidEnvAction):
            return scar
        return dataclasses.replace(scar, rule=Rule(Named("action_is", mask.action_id), mask))

    monkeypatch.setattr(scars_agent, "scar_from_synthesis", widened)
    cfg = Tier1Config(method="scars", episodes=12, seed=0, search_iterations=60)
    s = run_tier1(cfg, tmp_path / "run").summary
    assert s["scars_admitted"] > 0
    # the configured ε (0.5: bound 0.5) is far above drifts of 0.01-0.05; the scars' own L_drift bounds (0) catch it
    assert s["prop3_own_bound_exceeded"] > 0, s["prop3"]


def _reattributed(rule: str, q: dict) -> Scar:
    """A scar bringing the failure of ``_scar()`` (same episode and step: the same failure id) re-attributed to q."""
    failure = Failure(q, (SINK,), "no_cup_in_sink", FailureSource(episode=0, step=3))
    return Scar(
        parse_rule(rule), (failure.to_json(),), Provenance(synthesiser_settings=(("drift_budget", 0.5),))
    )


@pytest.mark.parametrize("covers", [True, False])
def test_a_re_attributed_failure_is_owed_by_the_scar_that_brings_it(store, covers):
    """Narrowing retires a wide scar and admits one that brings the same failure re-attributed (a variable the first
    attribution dropped). The failure is then owed as attributed there: it passes when the new scar covers that
    attribution, and fires Prop. 1 when it does not — the failure is handed on, never dropped."""
    monitor = GuaranteeMonitor(store)
    wide = _scar(parse_rule('if action.recep == "sinkbasin 1" then forbid_env_action("clean")'))
    equilibrate(store, [wide], [], merge_mode="append")
    _decide(monitor, store, 0)
    store.retire(wide.id, reason="narrowed: test")
    held = (
        "cup" if covers else "plate"
    )  # the fault: the new scar does not mask the failure as it re-attributed it
    narrow = _reattributed(
        f'if action.recep == "sinkbasin 1" and held_type == "{held}" then forbid_env_action("clean")',
        {"location": "sinkbasin 1", "held_type": "cup"},
    )
    equilibrate(store, [narrow], [], merge_mode="append")
    _decide(monitor, store, 1)
    s = monitor.summary()
    assert s["prop1_ok"] is covers
    if not covers:
        assert s["prop1"]["first"]["scar"] == narrow.id
