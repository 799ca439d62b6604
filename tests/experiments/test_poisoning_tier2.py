"""Issue 31 in the commons (tier 2): every attack but the Sybils' reaches a commons seat through the same hooks as in
tier 1 — MINJA through the observation the seat is shown, forged labels and suppressed verdicts through its feedback,
tampering through its files between two runs — each seeded and costed; each defence stops the case it claims
(scars' label protocol refuses labels of unexecuted actions, the ledger refuses an edited file); Sybils have no
channel in tier 1, said in one line; the poisoning presets run every attack of their tier on every method."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import scars.agents.builtin  # noqa: F401  (registers the built-in methods)
from scars.agents.registry import METHODS
from scars.agents.runtime.store import SchemaIntegrityError, SchemaStore
from scars.envs.api import Decision, Verdict
from scars.experiments.cli import main
from scars.experiments.commons_run import run_tier2
from scars.experiments.config import Tier1Config, Tier2Config
from scars.experiments.poisoning import AttackOutcomes, AttackView, attack_names, make_attack
from scars.experiments.sweep_spec import expand, load_spec
from scars.synthesis.dsl import Action
from scars.synthesis.errors import ConfigError

BUILT_IN_METHODS = (
    "scars",
    "static_persona",
    "rag",
    "reflexion",
    "scg_mem",
    "voyager",
    "rulebook",
    "insight",
)
"""The methods ``scars.agents.builtin`` registers (other tests register more into the same registry)."""
PRESETS = Path(__file__).resolve().parents[2] / "experiments" / "sweep_files"
HARVEST_8 = Action.tool("harvest", amount=8)
HARVEST_20 = Action.tool("harvest", amount=20)
Q = {"month": 1, "pool_resource_level": 100, "num_agents": 5, "sustainable_share": 10.0, "phase": "harvest"}


def _view(holder: str = "agent_0") -> AttackView:
    d = Decision("", "harvest", "harvest", Q, (HARVEST_20, HARVEST_8), 0, 0, 0)
    return AttackView(d, (HARVEST_20,), (HARVEST_8,), (HARVEST_8,), "agent_0", holder)


def _run(tmp_path: Path, method: str, attack: str, rate: float = 1.0, seed: int = 0, **kw):
    cfg = Tier2Config(
        method=method,
        setup="focal",
        runs=3,
        months=12,
        search_iterations=60,
        attack=attack,
        poison_rate=rate,
        seed=seed,
        **kw,
    )
    out = tmp_path / f"{method}-{attack}-{rate}-{seed}-{'-'.join(f'{k}{v}' for k, v in kw.items())}"
    return run_tier2(cfg, out), out


def _attack_numbers(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k.startswith("attack")}


@pytest.mark.parametrize("attack", ["minja", "forged_label", "counter_evidence", "tamper"])
@pytest.mark.parametrize("method", ["scars", "rag"])
def test_each_new_tier2_attack_is_seeded_and_costed(tmp_path, method, attack):
    (first, _), (again, _) = _run(tmp_path / "a", method, attack), _run(tmp_path / "b", method, attack)
    numbers = _attack_numbers(first.summary)
    assert numbers == _attack_numbers(again.summary)  # same seed, same poison, same outcome
    assert numbers["attack"] == attack and numbers["attack_success_n"] > 0
    # at rate 1 the attacker acted, and it is counted
    assert numbers["attack_writes"] + numbers["attack_queries"] > 0
    (unattacked, _) = _run(tmp_path / "c", method, attack, rate=0.0)
    assert unattacked.summary["attack_writes"] == unattacked.summary["attack_queries"] == 0


def test_query_only_injection_makes_the_seat_write_the_poison_itself(tmp_path):
    result, _ = _run(tmp_path, "rag", "minja")
    s = result.summary
    # the attacker only shaped what the seat observed
    assert s["attack_writes"] == 0 and s["attack_queries"] > 0
    (seat,) = result.seats
    memory = json.loads(Path(seat.memory_path).read_text(encoding="utf-8"))
    assert any("is the safe way to finish" in text for text in memory["texts"])


def test_forged_labels_in_the_commons_are_refused_by_scars_unless_the_state_protocol_is_on(tmp_path):
    executed, _ = _run(tmp_path, "scars", "forged_label")
    s = executed.summary
    # every forged label refused
    assert s["attack_writes"] > 0 and s["attack_detections"] == s["attack_writes"]
    state, _ = _run(tmp_path, "scars", "forged_label", verdicts="state")
    # taken as the verifier's
    assert state.summary["attack_writes"] > 0 and state.summary["attack_detections"] == 0


def test_counter_evidence_drops_only_the_verdicts_of_rules_that_seat_was_told():
    attack = make_attack("counter_evidence", 1.0, 0, "tier2")
    outcomes = AttackOutcomes(attack)
    over = Verdict("over_usage", "you took more than the sustainable share", "commons.norms")
    view = _view("agent_0")

    class _Governed:
        masked, probs = [False, False], [0.5, 0.5]

    outcomes.step(0, 0, view, HARVEST_20, ["over_usage"], _Governed(), (over,), [["over_usage"], []])
    assert outcomes.told_rules("agent_0") == {"over_usage"} and not outcomes.told_rules("agent_1")
    told = outcomes.told_rules("agent_0")
    delivered, _, _ = attack.feedback(view, HARVEST_20, (over,), None, (), 1, told, "commons.norms")
    assert delivered == () and attack.writes == 1  # the repeat arrives as a success
    other = _view("agent_1")  # a seat never told the rule: its first violation is delivered as it is
    delivered, _, _ = attack.feedback(other, HARVEST_20, (over,), None, (), 2, frozenset(), "commons.norms")
    assert delivered == (over,) and attack.writes == 1


def test_a_tampered_ledger_is_refused_at_the_restart_between_runs(tmp_path):
    result, out = _run(tmp_path, "scars", "tamper")
    s = result.summary
    # the one restart refused the rewritten ledger
    assert s["attack_writes"] > 0 and s["attack_detections"] == 1
    (seat,) = result.seats
    folder = Path(seat.ledger_path).parent
    assert list(folder.glob("ledger.*.sqlite"))  # the tampered ledger is set aside beside the new one
    SchemaStore(folder / "ledger.sqlite").close()  # the seat went on from a ledger that verifies


def test_a_grafted_memory_file_is_loaded_without_a_complaint(tmp_path):
    result, _ = _run(tmp_path, "rag", "tamper")
    s = result.summary
    assert s["attack_writes"] > 0 and s["attack_detections"] == 0  # no baseline checks its memory file
    (seat,) = result.seats
    memory = json.loads(Path(seat.memory_path).read_text(encoding="utf-8"))
    assert any("done, and no rule was broken" in text for text in memory["texts"])


def test_an_edited_rule_in_a_commons_seats_ledger_breaks_its_hash_chain(tmp_path):
    """The attacker edits the file on disk (no ``Tamper`` code): a learned rule's payload rewritten in place."""
    result, _ = _run(tmp_path, "scars", "none", rate=0.0)
    (seat,) = result.seats
    path = Path(seat.ledger_path)
    conn = sqlite3.connect(path)
    seq, payload = conn.execute(
        "SELECT seq, payload FROM events WHERE type = 'scar_admitted' ORDER BY seq LIMIT 1"
    ).fetchone()
    conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload.replace("harvest", "say"), seq))
    conn.commit()
    conn.close()
    with pytest.raises(SchemaIntegrityError):
        SchemaStore(path)


def test_sybils_have_no_channel_in_tier1_said_in_one_line():
    assert "sybil" not in attack_names("tier1") and "sybil" in attack_names("tier2")
    with pytest.raises(ConfigError, match="attack = 'sybil'"):
        Tier1Config(attack="sybil", poison_rate=0.1)
    with pytest.raises(ConfigError, match="no channel in tier1"):
        make_attack("sybil", 0.1, 0, "tier1")
    result = CliRunner().invoke(main, ["run", "tier1", "--attack", "sybil", "--out", "x"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "'tamper'" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("tier", ["tier1", "tier2"])
def test_the_poisoning_preset_runs_every_attack_of_its_tier_on_every_method(tier):
    assert set(BUILT_IN_METHODS) <= set(METHODS.names())
    trials = expand(load_spec(PRESETS / f"poisoning_{tier}.toml"))
    pairs = {(t.fields["method"], t.fields["attack"]) for t in trials}
    assert pairs == {(m, a) for m in BUILT_IN_METHODS for a in attack_names(tier) if a != "none"}
    assert {t.fields["poison_rate"] for t in trials} == {0.0, 0.001, 0.01, 0.1}
    assert {t.fields["seed"] for t in trials} == set(range(5))
    # every preset of the tier loads, and every point of it is a valid config
    for preset in PRESETS.glob(f"poisoning_*{tier}*.toml"):
        assert expand(load_spec(preset))
