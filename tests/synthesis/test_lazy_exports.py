"""Lazy package exports (``synthesis.lazy``): every listed name resolves to its module's object, an unknown name is
an ``AttributeError`` naming it, and ``dir()`` lists the names before they load."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ("scars.synthesis", "scars.agents.runtime")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_its_modules_own(package):
    pkg = importlib.import_module(package)
    assert set(pkg.__all__) <= set(dir(pkg))
    for module, names in pkg._EXPORTS.items():
        for name in names:
            assert getattr(pkg, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'NoSuchName'"):
        pkg.NoSuchName  # noqa: B018


def test_a_submodule_still_imports_through_the_package():
    from scars.synthesis import mcts

    assert mcts.__name__ == "scars.synthesis.mcts"
