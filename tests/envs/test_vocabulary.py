"""The abstract vocabulary (``envs.vocabulary``): a class-predicate scar of arena A fires in arena C, a surface-name
scar of A cannot."""

from __future__ import annotations

import dataclasses

from scars.envs.aquifer import aquifer_v0
from scars.envs.aquifer.adapter import AquiferAdapter
from scars.envs.commons import commons_v0
from scars.envs.commons.adapter import CommonsAdapter
from scars.envs.vocabulary import ground
from scars.synthesis.dsl import parse_rule
from scars.synthesis.dsl.semantics import fires

CLASS_SCAR = (
    'if in_class(action.tool, "extraction") and pool_resource_level < 50 and action.amount > 4 '
    'then forbid_tool_call("harvest")'
)
SURFACE_SCAR = 'if tool_is("harvest") and pool_resource_level < 50 and action.amount > 4 then forbid_tool_call("harvest")'


def _cards():
    a = CommonsAdapter(commons_v0.parallel_env(arena="A"), "agent_0")
    env = aquifer_v0.parallel_env()
    return a, env, AquiferAdapter(env, "farm_0")


def _c_decisions(env, adapter, levels):
    obs, infos = env.reset(seed=0)
    d = adapter.decision(obs["farm_0"], infos["farm_0"], t=0)
    for level in levels:
        yield d, {**d.context, "aquifer_level": level}


def test_a_class_predicate_scar_grounds_in_c_and_fires_on_the_analogous_state_only():
    a, env, c = _cards()
    g = ground(parse_rule(CLASS_SCAR), a.card, c.card)
    assert g.portable and g.tool_class == "extraction"
    (rule,) = g.rules
    assert rule.mask.tool_id == "pump"
    for d, q in _c_decisions(env, c, (60, 40)):
        fired = {x.arg("volume") for x in d.actions if fires(rule, q, x, c.card.classes)}
        # the A rule said: below 50 units of resource, no single extraction above 4
        assert fired == (set(range(5, 61)) if q["aquifer_level"] < 50 else set())


def test_a_surface_name_scar_does_not_ground_and_never_fires_in_c():
    a, env, c = _cards()
    rule = parse_rule(SURFACE_SCAR)
    g = ground(rule, a.card, c.card)
    assert not g.portable and "surface" in g.reason
    for d, q in _c_decisions(env, c, (60, 40, 10)):
        assert not any(fires(rule, q, x, c.card.classes) for x in d.actions)
        # the ungrounded class scar cannot fire either: its mask still names harvest
        assert not any(fires(parse_rule(CLASS_SCAR), q, x, c.card.classes) for x in d.actions)


def test_grounding_fails_without_the_vocabulary_and_on_surface_values():
    a, _, c = _cards()
    rule = parse_rule(CLASS_SCAR)
    no_class = dataclasses.replace(c.card, classes={})
    assert "no tool of class" in ground(rule, a.card, no_class).reason
    no_level = dataclasses.replace(
        c.card, variables={k: v for k, v in c.card.variables.items() if v != "resource_level"}
    )
    assert "nowhere" in ground(rule, a.card, no_level).reason
    unmapped = parse_rule(
        'if in_class(action.tool, "extraction") and month > 3 then forbid_tool_call("harvest")'
    )
    assert "not in" in ground(unmapped, a.card, c.card).reason
    target = parse_rule(
        'if in_class(action.tool, "sanction") and action.target == "agent_2" then forbid_tool_call("punish")'
    )
    assert "surface value" in ground(target, a.card, c.card).reason
    # a mask whose tool has no declared class does not travel
    no_tool_class = dataclasses.replace(a.card, classes={"sanction": frozenset({"punish"})})
    assert "no class" in ground(rule, no_tool_class, c.card).reason


def test_a_scar_on_abstract_variables_grounds_through_its_tools_declared_class():
    a, env, c = _cards()
    rule = parse_rule('if pool_resource_level < 50 and action.amount > 4 then forbid_tool_call("harvest")')
    g = ground(rule, a.card, c.card)
    assert g.portable and g.tool_class == "extraction"
    for d, q in _c_decisions(env, c, (40,)):
        assert {x.arg("volume") for x in d.actions if fires(g.rules[0], q, x, c.card.classes)} == set(
            range(5, 61)
        )
    phase = parse_rule('if phase == "harvest" and pool_resource_level < 50 then forbid_tool_call("harvest")')
    assert not ground(phase, a.card, c.card).portable  # the phase's name is a surface value


def test_sanction_scars_ground_through_their_class_and_variables():
    a, env, c = _cards()
    rule = parse_rule('if in_class(action.tool, "sanction") and karma < 60 then forbid_tool_call("punish")')
    (grounded,) = ground(rule, a.card, c.card).rules
    assert grounded.mask.tool_id == "fine"
    assert "standing" in repr(grounded.guard)


def test_a_relational_scar_grounds_both_feature_names_and_fires_above_the_target_share():
    a, env, c = _cards()
    rule = parse_rule('if action.amount > sustainable_share then forbid_tool_call("harvest")')
    (grounded,) = ground(rule, a.card, c.card).rules
    assert grounded == parse_rule('if action.volume > safe_yield_share then forbid_tool_call("pump")')
    for d, q in _c_decisions(env, c, (60,)):
        share = q["safe_yield_share"]
        fired = {x.arg("volume") for x in d.actions if fires(grounded, q, x, c.card.classes)}
        assert fired and fired == {
            x.arg("volume") for x in d.actions if x.name == "pump" and x.arg("volume") > share
        }
    # the right-hand name needs an abstract meaning too: without the target's fair share it does not travel
    no_share = dataclasses.replace(
        c.card, variables={k: v for k, v in c.card.variables.items() if v != "fair_share"}
    )
    assert "fair_share" in ground(rule, a.card, no_share).reason
    unmapped = parse_rule('if action.amount > month then forbid_tool_call("harvest")')
    assert "month is not in" in ground(unmapped, a.card, c.card).reason
