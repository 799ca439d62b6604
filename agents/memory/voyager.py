"""Voyager-style skill library baseline (Wang et al. 2023; paper §6.1).

Each won episode's action sequence is stored (Voyager's self-verification checks task success only) as a reusable skill (its task as the description), added to the
library additively — skills are never revised or removed. At each decision the top-k skills whose description is
most similar to the current task enter the context as "skill" items with polarity +1: they pull the policy towards
the actions they contain. A skill recorded before a rule changed keeps recommending the now-forbidden route: the
failure mode additive memories have.
"""

from __future__ import annotations

import numpy as np

from agents.memory.base import MemoryMechanism
from agents.policies.base import ContextItem
from agents.text import HashingEmbedder
from envs.api import WorldCard


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

    def begin_episode(self, decision):
        super().begin_episode(decision)
        self._trace = []

    def observe(self, feedback):
        action = feedback.action
        if action.is_control and action.name not in self.card.passive_actions:
            self._trace.append(action.text or action.name)

    def end_episode(self, won):
        if won and self._trace:
            body = "; ".join(self._trace[: self.max_steps_per_skill])
            self.skills.append((self.task, body))
            self._vectors.append(self.embedder.embed(self.task))

    def window(self, decision):
        items = [self.persona()]
        if self.skills:
            sims = np.stack(self._vectors) @ self.embedder.embed(self.task)
            for i in np.argsort(-sims, kind="stable")[: self.k]:
                desc, body = self.skills[i]
                items.append(ContextItem("skill", f"Skill for '{desc}': {body}", polarity=1))
        return tuple(items)
