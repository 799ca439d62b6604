"""Reflexion baseline (Shinn et al. 2023; noahshinn/reflexion): verbal reflections on failed trials.

After each episode that broke a rule or was lost, the agent writes a reflection; only the last three reach the
prompt, formatted "Your memory for the task below: Trial i: …" (``render_window``). With the embedded backend the
reflection comes from a template over the structured failure; with an LLM backend the runner can pass a
``reflect`` callable that asks the model.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.memory.base import MemoryMechanism, describe_failure
from agents.policies.base import ContextItem
from envs.api import Feedback, WorldCard


def template_reflection(failures: list[Feedback], won: bool) -> str:
    if failures:
        first = failures[0]
        what = first.action.text or first.action.name
        return f"{describe_failure(first)} Next time I must not do '{what}' or anything like it."
    return "I ran out of steps without finishing the task. Next time I should follow the task more directly."


class Reflexion(MemoryMechanism):
    name = "reflexion"

    def __init__(
        self,
        card: WorldCard,
        window_size: int = 3,
        reflect: Callable[[list[Feedback], bool], str] | None = None,
    ):
        super().__init__(card)
        self.window_size = window_size
        self.reflect = reflect or template_reflection
        self.reflections: list[str] = []
        self._failures: list[Feedback] = []

    def begin_episode(self, decision):
        super().begin_episode(decision)
        self._failures = []

    def observe(self, feedback):
        if feedback.violated:
            self._failures.append(feedback)

    def end_episode(self, won):
        if self._failures or not won:
            self.reflections.append(self.reflect(self._failures, won))

    def window(self, decision):
        recent = self.reflections[-self.window_size :]
        return (self.persona(), *(ContextItem("reflection", r, polarity=-1) for r in recent))
