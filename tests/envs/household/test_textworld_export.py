"""The ALFWorld exporter, the TextWorld-backed env and ``scars world export`` (issue 3; SPEC §9).

The pure parts (PDDL ids that AlfredDemangler turns back into native names, goal-text parsing, listing-order
normalisation) run everywhere; loading and playing the exported files needs the optional textworld extra.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from scars.envs.household.game_file import (
    INSTALL_HINT,
    TextWorldMissing,
    _pddl_ids,
    game_data,
    parse_task_text,
    spec_from_dict,
    spec_to_dict,
)
from scars.envs.household.generator import generate_game
from scars.envs.household.textworld_game import canonical_observation, textworld_available
from scars.envs.household.world import TASK_TYPES
from scars.experiments.cli import main as cli
from scars.synthesis.errors import WorldError

# ---------------------------------------------------------------------------------------------- pure parts


def test_pddl_ids_are_numbered_in_reverse_for_the_demangler():
    ids = _pddl_ids([(f"cabinet {k}", "cabinet") for k in range(1, 12)] + [("sinkbasin 1", "sinkbasin")])
    # Demangler: sorted ids, the FIRST of a name gets the HIGHEST number -> native "cabinet 11" is the first id.
    cabinets = sorted(v for k, v in ids.items() if k.startswith("cabinet"))
    assert cabinets[0] == ids["cabinet 11"] and cabinets[-1] == ids["cabinet 1"]
    assert ids["sinkbasin 1"] == "sink_bar_001_bar_sinkbasin"


@pytest.mark.parametrize(("name", "typ"), [("pan 3\n", "pan"), ("cabinet 12\n", "cabinet")])
def test_an_entity_name_is_matched_whole(name, typ):
    """Issue 41 #3: ``$`` matched before a trailing newline, so ``"pan 3\\n"`` passed as a name."""
    with pytest.raises(WorldError, match="is not '<type> <number>'"):
        _pddl_ids([(name, typ)])


def test_pddl_ids_reproduce_alfworld_demangler_names():
    demangler_mod = pytest.importorskip("alfworld.agents.utils.misc")
    names = [(f"cabinet {k}", "cabinet") for k in range(1, 13)] + [
        ("sinkbasin 1", "sinkbasin"),
        ("sinkbasin 2", "sinkbasin"),
        ("mug 1", "mug"),
        ("countertop 1", "countertop"),
    ]
    ids = _pddl_ids(names)

    class _Info:
        def __init__(self, ident: str) -> None:
            self.id = ident

    demangler = demangler_mod.Demangler(game_infos={i: _Info(i) for i in ids.values()})
    for name, ident in ids.items():
        assert demangler.demangle_alfred_name(ident) == name


def test_pddl_ids_reject_names_that_are_not_type_and_number():
    with pytest.raises(WorldError, match="not '<type> <number>'"):
        _pddl_ids([("big cabinet", "cabinet")])
    with pytest.raises(WorldError, match="1..1"):
        _pddl_ids([("cabinet 2", "cabinet")])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("put a clean mug in cabinet", ("pick_clean_then_place_in_recep", "mug", "cabinet")),
        ("heat some egg and put it in countertop.", ("pick_heat_then_place_in_recep", "egg", "countertop")),
        ("look at book under the desklamp", ("look_at_obj_in_light", "book", None)),
        ("find two pen and put them in drawer", ("pick_two_obj_and_place", "pen", "drawer")),
        ("put some spraybottle on toilet", ("pick_and_place_simple", "spraybottle", "toilet")),
        ("tidy up the room", ("unknown", "none", None)),
    ],
)
def test_parse_task_text(text, expected):
    assert parse_task_text(text) == expected


def test_canonical_observation_sorts_listings_only():
    a = "You arrive at countertop 1. On the countertop 1, you see a mug 2, a apple 1, and a knife 1."
    b = "You arrive at countertop 1. On the countertop 1, you see a knife 1, a mug 2, and a apple 1."
    assert canonical_observation(a) == canonical_observation(b)
    assert canonical_observation(a) != canonical_observation(a.replace("mug 2", "mug 3"))
    assert (
        canonical_observation("On the sinkbasin 1, you see nothing.")
        == "On the sinkbasin 1, you see nothing."
    )


def test_spec_round_trips_through_json():
    for task_type in TASK_TYPES:
        spec = generate_game(7, task_type)
        assert spec_from_dict(json.loads(json.dumps(spec_to_dict(spec)))) == spec
    with pytest.raises(WorldError, match="not a scars game"):
        spec_from_dict({"seed": 1})


def test_game_data_has_alfworld_layout():
    try:
        spec = generate_game(1, "pick_clean_then_place_in_recep")
        data = game_data(spec)
    except TextWorldMissing:
        pytest.skip(INSTALL_HINT)
    assert set(data) >= {"pddl_domain", "grammar", "pddl_problem", "solvable"}
    assert "UNKNOWN GOAL" not in data["grammar"]
    assert f'"Your task is to: {spec.goal_text}."' in data["grammar"]
    assert spec.goal_text in {
        t.format(obj=spec.task.obj_type, recep=spec.task.recep_type)
        for t in ("put a clean {obj} in {recep}", "clean some {obj} and put it in {recep}")
    }
    assert "(define (domain alfred)" in data["pddl_domain"]
    assert "(isClean ?o)" in data["pddl_problem"] and "(:domain alfred)" in data["pddl_problem"]


# ---------------------------------------------------------------------------------------------- playing


def test_missing_textworld_error_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "textworld" or name.startswith("textworld."):
            raise ImportError("No module named 'textworld'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    from scars.envs.household import textworld_game

    with pytest.raises(TextWorldMissing, match=r"scars-testbed\[textworld\]"):
        textworld_game._require_textworld()
    assert not textworld_game.textworld_available()


@pytest.mark.textworld
@pytest.mark.skipif(not textworld_available(), reason=INSTALL_HINT)
def test_textworld_household_env_matches_native_env_under_rules(tmp_path):
    from scars.envs.household.env import HouseholdConfig, HouseholdEnv
    from scars.envs.household.expert import expert_plan
    from scars.envs.household.game_file import export_game
    from scars.envs.household.rules import RuleSchedule, rules_for_task
    from scars.envs.household.textworld_env import TextWorldHousehold
    from scars.envs.household.world import World

    spec = generate_game(21, "pick_clean_then_place_in_recep")  # its plain expert plan breaks a library rule
    schedule = RuleSchedule(rules_for_task("pick_clean_then_place_in_recep"))
    config = HouseholdConfig(schedule=schedule)
    ref = TextWorldHousehold(export_game(spec, tmp_path / "g.tw-pddl"), config)
    native = HouseholdEnv(config)
    obs_r, info_r = ref.reset(seed=0)
    obs_n, info_n = native.reset(seed=0, options={"game": spec})
    assert canonical_observation(obs_r) == canonical_observation(obs_n)
    assert info_r["context"] == info_n["context"]
    assert info_r["goal"] == info_n["goal"]
    # The unconstrained expert plan washes a mug in the sink basin: both envs must report the same violation.
    violated = []
    for cmd in expert_plan(World.from_spec(spec)):
        out_r, out_n = ref.step(cmd), native.step(cmd)
        assert out_r[1:4] == out_n[1:4], cmd  # reward, terminated, truncated
        for key in (
            "violations",
            "active_rules",
            "admissible_commands",
            "admissible_actions",
            "context",
            "won",
        ):
            assert out_r[4][key] == out_n[4][key], (cmd, key)
        violated += [v["rule_id"] for v in out_r[4]["violations"]]
    assert violated == ["no_washing_dishware_in_sink_1"]
    assert out_r[2] and out_r[4]["won"]
    assert ref.step("fly to the moon")[0] == "Nothing happens."


def test_cli_export_writes_a_winnable_file(tmp_path):
    out = tmp_path / "game.tw-pddl"
    args = ["world", "export", "--seed", "3", "--task", "look_at_obj_in_light", str(out)]
    if textworld_available():
        args.insert(2, "--verify")
    result = CliRunner().invoke(cli, args)
    if not textworld_available():
        assert result.exit_code != 0 and "scars-testbed[textworld]" in result.output
        return
    assert result.exit_code == 0, result.output
    assert "verified: TextWorld's PDDL engine wins" in result.output
    data = json.loads(out.read_text())
    assert data["scars"]["task_type"] == "look_at_obj_in_light"
    assert "look at" in data["grammar"]


def test_cli_export_rejects_bad_path_and_seed(tmp_path):
    result = CliRunner().invoke(cli, ["world", "export", "--seed", "1", str(tmp_path / "game.json")])
    assert result.exit_code != 0 and ".tw-pddl" in result.output
    result = CliRunner().invoke(cli, ["world", "export", "--seed", "-4", str(tmp_path / "g.tw-pddl")])
    assert result.exit_code != 0 and "-4" in result.output
