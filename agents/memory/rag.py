"""RAG Memory baseline (paper §6.1): past actions and their outcomes, embedded and retrieved top-k by similarity.

Every step is stored as "I did '<command>' at <where>: <outcome>" (<where>: the world's first salient context key). At each decision the k memories most similar
(cosine, under the configured embedder) to the current task, location and observation enter the context; a memory
of a violation carries polarity −1, of a step in a won episode +1, others 0 (neutral text that still takes context).
"""

from __future__ import annotations

import numpy as np

from scars.agents.memory.base import MemoryMechanism, context_query, describe_failure
from scars.agents.memory.poisoning import FabricatedExperience, command_of
from scars.agents.policies.base import ContextItem
from scars.agents.text import HashingEmbedder
from scars.envs.api import WorldCard
from scars.synthesis.errors import ConfigError


class RAGMemory(MemoryMechanism):
    name = "rag"

    def __init__(self, card: WorldCard, k: int = 5, embedder=None, max_memories: int = 20_000):
        super().__init__(card)
        if k < 1:
            raise ConfigError(f"RAG top-k = {k!r} must be >= 1")
        self.k = k
        self.embedder = embedder or HashingEmbedder()
        self.max_memories = max_memories
        self.texts: list[str] = []
        self.polarity: list[int] = []
        self.vectors: list[np.ndarray] = []
        self._episode_rows: list[int] = []

    def begin_episode(self, decision):
        super().begin_episode(decision)
        self._episode_rows = []

    def _store(self, text: str, polarity: int) -> None:
        if len(self.texts) >= self.max_memories:  # FIFO eviction keeps retrieval cost bounded
            self.texts.pop(0), self.polarity.pop(0), self.vectors.pop(0)
            self._episode_rows = [r - 1 for r in self._episode_rows if r > 0]
        self.texts.append(text)
        self.polarity.append(polarity)
        self.vectors.append(self.embedder.embed(text))

    def observe(self, feedback):
        q = feedback.decision.context
        where = " ".join(str(q[k]) for k in self.card.salient_keys[:1] if k in q)
        if feedback.violated:
            self._store(describe_failure(feedback), -1)
        else:
            what = feedback.action.text or feedback.action.name
            self._store(f"I did '{what}' at {where}: {feedback.observation[:80]}", 0)
            self._episode_rows.append(len(self.texts) - 1)

    def graft(self, experience: FabricatedExperience) -> int:
        """``PoisonableMemory``: a fabricated successful step, stored as a step of a won episode is ("I did '<cmd>'
        at <where>: <claim>", polarity +1). A RAG row names one action, so only ``promote`` is written."""
        if experience.promote is None:
            return 0
        q = experience.context
        where = " ".join(str(q[k]) for k in self.card.salient_keys[:1] if k in q)
        self._store(f"I did '{command_of(experience.promote)}' at {where}: {experience.claim}", 1)
        return 1

    def end_episode(self, won):
        if won:
            for row in self._episode_rows:
                self.polarity[row] = 1

    def memory_state(self):
        return {"texts": list(self.texts), "polarity": list(self.polarity)}

    def load_memory_state(self, state):
        self.texts, self.polarity, self.vectors = [], [], []
        for text, polarity in zip(state["texts"], state["polarity"], strict=True):
            self._store(str(text), int(polarity))

    def window(self, decision):
        items = [self.persona()]
        if self.texts:
            query = self.embedder.embed(context_query(decision, self.card))
            sims = np.stack(self.vectors) @ query
            top = np.argsort(-sims, kind="stable")[: self.k]
            items += [ContextItem("memory", self.texts[i], polarity=self.polarity[i]) for i in top]
        return tuple(items)
