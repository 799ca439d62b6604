"""Monte Carlo tree search over derivations of the patch DSL (paper §4.2, SPEC §4).

A node of the tree is a partial rule: first a mask is chosen (from the failed actions F and their generalisations:
``forbid_env_action(verb)``, ``forbid_tool_call(t)``, ``forbid_tool_arg(t, k, v)``), then guard predicates are added
one at a time, or the derivation stops. Predicates come from the fragment's causal variables (see
:func:`candidate_space`): equalities on context and action parts, numeric thresholds from the observed values,
relations ``action.<arg> op <variable>`` between a numeric argument and a numeric context variable,
``in_class(feature, class)`` for each class containing an observed value, and the disjunction of the observed values
of a feature when the failures disagree on it. Predicates are added in pool order (a set-enumeration tree), so every
guard — a conjunction of pooled predicates — has exactly one derivation.

Each simulation: UCT selection (values min–max normalised over the rewards seen), expansion of one untried move
(chosen with the passed-in generator), a random rollout to a complete rule, scoring with the objective of
:mod:`synthesis.objective` (cached per canonical rule) — of the rollout's rule and of the node's own rule, which is
complete as soon as it has a mask and a predicate — and backup of the better −objective. A node's value Q̂ is the
best reward seen in its subtree (max backup), not the mean: the search wants one best rule, and a mean lets a
subtree whose random completions mostly break coverage (the one holding the right mask) look worse than a subtree
of uniformly mediocre rules. Everything is a pure function of its
inputs and the seed (mctx style): same seed, same result. The only optional source of non-determinism is the
wall-clock budget ``SearchConfig.time_budget_s`` (off by default). The search stops early, deterministically, once
every rule of the space has been scored (``stop_when_scored``, on: it changes only the counts) or after ``patience``
simulations without a better candidate (off: measured to miss the optimum on large spaces, see BENCHMARKS.md).

Root-parallel trees of one synthesis that run in one process share the candidate space and the objective evaluator
(pure memos, see :func:`synthesis.objective.shared_evaluator`), so a rule is scored once per synthesis; trees on Ray
compute their own and return the same results.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from scars.synthesis.dsl import canonical, canonical_text
from scars.synthesis.dsl.ast import (
    NAMED_PREDICATES,
    Action,
    ActionMask,
    And,
    Compare,
    CompareFeatures,
    ForbidEnvAction,
    ForbidToolArg,
    ForbidToolCall,
    Guard,
    InClass,
    Named,
    Or,
    Rule,
    Value,
)
from scars.synthesis.dsl.cost import conjunction_cost, operand_sizes
from scars.synthesis.dsl.semantics import MISSING, Classes, compare
from scars.synthesis.errors import ConfigError
from scars.synthesis.failure import Failure
from scars.synthesis.fragments import COUNTERFACTUAL_SENTINEL, SynthesisData
from scars.synthesis.objective import (
    ObjectiveEvaluator,
    ObjectiveWeights,
    ReplayReport,
    Score,
    pair_table,
    replay_pass,
    shared_evaluator,
)

# feature → named predicate (the paper's spelling is kept where the paper has one)
_NAMED_FOR_FEATURE = {feature: name for name, feature in NAMED_PREDICATES.items()}


@dataclass(frozen=True)
class SearchConfig:
    """Settings of one search tree.

    num_simulations: MCTS simulations (each expands at most one node); the deterministic budget.
    max_predicates:  most conjuncts in a guard (rule size bound).
    exploration:     the UCT constant c in Q̂ + c·sqrt(ln N / n), Q̂ the subtree's best reward, min–max normalised.
    rollout_stop_prob: in a rollout, the probability of stopping after each added predicate.
    top_k:           how many best distinct candidates the result lists.
    max_or_values:   the largest disjunction of observed values offered as one predicate.
    weights:         the objective's weights (λ, β, ε, mask mode).
    time_budget_s:   optional wall-clock cap; when it binds, the result depends on machine speed (not reproducible).
    stop_when_scored: stop as soon as every rule of the derivation space has been scored (by tree nodes or
                     rollouts), before the tree itself is exhausted. Changes no candidate, score or ranking — only
                     the node and simulation counts; deterministic.
    patience:        stop after this many consecutive simulations without a better best candidate (by
                     (admissible, objective, canonical text)); None: never. Deterministic (counts simulations, not
                     seconds), but it can end a search before the optimum is found, so it is off by default.
    """

    num_simulations: int = 300
    max_predicates: int = 3
    exploration: float = 1.0
    rollout_stop_prob: float = 0.5
    top_k: int = 5
    max_or_values: int = 4
    weights: ObjectiveWeights = field(default_factory=ObjectiveWeights)
    time_budget_s: float | None = None
    stop_when_scored: bool = True
    patience: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.num_simulations, int) and self.num_simulations >= 1):
            raise ConfigError(f"num_simulations must be an int ≥ 1, got {self.num_simulations!r}")
        if not (isinstance(self.max_predicates, int) and 1 <= self.max_predicates <= 8):
            raise ConfigError(f"max_predicates must be an int in 1..8, got {self.max_predicates!r}")
        if not (math.isfinite(self.exploration) and self.exploration >= 0):
            raise ConfigError(f"exploration must be a finite number ≥ 0, got {self.exploration!r}")
        if not 0 < self.rollout_stop_prob <= 1:
            raise ConfigError(f"rollout_stop_prob must be in (0, 1], got {self.rollout_stop_prob!r}")
        if not (isinstance(self.top_k, int) and self.top_k >= 1):
            raise ConfigError(f"top_k must be an int ≥ 1, got {self.top_k!r}")
        if not (isinstance(self.max_or_values, int) and self.max_or_values >= 2):
            raise ConfigError(f"max_or_values must be an int ≥ 2, got {self.max_or_values!r}")
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise ConfigError(f"time_budget_s must be > 0 or None, got {self.time_budget_s!r}")
        if self.patience is not None and not (
            isinstance(self.patience, int) and not isinstance(self.patience, bool) and self.patience >= 1
        ):
            raise ConfigError(f"patience must be an int ≥ 1 or None, got {self.patience!r}")


@dataclass(frozen=True)
class CandidateSpace:
    """The derivation alphabet: masks to choose from and the ordered predicate pool."""

    masks: tuple[ActionMask, ...]
    predicates: tuple[Guard, ...]

    def count_rules(self, max_predicates: int) -> int:
        """Number of complete rules with 1..max_predicates conjuncts: the size of the derivation space."""
        n = len(self.predicates)
        return len(self.masks) * sum(math.comb(n, k) for k in range(1, max_predicates + 1))


@dataclass(frozen=True)
class Candidate:
    rule: Rule
    text: str  # canonical text
    score: Score


@dataclass(frozen=True)
class SynthesisResult:
    """The outcome of one synthesis (one tree, or several merged).

    rule/text/score: the admitted candidate ΔS* (best admissible by (objective, canonical text)), or None.
    replay:          ReplayPass of H ∪ S_t ∪ {ΔS*} on D⁻ (for the best candidate overall when none is admissible).
    admitted:        True iff a candidate passed ReplayPass and the drift budget.
    top_k:           the best distinct candidates, admissible first.
    rejected:        the best candidates that failed ReplayPass or the drift budget (reported, never admitted).
    nodes_expanded:  tree nodes created; simulations: simulations run; evaluations: distinct rules scored.
    trace:           (nodes expanded, seconds, canonical text, objective) each time the best candidate improved.
    """

    rule: Rule | None
    text: str | None
    score: Score | None
    replay: ReplayReport
    admitted: bool
    top_k: tuple[Candidate, ...]
    rejected: tuple[Candidate, ...]
    nodes_expanded: int
    simulations: int
    evaluations: int
    wall_seconds: float
    trace: tuple[tuple[int, float, str, float], ...] = ()
    cpu_seconds: float = 0.0  # CPU time of the search process(es), summed over trees

    def signature(self) -> tuple:
        """Everything but timings: equal for equal searches (used to compare executors)."""
        return (
            self.text,
            self.score,
            self.admitted,
            tuple(c.text for c in self.top_k),
            tuple(c.text for c in self.rejected),
            self.nodes_expanded,
            self.simulations,
            self.evaluations,
        )


def candidate_key(c: Candidate) -> tuple:
    """The total order of candidates: admissible first, then lower objective, then canonical text."""
    return (not c.score.admissible, c.score.total, c.text)


# ---- the derivation alphabet ----------------------------------------------------------------------------------------


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _equality(feature: str, value: Value) -> Guard:
    named = _NAMED_FOR_FEATURE.get(feature)
    return Named(named, value) if named is not None else Compare(feature, "==", value)


def _midpoint(a: float, b: float) -> Value:
    mid = (a + b) / 2
    return int(mid) if float(mid).is_integer() and isinstance(a, int) and isinstance(b, int) else mid


def _thresholds(feature: str, failing: Sequence[float], observed: Sequence[float]) -> list[Guard]:
    """Numeric guards from observed values that hold on at least the most extreme failing value."""
    lo, hi = min(failing), max(failing)
    above = sorted({o for o in observed if o > hi})
    below = sorted({o for o in observed if o < lo}, reverse=True)
    out: list[Guard] = [Compare(feature, "<=", hi), Compare(feature, ">=", lo)]
    if above:
        out += [Compare(feature, "<", above[0]), Compare(feature, "<", _midpoint(hi, above[0]))]
    if below:
        out += [Compare(feature, ">", below[0]), Compare(feature, ">", _midpoint(lo, below[0]))]
    return out


def _feature_predicates(
    feature: str,
    failing: Sequence[Value],
    observed: Sequence[Value],
    classes: Classes,
    max_or_values: int,
    numeric_equalities: bool = True,
) -> list[Guard]:
    values = sorted(set(failing), key=lambda v: (type(v).__name__, v))
    numeric = [v for v in values if _is_number(v)]
    out: list[Guard] = [_equality(feature, v) for v in values if numeric_equalities or not _is_number(v)]
    if numeric:
        out += _thresholds(feature, numeric, [o for o in observed if _is_number(o)])
    categorical = [v for v in values if isinstance(v, str)]
    if 2 <= len(categorical) <= max_or_values:
        out.append(Or(tuple(_equality(feature, v) for v in categorical)))
    for class_name in sorted(classes):
        if any(v in classes[class_name] for v in categorical):
            out.append(InClass(feature, class_name))
    return out


def candidate_space(
    data: SynthesisData, fragment: Failure, classes: Classes | None = None, max_or_values: int = 4
) -> CandidateSpace:
    """Masks and guard predicates for the fragment's failure pattern (paper §4.2 derivation moves).

    Masks: for every failed action of D⁻ with the fragment's kind and name, ``forbid_env_action(verb)`` or
    ``forbid_tool_call(t)`` and ``forbid_tool_arg(t, k, v)`` for each causal argument k.
    Predicates: the action-name predicate (``action_is``/``tool_is``); for each causal action argument and each
    causal context variable (the fragment's q), equalities on the failing values, numeric thresholds from the values
    observed anywhere in the data, the disjunction of the failing values, and ``in_class`` for each class holding
    one of them; and for each numeric causal argument and numeric causal context variable, the relation between
    them that separates the failures from the recorded safe pairs (:func:`_relations`). When the verdict named a
    quantity a numeric argument was judged against (``Failure.quantities``), their relation is offered in place of
    the literal predicates on either; when it stated the value under which the action is allowed
    (``Failure.allowed``), ``variable != value`` is offered in place of the literal predicates on that variable.
    """
    classes = classes or {}
    keys = {(a.kind, a.name) for a in fragment.F}
    failed: list[tuple[dict, Action]] = [
        (dict(case.q), a) for case in data.D_minus for a in case.F if (a.kind, a.name) in keys
    ]
    if not failed:
        failed = [(dict(fragment.q), a) for a in fragment.F]
    masks: list[ActionMask] = []
    for kind, name in sorted(keys):
        if kind == "env":
            masks.append(ForbidEnvAction(name))
        elif kind == "tool":
            masks.append(ForbidToolCall(name))
            for arg in sorted(fragment.causal_args):
                for value in sorted(
                    {a.arg(arg) for _, a in failed if a.name == name and a.arg(arg) is not None}
                ):
                    masks.append(ForbidToolArg(name, arg, value))

    # Values observed anywhere in the data (only their set matters: numeric thresholds), read once per feature.
    table = pair_table(data)

    def observed(groups, every: Iterable[Value]) -> list[Value]:
        if groups is None:  # unhashable values: no grouping, every value
            return [v for v in every if v is not MISSING and v is not None]
        return [v for v in groups[2] if v is not MISSING and v is not None]

    # A numeric argument the verdict judged against a quantity it named: the condition is their relation, which
    # is offered in place of literal predicates on either (those would restate the levels this run failed at).
    judged = {
        arg for arg in fragment.causal_args if fragment.quantities and _is_number(fragment.action.arg(arg))
    }
    judged_against = fragment.quantities if judged else frozenset()
    predicates: list[Guard] = []
    for kind, name in sorted(keys):
        predicates.append(Named("tool_is" if kind == "tool" else "action_is", name))
    for arg in sorted(fragment.causal_args - judged):
        predicates += _feature_predicates(
            f"action.{arg}",
            [a.arg(arg) for _, a in failed if a.arg(arg) is not None],
            observed(table.arg_partition(arg), (a.arg(arg) for a in table.actions)),
            classes,
            max_or_values,
        )
    predicates += _confounded_flags(fragment, failed, _safe_pairs(data, fragment, keys))
    # A variable the verdict stated the allowed value of ("only with empty hands"): the condition is that it is not
    # that value, offered in place of literal predicates on it (those would restate the values this run failed at).
    allowed = dict(fragment.allowed)
    predicates += [Compare(var, "!=", value) for var, value in sorted(allowed.items())]
    # With the experience contrast, a numeric context variable gets thresholds only: an equality on it ("step ==
    # 25") restates when the failure happened, which one failure always separates from every success.
    contrast = bool(data.contrast)
    for var in sorted(set(fragment.q) - judged_against - set(allowed)):
        if (
            contrast
            and _is_number(fragment.q[var])
            and not _clock_separates(data, fragment, failed, keys, var)
        ):
            continue
        predicates += _feature_predicates(
            var,
            [q[var] for q, _ in failed if var in q],
            observed(table.partition(var), (q.get(var) for q in table.contexts)),
            classes,
            max_or_values,
            numeric_equalities=not contrast,
        )
    if contrast:
        predicates += _contrast_exceptions(data, fragment, set(fragment.q) - judged_against - set(allowed))
    predicates += _relations(fragment, failed, _safe_pairs(data, fragment, keys))
    predicates += _exception_predicates(fragment)
    # the confounded flags (one predicate that is a conjunction) go last, whole: canonical order would split them
    compound = [canonical(g) for g in dict.fromkeys(predicates) if isinstance(g, And)]
    unique = [g for g in dict.fromkeys(predicates) if not isinstance(g, And)]
    # Pool order = the canonical order of guard operands, so a conjunction of pooled predicates taken in pool order
    # is already canonical (the search then never re-canonicalises), unless it holds a compound predicate.
    ordered = (
        canonical(And(tuple(unique))).operands if len(unique) >= 2 else tuple(canonical(g) for g in unique)
    ) + tuple(compound)
    return CandidateSpace(tuple(dict.fromkeys(masks)), tuple(ordered))


def _same_action(a: Action, b: Action) -> bool:
    """The same action up to its numeric arguments: kind, name and every string or boolean argument."""
    return (
        a.kind == b.kind
        and a.name == b.name
        and {k: v for k, v in a.args if isinstance(v, str | bool)}
        == {k: v for k, v in b.args if isinstance(v, str | bool)}
    )


def _clock_separates(
    data: SynthesisData,
    fragment: Failure,
    failed: Sequence[tuple[Mapping[str, Value], Action]],
    keys: set[tuple[str, str]],
    var: str,
) -> bool:
    """The clock gate (evidence before context, issue 40): a numeric context variable (the step) is offered
    thresholds unless the situation explains the same evidence — some categorical context variable that changes
    within an episode (what is held, the room: the situation, which moves with the clock) has no value in common
    between the failures and the recorded successes (strong or weak) and certified-safe what-ifs of the same
    action. Then ``step > 3.5`` and ``held_type != "none"`` separate the same evidence, and the window is the wrong
    guess that masks the expert's later, empty-handed steps; the situation's reading is offered alone. With no
    such success, or one that differs from a failure in the clock only, the window is offered. A variable with one
    value in the whole data is exempt: it can be in q only because the verdict stated it (its scope, "in world
    version 0")."""
    values = {q.get(var) for q, _ in failed} | {c.q.get(var) for c in data.D_plus}
    if len(values - {None}) <= 1:
        return True
    safe = [(c.q, c.a_star) for c, label in zip(data.D_plus, data.contrast, strict=True) if label != 0]
    safe += [(q, a) for q, a in fragment.safe_counterfactuals if (a.kind, a.name) in keys]
    own = fragment.action
    failing = [q for q, a in failed if _same_action(a, own)]
    spared = [q for q, a in safe if _same_action(a, own)]
    if not failing or not spared:
        return True
    situational = _within_episode(data)
    for k in situational - {var}:
        if not all(isinstance(q.get(k), str | bool) for q in (*failing, *spared)):
            continue
        if not {_key(q[k]) for q in failing} & {_key(q[k]) for q in spared}:
            return False
    return True


def _within_episode(data: SynthesisData) -> frozenset[str]:
    """The context variables whose value changes within some episode of the recorded steps."""
    first: dict[tuple[int, str], Value] = {}
    out: set[str] = set()
    for step in data.steps:
        for k, v in step.context.items():
            if k not in out and first.setdefault((step.episode, k), v) != v:
                out.add(k)
    return frozenset(out)


def _confounded_flags(
    fragment: Failure,
    failed: Sequence[tuple[Mapping[str, Value], Action]],
    safe: Sequence[tuple[Mapping[str, Value], Action]],
) -> list[Guard]:
    """Evidence before context (issue 40): the causal state flags that were true on every failure and equal to each
    other on every failed and every recorded safe action of the kind (cleaning makes an object clean *and* wet:
    nothing the agent did separates them) are offered together, as one predicate. The search then need not pick
    one of them — a choice the evidence cannot make — and the conjunction costs one step of ``max_predicates``, so
    the object and the receptacle still fit beside it. A contrast (a failure or a success with one flag but not the
    other) splits the group, and the flags are then offered only one by one."""
    flags = [
        arg
        for arg in sorted(fragment.causal_args)
        if all(a.arg(arg) is True for _, a in failed) and fragment.action.arg(arg) is True
    ]
    executed = [a for _, a in failed] + [a for _, a in safe]
    confounded = [f for f in flags if all(a.arg(f) == a.arg(flags[0]) for a in executed)]
    if len(confounded) < 2:
        return []
    return [And(tuple(Compare(f"action.{f}", "==", True) for f in confounded))]


_RELATION_OPS = ("<", ">", "<=", ">=")  # strict first: on a tie in separation, the strict relation is offered


def _safe_pairs(
    data: SynthesisData, fragment: Failure, keys: set[tuple[str, str]]
) -> list[tuple[Mapping[str, Value], Action]]:
    """The recorded pairs known safe for the fragment's kind of action: successes whose chosen action has one of
    the failed (kind, name)s, and the safe what-ifs the extraction certified (or presumed from the verdict)."""
    out = [(c.q, c.a_star) for c in data.D_plus if (c.a_star.kind, c.a_star.name) in keys]
    out += [(q, a) for q, a in fragment.safe_counterfactuals if (a.kind, a.name) in keys]
    return out


def _relations(
    fragment: Failure,
    failed: Sequence[tuple[Mapping[str, Value], Action]],
    safe: Sequence[tuple[Mapping[str, Value], Action]],
) -> list[Guard]:
    """``action.<arg> op <variable>`` for each numeric causal argument and numeric causal context variable: a norm
    relative to the situation (a request above a share the context states), which no literal threshold expresses
    when the failures happen at different levels of the variable.

    For each (argument, variable) pair that are numbers on the fragment's own failure, the offered op is the one of
    ``<``, ``>``, ``<=``, ``>=`` that holds there and, of those, on the most failing pairs of D⁻, then on the fewest
    recorded safe pairs (strict first on a tie). It is offered when the verdict named the variable as the quantity
    the argument was judged against (``Failure.quantities``), when it separates — some safe pair where both sides
    are numbers falls outside it — or when there is no such safe pair to separate from (the failures alone then
    say as much for a relation as for a threshold). Whether it beats the other predicates is the objective's call:
    it costs what a literal comparison costs."""
    own_q, own_action = fragment.q, fragment.action
    out: list[Guard] = []
    for arg in sorted(fragment.causal_args):
        x0 = own_action.arg(arg)
        if not _is_number(x0):
            continue
        for var in sorted(own_q):
            y0 = own_q[var]
            if not _is_number(y0):
                continue
            failing = [(a.arg(arg), q.get(var, MISSING)) for q, a in failed]
            numeric_safe = [
                (a.arg(arg), q.get(var))
                for q, a in safe
                if _is_number(a.arg(arg)) and _is_number(q.get(var, MISSING))
            ]
            best: tuple[int, int, str] | None = None
            for op in _RELATION_OPS:
                if not compare(x0, op, y0):
                    continue
                covered = sum(_is_number(x) and _is_number(y) and compare(x, op, y) for x, y in failing)
                held = sum(compare(x, op, y) for x, y in numeric_safe)
                if best is None or (-covered, held) < best[:2]:
                    best = (-covered, held, op)
            separates = not numeric_safe or best is not None and best[1] < len(numeric_safe)
            if best is not None and (var in fragment.quantities or separates):
                out.append(CompareFeatures(f"action.{arg}", best[2], var))
    return out


def _contrast_exceptions(
    data: SynthesisData, fragment: Failure, variables: set[str], most: int = 3
) -> list[Guard]:
    """``variable != v`` for a categorical context variable where the agent's own successes of this kind of action
    (``SynthesisData.contrast``) were executed with a value v other than every failure's: the condition that spares
    them ("open the drawer" succeeded with ``held_type == "none"``, failed with a mug and with a plate in hand) —
    and where a presumption of this kind of action (``SynthesisData.presumed_safe``: a blocked proposal of a lost
    task) had such a value. The ``most`` commonest such values per variable."""
    failing = {var: set() for var in variables}
    for case in data.D_minus:
        for var in variables:
            if var in case.q:
                failing[var].add(_key(case.q[var]))
    counts: dict[str, dict] = {var: {} for var in variables}
    kinds = {(a.kind, a.name) for a in fragment.F}
    spared = [case.q for case, label in zip(data.D_plus, data.contrast, strict=True) if label != 0]
    # a presumption of the same kind of action with a context value no failure had (a blocked proposal of a lost
    # task: "open the fridge" with empty hands) is offered the same condition — as a candidate, never a veto
    spared += [q for q, a in data.presumed_safe if (a.kind, a.name) in kinds]
    for q in spared:
        for var in variables:
            v = q.get(var)
            if isinstance(v, str | bool) and _key(v) not in failing[var]:
                counts[var][_key(v)] = counts[var].get(_key(v), 0) + 1
    out: list[Guard] = []
    for var in sorted(variables):
        if not isinstance(fragment.q.get(var), str | bool):
            continue
        best = sorted(counts[var].items(), key=lambda kv: (-kv[1], str(kv[0])))[:most]
        out += [Compare(var, "!=", k[1] if isinstance(k, tuple) else k) for k, _ in best]
    return out


def _key(value: object) -> object:
    return (type(value).__name__, value) if isinstance(value, bool) else value


def _exception_predicates(fragment: Failure) -> list[Guard]:
    """``feature != v`` where the extraction found exactly one value v of a causal feature at which the failure
    disappears (e.g. ``held_type != "none"``: the violation holds for whatever is held, but not for empty hands).
    Only categorical values (strings, booleans) the world actually uses (not the extraction's sentinel)."""
    safe: dict[str, set] = {}
    for q, a in fragment.safe_counterfactuals:
        for var, value in fragment.q.items():
            other = q.get(var, value)
            if other != value or type(other) is not type(value):
                safe.setdefault(var, set()).add(other)
        for arg in fragment.causal_args:
            value, other = fragment.F[0].arg(arg), a.arg(arg)
            if other != value or type(other) is not type(value):
                safe.setdefault(f"action.{arg}", set()).add(other)
    out: list[Guard] = []
    for feature, values in sorted(safe.items()):
        values = {v for v in values if isinstance(v, str | bool) and v != COUNTERFACTUAL_SENTINEL}
        if len(values) == 1:
            out.append(Compare(feature, "!=", values.pop()))
    return out


def _shared_space(
    data: SynthesisData, fragment: Failure, classes: Classes | None, max_or_values: int
) -> CandidateSpace:
    """``candidate_space(...)``, shared by the trees of one synthesis in one process (kept on the data's pair table,
    for the same classes object; the space is a pure function of its arguments)."""
    spaces = pair_table(data).spaces
    key = (fragment, max_or_values)
    try:
        hit = spaces.get(key)
    except TypeError:  # an unhashable value in the fragment's actions: not shared
        return candidate_space(data, fragment, classes, max_or_values)
    if hit is None or hit[0] is not classes:
        hit = spaces[key] = (classes, candidate_space(data, fragment, classes, max_or_values))
    return hit[1]


def build_rule(mask: ActionMask, predicates: Sequence[Guard]) -> Rule:
    """The canonical rule ``if p1 and … and pk then mask``."""
    return canonical(_assemble(mask, predicates))


def _assemble(mask: ActionMask, predicates: Sequence[Guard]) -> Rule:
    # Canonical as is when the predicates are canonical and in pool order (see candidate_space), unless one of them
    # is a compound (the confounded flags): then flattened and ordered once.
    rule = Rule(predicates[0] if len(predicates) == 1 else And(tuple(predicates)), mask)
    return canonical(rule) if any(isinstance(p, And) for p in predicates) else rule


# ---- the search ----------------------------------------------------------------------------------------------------


class _Derivations:
    """The rules of one candidate space under one evaluator: each mask's and predicate's signature (the bit sets of
    ``ObjectiveEvaluator.signature``, met once) and every derivation scored so far. The trees of one synthesis in one
    process share it (see :func:`_derivations`), so a rule is scored once per synthesis."""

    def __init__(self, evaluator: ObjectiveEvaluator, space: CandidateSpace) -> None:
        self.evaluator = evaluator
        self.space = space
        self._masks: list[tuple[int, int, int] | None] = [None] * len(space.masks)
        self._predicates: list[tuple[int, int, int] | None] = [None] * len(space.predicates)
        # each predicate's sizes alone and as a conjunct (dsl.cost.operand_sizes): C of a derivation from its parts
        self._alone = [operand_sizes(g, False) for g in space.predicates]
        self._conjunct = [operand_sizes(g, True) for g in space.predicates]
        self._lambdas = evaluator.weights.lambdas
        # (mask, predicates) -> (rule, score, its rough rank: (not admissible, total))
        self.scored: dict[tuple[int, tuple[int, ...]], tuple[Rule, Score, tuple[bool, float]]] = {}

    def score(self, mask: int, preds: tuple[int, ...]) -> tuple[Rule, Score, tuple[bool, float]]:
        key = (mask, preds)
        hit = self.scored.get(key)
        if hit is None:
            space, evaluator = self.space, self.evaluator
            the_mask = space.masks[mask]
            rule = _assemble(the_mask, [space.predicates[j] for j in preds])
            signed = self._masks[mask]
            if signed is None:
                signed = self._masks[mask] = evaluator.signature(the_mask)
            operands = []
            for j in preds:
                sig = self._predicates[j]
                if sig is None:
                    sig = self._predicates[j] = evaluator.signature(space.predicates[j])
                operands.append(sig)
            # pool-ordered conjunctions of the canonical pool are canonical (see candidate_space): C from the parts
            sizes = self._alone if len(preds) == 1 else self._conjunct
            cost = conjunction_cost(the_mask, [sizes[j] for j in preds], self._lambdas)
            score = evaluator.score_signed(rule, signed, operands, cost)
            hit = self.scored[key] = (rule, score, (not score.admissible, score.total))
        return hit


_LAST_DERIVATIONS: tuple[weakref.ref, CandidateSpace, _Derivations] | None = None


def _derivations(evaluator: ObjectiveEvaluator, space: CandidateSpace) -> _Derivations:
    """The derivations of ``space`` under ``evaluator``, shared with the previous caller that passed the same two
    objects (the trees of one synthesis run one after another in one process; one slot keeps nothing for long)."""
    global _LAST_DERIVATIONS
    last = _LAST_DERIVATIONS
    if last is not None and last[0]() is evaluator and last[1] is space:
        return last[2]
    derivations = _Derivations(evaluator, space)
    _LAST_DERIVATIONS = (weakref.ref(evaluator), space, derivations)
    return derivations


def _rough(scored: tuple[Rule, Score, tuple[bool, float]]) -> tuple[bool, float]:
    return scored[2]


class _Scorer:
    """Scores each derivation (mask, predicate indices) once and keeps the candidates seen.

    Canonical texts are only printed where they decide something: ties of (admissible, objective) and the
    reported candidates.
    """

    def __init__(self, evaluator: ObjectiveEvaluator, space: CandidateSpace, started: float) -> None:
        self.derivations = _derivations(evaluator, space)
        self.started = started
        self.seen: dict[tuple[int, tuple[int, ...]], tuple[Rule, Score, tuple[bool, float]]] = {}
        self.best: Candidate | None = None
        self.trace: list[tuple[int, float, str, float]] = []

    def __call__(self, mask: int, preds: tuple[int, ...], nodes: int) -> Score:
        key = (mask, preds)
        hit = self.seen.get(key)
        if hit is not None:
            return hit[1]
        rule, score, _ = self.seen[key] = self.derivations.score(mask, preds)
        best = self.best
        if best is None or (not score.admissible, score.total) <= (
            not best.score.admissible,
            best.score.total,
        ):
            cand = Candidate(rule, canonical_text(rule), score)
            if best is None or candidate_key(cand) < candidate_key(best):
                self.best = cand
                self.trace.append((nodes, time.perf_counter() - self.started, cand.text, score.total))
        return score

    def ranked(self, k: int) -> list[Candidate]:
        """The k best candidates by :func:`candidate_key` (texts printed for the contenders only)."""
        seen = self.seen.values()
        # the k-th rough rank is the cut; a stable sort of what passes it is the sorted prefix
        if len(seen) > k:
            cut = heapq.nsmallest(k, [rs[2] for rs in seen])[-1]
            seen = [rs for rs in seen if rs[2] <= cut]
        rough = sorted(seen, key=_rough)
        return sorted((Candidate(r, canonical_text(r), sc) for r, sc, _ in rough), key=candidate_key)[:k]

    def rejected(self, k: int) -> list[Candidate]:
        """The k best candidates that failed admission (ReplayPass or the drift budget)."""
        failed = [rs for rs in self.seen.values() if rs[2][0]]
        if len(failed) > k:
            cut = heapq.nsmallest(k, [rs[2][1] for rs in failed])[-1]
            failed = [rs for rs in failed if rs[2][1] <= cut]
        rough = sorted(failed, key=_rough)
        return sorted((Candidate(r, canonical_text(r), sc) for r, sc, _ in rough), key=candidate_key)[:k]


class _Node:
    """A partial derivation. ``mask`` is −1 before the mask move; ``preds`` are pool indices in increasing order."""

    __slots__ = (
        "mask",
        "preds",
        "terminal",
        "untried",
        "children",
        "child_visits",
        "child_values",
        "child_open",
        "n_open",
        "visits",
    )

    def __init__(self, mask: int, preds: tuple[int, ...], terminal: bool, untried: list[int]) -> None:
        self.mask = mask
        self.preds = preds
        self.terminal = terminal
        self.untried = (
            untried  # moves not yet expanded: mask indices at the root, else predicate indices or _STOP
        )
        self.children: list[_Node] = []
        # Per-child statistics kept in the parent, so UCT over many children is one numpy expression.
        self.child_visits: list[int] = []
        self.child_values: list[float] = []  # best reward seen in each child's subtree
        self.child_open: list[bool] = []  # False once the child's subtree is fully explored
        self.n_open = 0  # children still open (a closed subtree never reopens: its moves are all taken)
        self.visits = 0


_STOP = -1  # the stop move; a mask node's moves are predicate indices, the root's are mask indices


def _moves(mask: int, preds: tuple[int, ...], terminal: bool, n_masks: int, n_preds: int, max_preds: int):
    if terminal:
        return []
    if mask < 0:
        return list(range(n_masks))
    moves: list[int] = [_STOP] if preds else []
    if len(preds) < max_preds:
        moves += range(preds[-1] + 1 if preds else 0, n_preds)
    return moves


def _child(node: _Node, move: int, n_masks: int, n_preds: int, max_preds: int) -> _Node:
    mask, preds, terminal = node.mask, node.preds, False
    if mask < 0:
        mask = move
    elif move != _STOP:
        preds = (*preds, move)
    else:
        terminal = True
    untried = _moves(mask, preds, terminal, n_masks, n_preds, max_preds)
    return _Node(mask, preds, terminal, untried)


_VECTOR_SELECT = 24  # children above which UCT is one numpy expression (measured crossover ≈ 20–30)


def _select(node: _Node, lo: float, hi: float, exploration: float) -> int:
    """UCT over the children that still have unexplored rules; best rewards are min–max normalised to [0, 1].

    Returns the child's index (the first of equal maxima, so the choice is deterministic).
    """
    span = hi - lo if hi > lo else 1.0
    log_n = math.log(max(node.visits, 1))
    if len(node.child_visits) > _VECTOR_SELECT:
        if node.child_visits.__class__ is list:
            # selected: fully expanded, so its children are final; their statistics become arrays for good (the
            # backup updates them in place: the same values as the lists')
            node.child_visits = np.asarray(node.child_visits, dtype=float)
            node.child_values = np.asarray(node.child_values, dtype=float)
            node.child_open = np.asarray(node.child_open, dtype=bool)
        uct = (node.child_values - lo) / span + exploration * np.sqrt(log_n / node.child_visits)
        return int(np.argmax(np.where(node.child_open, uct, -np.inf)))
    # Few children: plain floats beat numpy's per-call cost, and the same IEEE operations in the same order give the
    # same values (so the same choice) as the vectorised form.
    best, best_uct = -1, -math.inf
    for i, (value, visits, is_open) in enumerate(
        zip(node.child_values, node.child_visits, node.child_open, strict=True)
    ):
        if is_open:
            uct = (value - lo) / span + exploration * math.sqrt(log_n / visits)
            if uct > best_uct or best < 0:
                best, best_uct = i, uct
    return max(best, 0)


def synthesize(
    data: SynthesisData,
    fragment: Failure,
    current_rules: Iterable[Rule] = (),
    core_rules: Iterable[Rule] = (),
    classes: Classes | None = None,
    config: SearchConfig | None = None,
    seed: int | np.random.SeedSequence = 0,
) -> SynthesisResult:
    """Search for ΔS* = argmin of the SPEC §4 objective with UCT over DSL derivations (paper §4.2).

    Returns the best admissible rule (ReplayPass and drift budget), its Score and ReplayPass report, the top-k
    candidates, the rejected ones, nodes expanded and wall time. Same inputs and seed, same result.
    """
    config = config or SearchConfig()
    current_rules, core_rules = tuple(current_rules), tuple(core_rules)
    started, cpu_started = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(seed)
    space = _shared_space(data, fragment, classes, config.max_or_values)
    evaluator = shared_evaluator(data, current_rules, core_rules, classes, config.weights)
    scorer = _Scorer(evaluator, space, started)
    n_masks, n_preds, max_preds = len(space.masks), len(space.predicates), config.max_predicates
    if n_masks == 0 or n_preds == 0:
        raise ConfigError(f"the fragment yields no derivation: {n_masks} masks and {n_preds} predicates")

    root = _Node(-1, (), False, _moves(-1, (), False, n_masks, n_preds, max_preds))
    root_open = True
    nodes = 1
    lo, hi = math.inf, -math.inf
    simulations = 0
    space_size = space.count_rules(max_preds) if config.stop_when_scored else -1
    best_at = 0  # the simulation that last improved the best candidate (for ``patience``)

    integers, uniform = rng.integers, rng.random
    exploration, time_budget, patience = config.exploration, config.time_budget_s, config.patience
    seen = scorer.seen
    for _ in range(config.num_simulations):
        if not root_open:
            break
        if time_budget is not None and time.perf_counter() - started > time_budget:
            break
        if len(seen) == space_size:
            break
        if patience is not None and simulations - best_at >= patience:
            break
        simulations += 1
        path: list[tuple[_Node, int]] = [(root, -1)]  # (node, its index in its parent)
        node = root
        # Selection: descend through fully expanded nodes by UCT.
        while not node.terminal and not node.untried and node.children:
            index = _select(node, lo, hi, exploration)
            node = node.children[index]
            path.append((node, index))
        # Expansion: one untried move, chosen by the generator.
        untried = node.untried
        if untried:
            move = untried.pop(int(integers(len(untried))))
            child = _child(node, move, n_masks, n_preds, max_preds)
            node.children.append(child)
            node.child_visits.append(0)
            node.child_values.append(-math.inf)
            node.child_open.append(True)
            node.n_open += 1
            nodes += 1
            path.append((child, len(node.children) - 1))
            node = child
        # Evaluation: the node's own rule when complete, else a random completion. A node with a mask and at least
        # one predicate is itself a complete rule (stopping is always allowed there): it is scored too, and the
        # node is worth the better of the two, so a short rule is never lost to the conjuncts a rollout adds.
        if node.terminal:
            mask, preds = node.mask, node.preds
        else:  # the rollout (inline): a random mask at the root, then predicates until a stop
            mask = node.mask
            if mask < 0:
                mask = int(integers(n_masks))
            drawn = list(node.preds)
            while len(drawn) < max_preds:
                start = drawn[-1] + 1 if drawn else 0
                if start >= n_preds or (drawn and uniform() < config.rollout_stop_prob):
                    break
                drawn.append(int(integers(start, n_preds)))
            preds = tuple(drawn)
        improvements = len(scorer.trace)
        hit = seen.get((mask, preds))
        reward = -(hit[1] if hit is not None else scorer(mask, preds, nodes)).total
        if not node.terminal and node.preds and preds != node.preds:
            hit = seen.get((node.mask, node.preds))
            reward = max(reward, -(hit[1] if hit is not None else scorer(node.mask, node.preds, nodes)).total)
        if len(scorer.trace) > improvements:
            best_at = simulations
        if reward < lo:
            lo = reward
        if reward > hi:
            hi = reward
        # Backup, and close finished subtrees so selection never revisits them.
        is_open = True
        for depth in range(len(path) - 1, -1, -1):
            n, index = path[depth]
            n.visits += 1
            is_open = not n.terminal and (bool(n.untried) or n.n_open > 0)
            if depth > 0:
                parent = path[depth - 1][0]
                parent.child_visits[index] += 1
                value = parent.child_values[index]
                if reward > value:  # max(value, reward), as the best reward seen in the subtree
                    parent.child_values[index] = reward
                if not is_open and parent.child_open[index]:
                    parent.child_open[index] = False
                    parent.n_open -= 1
        root_open = is_open

    nodes += _generalise(scorer, space, nodes)
    return _result(
        scorer, current_rules, core_rules, data, classes, config, nodes, simulations, started, cpu_started
    )


def _subject(guard: Guard) -> str:
    """What a predicate is about, for :func:`_generalise`: the argument group of an action feature
    (``action.obj`` and ``action.obj_type`` are one object) or the context variable; a compound, a relation or a
    named predicate is about itself."""
    if isinstance(guard, Or) and guard.operands:
        return _subject(guard.operands[0])
    feature = guard.feature if isinstance(guard, Compare | InClass) else None
    if feature is None:
        return repr(guard)
    return f"action.{feature[7:].split('_', 1)[0]}" if feature.startswith("action.") else feature


def _generalise(scorer: _Scorer, space: CandidateSpace, nodes: int, best: int = 3, rounds: int = 4) -> int:
    """After the tree search: from each of the ``best`` candidates, replace one predicate on an argument of the
    action by another predicate of the pool on the same argument (an instance disjunction by its type or class, a
    receptacle type by the receptacle), and keep the best while it improves (issue 40: the objective prefers the
    class to the instance disjunction, but a tree of a few hundred simulations seldom meets it). Deterministic;
    every rule scored joins the search's candidates. Returns the number of rules scored."""
    subjects = [_subject(g) for g in space.predicates]
    by_subject: dict[str, list[int]] = {}
    for i, subject in enumerate(subjects):
        if subject.startswith("action."):
            by_subject.setdefault(subject, []).append(i)
    scored = 0

    def value(key: tuple[int, tuple[int, ...]]) -> tuple[bool, float]:
        score = scorer.seen[key][1]
        return (not score.admissible, score.total)

    starts = sorted(scorer.seen, key=lambda key: (value(key), key))[:best]
    for mask, preds in starts:
        current = (mask, preds)
        for _ in range(rounds):
            neighbours = set()
            for j, p in enumerate(preds):
                rest = preds[:j] + preds[j + 1 :]
                for q in by_subject.get(subjects[p], ()):
                    if q != p and q not in rest:
                        neighbours.add(tuple(sorted((*rest, q))))
            improved = current
            for neighbour in sorted(neighbours):
                key = (mask, neighbour)
                if key not in scorer.seen:
                    scored += 1
                    scorer(mask, neighbour, nodes + scored)
                if (value(key), key) < (value(improved), improved):
                    improved = key
            if improved == current:
                break
            current = improved
            preds = current[1]
    return scored


def exhaustive_search(
    data: SynthesisData,
    fragment: Failure,
    current_rules: Iterable[Rule] = (),
    core_rules: Iterable[Rule] = (),
    classes: Classes | None = None,
    config: SearchConfig | None = None,
) -> SynthesisResult:
    """The LLM-free, search-free baseline: score every rule of the same derivation space up to ``max_predicates``.

    Gives the true optimum of the objective over the space, so it is the oracle the MCTS is tested against and the
    alternative the benchmark compares with.
    """
    config = config or SearchConfig()
    current_rules, core_rules = tuple(current_rules), tuple(core_rules)
    started, cpu_started = time.perf_counter(), time.process_time()
    space = _shared_space(data, fragment, classes, config.max_or_values)
    evaluator = shared_evaluator(data, current_rules, core_rules, classes, config.weights)
    scorer = _Scorer(evaluator, space, started)
    count = 0
    for mask in range(len(space.masks)):
        for k in range(1, config.max_predicates + 1):
            for combo in itertools.combinations(range(len(space.predicates)), k):
                count += 1
                scorer(mask, combo, count)
    return _result(
        scorer, current_rules, core_rules, data, classes, config, count, count, started, cpu_started
    )


def _result(
    scorer: _Scorer,
    current_rules: tuple[Rule, ...],
    core_rules: tuple[Rule, ...],
    data: SynthesisData,
    classes: Classes | None,
    config: SearchConfig,
    nodes: int,
    simulations: int,
    started: float,
    cpu_started: float,
) -> SynthesisResult:
    ranked = scorer.ranked(config.top_k)
    best = ranked[0]
    admitted = best.score.admissible
    replay = replay_pass((*core_rules, *current_rules, best.rule), data.D_minus, classes)
    return SynthesisResult(
        rule=best.rule if admitted else None,
        text=best.text if admitted else None,
        score=best.score if admitted else None,
        replay=replay,
        admitted=admitted,
        top_k=tuple(ranked),
        rejected=tuple(scorer.rejected(config.top_k)),
        nodes_expanded=nodes,
        simulations=simulations,
        evaluations=len(scorer.seen),
        wall_seconds=time.perf_counter() - started,
        trace=tuple(scorer.trace),
        cpu_seconds=time.process_time() - cpu_started,
    )


def merge_results(
    results: Sequence[SynthesisResult], top_k: int = 5, wall_seconds: float | None = None
) -> SynthesisResult:
    """Deterministic merge of root-parallel trees: best by (admissible, objective, canonical text).

    Node, simulation and evaluation counts add up (evaluations count per tree: trees do not share caches).
    ``wall_seconds`` is the caller's elapsed time (trees run concurrently); default: the slowest tree.
    """
    if not results:
        raise ConfigError("merge_results needs at least one result")
    pool: dict[str, Candidate] = {}
    for r in results:
        for c in r.top_k:
            pool.setdefault(c.text, c)
    ranked = sorted(pool.values(), key=candidate_key)
    best = ranked[0]
    # The global best is some tree's own best; its ReplayPass report and improvement trace come from that tree.
    source = next(r for r in results if r.top_k[0].text == best.text)
    return SynthesisResult(
        rule=best.rule if best.score.admissible else None,
        text=best.text if best.score.admissible else None,
        score=best.score if best.score.admissible else None,
        replay=source.replay,
        admitted=best.score.admissible,
        top_k=tuple(ranked[:top_k]),
        rejected=tuple(c for c in ranked if not c.score.admissible)[:top_k],
        nodes_expanded=sum(r.nodes_expanded for r in results),
        simulations=sum(r.simulations for r in results),
        evaluations=sum(r.evaluations for r in results),
        wall_seconds=max(r.wall_seconds for r in results) if wall_seconds is None else wall_seconds,
        trace=source.trace,
        cpu_seconds=sum(r.cpu_seconds for r in results),
    )
