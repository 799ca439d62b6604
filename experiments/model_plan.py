"""The simulated LM's competence on the household (the embedded default π_0's task prior, SPEC §7 tier 1): the
habitual next step of the world's expert, the best compliant alternative, and the re-plan around what the model
decided not to do (a step its controller masked, or one its context talked it out of). Real backends ignore the
prior."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scars.agents.api import Agent
from scars.agents.runtime.control import Governed, core_rule_id
from scars.envs.api import Decision, WorldCard
from scars.envs.household.env import HouseholdEnv
from scars.envs.household.expert import NoCompliantPlan, expert_next_command, expert_plan
from scars.envs.household.world import World
from scars.experiments.loop import Declined
from scars.synthesis.dsl import Action, And, Compare, ForbidEnvAction, Rule

HABIT_PRIOR = 1.0
"""Task prior of the habitual next step (the unconstrained expert's): what a model of ordinary text would do."""
ALTERNATIVE_PRIOR = 0.6
"""Task prior of the next step of the best route that avoids the habitual step (the compliant alternative)."""


def exact_action_rule(action: Action) -> Rule:
    """A rule forbidding exactly this environment action (used to ask the expert for its alternative route)."""
    preds = tuple(Compare(f"action.{k}", "==", v) for k, v in action.args if isinstance(v, str))
    guard = preds[0] if len(preds) == 1 else And(preds) if preds else Compare("action.kind", "==", "env")
    return Rule(guard, ForbidEnvAction(action.name))


def task_prior(
    world: World,
    actions: tuple[Action, ...],
    excluded: tuple[Action, ...] = (),
    rules: tuple[Rule, ...] = (),
    route: list[str] | None = None,
) -> np.ndarray:
    """The simulated LM's competence: HABIT_PRIOR on the expert's next step, ALTERNATIVE_PRIOR on the next step of
    the best route avoiding it (and ``excluded``: actions the controller blocked, and ``rules``: the controller's
    rules that blocked them, so the model re-plans around what its controller enforces, not only around the one
    blocked action — otherwise it walks from one blocked drawer to the next).

    ``route``: with ``rules``, the model keeps to the route it planned around them (a list the caller keeps per
    episode: its head is the next step while it stays admissible; it is replanned when it runs out or the model
    strayed from it)."""
    prior = np.zeros(len(actions))
    index = {a.text: i for i, a in enumerate(actions)}
    forbidden = [exact_action_rule(a) for a in excluded] + list(rules)
    if route is not None and rules and not excluded and route and route[0] in index:
        habit = route[0]
    else:
        try:
            plan = expert_plan(world, forbidden)
        except NoCompliantPlan:
            return prior
        habit = plan[0] if plan else None
        if route is not None and rules:
            route[:] = plan
    if habit is None or habit not in index:
        return prior
    prior[index[habit]] = HABIT_PRIOR
    try:
        alternative = expert_next_command(world, [*forbidden, exact_action_rule(actions[index[habit]])])
    except NoCompliantPlan:
        alternative = None
    if alternative is not None and alternative in index:
        prior[index[alternative]] = ALTERNATIVE_PRIOR
    return prior


def blocking_rules(agent: Agent, card: WorldCard, governed: Governed) -> tuple[Rule, ...]:
    """The rules of the agent's controller that fired at this decision (H, scars, temporary masks)."""
    ids = {i for _, fired in governed.fired for i in fired}
    schema = agent.self_schema()
    plane = schema.plane if schema is not None else None
    by_id = {core_rule_id(r): r for r in card.core}
    if plane is not None:
        by_id.update({s.id: s.rule for s in plane.scars})
        by_id.update({m: rule for m, (rule, _) in plane.temporary_masks.items()})
    return tuple(by_id[i] for i in sorted(ids) if i in by_id)


@dataclass
class ModelPlan:
    """What the simulated LM plans around in one episode: what it decided not to do — the controller's rules that
    blocked its plan (it was refused once already, so it keeps planning around them) and the exact steps its context
    talked it out of — and the route it planned around them. The same for every method: its ``replan`` is the
    decision step's re-plan hook (``experiments.loop.decide``), called with what the model declined and why."""

    env: HouseholdEnv
    agent: Agent
    card: WorldCard
    blockers: dict[Rule, None] = field(default_factory=dict)
    route: list[str] = field(default_factory=list)
    replans: int = 0
    """Decisions of this episode at which the model re-planned (the step table's ``replan`` says why)."""

    def prior(self, actions: tuple[Action, ...]) -> np.ndarray:
        """The model's habitual task prior at this decision (the unconstrained expert's next step)."""
        return task_prior(self.env.world, actions)

    def planned(self, actions: tuple[Action, ...]) -> np.ndarray | None:
        """The route it planned around what it declined earlier in the episode (``PolicyInput.replan_prior``), or
        None when it has declined nothing yet."""
        if not self.blockers:
            return None
        return task_prior(self.env.world, actions, rules=tuple(self.blockers), route=self.route)

    def replan(self, decision: Decision, declined: Declined) -> np.ndarray:
        """The model decided not to do something: the controller masked its step (it plans around the rules that
        fired) or its context talked it out of one (it plans around that exact step — the text named it, not a
        rule); it re-plans around everything it declined in this episode."""
        self.replans += 1
        if declined.masked:
            self.blockers.update(dict.fromkeys(blocking_rules(self.agent, self.card, declined.governed)))
        told = tuple(decision.actions[i] for i in declined.talked_out)
        self.blockers.update(dict.fromkeys(exact_action_rule(a) for a in told))
        excluded = (*(decision.actions[i] for i in declined.masked), *told)
        return task_prior(self.env.world, decision.actions, excluded, tuple(self.blockers), route=self.route)

    def advance(self, action: Action) -> None:
        """The model took ``action``: the next step of its route, or it strayed and the next decision replans."""
        if self.route and self.route[0] == action.text:
            self.route.pop(0)
        else:
            self.route.clear()
