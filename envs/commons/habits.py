"""The commons base policy's habits: a documented model of an LLM harvester, as a prior over admissible actions.

The embedded default policy (``agents.policies.embedded.SimulatedLM``) is generic: it reads a per-action prior in
[0, 1] (``PolicyInput.task_prior``) and the in-context push of its context window. What an LLM would *want* in the
commons is world knowledge, so it lives here, on the world side, and the tier-2 loop hands it to the policy — the
way the household's expert hands tier 1 its habitual route (a real backend ignores the prior and reads the prompt).

The model is calibrated to what GovSim reports (Piatti et al. 2024): most models over-harvest and collapse the
resource within a few months, few survive the year. Its habits, each a field of :class:`HarvesterHabits`:

- **greed** — a model that does not reason about regrowth takes the "fair" split of what it sees, h(t)/|I|, or a
  fraction of it; five of them together empty the pool (GovSim's dominant failure). Seats differ (``greed_spread``).
- **anchoring** — its request drifts toward the others' catches it read in the mayor's report: if they took more, so
  does it (GovSim's finding that agents mirror the group's last harvest).
- **sustainable reasoning** — a minority mode at the sustainable share f(t)/|I| (the few runs that survive), made
  stronger by GovSim's universalization line when the prompt carries it, and a mode at an agreed limit.
- **retaliation** — it punishes whoever punished it; it punishes those who caught more than it did (envy), rarely.
- **short utterances** — in the discussion it proposes its own split as the limit, supports a limit, reassures
  ("there is plenty"), or accuses the biggest catcher.

In-context influence of memory text (reflections, retrieved memories, rules) is the policy's own model
(``SimulatedLM.influence``), the same in every world. Every number below is a parameter with the behaviour it
models; results obtained with it are results about this model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from scars.synthesis.dsl import Action
from scars.synthesis.errors import ConfigError


@dataclass(frozen=True)
class HarvesterHabits:
    """Every parameter of the commons base policy's habits (module docstring), with the behaviour it models."""

    greed: float = 0.9
    """Share of the naive equal split h(t)/|I| the model asks for (1: it splits the whole visible pool, ignoring
    regrowth — five such seats empty it in one month; GovSim's collapsing models behave near 0.7–1)."""
    greed_spread: float = 0.3
    """Seats differ: seat i's greed is greed·(1 + greed_spread·(i/(|I|−1) − ½)·2) (the most and the least greedy
    seats differ by ±greed_spread)."""
    anchoring: float = 0.4
    """Weight of the others' mean last catch in its target (0: ignores the report; 1: copies the group)."""
    sustainable_weight: float = 0.15
    """Probability of the minority mode at the sustainable share f(t)/|I| (the model reasons about regrowth)."""
    universalization_weight: float = 0.5
    """The same mode's probability when the prompt carries GovSim's universalization line (it helps models survive)."""
    agreement_weight: float = 0.3
    """Probability of the mode at an agreed per-agent limit, when the group agreed one (the greedy mode takes the
    rest of the probability)."""
    width: float = 2.0
    """Spread (in units) of each mode: the model's imprecision about the amount."""
    retaliation: float = 0.8
    """Weight (against ``restraint``) of punishing an agent that punished it in the last punishment phase."""
    envy: float = 0.25
    """Weight of punishing an agent whose last catch exceeded its own by more than ``envy_margin``."""
    envy_margin: int = 3
    """How much more another agent must have caught before envy applies."""
    restraint: float = 1.0
    """Weight of punishing nobody (the default of a polite model)."""
    propose: float = 0.8
    """Weight of proposing its own target (rounded) as everyone's limit."""
    support: float = 0.5
    """Weight of supporting the proposed limit."""
    reassure: float = 0.35
    """Weight of "there is plenty" (scaled by greed: greedy models talk the problem away)."""
    accuse: float = 0.3
    """Weight of accusing the agent with the biggest last catch, when it exceeded its own."""
    silence: float = 0.2
    """Weight of saying nothing."""

    def __post_init__(self) -> None:
        for name in ("greed", "width"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"HarvesterHabits.{name} = {getattr(self, name)!r} must be > 0")
        for name in (
            "greed_spread",
            "anchoring",
            "sustainable_weight",
            "universalization_weight",
            "agreement_weight",
            "retaliation",
            "envy",
            "restraint",
            "propose",
            "support",
            "reassure",
            "accuse",
            "silence",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"HarvesterHabits.{name} = {value!r} must be in [0, 1]")
        if (
            self.sustainable_weight + self.agreement_weight > 1
            or self.universalization_weight + self.agreement_weight > 1
        ):
            raise ConfigError(
                "HarvesterHabits: the sustainable (or universalization) and agreement modes' probabilities must sum "
                f"to at most 1, got {self.sustainable_weight!r}/{self.universalization_weight!r} + "
                f"{self.agreement_weight!r}"
            )
        if self.envy_margin < 0:
            raise ConfigError(f"HarvesterHabits.envy_margin = {self.envy_margin!r} must be >= 0")


HABIT_PRESETS: Mapping[str, HarvesterHabits] = MappingProxyType(
    {
        "govsim": HarvesterHabits(),
        "sustainable": HarvesterHabits(
            greed=0.5,
            anchoring=0.0,
            sustainable_weight=0.85,
            universalization_weight=0.9,
            agreement_weight=0.1,
            width=0.6,
            retaliation=0.2,
            envy=0.0,
            reassure=0.0,
        ),
        "outsider": HarvesterHabits(
            greed=1.3,
            greed_spread=0.0,
            anchoring=0.0,
            sustainable_weight=0.05,
            universalization_weight=0.2,
            agreement_weight=0.05,
            retaliation=1.0,
            envy=0.0,
            reassure=0.8,
            accuse=0.0,
        ),
    }
)
"""Named habit sets: ``govsim`` — the calibrated default (most seats over-harvest and collapse the pool, as most
models in GovSim); ``sustainable`` — a model that mostly takes ⌊f(t)/|I|⌋ (GovSim's best models; the anti-collusion
test's focal seat, so that what the coalition punishes is a correct harvest); ``outsider`` — GovSim's outsider
persona (a newcomer who wants to grow its business and does not care whether the resource lasts): it asks for more
than the naive split of the pool, ignores the others' catches, rarely reasons about regrowth or follows an agreed
limit, talks the problem away and hits back when punished."""


def seat_greed(habits: HarvesterHabits, index: int, num_agents: int) -> float:
    """Seat ``index``'s greed (seats differ by ``greed_spread`` around ``greed``)."""
    position = 0.0 if num_agents < 2 else index / (num_agents - 1) - 0.5
    return habits.greed * (1.0 + 2.0 * habits.greed_spread * position)


def harvest_target(habits: HarvesterHabits, observation: Mapping[str, Any], info: Mapping[str, Any]) -> float:
    """The amount the greedy, anchored model wants this month (before the other modes): its share of the naive split
    h(t)/|I(t)| among the group it sees, drawn toward the others' mean last catch (a seat not in the group caught 0
    and is not counted)."""
    n = int(info["num_agents"])  # |I(t)|, the group this month
    i = int(info["agent_index"])
    catches = np.asarray(observation["catches"], dtype=float)
    own = seat_greed(habits, i, len(catches)) * float(info["pool_resource_level"]) / n
    others = np.delete(catches, i)
    if int(info["month"]) > 1 and n > 1 and habits.anchoring > 0:
        own = (1.0 - habits.anchoring) * own + habits.anchoring * float(others.sum()) / (n - 1)
    return own


def _bump(amounts: np.ndarray, centre: float, width: float) -> np.ndarray:
    return np.exp(-0.5 * ((amounts - centre) / width) ** 2)


def _as_prior(weights: np.ndarray, scale: float) -> np.ndarray:
    """A habit distribution (unnormalised weights ≥ 0) as a prior in [0, 1]: 1 + log(p/max p)/scale, clipped at 0.
    With ``scale`` = the embedded policy's task_gain/temperature its choice reproduces the distribution (down to
    e^−scale of the mode; the rest is the policy's exploration)."""
    top = float(weights.max()) if len(weights) else 0.0
    if top <= 0:
        return np.zeros(len(weights))
    with np.errstate(divide="ignore"):
        logs = np.log(weights / top)
    return np.clip(1.0 + logs / scale, 0.0, 1.0)


def habit_prior(
    habits: HarvesterHabits,
    observation: Mapping[str, Any],
    info: Mapping[str, Any],
    actions: Sequence[Action],
    *,
    scale: float,
    universalization: bool = False,
) -> np.ndarray:
    """The model's prior in [0, 1] over ``actions`` (one agent's admissible actions of the current phase).

    ``observation`` / ``info`` are that agent's ``commons_v0`` observation and info; ``scale``: the embedded
    policy's task_gain/temperature (see ``_as_prior``); ``universalization``: the prompt carries GovSim's
    universalization line (the sustainable mode's weight is then ``universalization_weight``)."""
    if not scale > 0:
        raise ConfigError(f"habit_prior scale = {scale!r} must be > 0")
    phase = info["phase"]
    weights = np.zeros(len(actions))
    if phase == "harvest":
        amounts = np.array(
            [float(a.arg("amount", 0) or 0) if a.name == "harvest" else 0.0 for a in actions], dtype=float
        )
        share = float(info["sustainable_share"])
        sustainable = habits.universalization_weight if universalization else habits.sustainable_weight
        limit = int(info["agreed_limit"])
        modes = [(sustainable, float(math.floor(share)))]
        if limit >= 0:
            modes.append((habits.agreement_weight, float(limit)))
        greedy = max(0.0, 1.0 - sum(w for w, _ in modes))
        modes.append((greedy, harvest_target(habits, observation, info)))
        for weight, centre in modes:
            bump = _bump(amounts, centre, habits.width)
            if weight > 0 and bump.sum() > 0:
                weights += weight * bump / bump.sum()
        return _as_prior(weights, scale)
    catches = np.asarray(observation["catches"], dtype=float)
    i = int(info["agent_index"])
    names = [f"agent_{j}" for j in range(len(catches))]
    if phase == "discussion":
        target = round(harvest_target(habits, observation, info))
        others = np.where(np.arange(len(catches)) == i, -np.inf, catches)
        top = int(np.argmax(others))
        accuse = habits.accuse if catches[top] > catches[i] else 0.0
        intents = [a.arg("intent", "silent") for a in actions]
        proposals = np.array(
            [
                float(a.arg("limit", 0)) if it == "propose_limit" else np.inf
                for a, it in zip(actions, intents, strict=True)
            ]
        )
        with np.errstate(invalid="ignore"):
            weights = habits.propose * _bump(proposals, target, 1.0)  # exp(−inf) = 0 for the other intents
        fixed = {
            "support_limit": habits.support,
            "reassure": habits.reassure * min(1.0, habits.greed),
            "silent": habits.silence,
        }
        for k, (a, intent) in enumerate(zip(actions, intents, strict=True)):
            if intent in fixed:
                weights[k] = fixed[intent]
            elif intent == "accuse":
                weights[k] = accuse if a.arg("about") == names[top] else 0.0
        return _as_prior(weights, scale)
    # punishment
    punished_by = np.asarray(observation["punished_by"], dtype=bool)
    for k, a in enumerate(actions):
        if a.name != "punish":
            weights[k] = habits.restraint
            continue
        j = names.index(str(a.arg("target")))
        value = 0.0
        if punished_by[j]:
            value = habits.retaliation
        if catches[j] > catches[i] + habits.envy_margin:
            value = max(value, habits.envy)
        weights[k] = value
    return _as_prior(weights, scale)


def universalization_line(info: Mapping[str, Any], template: str) -> str:
    """GovSim's universalization line for this month's stock (``Scenario.universalization_text``): the per-agent
    bound ⌊f(t)/|I|⌋ above which, if everyone took it, the resource would shrink next month."""
    return template.format(threshold=math.floor(float(info["sustainable_share"])))
