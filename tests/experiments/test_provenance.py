"""Provenance and the safety of result folders (issue 16): provenance.json in every run folder, --config replays a
saved config, unique default folders, no overwrite without --overwrite, files follow the umask."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from scars.experiments.cli import main
from scars.experiments.config import Tier1Config
from scars.experiments.provenance import OutputExists, claim_out, default_out, load_config
from scars.experiments.report import atomic_write_text, write_table
from scars.synthesis.errors import ConfigError

TINY = ["run", "tier1", "--method", "static_persona", "--episodes", "1", "--schedule", "smoke"]


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prov") / "run"
    result = CliRunner().invoke(main, [*TINY, "--seed", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_every_run_folder_has_its_provenance(one_run):
    for folder in (one_run, one_run / "static_persona"):
        record = json.loads((folder / "provenance.json").read_text())
        assert len(record["git"]["commit"]) == 40 and isinstance(record["git"]["dirty"], bool)
        assert record["packages"]["numpy"] and record["packages"]["ray"] and "torch" in record["packages"]
        assert record["command"] and record["host"] and record["python"].startswith("3.")
        assert record["started"] <= record["ended"] and record["wall_seconds"] >= 0
        assert record["game_files"] is None  # generated games: no file to hash
    run = json.loads((one_run / "static_persona" / "provenance.json").read_text())
    assert (
        run["config"] == Tier1Config(method="static_persona", episodes=1, schedule="smoke", seed=2).to_dict()
    )


def test_a_saved_config_replays_and_flags_override_it(one_run, tmp_path):
    saved = one_run / "static_persona" / "config.json"
    out = tmp_path / "replay"
    result = CliRunner().invoke(main, ["run", "tier1", "--config", str(saved), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "static_persona" / "config.json").read_text()) == json.loads(saved.read_text())
    replayed = json.loads((out / "summary.json").read_text())["static_persona"]
    original = json.loads((one_run / "summary.json").read_text())["static_persona"]
    for key in ("success_rate", "svr", "violations", "steps"):  # same config, same seed: same numbers
        assert replayed[key] == original[key], key
    override = tmp_path / "override"
    result = CliRunner().invoke(
        main, ["run", "tier1", "--config", str(saved), "--seed", "5", "--out", str(override)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((override / "static_persona" / "config.json").read_text())["seed"] == 5
    # the runner's top-level config.json (one labelled config) replays too
    assert load_config(one_run / "config.json", Tier1Config)["seed"] == 2


def test_load_config_refuses_unknown_fields_and_several_configs(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"method": "rag", "temprature": 0.5}))
    with pytest.raises(ConfigError, match="'temprature'.*allowed: method"):
        load_config(bad, Tier1Config)
    many = tmp_path / "many.json"
    many.write_text(json.dumps({"rag": {"method": "rag"}, "scars": {"method": "scars"}}))
    with pytest.raises(ConfigError, match="holds 2 configs"):
        load_config(many, Tier1Config)
    result = CliRunner().invoke(main, ["run", "tier1", "--config", str(bad), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "temprature" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


def test_an_existing_run_folder_is_never_overwritten_without_overwrite(one_run, tmp_path):
    before = (one_run / "summary.json").read_bytes()
    result = CliRunner().invoke(main, [*TINY, "--out", str(one_run)])
    assert result.exit_code == 2 and "--overwrite" in result.output
    assert (one_run / "summary.json").read_bytes() == before
    out = tmp_path / "again"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    result = CliRunner().invoke(main, [*TINY, "--out", str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert not (out / "stale.txt").exists() and (out / "summary.json").is_file()
    with pytest.raises(OutputExists):
        claim_out(out, overwrite=False)


def test_default_output_folders_are_unique(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = default_out("tier1", "rag")
    first.mkdir(parents=True)
    second = default_out("tier1", "rag")
    assert first != second and first.name.startswith("tier1-rag-") and second.parent == Path("runs")
    result = CliRunner().invoke(main, TINY)
    assert result.exit_code == 0, result.output
    made = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("tier1-static_persona-")]
    assert len(made) == 1 and (made[0] / "summary.json").is_file()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_result_files_follow_the_umask(tmp_path, umask, mode):
    import pandas as pd

    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.md", "x")
        write_table(pd.DataFrame({"a": [1]}), tmp_path / "t")
    finally:
        os.umask(old)
    for name in ("a.md", "t.csv", "t.parquet"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name


def test_run_files_are_readable_by_the_group_under_the_usual_umask(one_run):
    for path in (one_run / "summary.json", one_run / "static_persona" / "steps.parquet", one_run / "svr.png"):
        assert stat.S_IMODE(path.stat().st_mode) & 0o044 == 0o044 & ~_umask(), path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_run_on_game_files_records_each_file_and_the_alfworld_versions(tmp_path):
    """Issue 27: results on ALFWorld's files survive version drift only with the versions and the files' hashes."""
    from scars.envs.household.game_file import TextWorldMissing, export_game, file_sha256
    from scars.envs.household.generator import generate_game

    games = tmp_path / "games"
    try:
        paths = [
            export_game(generate_game(seed, task), games / f"g{seed}" / "game.tw-pddl")
            for seed, task in (
                (3, "pick_heat_then_place_in_recep"),
                (4, "pick_and_place_simple"),
                (5, "pick_and_place_simple"),
            )
        ]
    except TextWorldMissing as err:
        pytest.skip(str(err))
    out = tmp_path / "run"
    args = ["run", "tier1", "--method", "static_persona", "--episodes", "2", "--schedule", "smoke"]
    result = CliRunner().invoke(main, [*args, "--game-files", str(games), "--out", str(out)])
    assert result.exit_code == 0, result.output
    record = json.loads((out / "static_persona" / "provenance.json").read_text())
    assert "alfworld" in record["packages"] and "textworld" in record["packages"]
    played = sorted(paths)[:2]  # the sorted files, the first `episodes` of them
    assert record["game_files"] == {str(p): file_sha256(p) for p in played}
    summary = json.loads((out / "summary.json").read_text())["static_persona"]
    assert summary["game_files_played"] == 2
    assert summary["game_files_by_task_type"] == {
        "pick_and_place_simple": 1,
        "pick_heat_then_place_in_recep": 1,
    }
