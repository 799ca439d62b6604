"""One decision step, the same for every tier (tier 1's household, tier 2's commons seats, tier 3's arena C).

A step is split at the world step, because worlds step differently: a Gymnasium env takes one action, a PettingZoo
parallel env takes every seat's action at once. ``decide`` is everything before the world step —

    guarantee monitor → context window → base policy π_0 (score, or generate told the mask first) → govern
    → optional re-plan → sample, or the written command, or the fallback a⊥ → optional pre-execution shield
    → utterance

— and ``learn`` everything after it: the executed action's ``Feedback`` to the agent and the signal record
(z_V, z_R, z_C, z_I, d_t, crossed) of its reading. Each tier builds its own prior (the household's expert, the
commons' habits) and steps its own world in between; nothing else of a decision differs between tiers, and a test
fails if a tier module governs, samples or observes on its own.

Behaviour decided here, once for every tier:

- **A written command the controller masks** (generate mode; neither built-in backend can do it, a buggy one could):
  the step records it (``Step.generated_masked``, the step tables' ``generated_masked`` column) and the choice falls
  back to sampling the governed distribution — the controller's mask holds; the written command is not executed.
- **Utterance**: a discussion action (``kind == "text"``) is its own text unless the model writes free text; every
  other action gets the policy's utterance for (action, blocked).
- **Re-plan** (``replan``, tier 1's simulated LM; one mechanism for every method): the model re-plans around whatever
  it decided not to do at this decision (``Declined``) — the step it had in mind (π_0's top choice) masked by its
  controller (reason ``mask``: H or scars), or a step its own context talked it out of (reason ``text``: the policy
  says so, ``agents.policies.base.Replanner``; a text baseline's memory is never masked, it is read). When the
  caller's ``replan(decision, declined)`` returns the route around it, π_0 is scored again with it
  (``PolicyInput.replan_prior``, followed with the simulated LM's ``replan_competence``) and governed again (score
  mode only; never under a fallback); ``Step.replan`` records the reason. ``planned`` carries the route re-planned
  at an earlier decision of the episode. ``blocked`` (what the controller masked, told to the utterance) is the
  first governing's.
- **Shield** (``shield``, the counterfactual oracle's pre-execution shield, any method that opts in): a flagged
  control action is refused and the choice redrawn from the governed distribution without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from scars.agents.api import Agent
from scars.agents.memory.base import memory_tokens
from scars.agents.policies import (
    Generation,
    Policy,
    PolicyInput,
    Replanner,
    generation_logits,
    sample_action,
)
from scars.agents.runtime.control import Governed
from scars.disequilibrium.composite import SIGNAL_NAMES
from scars.envs.api import Decision, Feedback, ProtocolWorld, Punishment, Verdict, method_turn
from scars.synthesis.dsl import Action

REPLAN_REASONS: tuple[str, ...] = ("mask", "text")
"""Why the model re-planned at a decision: its controller masked the step it had in mind, or its context talked it
out of it (the step table's ``replan`` column; empty when it did not re-plan)."""


NO_SIGNAL: Mapping[str, Any] = MappingProxyType({**dict.fromkeys(SIGNAL_NAMES), "d_t": None, "crossed": None})
"""A step's signal record when there is none (a method without the signal, or a step whose feedback was refused)."""


@dataclass(frozen=True)
class Declined:
    """What the model decided not to do at one decision (module docstring).

    masked:     the controller masked π_0's top choice: every action the controller masked (their indices).
    talked_out: the steps its context talked it out of (``Replanner.declined``; empty for other policies).
    governed:   the first governing (which rules fired: ``Governed.fired``).
    """

    masked: tuple[int, ...]
    talked_out: tuple[int, ...]
    governed: Governed

    @property
    def reason(self) -> str:
        return "mask" if self.masked else "text"


Replan = Callable[[Decision, Declined], "np.ndarray | None"]
"""``replan(decision, declined)``: the prior of the route the model re-plans around what it declined, or None when
it keeps its plan."""


def declined_steps(
    policy: Policy, inp: PolicyInput, logits: np.ndarray, governed: Governed
) -> Declined | None:
    """What the model decided not to do at this decision (``Declined``), or None when it keeps its plan."""
    scores = np.asarray(logits, dtype=np.float64)
    top = int(np.argmax(scores))
    in_mind = scores[top] > scores.min()  # a flat π_0 has no step in mind
    masked = tuple(i for i, m in enumerate(governed.masked) if m) if in_mind and governed.masked[top] else ()
    talked_out = policy.declined(inp) if isinstance(policy, Replanner) else ()
    if not masked and not talked_out:
        return None
    return Declined(masked, tuple(talked_out), governed)


class GuaranteeHook(Protocol):
    """What ``decide`` tells a guarantee monitor (``experiments.guarantees.GuaranteeMonitor``): a decision starts."""

    def before_decision(self, t: int) -> None: ...


@dataclass(frozen=True)
class Step:
    """One decision, up to the world step.

    decision:         the world's ``Decision`` (context q, admissible actions, observation).
    inp:              what the base policy saw (the re-planned prior, if the model re-planned).
    logits:           π_0's logits over the admissible actions (the re-planned ones, if it re-planned).
    governed:         the controller's governed decision (masks, probabilities, fallback).
    chosen:           the index of the executed action, or -1 for the fallback a⊥.
    action:           the executed action (the fallback action when ``chosen == -1``).
    written:          generate mode: the command the model wrote, else None.
    generated_masked: generate mode: the written command is one the controller masks (recorded, not executed).
    blocked:          the admissible actions the controller masked (first governing).
    utterance:        what the agent says with its action.
    memory_tokens:    the method's memory in context at this decision (tokens).
    enforce_seconds:  time spent governing (every governing of the step).
    shield_refused:   the shield's refused actions' texts (empty without the shield).
    proposal:         π_0's logits before any re-plan (what the model proposed first; Prop. 3 measures drift on
                      it); the same as ``logits`` when it did not re-plan.
    replan:           why the model re-planned at this decision (``REPLAN_REASONS``), or "" when it did not.
    """

    decision: Decision
    inp: PolicyInput
    logits: np.ndarray
    governed: Governed
    chosen: int
    action: Action
    written: Generation | None
    generated_masked: bool
    blocked: tuple[Action, ...]
    utterance: str
    memory_tokens: int
    enforce_seconds: float
    shield_refused: tuple[str, ...] = ()
    proposal: np.ndarray | None = None
    replan: str = ""

    @property
    def fallback(self) -> bool:
        return self.chosen < 0

    def generation_columns(self) -> dict[str, bool]:
        """The step-table columns of generate mode: written, constrained while written, written but masked."""
        return {
            "generated": self.written is not None,
            "constrained": self.written is not None and self.written.constrained,
            "generated_masked": self.generated_masked,
        }


def base_policy_step(
    policy: Policy,
    agent: Agent,
    decision: Decision,
    inp: PolicyInput,
    rng: np.random.Generator,
    generate: bool,
) -> tuple[np.ndarray, Generation | None]:
    """π_0 at one decision, in either policy mode. ``score``: the policy's logits over the admissible actions.
    ``generate``: the model is told the controller's mask before it writes (the control plane's mask does not read
    π_0), writes one unmasked command (``CommandWriter.generate``), and π_0 is that command
    (``generation_logits``); with every action masked nothing is written (the fallback follows)."""
    if not generate:
        return policy.logits(inp, rng), None
    told = agent.govern(decision, np.zeros(len(decision.actions)))
    if told.fallback is not None:
        return np.zeros(len(decision.actions)), None
    written = policy.generate(inp, tuple(bool(m) for m in told.masked))  # type: ignore[attr-defined]
    return generation_logits(len(decision.actions), written.index), written


def shield_choice(
    world: ProtocolWorld,
    decision: Decision,
    governed: Governed,
    chosen: int,
    action: Action,
    rng: np.random.Generator,
) -> tuple[int, Action, tuple[str, ...]]:
    """The pre-execution shield any method gets with ``--oracle counterfactual --shield``: the chosen control action is
    checked before it is executed; a flagged one is refused and the choice is redrawn from the governed
    distribution without it (the fallback a⊥ when nothing is left). Returns the final choice and the refused
    actions' texts."""
    refused: list[str] = []
    probs = np.asarray(governed.probs, dtype=np.float64).copy()
    while chosen >= 0 and action.is_control and world.check(decision.context, action):
        refused.append(action.text or action.name)
        probs[chosen] = 0.0
        if probs.sum() <= 0.0:
            return -1, Action("fallback", "no_op"), tuple(refused)
        chosen = sample_action(probs / probs.sum(), rng)
        action = decision.actions[chosen]
    return chosen, action, tuple(refused)


def decide(
    policy: Policy,
    agent: Agent,
    decision: Decision,
    prior: np.ndarray,
    salient_keys: Sequence[str],
    rng: np.random.Generator,
    *,
    generate: bool = False,
    monitor: GuaranteeHook | None = None,
    replan: Replan | None = None,
    shield: ProtocolWorld | None = None,
    planned: np.ndarray | None = None,
) -> Step:
    """Everything of one decision before the world step (module docstring). ``prior`` is the tier's task prior
    for the simulated LM (real backends ignore it) and ``planned`` the route it re-planned earlier in the episode
    (``PolicyInput.replan_prior``); ``rng`` is the decision's policy stream (π_0, sampling, shield).
    The whole step is the method's turn (``envs.api.method_turn``): the world's verifier answers it only through the
    protocol's view."""
    with method_turn():
        return _decide(
            policy, agent, decision, prior, salient_keys, rng, generate, monitor, replan, shield, planned
        )


def _decide(
    policy: Policy,
    agent: Agent,
    decision: Decision,
    prior: np.ndarray,
    salient_keys: Sequence[str],
    rng: np.random.Generator,
    generate: bool,
    monitor: GuaranteeHook | None,
    replan: Replan | None,
    shield: ProtocolWorld | None,
    planned: np.ndarray | None = None,
) -> Step:
    if monitor is not None:
        monitor.before_decision(decision.t)
    window = agent.window(decision)
    inp = PolicyInput(
        decision.observation,
        decision.task,
        decision.context,
        decision.actions,
        window,
        prior,
        salient_keys,
        planned,
    )
    logits, written = base_policy_step(policy, agent, decision, inp, rng, generate)
    proposal = np.asarray(logits)
    started = time.perf_counter()
    governed = agent.govern(decision, logits)
    enforce_seconds = time.perf_counter() - started
    blocked = tuple(a for a, m in zip(decision.actions, governed.masked, strict=True) if m)
    replanned = ""
    declined = (
        declined_steps(policy, inp, logits, governed)
        if replan is not None and not generate and governed.fallback is None
        else None
    )
    if declined is not None:
        new_prior = replan(decision, declined)
        if new_prior is not None:
            replanned = declined.reason
            inp = replace(inp, replan_prior=new_prior)
            logits = policy.logits(inp, rng)
            started = time.perf_counter()
            governed = agent.govern(decision, logits)
            enforce_seconds += time.perf_counter() - started
    generated_masked = written is not None and bool(governed.masked[written.index])
    if governed.fallback is not None:
        chosen, action = -1, governed.fallback
    elif written is not None and not generated_masked:
        chosen, action = written.index, decision.actions[written.index]
    else:
        chosen = sample_action(governed.probs, rng)
        action = decision.actions[chosen]
    refused: tuple[str, ...] = ()
    if shield is not None:
        chosen, action, refused = shield_choice(shield, decision, governed, chosen, action, rng)
    if action.kind == "text" and not policy.writes_text:
        utterance = action.text or ""
    else:
        utterance = policy.utter(inp, action, blocked)
    return Step(
        decision,
        inp,
        np.asarray(logits),
        governed,
        chosen,
        action,
        written,
        generated_masked,
        blocked,
        utterance,
        memory_tokens(agent, decision),
        enforce_seconds,
        refused,
        proposal,
        replanned,
    )


def learn(
    agent: Agent,
    step: Step,
    observation: str,
    reward: float,
    verdicts: Sequence[Verdict],
    punishments: Sequence[Punishment],
    won: bool,
    unsafe: tuple[Action, ...] | None = None,
) -> dict[str, Any]:
    """Everything after the world step: the executed action's ``Feedback`` (what the world said: the observation,
    the verifier's verdicts, punishments, the state's unsafe set under ``--verdicts state``) to the agent; returns
    the step's signal record (z terms, d_t, crossed; None for a method without the signal)."""
    with method_turn():
        reading = agent.observe(
            Feedback(
                step.decision,
                step.action,
                step.chosen,
                tuple(float(x) for x in step.logits),
                observation,
                reward,
                tuple(verdicts),
                tuple(punishments),
                won,
                step.utterance,
                unsafe,
                None if step.proposal is None else tuple(float(x) for x in step.proposal),
            )
        )
    if reading is None:
        return dict(NO_SIGNAL)
    return {
        **dict(zip(SIGNAL_NAMES, reading.z.as_tuple(), strict=True)),
        "d_t": reading.d,
        "crossed": reading.crossed,
    }
