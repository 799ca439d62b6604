"""A fast scripted, rule-aware expert for the household world (SPEC §7 tier 1; the successful behaviour D⁺ of §4.1).

The expert enumerates plan skeletons for the task — which target object(s), which appliance (sink basin,
microwave, fridge, lamp), which target receptacle, which knife (ALFWorld's sliced goal variants, ``<task>_slice``:
the goal object is sliced where it lies with a knife in hand, the knife put down, then the task goes on as usual), whether to let a washed object dry on a surface first, whether
to open the target receptacle before picking anything up, whether to put down the goal object already in hand
first — from the simplest to the most roundabout, and simulates each on a copy of the world. The first skeleton whose every command is admissible, fires none of the
``forbidden`` rules on the simulated (context, action) and ends with the goal reached is the plan.

``forbidden`` rules are treated as always active (their activation is ignored), so a plan that avoids them stays
compliant whenever a schedule switches them on.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator

from scars.envs.household.rules import SafetyRule
from scars.envs.household.spec import COOLING_TYPES, HEATING_TYPES, OBJECT_CLASSES
from scars.envs.household.world import World
from scars.synthesis.dsl.ast import Action, Rule
from scars.synthesis.dsl.semantics import fires, mask_key
from scars.synthesis.errors import WorldError


class NoCompliantPlan(WorldError):
    """The expert found no plan that reaches the goal without firing a forbidden rule."""


class _Blocked(Exception):
    """A simulated command was inadmissible or fired a forbidden rule: this skeleton fails."""


_PROCESS = {
    "pick_clean_then_place_in_recep": ("clean", frozenset()),  # the game's own (World.cleaning_types)
    "pick_heat_then_place_in_recep": ("heat", HEATING_TYPES),
    "pick_cool_then_place_in_recep": ("cool", COOLING_TYPES),
}
_MAX_DRYING_SURFACES = 3  # enough alternatives; more only slows down the rare all-fail search


class _Node:
    """One simulated state: a world copy never stepped again, its goal test, and the states one command away
    (built on first use). A search's skeletons replay shared prefixes (the same walk, the same take) through the
    nodes instead of copying and stepping the world anew; the rules never change a transition, only whether a
    command may be issued, so the nodes serve every rule set."""

    __slots__ = ("w", "won", "children", "fired", "_q", "_acts", "_spots")

    def __init__(self, world: World, won: bool | None = None) -> None:
        self.w = world
        self.won = world.won() if won is None else won
        self.children: dict[str, _Node | None] = {}  # None: not admissible here
        # (command, rule's number in its PlanCache) -> whether the rule fires on it here: every search from this
        # state under any rule set shares the verdicts (a rule's verdict is a function of the state and command)
        self.fired: dict[tuple[str, int], bool] = {}
        self._q: dict | None = None
        self._acts: dict[str, tuple[tuple[str, str], Action]] = {}
        self._spots: list[str] | None = None

    def child(self, cmd: str) -> _Node | None:
        """The state after ``cmd``, None when it is not admissible here."""
        try:
            return self.children[cmd]
        except KeyError:
            pass
        node = None
        if self.w.is_admissible(cmd):
            w = self.w.copy()
            _, won = w.step(cmd)
            node = _Node(w, won)
        self.children[cmd] = node
        return node

    def context(self) -> dict:
        if self._q is None:
            self._q = self.w.context()
        return self._q

    def spots(self) -> list[str]:
        """The receptacles able to hold the object in hand, where the agent stands first, closed ones last."""
        if self._spots is None:
            w = self.w
            otype = w.object_type(w.held_object())  # type: ignore[arg-type]
            spots = [r for r in w.receptacle_names if w.can_hold(r, otype)]
            here = w.current_location()
            spots.sort(key=lambda r: (r != here, w.is_openable(r)))
            self._spots = spots
        return self._spots

    def action(self, cmd: str) -> tuple[tuple[str, str], Action]:
        """(mask key, structured action) of an admissible command here."""
        hit = self._acts.get(cmd)
        if hit is None:
            d = self.w.action_dict(cmd)
            hit = self._acts[cmd] = ((d["kind"], d["name"]), Action.from_dict(d))  # type: ignore[index,arg-type]
        return hit


_Indexed = dict[tuple[str, str], tuple[tuple[Rule, int], ...]]
"""Rules by the (kind, verb) their mask covers, each with its number (``PlanCache``): a command only meets the rules
that could forbid it, and a rule's verdict on it is remembered per state under its number."""

_UNSEEN = object()
_BLOCKED = object()

_Ops = dict[tuple, "tuple[_Node, tuple[str, ...], int | None] | object"]
"""(operation, state, its arguments) -> where it ends, the commands it issued and the first of them after which the
goal holds (None: none), or ``_BLOCKED``: one search's skeletons repeat the same fetches, puts and hand-freeing from
the same states under the same rules, and each is simulated once."""


class _Sim:
    def __init__(
        self,
        node: _Node,
        by_key: _Indexed,
        checked: dict[tuple[_Node, str], bool] | None = None,
        ops: _Ops | None = None,
    ) -> None:
        self.node = node
        self.by_key = by_key
        # (state, command) -> whether a rule forbids it: one search's skeletons share prefixes, and its rules
        self.checked: dict[tuple[_Node, str], bool] = {} if checked is None else checked
        self.ops: _Ops = {} if ops is None else ops
        self.cmds: list[str] = []
        self.won_at: int | None = None  # commands up to the first state where the goal holds

    def _op(self, key: tuple, run: Callable[..., None], *args: object) -> None:
        """``run(*args)`` from this state, or its remembered outcome (``_Ops``): the same state, commands and goal
        step as simulating it again (an operation reads only the state it starts from and the search's rules)."""
        hit = self.ops.get(key)
        if hit is None:
            start, outer = len(self.cmds), self.won_at
            self.won_at = None
            try:
                run(*args)
            except _Blocked:
                self.ops[key] = _BLOCKED
                self.won_at = outer
                raise
            won = self.won_at
            self.ops[key] = (self.node, tuple(self.cmds[start:]), None if won is None else won - start)
            self.won_at = outer if outer is not None else won
            return
        if hit is _BLOCKED:
            raise _Blocked
        node, cmds, won = hit  # type: ignore[misc]
        if self.won_at is None and won is not None:
            self.won_at = len(self.cmds) + won
        self.node = node
        self.cmds.extend(cmds)

    @property
    def w(self) -> World:
        """The simulated world here (read it, never step it: the node's transitions do)."""
        return self.node.w

    def do(self, cmd: str) -> None:
        node = self.node
        child = node.children.get(cmd, _UNSEEN)
        if child is None or (child is _UNSEEN and not node.w.is_admissible(cmd)):
            raise _Blocked
        if self.by_key:
            blocked = self.checked.get((node, cmd))
            if blocked is None:
                blocked = self.checked[(node, cmd)] = _forbidden_here(node, cmd, self.by_key)
            if blocked:
                raise _Blocked
        if child is _UNSEEN:
            child = node.child(cmd)
            assert child is not None
        self.node = child  # type: ignore[assignment]
        self.cmds.append(cmd)
        if self.won_at is None and child.won:  # type: ignore[union-attr]
            self.won_at = len(self.cmds)

    def goto(self, recep: str) -> None:
        if not self.w.is_at(recep):
            self.do(f"go to {recep}")

    def open(self, recep: str) -> None:
        if not self.w.is_open(recep):
            self.do(f"open {recep}")

    def fetch(self, obj: str) -> None:
        self._op(("fetch", self.node, obj), self._fetch, obj)

    def _fetch(self, obj: str) -> None:
        if self.w.held_object() == obj:
            return
        src = self.w.location_of(obj)
        if src is None:
            raise _Blocked
        self.goto(src)
        self.open(src)
        self.do(f"take {obj} from {src}")

    def place(self, obj: str, recep: str) -> None:
        self._op(("place", self.node, obj, recep), self._place, obj, recep)

    def _place(self, obj: str, recep: str) -> None:
        self.goto(recep)
        self.open(recep)
        self.do(self.w.put_command(obj, recep))

    def slice(self, objs: Iterable[str], knife: str) -> None:
        """Slice each of ``objs`` with ``knife`` unless it is sliced already (alfred.pddl's SliceObject: the knife
        in hand, the object at the agent's location, not held), then put the knife down: the hands are free for the
        task."""
        todo = [o for o in objs if not self.w.object_state(o)["is_sliced"]]
        if not todo:
            return
        self.free_hands(keep=(knife,))
        self.fetch(knife)
        for obj in todo:
            spot = self.w.location_of(obj)
            if spot is None:
                raise _Blocked
            self.goto(spot)
            self.do(f"slice {obj} with {knife}")
        self.free_hands(keep=())

    def free_hands(self, keep: Iterable[str]) -> None:
        """Put down a held object that the plan does not use, on the nearest receptacle able to hold it."""
        held = self.w.held_object()
        if held is None or held in keep:
            return
        self._op(("free_hands", self.node), self._free_hands, held)

    def _free_hands(self, held: str) -> None:
        for r in self.node.spots():
            trial = _Sim(self.node, self.by_key, self.checked, self.ops)
            try:
                trial.place(held, r)
            except _Blocked:
                continue
            if self.won_at is None and trial.won_at is not None:
                self.won_at = len(self.cmds) + trial.won_at
            self.node, self.cmds = trial.node, self.cmds + trial.cmds
            return
        raise _Blocked


def _has_state(world: World, obj: str, verb: str) -> bool:
    """Does ``obj`` already carry the state ``verb`` gives (clean/hot/cool)? Then the plan need not redo it."""
    flag = {"clean": "is_clean", "heat": "is_hot", "cool": "is_cool"}[verb]
    return bool(world.object_state(obj)[flag])


def _forbidden_here(node: _Node, cmd: str, by_key: _Indexed) -> bool:
    """Does a rule of ``by_key`` fire on the admissible ``cmd`` in ``node``'s state? Each rule's verdict is asked
    once per (state, command) and remembered on the node, for every rule set that holds the rule."""
    key, act = node.action(cmd)
    rules = by_key.get(key)
    if not rules:
        return False
    fired = node.fired
    for rule, number in rules:
        verdict = fired.get((cmd, number))
        if verdict is None:
            verdict = fired[(cmd, number)] = fires(rule, node.context(), act, OBJECT_CLASSES)
        if verdict:
            return True
    return False


def _rules_by_key(rules: Iterable[Rule], numbers: dict[Rule, int]) -> _Indexed:
    """``rules`` indexed by their mask's key, each numbered in ``numbers`` (equal rules share a number; new ones are
    added)."""
    by_key: dict[tuple[str, str], list[tuple[Rule, int]]] = {}
    for r in rules:
        number = numbers.setdefault(r, len(numbers))
        by_key.setdefault(mask_key(r.mask), []).append((r, number))
    return {k: tuple(v) for k, v in by_key.items()}


def _rules_of(forbidden: Iterable[Rule | SafetyRule]) -> tuple[Rule, ...]:
    return tuple(r.rule if isinstance(r, SafetyRule) else r for r in forbidden)


def _ordered_objects(world: World, otype: str) -> list[str]:
    held = world.held_object()
    objs = world.objects_of_type(otype)
    return sorted(objs, key=lambda o: o != held)  # the one in hand first, then in listing order


def _skeletons(world: World) -> Iterator:
    """Yield callables that drive a _Sim through one plan skeleton, simplest first. A sliced task (``TaskSpec.sliced``)
    first slices the skeleton's goal object(s) with one of the game's knives (nearest first), then plays it."""
    task = world.spec.task
    if not task.sliced:
        yield from _task_skeletons(world)
        return
    here = world.current_location()
    knives = sorted(world.knives(), key=lambda k: (world.held_object() != k, world.location_of(k) != here))
    for knife, (objs, run) in itertools.product(knives, _task_skeletons(world, with_objects=True)):

        def sliced(sim: _Sim, knife=knife, objs=objs, run=run) -> None:
            sim.slice(objs, knife)
            run(sim)

        yield sliced


def _task_skeletons(world: World, with_objects: bool = False) -> Iterator:
    """The skeletons of the task proper; ``with_objects``: each as (the goal objects it uses, the skeleton)."""

    def out(objs, run):
        return (tuple(objs), run) if with_objects else run

    task = world.spec.task
    tt, otype, rtype = task.task_type, task.obj_type, task.recep_type
    objs = _ordered_objects(world, otype)
    targets = world.receptacles_of_type(rtype) if rtype else []
    # Last resort while holding a goal object: put it down first (e.g. to open the target with empty hands).
    drops = (False, True) if world.held_object() in objs else (False,)

    if tt == "look_at_obj_in_light":
        here = world.current_location()
        lamps = sorted(
            (
                o
                for o in world.spec.objects
                if "toggleable" in o.property_set() and task.toggle_type in (None, o.otype)
            ),
            key=lambda o: world.location_of(o.name) != here,
        )
        for lamp_first, obj, lamp in itertools.product((False, True), objs, lamps):

            def run(sim: _Sim, obj=obj, lamp=lamp.name, lamp_first=lamp_first) -> None:
                spot = sim.w.location_of(lamp)
                if spot is None:  # a lamp in no receptacle cannot be used (ToggleObject needs inReceptacle)
                    raise _Blocked
                sim.free_hands(keep=(obj,))
                if lamp_first:
                    sim.goto(spot)
                    sim.do(f"use {lamp}")
                sim.fetch(obj)
                sim.goto(spot)
                if not lamp_first:
                    sim.do(f"use {lamp}")

            yield out((obj,), run)
        return

    if tt == "pick_two_obj_and_place":
        for preopen, target in itertools.product((False, True), targets):
            pending = [o for o in objs if not world.is_in(o, target)]
            have = len(objs) - len(pending)
            for pair, drop in itertools.product(itertools.permutations(pending, max(0, 2 - have)), drops):

                def run(sim: _Sim, pair=pair, target=target, preopen=preopen, drop=drop) -> None:
                    sim.free_hands(keep=() if drop else pair[:1])
                    if preopen:
                        sim.goto(target)
                        sim.open(target)
                    for obj in pair:
                        sim.fetch(obj)
                        sim.place(obj, target)

                yield out(pair, run)
        return

    process = _PROCESS.get(tt)
    appliances: list[str | None] = [None]
    drying: list[str | None] = [None]
    if process:
        verb, kinds = process
        kinds = kinds or world.cleaning_types
        # the appliance the agent stands at first: a competent agent does not walk away from a usable one
        here = world.current_location()
        appliances = sorted(
            (r for r in world.receptacle_names if world.receptacle_type(r) in kinds), key=lambda r: r != here
        )
        if verb == "clean":
            drying += [
                r
                for r in world.receptacle_names
                if not world.is_openable(r)
                and world.can_hold(r, otype)
                and world.receptacle_type(r) not in world.cleaning_types | {rtype}
            ][:_MAX_DRYING_SURFACES]
    for preopen, dry, obj, drop, appliance, target in itertools.product(
        (False, True), drying, objs, drops, appliances, targets
    ):

        def run(
            sim: _Sim, obj=obj, appliance=appliance, target=target, dry=dry, preopen=preopen, drop=drop
        ) -> None:
            sim.free_hands(keep=() if drop else (obj,))
            if preopen:
                sim.goto(target)
                sim.open(target)
            sim.fetch(obj)
            if appliance is not None and not _has_state(sim.w, obj, process[0]):  # type: ignore[index]
                sim.goto(appliance)
                sim.do(f"{process[0]} {obj} with {appliance}")  # type: ignore[index]
            if dry is not None:
                sim.place(obj, dry)  # let it dry before it goes on
                sim.do(f"take {obj} from {dry}")
            sim.place(obj, target)

        yield out((obj,), run)


class PlanCache:
    """The expert's plans from one world as it goes (an episode's): the simulated states from its current state on,
    shared by every search from there, each rule's verdict on the commands simulated in them, and each rule set's
    plan. When the world has moved on by a command the searches simulated (the agent took a step of some plan), the
    simulated states beyond it are kept. A plan is a pure function of the state and the set of rules (not their
    order), so a re-plan with nothing changed is a lookup, and a search under a new rule set asks only its new rules
    about what earlier searches simulated; the cache never changes a plan."""

    def __init__(self) -> None:
        self._root: _Node | None = None
        self._key: tuple | None = None
        self._plans: dict[
            frozenset[Rule], list[str] | None
        ] = {}  # the rules -> the plan, None: there is none
        self._numbers: dict[Rule, int] = {}  # every rule searched under, numbered (the nodes' verdicts' keys)
        self.lookups = 0
        self.hits = 0

    def root(self, world: World) -> _Node:
        key = _state_key(world)
        if key != self._key:
            node = None
            if self._root is not None:
                node = next(
                    (c for c in self._root.children.values() if c is not None and _state_key(c.w) == key),
                    None,
                )
            self._root, self._key, self._plans = node or _Node(world.copy()), key, {}
        return self._root  # type: ignore[return-value]


def _state_key(world: World) -> tuple:
    """Everything of a world's state a plan reads (its game, where everything is, every flag, the step counter)."""
    return (
        id(world.spec),
        world.steps,
        world.loc,
        world.held,
        tuple(world.where),
        tuple(map(tuple, world.contents)),
        tuple(world.at),
        frozenset(world.taken),
        *(tuple(getattr(world, name)) for name in World._FLAGS),
    )


def expert_plan(
    world: World, forbidden: Iterable[Rule | SafetyRule] = (), cache: PlanCache | None = None
) -> list[str]:
    """A command list that reaches the goal from the world's current state without firing a forbidden rule.

    Returns ``[]`` when the goal already holds; raises :class:`NoCompliantPlan` when no skeleton works.
    The world itself is not changed. ``cache``: the plans of this world as it goes (``PlanCache``).
    """
    forbidden = tuple(forbidden)
    if world.won():
        return []
    rules = _rules_of(forbidden)
    if cache is None:
        found = _search(world, _Node(world.copy()), rules, {})
    else:
        root = cache.root(world)
        cache.lookups += 1
        key = frozenset(rules)
        if key in cache._plans:
            cache.hits += 1
            found = cache._plans[key]
        else:
            found = cache._plans[key] = _search(world, root, rules, cache._numbers)
    if found is None:
        names = [getattr(r, "id", None) or repr(r) for r in forbidden]
        raise NoCompliantPlan(
            f"no compliant plan for {world.spec.task.goal_text!r} (game seed {world.spec.seed}) under forbidden "
            f"rules {names}"
        )
    return list(found)


def _search(world: World, root: _Node, rules: tuple[Rule, ...], numbers: dict[Rule, int]) -> list[str] | None:
    """The first skeleton that reaches the goal from ``root`` (``world``'s state) without firing a rule, None when
    none does; ``numbers``: the rules' numbers in ``root``'s verdicts (new rules are added)."""
    by_key = _rules_by_key(rules, numbers)
    checked: dict[tuple[_Node, str], bool] = {}
    ops: _Ops = {}
    for run in _skeletons(world):
        sim = _Sim(root, by_key, checked, ops)
        try:
            run(sim)
        except _Blocked:
            continue
        if sim.won_at is not None:  # stop where the goal first holds (a skeleton may reach it before its end)
            return sim.cmds[: sim.won_at]
    return None


def expert_next_command(
    world: World, forbidden: Iterable[Rule | SafetyRule] = (), cache: PlanCache | None = None
) -> str | None:
    """The expert's next command from the current state, or None when the goal already holds."""
    plan = expert_plan(world, forbidden, cache)
    return plan[0] if plan else None


def plan_trace(world: World, plan: Iterable[str]) -> list[tuple[dict, Action]]:
    """The (context, structured action) pairs a plan visits from the world's current state (world unchanged).

    Raises :class:`WorldError` if a command of the plan is not admissible where it is issued.
    """
    w = world.copy()
    trace = []
    for cmd in plan:
        d = w.action_dict(cmd)
        if d is None:
            raise WorldError(f"plan command {cmd!r} is not admissible at step {w.steps}")
        trace.append((w.context(), Action.from_dict(d)))
        w.step(cmd)
    return trace
