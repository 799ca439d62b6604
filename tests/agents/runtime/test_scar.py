"""Scars (SPEC §1): content-addressed ids, JSON round trip, validated audit plane."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scars.agents.runtime import Provenance, Scar, Scope
from scars.agents.runtime.scar import scar_id_of
from scars.synthesis.dsl import parse_rule
from scars.synthesis.errors import ConfigError, LedgerIntegrityError

PAPER_RULE = (
    'if intent_is("database_export") and data_scope_is("internal") and tool_is("send_data") '
    'then forbid_tool_call("send_data")'
)


def paper_scar() -> Scar:
    return Scar(
        parse_rule(PAPER_RULE),
        evidence=({"q": {"intent": "database_export", "data_scope": "internal"}, "F": ["send_data"]},),
        provenance=Provenance(
            source_episode=3,
            source_step=17,
            verifier_id="deterministic:policy_violation",
            synthesiser="mcts",
            synthesiser_settings={"iterations": 400, "c_uct": 1.4},
            seed=11,
            observed_at_us=1_700_000_000_000_000,
        ),
        scope=Scope(env_version="v2", confidence=0.8, expires_at_episode=50),
    )


def test_id_is_the_content_address_of_the_canonical_control_plane():
    scar = paper_scar()
    reordered = Scar(
        parse_rule(
            'if tool_is("send_data") and data_scope_is("internal") and intent_is("database_export") '
            'then forbid_tool_call("send_data")'
        )
    )
    assert scar.id == reordered.id == scar_id_of(scar.rule)  # evidence/provenance do not change the id
    assert len(scar.id) == 16 and int(scar.id, 16) >= 0
    other = Scar(parse_rule('if intent_is("database_export") then forbid_tool_call("send_data")'))
    assert other.id != scar.id


def test_id_is_stable_across_processes():
    code = (
        "from scars.agents.runtime import Scar; from scars.synthesis.dsl import parse_rule; "
        f"print(Scar(parse_rule({PAPER_RULE!r})).id)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123"},
    )
    assert out.stdout.strip() == paper_scar().id


def test_json_round_trip_and_accessors():
    scar = paper_scar()
    data = scar.to_json()
    assert Scar.from_json(data) == scar
    assert hash(Scar.from_json(data)) == hash(scar)
    assert scar.guard == scar.rule.guard and scar.mask == scar.rule.mask
    assert data["provenance"]["synthesiser_settings"] == {"c_uct": 1.4, "iterations": 400}
    assert scar.control_text.startswith("if ")


def test_from_json_detects_an_id_that_does_not_match_the_rule():
    data = paper_scar().to_json()
    data["id"] = "0" * 16
    with pytest.raises(LedgerIntegrityError, match="0000000000000000"):
        Scar.from_json(data)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
        ({"expires_at_step": -1}, "expires_at_step"),
        ({"expires_at_episode": 2.5}, "expires_at_episode"),
        ({"env_version": 3}, "env_version"),
    ],
)
def test_scope_validation_names_the_bad_value(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Scope(**kwargs)


def test_scope_expiry():
    scope = Scope(env_version="v1", expires_at_step=10, expires_at_episode=3)
    assert not scope.expired(step=9, episode=2, env_version="v1")
    assert scope.expired(step=10)
    assert scope.expired(episode=3)
    assert scope.expired(env_version="v2")
    assert not Scope().expired(step=10**9, episode=10**9, env_version="anything")
    with pytest.raises(ConfigError, match="unknown Scope field"):
        Scope.from_json({"ttl": 3})


def test_evidence_must_be_json_able_dicts():
    rule = parse_rule(PAPER_RULE)
    with pytest.raises(ConfigError, match="tuple of dicts"):
        Scar(rule, evidence={"q": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must be a dict"):
        Scar(rule, evidence=("not a dict",))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="canonical-JSON"):
        Scar(rule, evidence=({"x": float("nan")},))
    with pytest.raises(ConfigError, match="seed"):
        Provenance(seed="7")  # type: ignore[arg-type]
