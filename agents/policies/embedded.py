"""The embedded default policy: a *simulated* language-model policy (no model, no network).

This is a model of an LLM agent, not an LLM. It exists so that the text-memory baselines are meaningful without a
model: its behaviour is an explicit, documented model of how a competent but habit-driven LLM reads its context
window. Every parameter is a field of :class:`SimulatedLMConfig`, documented with the behaviour it models.

Logits over the admissible actions a_1..a_n are

    l(a) = task_gain · prior(a)                                  (competence: the expert oracle's task prior)
         + Σ_items  compliance · influence_gain · polarity(item) · rel(item, a) · dilution(window)
    then divided by ``temperature`` and mixed with a uniform ``exploration`` share.

- prior(a) ∈ [0, 1] comes from the runner (``PolicyInput.task_prior``): 1 for the habitual next step of the task
  (the route a model trained on ordinary household text would take: clean in the sink, put dishes straight in the
  cabinet), a lower value for the steps of compliant alternative routes, 0 otherwise. The habit is what makes the
  policy break a rule before it has learned it.
- rel(item, a) = max(0, cos(e(item), e(a)) − max(relevance_threshold, mean_b cos(e(item), e(b)))) /
  (1 − relevance_threshold): the similarity between the item's text and the action's command plus the salient
  context (offline embedding, ``agents.text.HashingEmbedder``), taken contrastively — an item acts on the actions
  that stand out for it among the admissible ones, as attention would. An item about "cup in the sink" is very
  relevant to "clean cup 1 with sinkbasin 1", barely to "clean cup 1 with bathtubbasin 1", and not at all to
  "go to fridge 1".
- polarity ∈ {−1, 0, +1}: prohibitions and recorded failures push the relevant actions down, recommendations and
  recorded successes push them up; a neutral item pushes nothing but still takes up context. A prohibition acts
  only on the actions it describes best (``prohibition_focus``): it lowers the forbidden command and leaves the
  compliant alternatives on the same topic alone.
- dilution(window) = 1 / (1 + window_tokens / dilution_tokens): a long context dilutes every item's influence (the
  "lost in the middle" effect), so irrelevant or poisoned items distract from the relevant ones.

**Re-planning** (one mechanism for every method): the model re-plans around whatever it decided not to do — a step
its controller masked (H or scars), or a step its context talked it out of (``declined``: the top step of its prior
that the window's push made it no longer prefer). The decision step (``experiments.loop``) asks the tier for the
expert's route around everything the model declined in the episode (``PolicyInput.replan_prior``), and the model
follows it with competence ``replan_competence``:

    prior(a) = (1 − replan_competence) · task_prior(a) + replan_competence · replan_prior(a)

so 1 plans like the world's expert around what it knows not to do, 0 keeps its habitual plan (it avoids the one
declined step at that decision, by the alternative in ``task_prior``, and walks back into the same route).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scars.agents.policies.base import PolicyInput, template_utterance
from scars.agents.text import HashingEmbedder, count_tokens
from scars.synthesis.dsl import Action
from scars.synthesis.errors import ConfigError


@dataclass(frozen=True)
class SimulatedLMConfig:
    task_gain: float = 4.0
    """How strongly the model follows the task (its competence). High: it rarely wanders off the expert's route."""
    temperature: float = 0.7
    """Softmax temperature of its choices. Low: near-greedy; high: erratic."""
    exploration: float = 0.03
    """Share of probability spread uniformly over admissible actions (slips, random tries)."""
    compliance: float = 1.0
    """How much text in its context steers it (0: ignores its context window entirely; 1: fully heeds it)."""
    influence_gain: float = 12.0
    """Logit shift a fully relevant item applies at compliance 1 and no dilution."""
    relevance_threshold: float = 0.15
    """Cosine similarity under which an item is judged irrelevant to an action."""
    dilution_tokens: float = 600.0
    """Context length (tokens) at which each item's influence is halved."""
    prohibition_focus: float = 0.8
    """A prohibition (negative item) acts only on the actions it describes best — relevance at least this share of
    its best match among the admissible actions: a model that reads "do not wash mugs in sinkbasin 1" understands
    which command is forbidden and does not shy away from washing the mug in another basin (1.0: only the best
    match; 0.0: every relevant action, the topic-avoidance of a bag-of-words reader)."""

    replan_competence: float = 1.0
    """How well the model finds a compliant route once it knows what not to do (a step its controller masked, or one
    its context talked it out of), in [0, 1]. It models a real LLM told "that action is not allowed" (an error from
    its tool layer, or a rule in its prompt that forbids the step it was about to take): a capable model plans a new
    route around it and keeps to it for the rest of the task (1), a weak one returns to its habitual route and runs
    into the same refusal again (0). Swept by ``scars sensitivity`` (0, 0.5, 1)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.replan_competence <= 1.0:
            raise ConfigError(
                f"SimulatedLMConfig.replan_competence = {self.replan_competence!r} must be in [0, 1]"
            )
        for name in ("task_gain", "influence_gain", "dilution_tokens"):
            if getattr(self, name) < 0:
                raise ConfigError(f"SimulatedLMConfig.{name} = {getattr(self, name)!r} must be >= 0")
        if self.temperature <= 0:
            raise ConfigError(f"SimulatedLMConfig.temperature = {self.temperature!r} must be > 0")
        if not 0.0 <= self.exploration < 1.0:
            raise ConfigError(f"SimulatedLMConfig.exploration = {self.exploration!r} must be in [0, 1)")
        if not 0.0 <= self.compliance <= 1.0:
            raise ConfigError(f"SimulatedLMConfig.compliance = {self.compliance!r} must be in [0, 1]")
        if not 0.0 <= self.prohibition_focus <= 1.0:
            raise ConfigError(
                f"SimulatedLMConfig.prohibition_focus = {self.prohibition_focus!r} must be in [0, 1]"
            )
        if not 0.0 <= self.relevance_threshold < 1.0:
            raise ConfigError(
                f"SimulatedLMConfig.relevance_threshold = {self.relevance_threshold!r} must be in [0, 1)"
            )


def action_description(action: Action, context, salient_keys=()) -> str:
    """The text the relevance model compares items against: the command plus the salient context (the world's
    ``WorldCard.salient_keys``, handed over in ``PolicyInput.salient_keys``)."""
    command = action.text or " ".join([action.name, *(str(v) for _, v in action.args if isinstance(v, str))])
    salient = [str(context[k]) for k in salient_keys if k in context and str(context[k]) not in command]
    return " ".join([command, *salient])


class SimulatedLM:
    """The embedded default policy (see module docstring). Deterministic given its input and rng."""

    name = "embedded"
    writes_text = False

    def __init__(
        self, config: SimulatedLMConfig = SimulatedLMConfig(), embedder: HashingEmbedder | None = None
    ):
        self.config = config
        self.embedder = embedder or HashingEmbedder()

    def influence(self, inp: PolicyInput) -> np.ndarray:
        """The context window's push on each action's logit (before temperature)."""
        cfg = self.config
        n = len(inp.actions)
        if not inp.window or cfg.compliance == 0.0:
            return np.zeros(n)
        window_tokens = sum(count_tokens(it.text) for it in inp.window)
        dilution = 1.0 / (1.0 + window_tokens / cfg.dilution_tokens) if cfg.dilution_tokens > 0 else 1.0
        signed = [it for it in inp.window if it.polarity != 0]
        if not signed:
            return np.zeros(n)
        items = self.embedder.embed_many([it.text for it in signed])
        acts = self.embedder.embed_many(
            [action_description(a, inp.context, inp.salient_keys) for a in inp.actions]
        )
        cos = acts @ items.T  # (n_actions, n_items)
        # Contrastive relevance: an item acts on the actions that stand out for it among the admissible ones.
        floor = np.maximum(cfg.relevance_threshold, cos.mean(axis=0, keepdims=True))
        rel = np.clip((cos - floor) / (1.0 - cfg.relevance_threshold), 0.0, None)
        polarity = np.array([it.polarity for it in signed], dtype=np.float64)
        # a prohibition acts on what it forbids, not on the compliant alternatives that share its topic
        best = rel.max(axis=0, keepdims=True)
        focused = np.where(rel >= cfg.prohibition_focus * best, rel, 0.0)
        rel = np.where(polarity[None, :] < 0, focused, rel)
        return cfg.compliance * cfg.influence_gain * dilution * (rel @ polarity)

    def utter(self, inp: PolicyInput, action: Action, blocked) -> str:
        return template_utterance(inp, action, blocked)

    def write_text(self, prompt: str) -> str:
        raise ConfigError(
            "the embedded simulated LM writes no free text (writes_text is False): use a template"
        )

    def prior(self, inp: PolicyInput) -> np.ndarray:
        """The task prior the model acts on: its habitual ``task_prior``, mixed with the route it re-planned around
        what it declined (``replan_prior``) by ``replan_competence`` (module docstring)."""
        n = len(inp.actions)
        parts = []
        for name in ("task_prior", "replan_prior"):
            value = getattr(inp, name)
            arr = None if value is None else np.asarray(value, dtype=np.float64)
            if arr is not None and arr.shape != (n,):
                raise ConfigError(f"{name} has shape {arr.shape}; expected ({n},) for {n} admissible actions")
            parts.append(arr)
        habit, planned = parts
        habit = np.zeros(n) if habit is None else habit
        if planned is None:
            return habit
        c = self.config.replan_competence
        return (1.0 - c) * habit + c * planned

    def declined(self, inp: PolicyInput) -> tuple[int, ...]:
        """The step its context talked it out of (``agents.policies.base.Replanner``): the top step of its prior, when
        the window pushes it down and the model no longer prefers it; () otherwise."""
        prior = self.prior(inp)
        if not prior.any():
            return ()
        top = int(np.argmax(prior))
        push = self.influence(inp)
        if push[top] >= 0.0 or int(np.argmax(self.config.task_gain * prior + push)) == top:
            return ()
        return (top,)

    def logits(self, inp: PolicyInput, rng: np.random.Generator) -> np.ndarray:
        cfg = self.config
        prior = self.prior(inp)
        raw = (cfg.task_gain * prior + self.influence(inp)) / cfg.temperature
        probs = np.exp(raw - raw.max())
        probs /= probs.sum()
        probs = (1.0 - cfg.exploration) * probs + cfg.exploration / len(inp.actions)
        return np.log(probs)
