"""scars-runtime, the public library: gate any framework's tool calls with scars (docs/runtime.md).

``open_gate`` opens a scar set from an audit ledger (fail closed if it does not verify) with a core schema H from a
rule file (``read_core_schema``) behind a ``Gate``: ``check`` / ``enforce`` / the ``tool`` decorator decide calls
through the ``ContextMapping`` (``ToolSignature`` per tool; ``ContextMappingError`` when a call does not fit); a
blocked call raises ``ScarBlocked`` (a ``GateError``) or returns a fallback; ``report_failure`` takes a ``Verdict``
and feeds the background accommodation loop (``AccommodationConfig``; its ``Outcome``); ``DecisionLog`` holds the
batched audit of decisions; ``Gate.scars`` lists the active ``Scar`` objects (control plane + audit plane:
``Provenance``, ``Scope``). Adapters live in ``scars.agents.runtime.adapters`` (OpenAI tool calling, HuggingFace and
vLLM logits processors, an MCP gate).

Importing it loads the project's rules, control plane, ledger and schema store with the standard library, numpy and
lark only — no simulator, no solver (OR-Tools loads when a merge runs), no data-frame library — and registers no
environment (``tests/agents/runtime/test_light_import.py``). The machinery behind it keeps its own modules:
``scar`` (dual-plane scars), ``control`` (``ControlPlane``: H ∪ S_t ∪ temporary masks), ``ledger`` (the hash-chained
SQLite ledger; its parts ``events``, ``head``, ``locks``, ``admission``, ``projection``, ``errors``), ``store`` (``SchemaStore``, the one writer of both), ``equilibration`` (merge and retirement
decisions handed to the store), ``accommodation`` (the background loop), ``gate`` (with ``context_mapping`` and ``decision_log``).
"""

from scars.agents.runtime.accommodation import AccommodationConfig, Outcome
from scars.agents.runtime.gate import (
    ContextMapping,
    ContextMappingError,
    DecisionLog,
    Gate,
    GateDecision,
    GateError,
    MissingLedgerError,
    ScarBlocked,
    ToolSignature,
    open_gate,
    read_core_schema,
)
from scars.agents.runtime.scar import Provenance, Scar, Scope
from scars.envs.api import Verdict

__all__ = [
    "AccommodationConfig",
    "ContextMapping",
    "ContextMappingError",
    "DecisionLog",
    "Gate",
    "GateDecision",
    "GateError",
    "MissingLedgerError",
    "Outcome",
    "Provenance",
    "Scar",
    "ScarBlocked",
    "Scope",
    "ToolSignature",
    "Verdict",
    "open_gate",
    "read_core_schema",
]
