"""The runtime's errors, all under the one hierarchy of ``synthesis.errors`` (``ScarsError``).

Ledger: ``ResurrectionRefused`` and ``LifecycleError`` (an admission policy's or lifecycle's refusal),
``MissingLedgerError`` (a deleted, emptied or replaced database), ``ForeignWriteError`` (another process wrote
a ledger its owner folds), ``SchemaIntegrityError`` (a self-schema whose
ledger does not verify). Gate: ``GateError`` and its two kinds,
``ContextMappingError`` (a call that does not fit the mapping) and ``ScarBlocked`` (a call a rule forbids).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scars.synthesis.errors import LedgerError, LedgerIntegrityError, ScarsError

if TYPE_CHECKING:
    from scars.agents.runtime.gate import GateDecision


class ResurrectionRefused(LedgerError):
    """A retired/revoked scar was re-admitted without evidence never seen before for its id (seed 000 §3.4)."""


class LifecycleError(LedgerError):
    """A lifecycle event does not apply to its subject's state (retiring an inactive scar, …)."""


class MissingLedgerError(LedgerIntegrityError):
    """The ledger's database is missing, emptied or replaced although its head file (or its key next to it) says
    events existed, or it was deleted or replaced under an open handle: a tamper, never a fresh start."""


class ForeignWriteError(LedgerIntegrityError):
    """Another writer appended events to a ledger whose owner keeps state folded from it (a ``SchemaStore``: its
    control plane is the fold of the events it wrote): that state is no longer the fold, so the owner stops (fail
    closed). The message names the foreign events."""


class SchemaIntegrityError(LedgerError):
    """The ledger behind a self-schema does not verify: the agent refuses to load it (fail closed)."""


class GateError(ScarsError):
    """Base of the gate's errors: each one means the call did not reach the tool."""


class ContextMappingError(GateError, ValueError):
    """A tool call (or context) that does not fit the declared context mapping; the call is blocked."""


class ScarBlocked(GateError):
    """A rule of H or an active scar forbids this call in this context; it did not reach the tool."""

    def __init__(self, decision: GateDecision) -> None:
        self.decision = decision
        super().__init__(
            f"tool call {decision.tool!r} blocked in this context by rule(s) {', '.join(decision.fired)}"
        )
