"""Tier 3 end to end (``experiments.tier3``, ``scars run tier3``): tiny runs, the controls, files, bad inputs."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from scars.experiments.cli import main
from scars.experiments.tier3 import NO_MEMORY, Tier3Config, run_tier3, run_tier3_to_dir
from scars.synthesis.errors import ConfigError

TINY = {
    "seeds": (0, 1),
    "train_runs": 1,
    "train_months": 3,
    "episodes_c": 1,
    "seasons_c": 3,
    "permutations": 5,
    "search_iterations": 20,
}


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"seeds": (3,)}, "at least two distinct seeds"),
        ({"seeds": (1, 1)}, "at least two distinct seeds"),
        ({"population_c": "coop:1"}, "arena C needs 3"),
        ({"population_c": "coop:2,malicious:1"}, "no malicious"),
        ({"method": "rag", "ablation": "no_mdl"}, "applies to method 'scars' only"),
        ({"method": "no_such_method"}, "unknown memory method"),
        ({"episodes_c": 0}, "must be >= 1"),
        ({"tau": 0.9}, "tau"),
    ],
)
def test_bad_configs_name_the_value(fields, match):
    with pytest.raises(ConfigError, match=match):
        Tier3Config(**fields)


def test_a_baseline_runs_end_to_end_and_its_identical_history_control_is_at_chance(tmp_path):
    summary = run_tier3_to_dir(Tier3Config(method="rag", **TINY), tmp_path)
    for name in ("summary.json", "results.md", "agents.csv", "agents.parquet", "steps.csv", "steps.parquet"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "continuity.png").is_file() and (tmp_path / "individuation.png").is_file()
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["method"] == "rag" and on_disk["agents"] == 4
    control = summary["identical_history_control"]
    assert (
        control["accuracy"] == 0.5 and control["n_trajectories"] == 4
    )  # one copy per label: never separable
    assert summary["style_continuity"]["js_imprint"]["n"] == 4
    agents = pd.read_csv(tmp_path / "agents.csv")
    assert sorted(agents["history"]) == ["A", "A", "B", "B"]
    steps = pd.read_csv(tmp_path / "steps.csv")
    assert set(steps["stage"]) <= {"pumping", "council", "fines"} and "harvest" not in set(steps["action"])
    assert summary["drift"]["scars_measured"] == 0 and summary["drift"]["ok"] is None  # no scars: n/a, not 0


def test_the_no_memory_control_cannot_tell_histories_apart(tmp_path):
    result = run_tier3(Tier3Config(method=NO_MEMORY, **TINY), tmp_path)
    features = result.agents.filter(like="f_")
    for seed in (0, 1):
        rows = features[result.agents["seed"] == seed].to_numpy()
        assert (rows[0] == rows[1]).all()  # nothing carried: the A- and B-"trained" agents play C identically
    assert result.summary["individuation"]["accuracy"] <= 0.5


def test_scars_carry_their_ledger_into_c_and_the_same_seed_gives_the_same_numbers(tmp_path):
    cfg = Tier3Config(method="scars", **TINY)
    a = run_tier3(cfg, tmp_path / "a")
    b = run_tier3(cfg, tmp_path / "b")
    pd.testing.assert_frame_equal(a.agents, b.agents)
    transfer = a.summary["transfer"]
    assert transfer["carried_scars"] >= 1 and transfer["grounded_scars"] >= 1
    assert all('("pump"' in g["rule"] and "harvest" not in g["rule"] for g in transfer["grounded"])
    assert transfer["transfer_masked_decisions"] >= 1  # a scar learned in A masked a pump in C
    assert (tmp_path / "a" / "seed_0" / "c_from_A" / "ledger.sqlite").is_file()
    assert a.summary["drift"]["scars_measured"] >= 1
    overreach = a.summary["overreach"]
    assert overreach["denominator"] == transfer["transfer_masked_decisions"]
    assert overreach["estimate"] is None or 0.0 <= overreach["estimate"] <= 1.0


def test_without_grounding_no_carried_scar_can_fire_in_c(tmp_path):
    result = run_tier3(Tier3Config(method="scars", ground_scars=False, **TINY), tmp_path)
    transfer = result.summary["transfer"]
    assert transfer["carried_scars"] >= 1 and transfer["grounded_scars"] == 0
    assert transfer["transfer_masked_decisions"] == 0  # A's names mask no action of C
    assert result.summary["overreach"]["estimate"] is None  # undefined, not 0


def test_cli_runs_a_tiny_tier3_and_rejects_bad_input_with_one_line(tmp_path):
    runner = CliRunner()
    args = ["run", "tier3", "--method", "rag", "--seeds", "0-1", "--train-runs", "1", "--train-months", "3"]
    args += ["--episodes-c", "1", "--seasons-c", "3", "--permutations", "5", "--out", str(tmp_path / "t3")]
    ok = runner.invoke(main, args)
    assert ok.exit_code == 0, ok.output
    assert "| rag |" in ok.output and (tmp_path / "t3" / "results.md").is_file()
    file = tmp_path / "a_file"
    file.write_text("x")
    for bad, needle in (
        (["--seeds", "4"], "at least two distinct seeds"),
        (["--seeds", "x"], "expected seeds like"),
        (["--population-c", "coop:9"], "arena C needs 3"),
        (["--method", "rag", "--ablation", "no_mdl"], "scars' only"),
        (["--out", str(file)], "is a file"),
        (["--method", "nope"], "nope"),
    ):
        result = runner.invoke(main, ["run", "tier3", *bad])
        assert result.exit_code == 2, (bad, result.output)
        assert needle in result.output and "Traceback" not in result.output


def test_sweep_accepts_tier3_and_rejects_bad_input_with_one_line(tmp_path):
    """Tier 3 is a tier of the registry: ``scars sweep --tier tier3`` runs it on Ray Tune (one trial per method,
    each over all its seeds); bad values exit 2 naming them."""
    runner = CliRunner()
    tiny = [f"--set={k}={v}" for k, v in TINY.items() if k != "seeds"]
    for bad, needle in (
        (["--grid", "method=nope"], "nope"),
        (["--grid", "method=rag", "--set", "seeds=3"], "at least two distinct seeds"),
    ):
        result = runner.invoke(
            main, ["sweep", "--tier", "tier3", *bad, *tiny, "--out", str(tmp_path / "bad")]
        )
        assert result.exit_code == 2, (bad, result.output)
        assert needle in result.output and "Traceback" not in result.output
    out = tmp_path / "s"
    args = [
        "sweep",
        "--tier",
        "tier3",
        "--grid",
        "method=rag",
        "--set",
        "seeds=0-1",
        *tiny,
        "--out",
        str(out),
    ]
    ok = runner.invoke(main, args)
    assert ok.exit_code == 0, ok.output
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 1 and runs["status"].tolist() == ["ok"]


def test_a_damaged_carried_ledger_travels_nowhere(tmp_path):
    import sqlite3

    from scars.experiments.commons_seats import SeatState
    from scars.experiments.tier3 import play_c

    cfg = Tier3Config(method="scars", **TINY)
    run_tier3(cfg, tmp_path / "ok")  # a real training ledger to damage
    ledger = tmp_path / "ok" / "seed_0" / "train_A" / "agent_0" / "ledger.sqlite"
    with sqlite3.connect(ledger) as db:
        db.execute("UPDATE events SET payload = '{}' WHERE seq = 1")
    state = SeatState("agent_0", "scars", str(ledger), None, None, {}, 10)
    with pytest.raises(ConfigError, match="fails verification"):
        play_c(cfg, 0, "A", state, ([], []), tmp_path / "c")


def test_a_carried_ledger_extended_after_training_travels_nowhere(tmp_path):
    """The carried state names the head its training run ended at: a ledger that verifies against it but has events
    after it (rules training did not learn) is refused, and the source is untouched."""
    from scars.agents.runtime.ledger import Ledger
    from scars.experiments.commons_seats import SeatState
    from scars.experiments.tier3 import play_c

    cfg = Tier3Config(method="scars", **TINY)
    run_tier3(cfg, tmp_path / "ok")
    ledger = tmp_path / "ok" / "seed_0" / "train_A" / "agent_0" / "ledger.sqlite"
    with Ledger(ledger) as led:
        trained = led.anchor_text()
        led.observe_failure({"after": "training"})
    extended = ledger.read_bytes()
    state = SeatState("agent_0", "scars", str(ledger), trained, None, {}, 10)
    with pytest.raises(ConfigError, match="extended after training"):
        play_c(cfg, 0, "A", state, ([], []), tmp_path / "c")
    assert ledger.read_bytes() == extended
    with Ledger(ledger, read_only=True) as led:
        ok = SeatState("agent_0", "scars", str(ledger), led.anchor_text(), None, {}, 10)
    play_c(cfg, 0, "A", ok, ([], []), tmp_path / "c2")  # the ledger as it ends now travels


def _retire_in_c(retired: list[tuple[int, str]]):
    """``on_step``: at the first decision in arena C with an active scar, another process retires that scar."""
    from support.second_writer import retire_from_another_process

    def on_step(agent, row):
        if not retired and agent.scar_ids():
            scar_id = agent.scar_ids()[0]
            retire_from_another_process(agent.self_schema().path, scar_id)
            retired.append((row["t"], scar_id))

    return on_step


def test_a_second_process_retiring_a_scar_in_arena_c_stops_the_tier3_run_with_what_it_recorded(tmp_path):
    """Issue 41 #4 in tier 3: a foreign process retires a carried scar while the A-trained agent plays arena C. The
    next decision sees it and the whole run stops there, fail closed: the decisions in C until then are the
    result, the summary is marked incomplete with the foreign event named (before: the run raised, nothing
    written)."""
    from scars.agents.runtime.ledger import Ledger

    retired: list[tuple[int, str]] = []
    result = run_tier3(Tier3Config(method="scars", **TINY), tmp_path, on_step=_retire_in_c(retired))
    assert retired, "the carried agent had no active scar in C"
    t, scar_id = retired[0]
    s = result.summary
    assert s["complete"] is False and f"at decision {t + 1}" in s["stopped"]
    assert f"scar_retired {scar_id}" in s["stopped"] and "another process" in s["stopped"]
    assert s["agents"] == 1 and list(result.agents["history"]) == ["A"]  # the B-trained agent never played
    assert result.steps["t"].iloc[-1] == t  # every decision up to the foreign write is kept
    with Ledger(tmp_path / "seed_0" / "c_from_A" / "ledger.sqlite", read_only=True) as audit:
        assert audit.verify().ok
        last = audit.events()[-1]
    assert (last.type, last.subject) == ("scar_retired", scar_id)


def test_scars_run_tier3_stopped_by_a_second_process_writes_its_files_and_exits_1(tmp_path, monkeypatch):
    """``scars run tier3`` stops as ``scars run tier1`` does: RUN STOPPED, the files written, summary.json marked
    ``complete: false``, exit 1."""
    import scars.experiments.tier3 as tier3

    real = tier3.run_tier3
    retired: list[tuple[int, str]] = []
    monkeypatch.setattr(
        tier3, "run_tier3", lambda cfg, out, progress=None: real(cfg, out, progress, _retire_in_c(retired))
    )
    out = tmp_path / "out"
    args = ["run", "tier3", "--method", "scars", "--seeds", "0,1", "--train-runs", "1", "--train-months", "3"]
    args += ["--episodes-c", "1", "--seasons-c", "3", "--permutations", "5", "--search-iterations", "20"]
    result = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert retired, "the carried agent had no active scar in C"
    assert result.exit_code == 1, result.output
    assert "RUN STOPPED" in result.output and "stopped before its end" in result.output
    summary = json.loads((out / "scars" / "summary.json").read_text())
    assert summary["complete"] is False and "scar_retired" in summary["stopped"]
    assert (out / "results.md").exists() and (out / "scars" / "steps.parquet").exists()


def test_a_second_process_writing_a_training_ledger_stops_the_tier3_run_before_arena_c(tmp_path, monkeypatch):
    """A foreign write during training in arena A stops the tier-3 run there: the training run is written out as
    tier 2 writes a stopped run, nothing is carried into C, and the run's files say it stopped (no trajectory)."""
    import scars.experiments.tier3 as tier3
    from scars.agents.runtime.ledger import Ledger
    from support.second_writer import retire_from_another_process

    real = tier3.run_tier2
    retired: list[str] = []

    def training_with_a_second_writer(cfg, out, progress=None, stop=None):
        def after_a_run(done, total):
            ledger = out / "agent_0" / "ledger.sqlite"
            with Ledger(ledger, read_only=True) as audit:
                active = [s.id for s in audit.active_scars()]
            if active and not retired:
                retire_from_another_process(ledger, active[0])
                retired.append(active[0])

        return real(cfg, out, after_a_run, stop=stop)

    monkeypatch.setattr(tier3, "run_tier2", training_with_a_second_writer)
    summary = run_tier3_to_dir(Tier3Config(method="scars", **TINY | {"train_runs": 2}), tmp_path)
    assert retired, "the training seat admitted nothing to retire"
    assert summary["complete"] is False and f"scar_retired {retired[0]}" in summary["stopped"]
    assert summary["agents"] == 0 and not (tmp_path / "seed_0" / "c_from_A").exists()
    trained = json.loads((tmp_path / "seed_0" / "train_A" / "summary.json").read_text())
    assert trained["complete"] is False and (tmp_path / "seed_0" / "train_A" / "steps.parquet").exists()
    assert json.loads((tmp_path / "summary.json").read_text())["complete"] is False
