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
            *(ContextItem("rule", f"Never {text}", polarity=-1) for text in decision.rules_in_force),
        )
