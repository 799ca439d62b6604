"""Rulebook baseline (AutoManual-style; Chen et al. 2024): a manual of natural-language rules, one per verified
failure, kept, merged when they say the same, and shown at every step.

Every verified failure (a ``Feedback`` with the verifier's verdicts) yields one rule per verdict. Two failures say
the same when the verifier names the same cause (``Verdict.rule_id``): the second one updates the rule already in
the book instead of adding a near-copy (AutoManual's consolidation). The whole book is in the context window at every
decision (kind ``rule``, polarity −1: a prohibition).

- With the embedded default the rule text is a documented template (``template_rule``): the world's own sentence
  for the broken rule, as the verifier stated it, followed by the commands that broke it ("Open drawers only with
  empty hands. (Broken by: 'open drawer 1' at countertop 1.)") — never a prefix that could invert the sentence.
- With a real model (``policy.writes_text``) the model writes the rule from the failure report and rewrites it when
  a failure of the same cause arrives (``agents.rule_writer.llm_rulebook``).

Kept from the paper: rules learned from the environment's verified feedback, one rule per failure, updated instead of
duplicated, the whole manual in context at every step. Dropped: AutoManual's separate Builder / Consolidator agents
and its rule types (success processes, special phenomena, useful helper methods), code-as-action planning, and the
case-conditioned prompting; rules come only from verified failures, as the information protocol gives every method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from scars.agents.memory.base import MemoryMechanism
from scars.agents.memory.poisoning import FabricatedExperience, command_of
from scars.agents.policies.base import ContextItem
from scars.envs.api import Feedback, Verdict, WorldCard

MAX_EXAMPLES = 3
"""Failed commands a template rule names (the first ones; later failures of the same cause only merge)."""

RuleWriter = Callable[[Feedback, Verdict, "str | None"], str]
"""``write(feedback, verdict, current)``: the rule text for this verified failure — a new rule (``current`` None)
or the rewrite of the rule already in the book for the same cause."""


@dataclass
class BookRule:
    """One rule of the book: the verified cause it stands for, its text, the failures that taught it."""

    cause: str
    text: str
    failures: list[str] = field(default_factory=list)


def failure_example(feedback: Feedback, card: WorldCard) -> str:
    """'<command>' at <where> (the first salient context value): what the rule's failure was."""
    q = feedback.decision.context
    what = feedback.action.text or feedback.action.name
    where = " ".join(str(q[k]) for k in card.salient_keys[:1] if k in q)
    return f"'{what}' at {where}" if where else f"'{what}'"


def template_rule(verdict: Verdict, failures: list[str]) -> str:
    """The embedded default's rule: the world's sentence as stated, then the failures that broke it."""
    return f"{verdict.message} (Broken by: {', '.join(failures[:MAX_EXAMPLES])}.)"


class Rulebook(MemoryMechanism):
    name = "rulebook"

    def __init__(self, card: WorldCard, write: RuleWriter | None = None):
        super().__init__(card)
        self.write = write
        self.rules: dict[str, BookRule] = {}

    def observe(self, feedback):
        if not feedback.violated:
            return None
        example = failure_example(feedback, self.card)
        for verdict in feedback.verdicts:
            rule = self.rules.get(verdict.rule_id)
            if rule is None:  # a new verified failure: one new rule
                rule = self.rules[verdict.rule_id] = BookRule(verdict.rule_id, "", [example])
                current = None
            else:  # the same cause again: merge into the rule that says it
                if example in rule.failures:
                    continue
                rule.failures.append(example)
                current = rule.text
            if self.write is None:
                rule.text = template_rule(verdict, rule.failures)
            else:
                rule.text = self.write(feedback, verdict, current).strip() or template_rule(
                    verdict, rule.failures
                )
        return None

    def window(self, decision):
        return (self.persona(), *(ContextItem("rule", r.text, polarity=-1) for r in self.rules.values()))

    def graft(self, experience: FabricatedExperience) -> int:
        """``PoisonableMemory``: the book holds rules learned from verified failures, so the fabricated experience is
        written as one rule per action it ``demote``s, in the template's form ("… (Broken by: '<command>'.)"); the
        book cannot state a recommendation, so ``promote`` is not written."""
        for action in experience.demote:
            what = command_of(action)
            cause = f"grafted:{len(self.rules)}"
            self.rules[cause] = BookRule(
                cause, f"Do not do '{what}': it breaks a safety rule. (Broken by: '{what}'.)", [f"'{what}'"]
            )
        return len(experience.demote)

    def stats(self):
        return {"rulebook_rules": len(self.rules)}

    def memory_state(self):
        return {
            "rules": [
                {"cause": r.cause, "text": r.text, "failures": list(r.failures)} for r in self.rules.values()
            ]
        }

    def load_memory_state(self, state):
        self.rules = {
            str(r["cause"]): BookRule(str(r["cause"]), str(r["text"]), [str(f) for f in r["failures"]])
            for r in state["rules"]
        }
