"""Game pools are built once (issue 39, item 4): kept in the user cache, keyed by the schedule's content, the seed and
the generator version; a second tier-1 run on the same schedule and seed generates no game, and an entry that does
not verify is rebuilt, never read."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

import scars.experiments.schedules as schedules
from scars.experiments.cache import CACHE_DIR_ENV, CACHE_ENV, cache_dir
from scars.experiments.cli import main
from scars.synthesis.errors import ConfigError


def _forget_in_process() -> None:
    """What a new process starts with: no pool memoised in memory."""
    for f in (schedules.game_pool, schedules.episode_games, schedules.probe_pairs):
        f.cache_clear()


@pytest.fixture
def generated(monkeypatch, tmp_path):
    """A fresh cache folder and a counter of ``generate_game`` calls made while building pools."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(CACHE_ENV, raising=False)
    calls = []
    real = schedules.generate_game
    monkeypatch.setattr(schedules, "generate_game", lambda *a, **k: calls.append(a) or real(*a, **k))
    _forget_in_process()
    yield calls
    _forget_in_process()


def _entries(folder):
    return sorted((folder / "game_pool").glob("*.pickle"))


def test_a_second_tier1_run_on_the_same_schedule_and_seed_builds_no_game_pool(generated, tmp_path):
    folder = tmp_path / "given"
    args = ["run", "tier1", "--schedule", "smoke", "--method", "static_persona", "--episodes", "2"]
    first = CliRunner().invoke(main, ["--cache-dir", str(folder), *args, "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    built = len(generated)
    assert built > 0 and len(_entries(folder)) == 1  # --cache-dir chose the folder
    _forget_in_process()
    second = CliRunner().invoke(main, ["--cache-dir", str(folder), *args, "--out", str(tmp_path / "b")])
    assert second.exit_code == 0, second.output
    assert len(generated) == built  # the pool came from the cache
    a, b = (pd.read_parquet(tmp_path / x / "steps.parquet").drop(columns="enforce_seconds") for x in "ab")
    pd.testing.assert_frame_equal(a, b)  # the same games, the same run


def _truncate(path):
    path.write_bytes(path.read_bytes()[:-40])


def _flip_a_payload_byte(path):
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0xFF
    path.write_bytes(bytes(raw))


def _header_of_another_seed(path):
    head, _, payload = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    header["key"] = header["key"].replace('"seed":3', '"seed":4')
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)


@pytest.mark.parametrize("damage", [_truncate, _flip_a_payload_byte, _header_of_another_seed])
def test_a_corrupt_or_stale_entry_is_rebuilt_and_replaced(generated, tmp_path, damage):
    pool = schedules.game_pool("smoke", 3)
    built = len(generated)
    (entry,) = _entries(tmp_path / "cache")
    damage(entry)
    _forget_in_process()
    assert schedules.game_pool("smoke", 3) == pool and len(generated) == 2 * built  # rebuilt, not read
    _forget_in_process()  # the rebuilt entry verifies:
    assert schedules.game_pool("smoke", 3) == pool and len(generated) == 2 * built


def test_a_new_generator_version_is_a_different_entry(generated, tmp_path, monkeypatch):
    schedules.game_pool("smoke", 3)
    built = len(generated)
    monkeypatch.setattr(schedules, "GENERATOR_VERSION", schedules.GENERATOR_VERSION + 1)
    _forget_in_process()
    schedules.game_pool("smoke", 3)
    assert len(_entries(tmp_path / "cache")) == 2 and len(generated) == 2 * built


def test_an_entry_written_by_other_code_is_a_different_entry(generated, tmp_path, monkeypatch):
    """The source of the modules a pool is computed by is part of the key: a checkout whose game types changed
    without a new GENERATOR_VERSION (seen: pickled specs without a field the world now reads) never reads the
    other code's pools."""
    schedules.game_pool("smoke", 3)
    built = len(generated)
    spec_file = tmp_path / "spec.py"
    spec_file.write_text("# the game types of another checkout\n")
    real = schedules.importlib.util.find_spec

    def other_spec_source(name, *args):
        found = real(name, *args)
        if name == "scars.envs.household.spec":
            found = type("Found", (), {"origin": str(spec_file)})()
        return found

    monkeypatch.setattr(schedules.importlib.util, "find_spec", other_spec_source)
    schedules._pool_code.cache_clear()
    _forget_in_process()
    try:
        schedules.game_pool("smoke", 3)
    finally:
        schedules._pool_code.cache_clear()
    assert len(_entries(tmp_path / "cache")) == 2 and len(generated) == 2 * built


def test_the_cache_can_be_turned_off_and_a_bad_switch_is_one_line(generated, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_dir() is None
    schedules.game_pool("smoke", 3)
    assert not (tmp_path / "cache").exists()
    monkeypatch.setenv(CACHE_ENV, "on")
    args = ["run", "tier1", "--schedule", "smoke", "--method", "static_persona", "--episodes", "1"]
    _forget_in_process()
    result = CliRunner().invoke(main, ["--no-cache", *args, "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "cache").exists()
    monkeypatch.setenv(CACHE_ENV, "maybe")
    with pytest.raises(ConfigError, match="SCARS_CACHE='maybe': must be 'on' or 'off'"):
        cache_dir()
    refused = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "b")])
    assert refused.exit_code == 2 and not (tmp_path / "b").exists()
    assert refused.output.strip() == "error: SCARS_CACHE='maybe': must be 'on' or 'off'"


def test_an_unwritable_cache_folder_costs_a_rebuild_and_one_warning(generated, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocker))
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        pool = schedules.game_pool("smoke", 3)
    assert pool and blocker.read_text() == "not a folder"
