"""The schedule registry (Melting Pot style): every name resolves, nothing duplicated, nothing unused."""

from __future__ import annotations

import pytest

from scars.envs.household.rules import RULE_LIBRARY
from scars.experiments.schedules import EXPERIMENT_RULES, SCHEDULES, episode_games, lookup_rule
from scars.synthesis.errors import ConfigError


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_every_schedule_resolves_and_is_consistent(name):
    schedule = SCHEDULES[name]
    ids = [r.rule_id for r in schedule.rules]
    assert len(ids) == len(set(ids)), "a rule listed twice"
    for rule_id in ids:
        assert lookup_rule(rule_id).id == rule_id
    assert set(schedule.heldout) <= set(ids)
    assert set(schedule.equivalence) <= set(ids)
    assert all(0.0 <= r.from_fraction < 1.0 for r in schedule.rules)
    games = episode_games(name, 6, 0)
    assert len(games) == 6 and games == episode_games(name, 6, 0)  # same seed, same games


def test_experiment_rules_do_not_shadow_the_library_and_are_all_used():
    assert not set(EXPERIMENT_RULES) & set(RULE_LIBRARY)
    used = {r.rule_id for s in SCHEDULES.values() for r in s.rules}
    assert set(EXPERIMENT_RULES) <= used


def test_unknown_rule_is_named():
    with pytest.raises(ConfigError, match="no_such_rule"):
        lookup_rule("no_such_rule")


def test_registry_is_read_only():
    with pytest.raises(TypeError):
        SCHEDULES["mine"] = SCHEDULES["paper"]  # type: ignore[index]
