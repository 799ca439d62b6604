"""Static Persona baseline (paper §6.1): the rules in force are declared in the system prompt, nothing is learned.

The most generous reading: the prompt is refreshed whenever the rule set changes, so it always lists exactly the
rules in force (as the world's rule descriptions, ``Decision.rules_in_force``). It never learns from its own
failures.
"""

from __future__ import annotations

from scars.agents.memory.base import MemoryMechanism
from scars.agents.memory.poisoning import FabricatedExperience, command_of
from scars.agents.policies.base import ContextItem
from scars.envs.api import WorldCard


class StaticPersona(MemoryMechanism):
    name = "static_persona"

    def __init__(self, card: WorldCard) -> None:
        super().__init__(card)
        self.grafted_rules: list[
            str
        ] = []  # rule lines a co-writer of the persona prompt added (never the world's)

    def graft(self, experience: FabricatedExperience) -> int:
        """``PoisonableMemory``: its only memory is the persona prompt's rule list, so a co-writer of that prompt
        adds one rule line per ``demote``d action ("do not '<cmd>'"), shown beside the world's rules in force."""
        for action in experience.demote:
            self.grafted_rules.append(f"do not '{command_of(action)}'")
        return len(experience.demote)

    def window(self, decision):
        return (
            self.persona(),
            *(ContextItem("rule", f"Rule in force: {text}", polarity=-1) for text in self.grafted_rules),
            # the world's own sentence, as stated ("Open drawers only with empty hands."): a prefix such as "Never"
            # would turn a permission-with-condition into its opposite for a real model
            *(ContextItem("rule", f"Rule in force: {text}", polarity=-1) for text in decision.rules_in_force),
        )
