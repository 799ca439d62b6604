"""Static Persona baseline (paper §6.1): the rules in force are declared in the system prompt, nothing is learned.

The most generous reading: the prompt is refreshed whenever the rule set changes, so it always lists exactly the
rules in force (as the world's rule descriptions, ``Decision.rules_in_force``). It never learns from its own
failures.
"""

from __future__ import annotations

from scars.agents.memory.base import MemoryMechanism
from scars.agents.policies.base import ContextItem


class StaticPersona(MemoryMechanism):
    name = "static_persona"

    def window(self, decision):
        return (
            self.persona(),
            # the world's own sentence, as stated ("Open drawers only with empty hands."): a prefix such as "Never"
            # would turn a permission-with-condition into its opposite for a real model
            *(ContextItem("rule", f"Rule in force: {text}", polarity=-1) for text in decision.rules_in_force),
        )
