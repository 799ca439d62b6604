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

from scars.synthesis.dsl import Action, Value
from scars.synthesis.errors import ConfigError

ItemKind = Literal["persona", "rule", "memory", "reflection", "skill", "insight"]
PolicyMode = Literal["score", "generate"]
POLICY_MODES: tuple[str, ...] = ("score", "generate")
"""How a real model chooses: ``score`` — the log-likelihood of every admissible command is its base logit and the
controller masks afterwards; ``generate`` — the model writes its command, told the unmasked commands beforehand
(a ``CommandWriter``), so a masked command cannot be written."""
GENERATED_MARGIN = 20.0
"""In generate mode π_0 is the written command: logit 0 for it, −GENERATED_MARGIN for every other command (finite,
so the signals that read π_0 still see the alternatives the model had)."""
ITEM_KINDS: tuple[str, ...] = ("persona", "rule", "memory", "reflection", "skill", "insight")


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
    replan_prior: np.ndarray | None = field(default=None, compare=False)
    """Simulated LM only, like ``task_prior``: the expert's route around what the model decided not to do earlier in
    the episode or at this decision (a step a controller masked, or one its context talked it out of); the simulated
    LM mixes it into ``task_prior`` by its ``replan_competence``. None: nothing declined yet. Real backends ignore it
    (a real model re-plans by itself, from what it reads)."""

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


@runtime_checkable
class Replanner(Protocol):
    """A policy that can say which step its own context talked it out of (the embedded simulated LM): the index
    of each admissible action it had in mind under its task prior and no longer prefers once it has read its
    context window. The decision step re-plans around those exactly as around a step the controller masked
    (``experiments.loop``); a real model needs no such hook — it re-plans by itself."""

    def declined(self, inp: PolicyInput) -> tuple[int, ...]: ...


@dataclass(frozen=True, slots=True)
class Generation:
    """The command a model wrote at one decision (generate mode).

    index:       position of the written command in ``PolicyInput.actions``.
    text:        the text the model produced (decoded tokens or the server's answer).
    constrained: the mask was enforced while the model wrote — a logits processor over the unmasked commands, or
                 a server's structured-output choice — rather than checked only afterwards.
    """

    index: int
    text: str
    constrained: bool


@runtime_checkable
class CommandWriter(Protocol):
    """A policy that can write its command under the scars mask (``policy_mode = "generate"``).

    ``masked[i]`` is True when the controller forbids ``inp.actions[i]`` at this decision; the writer is given the
    mask BEFORE it chooses and must return an unmasked command (at least one is unmasked: when every command is
    masked the caller takes the safe fallback instead of asking)."""

    def generate(self, inp: PolicyInput, masked: Sequence[bool]) -> Generation: ...


def generation_logits(n: int, index: int) -> np.ndarray:
    """π_0 of a written command (generate mode): 0 for it, −``GENERATED_MARGIN`` for the ``n − 1`` others."""
    logits = np.full(n, -GENERATED_MARGIN)
    logits[index] = 0.0
    return logits


def unmasked_commands(inp: PolicyInput, masked: Sequence[bool]) -> list[tuple[int, str]]:
    """(index, command text) of every admissible command the mask leaves; a ``ConfigError`` when none is left or
    the mask does not match the actions."""
    if len(masked) != len(inp.actions):
        raise ConfigError(
            f"mask of length {len(masked)} does not match {len(inp.actions)} admissible actions"
        )
    allowed = [
        (i, a.text or a.name) for i, (a, m) in enumerate(zip(inp.actions, masked, strict=True)) if not m
    ]
    if not allowed:
        raise ConfigError(
            "every admissible command is masked; the caller must take the safe fallback instead"
        )
    return allowed


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
        "insight": "Insights from your experience",
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
