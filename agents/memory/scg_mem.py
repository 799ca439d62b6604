"""SCG-MEM baseline: schema-constrained generative memory (paper §6.1).

Every verified failure is written as one structured memory under a FIXED schema instead of free text:

    situation — the world's salient context values (``WorldCard.salient_keys``, e.g. where the agent is, what it holds)
    action    — the verb or tool and the world's schema arguments (``WorldCard.schema_args``, e.g. object and
                receptacle type)
    outcome   — "violation"
    rule      — the verifier's rule id and its text

Memories deduplicate on (action, rule), so the memory grows with distinct failures, not with experience. Retrieval is
by schema match, field by field: a memory enters the context when an admissible action matches its action fields
(same verb and at least one schema argument), or when the current situation matches its situation on at least one
field and an admissible action has its verb. Memories are rendered from the schema, most specific match first.
"""

from __future__ import annotations

from dataclasses import dataclass

from scars.agents.memory.base import MemoryMechanism
from scars.agents.memory.poisoning import FabricatedExperience, command_of
from scars.agents.policies.base import ContextItem
from scars.envs.api import WorldCard
from scars.synthesis.dsl import Action


@dataclass(frozen=True)
class SchemaMemory:
    situation: tuple[tuple[str, str], ...]
    action: tuple[str, ...]
    outcome: str
    rule: str
    rule_text: str


class SCGMemory(MemoryMechanism):
    name = "scg_mem"

    def __init__(self, card: WorldCard, max_items: int = 8):
        super().__init__(card)
        self.max_items = max_items
        self.records: dict[tuple[tuple[str, ...], str], SchemaMemory] = {}

    def schema_key(self, action: Action) -> tuple[str, ...]:
        return (action.name, *(str(action.arg(k, "*")) for k in self.card.schema_args))

    def _situation(self, context) -> tuple[tuple[str, str], ...]:
        return tuple((k, str(context[k])) for k in self.card.salient_keys if k in context)

    def observe(self, feedback):
        if feedback.violated:
            key = self.schema_key(feedback.action)
            situation = self._situation(feedback.decision.context)
            for v in feedback.verdicts:
                self.records[(key, v.rule_id)] = SchemaMemory(
                    situation, key, "violation", v.rule_id, v.message
                )

    def graft(self, experience: FabricatedExperience) -> int:
        """``PoisonableMemory``: the schema holds violations only, so each ``demote``d action becomes one schema
        record (its situation from the experience's context, outcome "violation", a reported rule) — the same
        fields, deduplication and retrieval as the agent's own records."""
        situation = self._situation(experience.context)
        for action in experience.demote:
            key = self.schema_key(action)
            text = f"'{command_of(action)}' is not allowed here"
            self.records[(key, "reported")] = SchemaMemory(situation, key, "violation", "reported", text)
        return len(experience.demote)

    def _action_match(self, key: tuple[str, ...], candidate: tuple[str, ...]) -> bool:
        return key[0] == candidate[0] and any(
            k == c != "*" for k, c in zip(key[1:], candidate[1:], strict=True)
        )

    def _render(self, m: SchemaMemory) -> str:
        fields = ("verb", *self.card.schema_args)
        situation = "; ".join(f"{k}={v}" for k, v in m.situation) or "-"
        action = "; ".join(f"{f}={v}" for f, v in zip(fields, m.action, strict=True))
        return (
            f"MEMORY[situation: {situation} | action: {action} | outcome: {m.outcome} | rule: {m.rule_text}]"
        )

    def memory_state(self):
        return {
            "records": [
                {
                    "situation": [list(kv) for kv in m.situation],
                    "action": list(m.action),
                    "outcome": m.outcome,
                    "rule": m.rule,
                    "rule_text": m.rule_text,
                }
                for m in self.records.values()
            ]
        }

    def load_memory_state(self, state):
        self.records = {}
        for r in state["records"]:
            m = SchemaMemory(
                tuple((str(k), str(v)) for k, v in r["situation"]),
                tuple(str(x) for x in r["action"]),
                str(r["outcome"]),
                str(r["rule"]),
                str(r["rule_text"]),
            )
            self.records[(m.action, m.rule)] = m

    def window(self, decision):
        keys = {self.schema_key(a) for a in decision.actions}
        verbs = {k[0] for k in keys}
        here = set(self._situation(decision.context))
        by_action, by_situation = [], []
        for m in self.records.values():
            if any(self._action_match(m.action, c) for c in keys):
                by_action.append(m)
            elif m.action[0] in verbs and here & set(m.situation):
                by_situation.append(m)
        hits = (by_action + by_situation)[: self.max_items]
        return (self.persona(), *(ContextItem("memory", self._render(m), -1) for m in hits))
