"""Voyager-style skill library baseline (Wang et al. 2023; paper §6.1).

A won episode's action sequence becomes a reusable skill (its task as the description) only if the environment's
feedback confirms it: Voyager's self-verification plus its environment-feedback loop, so a trace that broke a rule
is not a success and is not stored. When an action later draws a violation, every skill that prescribes it is
dropped (Voyager revises a skill that fails; here the revision is removal, and a clean retry adds it back). At each
decision the top-k skills whose description is most similar to the current task enter the context as "skill" items
with polarity +1: they pull the policy towards the actions they contain. Kept: additive growth from verified
successes, retrieval by description. Dropped: code skills (the actions are the skill's body).
"""

from __future__ import annotations

import numpy as np

from scars.agents.memory.base import MemoryMechanism
from scars.agents.memory.poisoning import FabricatedExperience, command_of
from scars.agents.policies.base import ContextItem
from scars.agents.text import HashingEmbedder
from scars.envs.api import WorldCard


class SkillLibrary(MemoryMechanism):
    name = "voyager"

    def __init__(self, card: WorldCard, k: int = 2, embedder=None, max_steps_per_skill: int = 12):
        super().__init__(card)
        self.k = k
        self.embedder = embedder or HashingEmbedder()
        self.max_steps_per_skill = max_steps_per_skill
        self.skills: list[tuple[str, str]] = []  # (description, body)
        self._vectors: list[np.ndarray] = []
        self._trace: list[str] = []
        self._violated = False

    def begin_episode(self, decision):
        super().begin_episode(decision)
        self._trace = []
        self._violated = False

    def observe(self, feedback):
        action = feedback.action
        command = action.text or action.name
        if (
            feedback.violated
        ):  # environment feedback: this trace is no success, and skills doing this are wrong
            self._violated = True
            keep = [i for i, (_, body) in enumerate(self.skills) if command not in body.split("; ")]
            self.skills = [self.skills[i] for i in keep]
            self._vectors = [self._vectors[i] for i in keep]
        if action.is_control and action.name not in self.card.passive_actions:
            self._trace.append(command)

    def end_episode(self, won):
        if won and self._trace and not self._violated:
            body = "; ".join(self._trace[: self.max_steps_per_skill])
            self.skills.append((self.task, body))
            self._vectors.append(self.embedder.embed(self.task))

    def graft(self, experience: FabricatedExperience) -> int:
        """``PoisonableMemory``: a fabricated verified skill — the experience's task as its description and the
        promoted command as its body, the form of a won, violation-free trace (MemoryGraft's "successful
        experience")."""
        if experience.promote is None:
            return 0
        self.skills.append((experience.task, command_of(experience.promote)))
        self._vectors.append(self.embedder.embed(experience.task))
        return 1

    def memory_state(self):
        return {"skills": [list(s) for s in self.skills]}

    def load_memory_state(self, state):
        self.skills = [(str(d), str(b)) for d, b in state["skills"]]
        self._vectors = [self.embedder.embed(d) for d, _ in self.skills]

    def window(self, decision):
        items = [self.persona()]
        if self.skills:
            sims = np.stack(self._vectors) @ self.embedder.embed(self.task)
            for i in np.argsort(-sims, kind="stable")[: self.k]:
                desc, body = self.skills[i]
                items.append(ContextItem("skill", f"Skill for '{desc}': {body}", polarity=1))
        return tuple(items)
