"""scars-runtime, the public library: gate any framework's tool calls with scars (docs/runtime.md).

``open_gate`` opens a scar set from an audit ledger (fail closed if it does not verify) with a core schema H from a
rule file (``read_core_schema``) behind a ``Gate``: ``check`` / ``enforce`` / the ``tool`` decorator decide calls
through the ``ContextMapping`` (``ToolSignature`` per tool; ``ContextMappingError`` when a call does not fit); a
blocked call raises ``ScarBlocked`` (a ``GateError``) or returns a fallback; ``report_failure`` takes a ``Verdict``
and feeds the background accommodation loop (``AccommodationConfig``; its ``Outcome``); ``DecisionLog`` holds the
batched audit of decisions; ``Gate.scars`` lists the active ``Scar`` objects (control plane + audit plane:
``Provenance``, ``Scope``). Adapters live in ``scars.agents.runtime.adapters`` (OpenAI tool calling, HuggingFace and
vLLM logits processors, an MCP gate).

Importing the package loads only the table below; a name loads its module when first read (``synthesis.lazy``).
``from scars.agents.runtime import Gate, open_gate`` loads the project's rules, control plane, ledger and schema
store with the standard library and lark only — no numpy (it loads when logits are governed), no simulator, no
solver, no data-frame library — and registers no environment (``tests/agents/runtime/test_light_import.py``); the
learner (the disequilibrium monitor, MCTS, fragments' search, the merge) loads with the first failure the gate
accommodates. The machinery behind it keeps its own modules: ``scar`` (dual-plane scars), ``control``
(``ControlPlane``: H ∪ S_t ∪ temporary masks), ``ledger`` (the hash-chained SQLite ledger; its parts ``events``,
``head``, ``locks``, ``admission``, ``projection``, ``errors``), ``store`` (``SchemaStore``, the one writer of both),
``equilibration`` (merge and retirement decisions handed to the store), ``accommodation`` (the background loop),
``gate`` (with ``context_mapping`` and ``decision_log``).
"""

from scars.synthesis.lazy import lazy_exports

_EXPORTS = {
    "scars.agents.runtime.accommodation": ("AccommodationConfig", "Outcome"),
    "scars.agents.runtime.gate": (
        "ContextMapping",
        "ContextMappingError",
        "DecisionLog",
        "Gate",
        "GateDecision",
        "GateError",
        "MissingLedgerError",
        "ScarBlocked",
        "ToolSignature",
        "open_gate",
        "read_core_schema",
    ),
    "scars.agents.runtime.scar": ("Provenance", "Scar", "Scope"),
    "scars.envs.api": ("Verdict",),
}
"""The public names by module; each module loads when one of its names is first read (``synthesis.lazy``)."""
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
