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


# ---------------------------------------------------------------------------------------------- schedules as data
from scars.experiments.schedules import (  # noqa: E402
    PARAPHRASE_SUITE,
    SCHEDULE_FILES,
    game_pool,
    load_schedule_file,
)


def test_the_paper_schedule_file_is_the_paper_schedule():
    key, schedule = load_schedule_file("paper")
    paper = SCHEDULES["paper"]
    assert schedule.rule_schedule(36) == paper.rule_schedule(36)
    assert schedule.heldout == paper.heldout and dict(schedule.equivalence) == dict(paper.equivalence)
    assert schedule.world_version_change == pytest.approx(paper.world_version_change)
    assert load_schedule_file(str(SCHEDULE_FILES / "paper.toml"))[0] == key  # same content, same key


@pytest.mark.parametrize("name", [*PARAPHRASE_SUITE, "paraphrase_heldout"])
def test_every_shipped_schedule_file_loads_and_rewords_its_rules(name):
    key, schedule = load_schedule_file(name)
    texts = {r.id: r.description for r in schedule.rule_schedule(36).rules}
    paper_texts = {r.id: r.description for r in SCHEDULES["paper"].rule_schedule(36).rules}
    assert all(
        texts[i] != paper_texts[i] for i in texts.keys() & paper_texts.keys()
    )  # every paper rule reworded
    assert len(episode_games(key, 6, 0)) == 6


@pytest.mark.slow
@pytest.mark.parametrize("name", PARAPHRASE_SUITE)
def test_every_paraphrase_rule_but_the_step_bound_one_is_exposed_by_some_game(name):
    key, schedule = load_schedule_file(name)
    exposed = {r for _, v in game_pool(key, 0) for r in v}
    missing = {r.rule_id for r in schedule.rules} - exposed
    assert missing <= {"no_washing_mugs_in_any_sink_after_10"}  # its step bound is past the habitual route


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = 'x'\n", "needs at least one [[rule]]"),
        ("name = 'x'\n[[rule]]\nid = 'a'\ntext = 't'\n", "rule 'a': give exactly one of 'dsl'"),
        ("name = 'x'\n[[rule]]\nid = 'a'\ntext = 't'\ndsl = 'if then'\n", "rule 'a': dsl: "),
        (
            "name = 'x'\n[[rule]]\nid = 'a'\ntext = 't'\nbase = 'nope'\n",
            "rule 'a': base: unknown rule id 'nope'",
        ),
        (
            "name = 'x'\n[[rule]]\nid = 'a'\ntext = 't'\nbase = 'microwave_1_broken'\nfrom_fraction = 2\n",
            "rule 'a': from_fraction = 2",
        ),
        ("name = 'x'\n[[rule]]\nid = 'a'\nbase = 'microwave_1_broken'\n", "rule 'a': 'text' must be"),
        ("name = 'x'\ncolour = 1\n", "unknown field"),
        ("name = \n", "not valid TOML"),
    ],
)
def test_a_bad_schedule_file_is_one_line_naming_the_rule_and_field(tmp_path, text, message):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")) as e:
        load_schedule_file(str(path))
    assert "\n" not in str(e.value)


def test_a_missing_schedule_file_names_the_shipped_ones():
    with pytest.raises(ConfigError, match="paraphrase_a"):
        load_schedule_file("no_such_schedule")
