"""Lazy exports for a package's ``__init__`` (PEP 562): a name is imported from its module when first read.

    __getattr__, __dir__ = lazy_exports(__name__, {"scars.synthesis.mcts": ("SearchConfig", "synthesize"), ...})

``from package import Name`` and ``package.Name`` work as with eager imports; the module behind a name loads on
first use, and the name is then kept in the package (later reads cost nothing). The table is the one list of the
package's exports (its ``__all__`` is derived from it); ``tests/synthesis/test_lazy_exports.py`` resolves every name.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, table: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` exporting each module's names in ``table``."""
    where = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
