"""The one policy interface (SPEC §8, paper §3.1): base logits π_0 over the admissible actions.

A policy sees the observation, the structured context q, the structured admissible actions and the agent's
context window (typed text items). It returns base logits π_0(·|q, H); memory mechanisms only build the window
(text baselines) or govern the logits afterwards (scars, at the controller level). A policy never sees scars.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from synthesis.dsl import Action, Value
from synthesis.errors import ConfigError

ItemKind = Literal["persona", "rule", "memory", "reflection", "skill"]
ITEM_KINDS: tuple[str, ...] = ("persona", "rule", "memory", "reflection", "skill")


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One typed text item of the context window: persona/system text, a retrieved memory, a reflection, a skill.

    ``polarity`` says how the text relates to the actions it is relevant to: −1 for a prohibition or a recorded
    failure ("do not …"), +1 for a recommendation or a recorded success, 0 for neutral description. Baselines set it
    from what they store; the embedded policy reads it (an LLM backend reads only the text).
    """

    kind: ItemKind
    text: str
    polarity: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ITEM_KINDS:
            raise ConfigError(f"context item kind {self.kind!r} is not one of {ITEM_KINDS}")
        if self.polarity not in (-1, 0, 1):
            raise ConfigError(f"context item polarity {self.polarity!r} must be -1, 0 or 1")


@dataclass(frozen=True)
class PolicyInput:
    """What a policy is given at one decision.

    ``task_prior`` is the competence oracle of the *simulated* language model only: a per-action score of how
    much a competent agent would want each admissible action for the task (computed by the runner from the
    world's expert). Real LLM backends ignore it; they must find the task's next step themselves.
    """

    observation: str
    task: str
    context: Mapping[str, Value]
    actions: tuple[Action, ...]
    window: tuple[ContextItem, ...] = ()
    task_prior: np.ndarray | None = field(default=None, compare=False)
    salient_keys: tuple[str, ...] = ()
    """The context keys that describe the situation in this world (``WorldCard.salient_keys``)."""

    def __post_init__(self) -> None:
        if not self.actions:
            raise ConfigError("a policy needs at least one admissible action; got an empty action list")


@runtime_checkable
class Policy(Protocol):
    """Base policy π_0: one finite logit per admissible action, in the order of ``inp.actions``; the agent's short
    utterance about what it does (its text output y_t, which identity drift z_I reads, §3.2); and free text when it
    is a real model (``writes_text``: reflections and model-written rules; the embedded model uses templates)."""

    name: str
    writes_text: bool

    def logits(self, inp: PolicyInput, rng: np.random.Generator) -> np.ndarray: ...

    def utter(self, inp: PolicyInput, action: Action, blocked: Sequence[Action]) -> str: ...

    def write_text(self, prompt: str) -> str: ...


def template_utterance(inp: PolicyInput, action: Action, blocked: Sequence[Action]) -> str:
    """The embedded model's utterance: one templated sentence about what it does and what shaped it — the rules
    or memories it heeds, the actions its controller blocked, a refusal when nothing safe is left. Its style
    changes as the agent's memory and controller start to shape its conduct (what z_I measures)."""
    if action.kind == "fallback":
        return "No action is safe for me here, so I will wait."
    command = action.text or action.name
    if blocked:
        return f"I must not {blocked[0].text or blocked[0].name}; I will {command} instead."
    if any(item.polarity < 0 for item in inp.window):
        return f"Remembering what I must avoid, I will {command}."
    return f"I will {command}."


def utterance_prompt(inp: PolicyInput, action: Action) -> str:
    """What a real model is asked for its utterance (one short sentence about its chosen action)."""
    return f"{build_prompt(inp)} {action.text or action.name}\nIn one short sentence, say what you are doing and why:"


def render_window(window: Sequence[ContextItem]) -> str:
    """The context window as prompt text, grouped by kind (what an LLM backend is shown)."""
    headers = {
        "persona": "System",
        "rule": "Rules you must follow",
        "memory": "Relevant past experience",
        "reflection": "Your memory for the task below",
        "skill": "Skills you have learned",
    }
    parts: list[str] = []
    for kind in ITEM_KINDS:
        items = [it.text for it in window if it.kind == kind]
        if not items:
            continue
        if kind == "reflection":  # Reflexion's format: "Trial i: …"
            body = "\n".join(f"Trial {i}: {t}" for i, t in enumerate(items, 1))
        else:
            body = "\n".join(f"- {t}" for t in items)
        parts.append(f"{headers[kind]}:\n{body}")
    return "\n\n".join(parts)


def build_prompt(inp: PolicyInput) -> str:
    """The full prompt text an LLM backend scores admissible commands against."""
    window = render_window(inp.window)
    head = f"{window}\n\n" if window else ""
    return f"{head}Task: {inp.task}\nObservation: {inp.observation}\nNext action:"


def sample_action(probs: np.ndarray, rng: np.random.Generator) -> int:
    """Sample an index from a probability vector that may contain exact zeros (masked actions)."""
    total = float(probs.sum())
    if not np.isfinite(total) or total <= 0.0:
        raise ValueError(f"cannot sample from a distribution with total mass {total!r}")
    return int(rng.choice(len(probs), p=probs / total))
