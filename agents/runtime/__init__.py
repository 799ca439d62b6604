"""The scar runtime (paper §3.1, §4.2; SPEC §1, §5): dual-plane scars, online enforcement, the audit ledger.

- ``scar``:    ``Scar`` = control plane (rule: guard, mask) + audit plane (evidence, ``Provenance``, ``Scope``).
- ``control``: ``ControlPlane`` enforces H ∪ S_t ∪ temporary masks on candidate actions and base logits.
- ``ledger``:  ``Ledger``, the append-only, bitemporal, hash-chained SQLite store the control plane projects from
  (its parts: ``events`` the event record and its hash, ``head`` the head file / key / anchors, ``locks`` the writer
  lock, ``admission`` the no-resurrection policy, ``projection`` S_t and the control plane as folds of events).
- ``store``:   ``SchemaStore``, the one owner of both: typed commands append events and apply them to the plane.
- ``errors``:  the runtime's errors (ledger refusals, ``SchemaIntegrityError``, the gate's errors).

``scars-runtime``, the public library (README: "scars-runtime: gate any framework's tool calls"): this package is its
one import path. ``open_gate`` opens a scar set from a ledger (fail closed if it does not verify) with a core schema H
from a rule file (``read_core_schema``) behind a ``Gate``: ``check`` / ``enforce`` / the ``tool`` decorator decide
calls through the ``ContextMapping`` (``ToolSignature`` per tool; ``ContextMappingError`` when a call does not fit);
a blocked call raises ``ScarBlocked`` or returns a fallback; ``report_failure`` feeds the background accommodation
loop (``AccommodationConfig``, ``Outcome``); ``DecisionLog`` (``decision_log``) holds the batched audit of decisions;
``context_mapping`` holds ``ContextMapping`` and ``ToolSignature``. Adapters live in
``agents.runtime.adapters`` (OpenAI tool calling, HuggingFace and vLLM logits processors, an MCP gate). The gate's
names are loaded on first use (``agents.equilibration`` imports this package).
"""

from scars.agents.runtime.control import ControlPlane, ControlPlaneError, Expired, Governed
from scars.agents.runtime.ledger import (
    EVENT_TYPES,
    Event,
    Ledger,
    LifecycleError,
    ResurrectionRefused,
    TemporaryMask,
    VerifyReport,
)
from scars.agents.runtime.scar import Provenance, Scar, Scope, canonical_json, scar_id_of
from scars.agents.runtime.store import SchemaIntegrityError, SchemaStore

_GATE_NAMES = {
    "AccommodationConfig": "scars.agents.runtime.accommodation",
    "Outcome": "scars.agents.runtime.accommodation",
    "ContextMapping": "scars.agents.runtime.context_mapping",
    "ContextMappingError": "scars.agents.runtime.errors",
    "DecisionLog": "scars.agents.runtime.decision_log",
    "Gate": "scars.agents.runtime.gate",
    "GateDecision": "scars.agents.runtime.gate",
    "GateError": "scars.agents.runtime.errors",
    "MissingLedgerError": "scars.agents.runtime.errors",
    "ScarBlocked": "scars.agents.runtime.errors",
    "ToolSignature": "scars.agents.runtime.context_mapping",
    "open_gate": "scars.agents.runtime.gate",
    "read_core_schema": "scars.agents.runtime.gate",
    "Verdict": "scars.envs.api",
}


def __getattr__(name: str):
    module = _GATE_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'scars.agents.runtime' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    *_GATE_NAMES,
    "EVENT_TYPES",
    "ControlPlane",
    "ControlPlaneError",
    "Event",
    "Expired",
    "Governed",
    "Ledger",
    "LifecycleError",
    "Provenance",
    "ResurrectionRefused",
    "SchemaIntegrityError",
    "SchemaStore",
    "Scar",
    "Scope",
    "TemporaryMask",
    "VerifyReport",
    "canonical_json",
    "scar_id_of",
]
