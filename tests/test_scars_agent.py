"""The scars agent's lifecycle pieces that the tier-1 runs exercise only sometimes."""

from __future__ import annotations

import pytest

from agents.runtime.scar import Scar, Scope
from agents.scars_agent import ScarsAgent, ScarsAgentConfig
from synthesis.dsl import parse_rule
from synthesis.errors import ConfigError


def _agent(tmp_path, **kw):
    return ScarsAgent(
        ScarsAgentConfig.for_ablation(**kw), verifier=lambda q, a: False, ledger_path=tmp_path / "l.sqlite"
    )


def test_world_version_change_retires_exactly_the_version_scoped_scars(tmp_path):
    agent = _agent(tmp_path)
    scoped = Scar(
        parse_rule('if action.recep == "microwave 1" then forbid_env_action("heat")'),
        ({"e": 1},),
        scope=Scope(env_version="0"),
    )
    general = Scar(parse_rule('if action.obj_type == "cup" then forbid_env_action("clean")'), ({"e": 2},))
    for scar in (scoped, general):
        agent.ledger.admit(scar)
    agent._rebuild()
    assert set(agent.scar_ids()) == {scoped.id, general.id}
    agent.on_world_version(1, step=10)
    assert agent.scar_ids() == (general.id,)
    retired = [e for e in agent.ledger.events() if e.type == "scar_retired"]
    assert [e.subject for e in retired] == [scoped.id] and "version" in retired[0].payload["reason"]
    assert agent.ledger.verify().ok  # nothing deleted: the evidence stays in the admission event
    agent.close()


def test_ablations_are_one_setting_each():
    assert ScarsAgentConfig.for_ablation("no_ilp_merge").merge_mode == "append"
    assert ScarsAgentConfig.for_ablation("soft_bias_only").mask_mode == "soft"
    assert ScarsAgentConfig.for_ablation("text_reflection_scar").enforce is False
    assert ScarsAgentConfig.for_ablation("llm_only_patch").search == "direct"
    assert ScarsAgentConfig.for_ablation("no_drift_loss").search_config.weights.beta3 == 0.0
    assert ScarsAgentConfig.for_ablation("no_mdl").search_config.weights.use_description_length is False
    with pytest.raises(ConfigError, match="unknown ablation"):
        ScarsAgentConfig.for_ablation("no_such")
