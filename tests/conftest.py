"""Shared fixtures. Ray starts once per test session (its start-up costs seconds)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory):
    """Every test's user cache (game pools, ``scars.experiments.cache``) is one temporary folder of the session, never
    ``~/.cache/scars``: CI stays hermetic, and the processes the tests start (Ray workers, the CLI) inherit it."""
    from scars.experiments.cache import CACHE_DIR_ENV, CACHE_ENV

    saved = {k: os.environ.get(k) for k in (CACHE_DIR_ENV, CACHE_ENV)}
    os.environ[CACHE_DIR_ENV] = str(tmp_path_factory.mktemp("user-cache"))
    os.environ.pop(CACHE_ENV, None)
    yield Path(os.environ[CACHE_DIR_ENV])
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance with 2 CPUs shared by every test that needs it."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
