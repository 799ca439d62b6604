"""SCG-MEM baseline: schema-constrained generative memory (paper §6.1).

Memories are stored and retrieved under a FIXED key schema (verb, object type, receptacle type, outcome) instead of
free text: each verified failure becomes one record keyed by the failed action's schema fields, and at decision time
the records whose keys match an admissible action's fields — on the verb and at least one of object/receptacle type
— enter the context, rendered from the schema. Records deduplicate on their key, so the memory grows with the number
of distinct failure keys, not with experience.
"""

from __future__ import annotations

from agents.memory.base import PERSONA, MemoryMechanism
from agents.policies.base import ContextItem

SCHEMA = ("verb", "obj_type", "recep_type")


def schema_key(action) -> tuple[str, str, str]:
    return (action.name, str(action.arg("obj_type", "*")), str(action.arg("recep_type", "*")))


class SCGMemory(MemoryMechanism):
    name = "scg_mem"

    def __init__(self, max_items: int = 8):
        self.max_items = max_items
        self.records: dict[tuple[str, str, str], str] = {}
        self._candidates: tuple = ()

    def observe(self, outcome):
        if outcome.violations:
            key = schema_key(outcome.action)
            self.records[key] = outcome.violations[0].message

    def set_candidates(self, actions) -> None:
        """The runner hands over the admissible actions so retrieval can match on schema keys."""
        self._candidates = tuple(actions)

    def window(self, observation, context):
        keys = {schema_key(a) for a in self._candidates}
        hits = [
            (k, msg)
            for k, msg in self.records.items()
            if any(k[0] == c[0] and (k[1] == c[1] != "*" or k[2] == c[2] != "*") for c in keys)
        ]
        items = [
            ContextItem("memory", f"MEMORY[verb={v}; object={o}; receptacle={r}] outcome=violation: {m}", -1)
            for (v, o, r), m in hits[: self.max_items]
        ]
        return (ContextItem("persona", PERSONA), *items)
