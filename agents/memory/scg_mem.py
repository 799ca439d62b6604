"""SCG-MEM baseline: schema-constrained generative memory (paper §6.1).

Memories are stored and retrieved under a FIXED key schema (the verb or tool, then the world's schema arguments —
``WorldCard.schema_args``, e.g. object type and receptacle type — and the outcome) instead of
free text: each verified failure becomes one record keyed by the failed action's schema fields, and at decision time
the records whose keys match an admissible action's fields — on the verb and at least one schema argument — enter
the context, rendered from the schema. Records deduplicate on their key, so the memory grows with the number
of distinct failure keys, not with experience.
"""

from __future__ import annotations

from agents.memory.base import MemoryMechanism
from agents.policies.base import ContextItem
from envs.api import WorldCard
from synthesis.dsl import Action


class SCGMemory(MemoryMechanism):
    name = "scg_mem"

    def __init__(self, card: WorldCard, max_items: int = 8):
        super().__init__(card)
        self.max_items = max_items
        self.records: dict[tuple[str, ...], str] = {}

    def schema_key(self, action: Action) -> tuple[str, ...]:
        return (action.name, *(str(action.arg(k, "*")) for k in self.card.schema_args))

    def observe(self, feedback):
        if feedback.violated:
            self.records[self.schema_key(feedback.action)] = feedback.verdicts[0].message

    def _matches(self, key: tuple[str, ...], candidate: tuple[str, ...]) -> bool:
        return key[0] == candidate[0] and any(
            k == c != "*" for k, c in zip(key[1:], candidate[1:], strict=True)
        )

    def window(self, decision):
        keys = {self.schema_key(a) for a in decision.actions}
        hits = [(k, msg) for k, msg in self.records.items() if any(self._matches(k, c) for c in keys)]
        fields = ("verb", *self.card.schema_args)
        items = [
            ContextItem(
                "memory",
                "MEMORY["
                + "; ".join(f"{f}={v}" for f, v in zip(fields, k, strict=True))
                + f"] outcome=violation: {m}",
                -1,
            )
            for k, m in hits[: self.max_items]
        ]
        return (self.persona(), *items)
