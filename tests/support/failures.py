"""A recorded failure in the one shape every writer uses (``synthesis.failure.Failure``), for ledger tests."""

from __future__ import annotations

from typing import Any

from scars.synthesis.dsl import Action
from scars.synthesis.failure import Failure, FailureSource


def failure_of(kind: str, name: str, step: int = 0, **q: Any) -> Failure:
    """A verified failure of the action ``kind:name`` (no arguments) in context ``q`` (plus ``step``)."""
    return Failure(
        {"step": step, **q}, (Action(kind, name),), "test_rule", FailureSource("test", 0, step, "test")
    )  # type: ignore[arg-type]
