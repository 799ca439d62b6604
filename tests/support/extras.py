"""Optional extras a test needs: skipped when absent locally, a failure in CI (which installs them, ``.ci/run``)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` of the ``extra`` extra; in CI (``CI`` set) a missing one fails instead of skipping."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"the {extra!r} extra is not installed")
