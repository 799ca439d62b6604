"""Optional extras a test needs: skipped when absent, a failure where the extras are required — ``.ci/run`` sets
``SCARS_REQUIRE_EXTRAS=1`` for the phases that run after it installed them (README's test command runs before, in a
fresh venv without them, and skips these tests)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRE_EXTRAS = "SCARS_REQUIRE_EXTRAS"


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` of the ``extra`` extra; with ``SCARS_REQUIRE_EXTRAS`` set a missing one fails instead of
    skipping."""
    if os.environ.get(REQUIRE_EXTRAS):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"the {extra!r} extra is not installed")
