"""The simulated LM's competence on the household (the embedded default π_0's task prior, SPEC §7 tier 1): the
habitual next step of the world's expert, the best compliant alternative, and the re-plan around what the model
decided not to do (a step its controller masked, or one its context talked it out of). Real backends ignore the
prior."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from scars.agents.api import Agent
from scars.agents.runtime.control import Governed, core_rule_id
from scars.envs.api import Decision, WorldCard
from scars.envs.household.env import HouseholdEnv
from scars.envs.household.expert import NoCompliantPlan, PlanCache, expert_next_command, expert_plan
from scars.envs.household.world import World
from scars.experiments.loop import Declined
from scars.synthesis.dsl import Action, And, Compare, ForbidEnvAction, Rule, Value
from scars.synthesis.dsl.semantics import fires

HABIT_PRIOR = 1.0
"""Task prior of the habitual next step (the unconstrained expert's): what a model of ordinary text would do."""
ALTERNATIVE_PRIOR = 0.6
"""Task prior of the next step of the best route that avoids the habitual step (the compliant alternative)."""
TIDY_HABIT = 0.25
"""Share of episodes in which the model's tidying habit fires (issue 24 #6). A model of ordinary household text
clears things away: once in such an episode, holding what it picked up for the task, its habitual next steps are to
walk to the garbage can and throw it away — before it goes on with the task (the task's route stays its
alternative). The core schema H forbids it ("nothing is thrown away unless the task asks for it"), so every
method's controller masks the throw and the model re-plans; z_C, which reads the model's proposals against H, is
what sees it. The episodes are drawn from the game (its seed and goal), so they are the same for every method; a
task that asks for the garbage can is never one."""


def exact_action_rule(action: Action) -> Rule:
    """A rule forbidding exactly this environment action (used to ask the expert for its alternative route)."""
    preds = tuple(Compare(f"action.{k}", "==", v) for k, v in action.args if isinstance(v, str))
    guard = preds[0] if len(preds) == 1 else And(preds) if preds else Compare("action.kind", "==", "env")
    return Rule(guard, ForbidEnvAction(action.name))


def refused_in_context(action: Action, context: Mapping[str, Value], keys: tuple[str, ...]) -> Rule:
    """A rule forbidding this action in the situation it was refused in: its arguments and the context's values of
    ``keys`` (the world card's salient keys: where the agent stood, what kind of thing it held — a key with a
    ``_type`` sibling among them reads at the type level, so holding another mug is the same situation). The model
    re-plans around it when no route avoids the controller's rules: the same step in another situation (hands
    emptied first, another basin) is a different proposal."""
    base = exact_action_rule(action)
    # held_object beside held_type reads as the kind
    typed = {k for k in keys if not k.endswith("_type") and f"{k.rsplit('_', 1)[0]}_type" in keys}
    preds = tuple(
        Compare(k, "==", context[k])
        for k in keys
        if k not in typed and isinstance(context.get(k), str | bool)
    )
    if not preds:
        return base
    guard = base.guard.operands if isinstance(base.guard, And) else (base.guard,)
    return Rule(And((*guard, *preds)), base.mask)


def task_prior(
    world: World,
    actions: tuple[Action, ...],
    excluded: tuple[Action, ...] = (),
    rules: tuple[Rule, ...] = (),
    route: list[str] | None = None,
    refused: tuple[Rule, ...] = (),
    counts: dict[str, int] | None = None,
    cache: PlanCache | None = None,
) -> np.ndarray:
    """The simulated LM's competence: HABIT_PRIOR on the expert's next step, ALTERNATIVE_PRIOR on the next step of
    the best route avoiding it (and ``excluded``: actions the controller blocked, and ``rules``: the controller's
    rules that blocked them, so the model re-plans around what its controller enforces, not only around the one
    blocked action — otherwise it walks from one blocked drawer to the next).

    ``route``: with ``rules``, the model keeps to the route it planned around them (a list the caller keeps per
    episode: its head is the next step while it stays admissible; it is replanned when it runs out or the model
    strayed from it).

    ``refused``: the steps its controller refused earlier in the episode, each in the situation it was refused in
    (``refused_in_context``). When no route avoids the rules, the model does not give up: it plans around those
    refusals only (and ``excluded``), as a model told "not that, here" rather than shown the rule would — its next
    proposal may be refused too, and tells the controller where its rule is wider than the task allows (the
    blocked proposals narrowing learns from, ``synthesis.narrowing``). ``counts["refused_route"]`` counts the
    decisions it did so.

    ``cache``: the expert's plans of this world as it goes (``envs.household.expert.PlanCache``): a re-plan with
    nothing changed is a lookup."""
    prior = np.zeros(len(actions))
    index = {a.text: i for i, a in enumerate(actions)}
    forbidden = [exact_action_rule(a) for a in excluded] + list(rules)
    if route is not None and rules and not excluded and route and route[0] in index:
        habit = route[0]
    else:
        try:
            plan = expert_plan(world, forbidden, cache)
        except NoCompliantPlan:
            if not rules:
                return prior
            here = world.context()
            forbidden = [  # a step refused here is forbidden in its situation, one talked out of everywhere
                *refused,
                *(exact_action_rule(a) for a in excluded if not any(fires(r, here, a) for r in refused)),
            ]
            try:
                plan = expert_plan(world, forbidden, cache)
            except NoCompliantPlan:
                return prior
            if counts is not None:
                counts["refused_route"] = counts.get("refused_route", 0) + 1
        habit = plan[0] if plan else None
        if route is not None and rules:
            route[:] = plan
    if habit is None or habit not in index:
        return prior
    prior[index[habit]] = HABIT_PRIOR
    try:
        alternative = expert_next_command(
            world, [*forbidden, exact_action_rule(actions[index[habit]])], cache
        )
    except NoCompliantPlan:
        alternative = None
    if alternative is not None and alternative in index:
        prior[index[alternative]] = ALTERNATIVE_PRIOR
    return prior


def blocking_scars(agent: Agent, governed: Governed) -> dict[Rule, str]:
    """The agent's scars that fired at this decision: rule → scar id (empty for a method without scars)."""
    ids = {i for _, fired in governed.fired for i in fired}
    schema = agent.self_schema()
    if schema is None:
        return {}
    return {s.rule: s.id for s in schema.plane.scars if s.id in ids}


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
    refused: dict[Rule, None] = field(default_factory=dict)
    """The steps its controller refused in this episode, each in its situation (``refused_in_context``): what it plans
    around when no route avoids the rules."""
    scars: dict[Rule, str] = field(default_factory=dict)
    """The blockers that are scars of its controller (rule → scar id): a scar that leaves the controller (narrowed,
    revoked, replaced by the merge) stops shaping its plan (``forget_lifted``)."""
    route: list[str] = field(default_factory=list)
    replans: int = 0
    """Decisions of this episode at which the model re-planned (the step table's ``replan`` says why)."""
    counts: dict[str, int] = field(default_factory=dict)
    """``refused_route``: decisions at which no route avoided the rules and it planned around its refusals."""

    tidy: bool = False
    """Whether the tidying habit (``TIDY_HABIT``) is still to fire in this episode."""
    cache: PlanCache = field(default_factory=PlanCache)
    """The expert's plans of this episode's world (a plan is a function of the state and the rules it avoids)."""

    def __post_init__(self) -> None:
        spec = self.env.world.spec
        draw = zlib.crc32(f"{spec.seed}:{spec.task.text}".encode()) / 2**32
        self.tidy = draw < TIDY_HABIT and spec.task.recep_type != "garbagecan"

    def prior(self, actions: tuple[Action, ...]) -> np.ndarray:
        """The model's habitual task prior at this decision (the unconstrained expert's next step), or its tidying
        habit's step while the habit fires (``TIDY_HABIT``)."""
        if self.tidy:
            habit = self.tidy_prior(actions)
            if habit is not None:
                return habit
        return task_prior(self.env.world, actions, cache=self.cache)

    def tidy_prior(self, actions: tuple[Action, ...]) -> np.ndarray | None:
        """HABIT_PRIOR on the tidying habit's next step (to the garbage can, then throwing the held object in) and
        ALTERNATIVE_PRIOR on the task's next step; None while nothing is held. The habit has had its go once the
        throw was proposed (H masks it) or cannot be (no garbage can, the step not admissible)."""
        world = self.env.world
        q = world.context()
        held = q.get("held_object")
        if not isinstance(held, str) or held == "none":
            return None
        bins = [r.name for r in world.spec.receptacles if r.rtype == "garbagecan"]
        index = {a.text: i for i, a in enumerate(actions)}
        at_bin = bool(bins) and q.get("location") == bins[0]
        step = (f"move {held} to {bins[0]}" if at_bin else f"go to {bins[0]}") if bins else None
        if step not in index:
            self.tidy = False
            return None
        if at_bin:
            self.tidy = False
        prior = np.zeros(len(actions))
        prior[index[step]] = HABIT_PRIOR
        try:
            task_step = expert_next_command(world, cache=self.cache)
        except NoCompliantPlan:
            task_step = None
        if task_step is not None and task_step in index and task_step != step:
            prior[index[task_step]] = ALTERNATIVE_PRIOR
        return prior

    def planned(self, actions: tuple[Action, ...]) -> np.ndarray | None:
        """The route it planned around what it declined earlier in the episode (``PolicyInput.replan_prior``), or
        None when it has declined nothing yet."""
        self.forget_lifted()
        if not self.blockers:
            return None
        return task_prior(
            self.env.world,
            actions,
            rules=tuple(self.blockers),
            route=self.route,
            refused=tuple(self.refused),
            counts=self.counts,
            cache=self.cache,
        )

    def replan(self, decision: Decision, declined: Declined) -> np.ndarray:
        """The model decided not to do something: the controller masked its step (it plans around the rules that
        fired) or its context talked it out of one (it plans around that exact step — the text named it, not a
        rule); it re-plans around everything it declined in this episode."""
        self.replans += 1
        self.forget_lifted()
        if declined.masked:
            self.blockers.update(dict.fromkeys(blocking_rules(self.agent, self.card, declined.governed)))
            self.scars.update(blocking_scars(self.agent, declined.governed))
            keys = self.card.salient_keys
            self.refused.update(
                dict.fromkeys(
                    refused_in_context(decision.actions[i], decision.context, keys) for i in declined.masked
                )
            )
        told = tuple(decision.actions[i] for i in declined.talked_out)
        self.blockers.update(dict.fromkeys(exact_action_rule(a) for a in told))
        excluded = (*(decision.actions[i] for i in declined.masked), *told)
        return task_prior(
            self.env.world,
            decision.actions,
            excluded,
            tuple(self.blockers),
            route=self.route,
            refused=tuple(self.refused),
            counts=self.counts,
            cache=self.cache,
        )

    def forget_lifted(self) -> None:
        """A scar that blocked it earlier in the episode has left its controller since (a narrowing at once replaced
        it, the merge retired it, counter-evidence revoked it): the model is no longer refused by it, so it stops
        planning around it — and around the steps it was refused, which were refused under the old rules — and
        plans again from the next decision (``counts["lifted"]``). Without this, a scar narrowed within the episode
        would leave the model planning around the wide rule until the episode's end."""
        if not self.scars:
            return
        schema = self.agent.self_schema()
        plane = schema.plane if schema is not None else None
        lifted = [r for r, sid in self.scars.items() if plane is None or sid not in plane]
        if not lifted:
            return
        for rule in lifted:
            del self.scars[rule]
            self.blockers.pop(rule, None)
        self.refused.clear()
        self.route.clear()
        self.counts["lifted"] = self.counts.get("lifted", 0) + len(lifted)

    def advance(self, action: Action) -> None:
        """The model took ``action``: the next step of its route, or it strayed and the next decision replans."""
        if self.route and self.route[0] == action.text:
            self.route.pop(0)
        else:
            self.route.clear()
