"""The synthesis objective of paper §3.3 / SPEC §4, ReplayPass (Prop. 1) and the off-failure drift (Prop. 3).

    ΔS* = argmin  C(ΔS) + β1·L_fail + β2·L_succ + β3·L_drift + β4·L_conflict,   π' = π_{S_t ∪ ΔS}

π' is computed from the recorded base logits: π_S(a|q) ∝ π_0(a|q)·exp(Φ_S(q, a)) with Φ_S = −∞ on the masked set
U_S(q) (hard masks, SPEC §1) or Φ_S = b·#{σ firing on (q, a)} with a finite bias b < 0 (the *Soft Bias Only*
ablation). The governed policy always includes the core schema H: π_{S_t} masks with H ∪ S_t, π' with H ∪ S_t ∪ ΔS.
Every distribution has one extra outcome, the fallback a_⊥: when every control action of q is masked, π' puts mass
1 on a_⊥ (never a division by zero), so π'(a|q) = 0 for every a ∈ F there.

Finite caps (documented choices):
- L_succ: −log π'(a*|q) is infinite when a* is masked; it is capped at ``LOG_CAP`` = −log(1e−12) ≈ 27.63, i.e. a
  masked success costs as much as a success left with probability 10⁻¹².
- L_drift: KL(π'‖π_{S_t}) is infinite when π' puts mass where π_{S_t} has none (only the fallback can: π' falls back
  where π_{S_t} did not); the log-probability of π_{S_t} is floored at −``LOG_CAP`` for that term.

L_conflict (the paper: Σ_{σ_i∈S_t} 1[g_i ∧ g_ΔS ∧ (m_i ⊕ m_ΔS)]). The DSL only forbids, so two masks never say
"allow" and "forbid" of one action; the contradiction the paper names "action exclusivity" is read here as: on some
recorded context q both σ_i and ΔS fire (their guards co-fire, each masking at least one admissible control action)
and *together* they mask every control action left open by the rest of H ∪ S_t, although neither alone does — the
pair forces the fallback a_⊥ where each rule alone leaves the agent a way to act. σ_i ranges over H ∪ S_t (the core
schema is part of the active control plane the patch joins). Each σ_i counts at most once.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Literal

import numpy as np

from scars.synthesis.dsl import Lambdas, description_length
from scars.synthesis.dsl.ast import (
    NAMED_PREDICATES,
    Action,
    ActionMask,
    And,
    Compare,
    ForbidEnvAction,
    ForbidToolArg,
    ForbidToolCall,
    Guard,
    InClass,
    Named,
    Or,
    Rule,
)
from scars.synthesis.dsl.cost import canonical_cost
from scars.synthesis.dsl.semantics import MISSING, Classes, fires, guard_holds, mask_covers
from scars.synthesis.errors import ConfigError
from scars.synthesis.fragments import FailureCase, RecordedStep, SynthesisData

LOG_CAP = -math.log(1e-12)
"""The finite stand-in for −log 0 (≈ 27.63): a masked success, or drift onto an outcome the old policy never takes."""

MaskMode = Literal["hard", "soft"]


@dataclass(frozen=True)
class ObjectiveWeights:
    """The weights of the objective (SPEC §4). Every ablation of the objective is one setting.

    lambdas:   λ_tok, λ_ast, λ_pred of the description length C (SPEC §2), the DSL's ``Lambdas``.
    beta1:     weight of L_fail (failed actions still allowed). Large: a patch must block its failure.
    beta2:     weight of L_succ (historical successes broken).
    beta3:     weight of L_drift (KL drift on Q_safe). ``beta3 = 0`` is the *No-Drift-Loss* ablation. The default
               is above beta2 on purpose: masking an action the agent did *not* choose in a recorded success raises
               π'(a*|q), lowering that step's −log π'(a*|q) by exactly the KL it adds there (−log of the mass
               left), so with beta3 = beta2 the two terms cancel on steps that are both in D⁺ and Q_safe and
               collateral masking would go unpunished.
    beta4:     weight of L_conflict (contradictory co-firing with H ∪ S_t).
    drift_budget: ε; a candidate with L_drift > ε is not admitted (Prop. 3 then bounds TV by sqrt(ε/2)).
    use_description_length: False drops C entirely — the *No-MDL* ablation.
    mask_mode: "hard" (φ ∈ {0, −∞}) or "soft" (the *Soft Bias Only* ablation: a finite bias per firing rule).
    soft_bias: the finite bias b < 0 added to the logit of an action once per firing rule in "soft" mode.
    contrast_strong, contrast_weak, presumption: the experience contrast (issue 24; zero unless the data carries it,
    ``SynthesisData.contrast``): a fixed cost per strong success (recorded after the rule's first verified
    failure), per weak success (before it) of the same kind of action, and per presumption
    (``Failure.presumed_safe``) that the candidate would block. Absolute, not a mean like L_succ: the contrast
    set is the handful of executions of this one verb, which a mean over every success of the run would dilute.
    A strong success costs more than a predicate (C ≈ 5 per equality), so a rule keeps the condition that spares
    it; a presumption costs as much as a strong success (12), so it narrows a first rule but gives way to the
    generalisation the failures support (``synthesis.fragments.presumptions``); a weak success costs less than
    a predicate, so one stale success does not buy an incidental condition, several do.
    width: with the contrast, a tie-break below one predicate's cost: ``width`` × the share of every recorded
    control pair the candidate's guard holds on (narrow first among equally cheap rules).
    """

    lambdas: Lambdas = field(default_factory=Lambdas)
    beta1: float = 100.0
    beta2: float = 10.0
    beta3: float = 20.0
    beta4: float = 10.0
    drift_budget: float = 0.5
    use_description_length: bool = True
    mask_mode: MaskMode = "hard"
    soft_bias: float = -5.0
    contrast_strong: float = 12.0
    contrast_weak: float = 2.0
    presumption: float = 12.0
    width: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "beta1",
            "beta2",
            "beta3",
            "beta4",
            "drift_budget",
            "contrast_strong",
            "contrast_weak",
            "presumption",
            "width",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number ≥ 0, got {value!r}")
        if self.mask_mode not in ("hard", "soft"):
            raise ConfigError(f"mask_mode must be 'hard' or 'soft', got {self.mask_mode!r}")
        if not (math.isfinite(self.soft_bias) and self.soft_bias < 0):
            raise ConfigError(f"soft_bias must be a finite negative number, got {self.soft_bias!r}")

    @classmethod
    def no_mdl(cls, **overrides) -> ObjectiveWeights:
        """The *No-MDL* ablation (paper §6.4): C(ΔS) dropped from the objective."""
        return cls(use_description_length=False, **overrides)

    @classmethod
    def no_drift_loss(cls, **overrides) -> ObjectiveWeights:
        """The *No-Drift-Loss* ablation (paper §6.4): β3 = 0."""
        return cls(beta3=0.0, **overrides)


@dataclass(frozen=True)
class Score:
    """Every term of the objective for one candidate ΔS, their weighted total and the admission checks."""

    description_length: float  # C(ΔS), before weighting (reported even when No-MDL drops it from the total)
    l_fail: float
    l_succ: float
    l_drift: float
    l_conflict: float
    total: float
    replay_passed: bool  # ReplayPass(H ∪ S_t ∪ {ΔS}, D⁻) = 1 (Prop. 1)
    within_drift_budget: bool  # L_drift ≤ ε (Prop. 3)
    counterfactual_safe: bool = True  # ΔS fires on no verifier-certified safe what-if of its failures
    l_contrast: float = 0.0  # the experience contrast's cost (strong/weak successes, presumptions it blocks)

    @property
    def admissible(self) -> bool:
        """Admission needs ReplayPass, the drift budget and respect for the verifier's certified-safe
        counterfactuals; a candidate failing any of them is reported, not admitted."""
        return self.replay_passed and self.within_drift_budget and self.counterfactual_safe


@dataclass(frozen=True)
class ReplayReport:
    """ReplayPass(Π, D⁻) (paper §5, Prop. 1): for every (q, F) ∈ D⁻, F ⊆ U_Π(q)."""

    passed: bool
    n_cases: int
    uncovered: tuple[tuple[tuple[int, int], Action], ...]  # (step id, failed action still allowed)


def replay_pass(
    rules: Iterable[Rule], D_minus: Sequence[FailureCase], classes: Classes | None = None
) -> ReplayReport:
    """Check ReplayPass: every failed action of every recorded failure is in the masked set of ``rules``.

    ``rules`` is the whole candidate control plane Π_{t+1} (H ∪ S_t ∪ {ΔS}).
    """
    rules = tuple(rules)
    uncovered = tuple(
        (case.step.step_id, a)
        for case in D_minus
        for a in case.F
        if not (a.is_control and any(fires(r, case.q, a, classes) for r in rules))
    )
    return ReplayReport(passed=not uncovered, n_cases=len(D_minus), uncovered=uncovered)


def policy_distribution(
    step: RecordedStep,
    rules: Iterable[Rule],
    classes: Classes | None = None,
    mask_mode: MaskMode = "hard",
    soft_bias: float = -5.0,
) -> tuple[np.ndarray, float]:
    """π_S(·|q) over the step's actions and the fallback a_⊥ (SPEC §1), from the recorded logits.

    Returns (probabilities of ``step.actions`` in order, probability of the fallback). The readable per-step form;
    :class:`ObjectiveEvaluator` computes the same numbers vectorised over a whole data set.
    """
    rules = tuple(rules)
    logits = np.asarray(step.logits, dtype=float)
    counts = np.array(
        [sum(fires(r, step.context, a, classes) for r in rules) if a.is_control else 0 for a in step.actions]
    )
    control = np.array([a.is_control for a in step.actions])
    if mask_mode == "soft":
        z = logits + soft_bias * counts
        p = np.exp(z - z.max())
        return p / p.sum(), 0.0
    masked = counts > 0
    if control.any() and masked[control].all():
        return np.zeros(len(step.actions)), 1.0
    z = np.where(masked, -np.inf, logits)
    p = np.exp(z - z[~masked].max())
    return p / p.sum(), 0.0


def drift_measures(
    rules_before: Iterable[Rule],
    rules_after: Iterable[Rule],
    Q_safe: Sequence[RecordedStep],
    classes: Classes | None = None,
    mask_mode: MaskMode = "hard",
    soft_bias: float = -5.0,
) -> tuple[float, float]:
    """(E_{q∼Q_safe} TV(π_after, π_before), E_{q∼Q_safe} KL(π_after ‖ π_before)) in one pass — both sides of
    Prop. 3 (TV ≤ sqrt(KL/2) by Pinsker). Outcomes are the step's actions and the fallback a⊥."""
    rules_before, rules_after = tuple(rules_before), tuple(rules_after)
    if not Q_safe:
        return 0.0, 0.0
    tv = kl = 0.0
    for step in Q_safe:
        p_after, fb_after = policy_distribution(step, rules_after, classes, mask_mode, soft_bias)
        p_before, fb_before = policy_distribution(step, rules_before, classes, mask_mode, soft_bias)
        pa, pb = np.append(p_after, fb_after), np.append(p_before, fb_before)
        tv += 0.5 * float(np.abs(pa - pb).sum())
        keep = pa > 0
        kl += float(np.sum(pa[keep] * (np.log(pa[keep]) - np.log(np.maximum(pb[keep], 1e-300)))))
    return tv / len(Q_safe), kl / len(Q_safe)


def tv_drift(
    rules_before: Iterable[Rule],
    rules_after: Iterable[Rule],
    Q_safe: Sequence[RecordedStep],
    classes: Classes | None = None,
    mask_mode: MaskMode = "hard",
    soft_bias: float = -5.0,
) -> float:
    """E_{q∼Q_safe} TV(π_after(·|q), π_before(·|q)) — the left side of Prop. 3 (≤ sqrt(ε/2) when L_drift ≤ ε)."""
    return drift_measures(rules_before, rules_after, Q_safe, classes, mask_mode, soft_bias)[0]


def _atom_feature(guard: Guard) -> str | None:
    """The one feature a predicate reads (its truth is a function of that feature's value), else None."""
    if isinstance(guard, Compare | InClass):
        return guard.feature
    if isinstance(guard, Named):
        return NAMED_PREDICATES.get(guard.name)
    return None


_LAST_TABLE: tuple[weakref.ref, _PairTable] | None = None


def _value_key(value: object) -> object:
    """A dict key that keeps apart literals Python calls equal (``True``, ``1``, ``1.0``; see ``value_identity``)."""
    return value if type(value) is str else (type(value), value)


class _PairTable:
    """Every recorded (q, a) pair of one data set, flattened once. Depends on the data only (no rules, classes or
    weights), so the root-parallel trees of one synthesis in one process share it (see :func:`pair_table`).

    ``partition(feature)`` groups the pairs by the value a feature reads on them: a code per pair and one
    representative pair per code. A predicate on one feature is then evaluated once per distinct value (by
    ``guard_holds`` itself, on the representative) instead of once per pair.
    """

    def __init__(self, data: SynthesisData) -> None:
        self.steps = steps = data.steps
        index = {id(s): i for i, s in enumerate(steps)}
        self.contexts = [s.context for s in steps]
        self._memos = [_step_memo(s) for s in steps]
        self.actions: list[Action] = list(chain.from_iterable(s.actions for s in steps))
        sizes = np.fromiter((len(s.actions) for s in steps), dtype=np.intp, count=len(steps))
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        self.seg = np.repeat(np.arange(len(steps), dtype=np.intp), sizes)
        n = len(self.actions)
        self.logits = np.fromiter(chain.from_iterable(s.logits for s in steps), dtype=float, count=n)
        control = []
        for step, memo in zip(steps, self._memos, strict=True):
            flags = memo.get("is_control")
            if flags is None:
                flags = memo["is_control"] = np.array([a.is_control for a in step.actions], dtype=bool)
            control.append(flags)
        self.control = np.concatenate(control)
        step_max = np.maximum.reduceat(self.logits, self.starts)
        self.exp_logits = np.exp(self.logits - step_max[self.seg])
        fail_pairs = []
        for case in data.D_minus:
            start = self.starts[index[id(case.step)]]
            fail_pairs += [start + case.step.actions.index(a) for a in case.F]
        self.fail_pairs = np.array(fail_pairs, dtype=np.intp)
        self.succ_pairs = np.array(
            [self.starts[index[id(c.step)]] + c.step.chosen for c in data.D_plus], dtype=np.intp
        )
        self.safe_steps = np.array([index[id(s)] for s in data.Q_safe], dtype=np.intp)
        self._partitions: dict[object, tuple[np.ndarray, list[int], list[object]] | None] = {}
        # evaluators on this data, by (current rules, core rules, weights): see shared_evaluator
        self.evaluators: dict[tuple, ObjectiveEvaluator] = {}
        # candidate spaces on this data, by (fragment, max_or_values): (classes, space), see mcts._shared_space
        self.spaces: dict[tuple, tuple[object, object]] = {}

    def partition(self, feature: str) -> tuple[np.ndarray, list[int], list[object]] | None:
        """(code of every pair, a representative pair per code, the feature's value per code) for one feature
        (``semantics.feature_value``); None when some value is unhashable (the caller then goes pair by pair).
        Pairs with one code agree on the feature, so a predicate on it is evaluated once per code."""
        if feature.startswith("action."):
            part = feature[7:]
            if part not in _ACTION_PARTS:
                return self.arg_partition(part)
            # action.kind/name/tool/verb are functions of (kind, name): group by that (values: (kind, name) pairs)
            return self.mask_partition(None)
        return self._cached(
            ("q", feature), lambda: self._group([q.get(feature, MISSING) for q in self.contexts])
        )

    def arg_partition(self, name: str) -> tuple[np.ndarray, list[int], list[object]] | None:
        """The pairs grouped by ``action.arg(name)`` (missing: ``MISSING``)."""
        key = ("arg", name)
        return self._cached(key, lambda: self._action_partition(key, lambda a: a.arg(name, MISSING)))

    def mask_partition(self, arg_name: str | None) -> tuple[np.ndarray, list[int], list[object]] | None:
        """The pairs grouped by what an action mask reads: (kind, name), and one argument for ``forbid_tool_arg``."""
        if arg_name is None:
            return self._cached("kind_name", lambda: self._action_partition("kind_name", _KIND_NAME))
        key = ("mask", arg_name)
        return self._cached(
            key,
            lambda: self._action_partition(
                key, lambda a: (a.kind, a.name, _value_key(a.arg(arg_name, MISSING)))
            ),
        )

    def _action_partition(
        self, key: object, read: Callable[[Action], object]
    ) -> tuple[np.ndarray, list[int], list[object]]:
        """Group the pairs by ``read(action)``. Each step's actions are read once per process: their codes in the
        feature's interned table are remembered on the step (see ``_step_memo``), so grouping a table's pairs is
        numpy work only. Codes are then renumbered in first-seen order, as :meth:`_group` numbers them."""
        interned = _interned(key)
        parts = []
        for step, memo in zip(self.steps, self._memos, strict=True):
            codes = memo.get(key)
            if codes is None:
                codes = memo[key] = np.array(interned.codes(map(read, step.actions)), dtype=np.intp)
            parts.append(codes)
        codes = np.concatenate(parts)
        n = len(codes)
        first = np.full(int(codes.max()) + 1, n, dtype=np.intp)  # each interned code's first pair here
        np.minimum.at(first, codes, np.arange(n, dtype=np.intp))
        present = np.flatnonzero(first < n)
        order = present[np.argsort(first[present], kind="stable")]
        rank = np.empty(len(first), dtype=np.intp)
        rank[order] = np.arange(len(order), dtype=np.intp)
        reps = first[order].tolist()
        return rank[codes], reps, [read(self.actions[i]) for i in reps]

    def _cached(self, key: object, build) -> tuple[np.ndarray, list[int], list[object]] | None:
        if key not in self._partitions:
            try:
                self._partitions[key] = build()
            except TypeError:  # an unhashable value
                self._partitions[key] = None
        return self._partitions[key]

    def _group(self, values: list[object]) -> tuple[np.ndarray, list[int], list[object]]:
        """Group the pairs by a per-step value (one value per step, e.g. a context variable)."""
        # Python calls True, 1 and 1.0 equal: values are their own keys only when, besides strings and the missing
        # marker (equal to nothing else), at most one type occurs; else (type, value) keys (as value_identity).
        mixed = len(set(map(type, values)) - _PLAIN_TYPES) > 1
        keys = [v if v.__class__ is str else (v.__class__, v) for v in values] if mixed else values
        index = {k: i for i, k in enumerate(dict.fromkeys(keys))}  # codes in first-seen order
        codes = np.fromiter(map(index.__getitem__, keys), dtype=np.intp, count=len(keys))
        # codes appear in increasing order, so a code's first occurrence is where the running maximum rises
        first = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)
        firsts = [values[i] for i in first]
        return codes[self.seg], self.starts[first].tolist(), firsts


_PLAIN_TYPES = {str, type(MISSING)}
_ACTION_PARTS = ("kind", "name", "tool", "verb")  # the ``action.*`` features that are not arguments
_ALL = slice(None)  # every pair


def _KIND_NAME(a: Action) -> tuple[str, str]:
    return (a.kind, a.name)


class _Interned:
    """Process-wide codes for the values one action feature takes (a value keeps its code for good), so that a
    step's codes can be remembered on the step and reused by every later pair table. Literals Python calls equal
    (True, 1, 1.0) get different codes (keys as ``_value_key``)."""

    def __init__(self) -> None:
        self._codes: dict[object, int] = {}
        self._lock = threading.Lock()

    def codes(self, values: Iterable[object]) -> list[int]:
        """The codes of some values, new values numbered as they come."""
        keys = [v if v.__class__ is str else (v.__class__, v) for v in values]  # as _value_key, inlined
        codes = list(map(self._codes.get, keys))
        if None in codes:
            with self._lock:
                codes = [self._codes.setdefault(k, len(self._codes)) for k in keys]
        return codes


_INTERNED: dict[object, _Interned] = {}
_INTERNED_LOCK = threading.Lock()


def _interned(key: object) -> _Interned:
    table = _INTERNED.get(key)
    if table is None:
        with _INTERNED_LOCK:
            table = _INTERNED.setdefault(key, _Interned())
    return table


# What the pair tables read from a recorded step's actions, remembered per step object: the agent synthesises again
# and again over a sliding window of the same recorded steps, so each step's actions are read once per feature.
# Keyed by id and checked by weak reference; an entry leaves with its step (the reference's callback).
_STEP_MEMO: dict[int, tuple[weakref.ref, dict[object, object]]] = {}


def _step_memo(step: RecordedStep) -> dict[object, object]:
    key = id(step)
    hit = _STEP_MEMO.get(key)
    if hit is not None and hit[0]() is step:
        return hit[1]
    memo: dict[object, object] = {}
    with contextlib.suppress(TypeError):  # not weakly referenceable: not remembered
        _STEP_MEMO[key] = (weakref.ref(step, lambda _, key=key: _STEP_MEMO.pop(key, None)), memo)
    return memo


def pair_table(data: SynthesisData) -> _PairTable:
    """The pair table of ``data``, shared with the previous caller when it was built for the same object (the
    trees of one synthesis run one after another in one process; a single slot keeps nothing alive for long)."""
    global _LAST_TABLE
    last = _LAST_TABLE
    if last is not None and last[0]() is data:
        return last[1]
    table = _PairTable(data)
    with contextlib.suppress(TypeError):  # not weak-referenceable: no sharing
        _LAST_TABLE = (weakref.ref(data), table)
    return table


def shared_evaluator(
    data: SynthesisData,
    current_rules: Iterable[Rule] = (),
    core_rules: Iterable[Rule] = (),
    classes: Classes | None = None,
    weights: ObjectiveWeights | None = None,
) -> ObjectiveEvaluator:
    """``ObjectiveEvaluator(...)``, shared with earlier callers that passed the same data object, classes object and
    equal rules and weights: the root-parallel trees of one synthesis in one process score each rule once. Every
    cache of an evaluator memoises a pure function, so sharing changes no result (trees on Ray get their own)."""
    current_rules, core_rules = tuple(current_rules), tuple(core_rules)
    weights = weights or ObjectiveWeights()
    table = pair_table(data)
    key = (current_rules, core_rules, weights)
    evaluator = table.evaluators.get(key)
    if evaluator is None or evaluator.passed_classes is not classes:
        evaluator = ObjectiveEvaluator(data, current_rules, core_rules, classes, weights)
        table.evaluators[key] = evaluator
    return evaluator


class ObjectiveEvaluator:
    """The objective of SPEC §4 over one data set, vectorised with numpy and cached per guard/mask.

    Construction flattens every recorded (q, a) pair of D⁻ ∪ D⁺ ∪ Q_safe once; a candidate rule is then the set of
    pairs it fires on — a bit set (bit i: pair i), the AND of cached per-predicate and per-mask bit sets (each
    predicate is evaluated once per distinct value of its feature) — and the terms that depend on that set alone
    (L_fail, L_succ, L_drift, L_conflict, ReplayPass, the contrast) are a handful of numpy reductions, computed once per
    distinct set. The caches only memoise pure functions of (data, classes), so ``score`` is a pure function of the
    rule. :func:`score_rule` is the one-shot form; the search scores from signatures (``score_signed``).
    """

    def __init__(
        self,
        data: SynthesisData,
        current_rules: Iterable[Rule] = (),
        core_rules: Iterable[Rule] = (),
        classes: Classes | None = None,
        weights: ObjectiveWeights | None = None,
    ) -> None:
        self.data = data
        self.current_rules = tuple(current_rules)
        self.core_rules = tuple(core_rules)
        self.passed_classes = classes
        self.classes = classes or {}
        self.weights = weights or ObjectiveWeights()
        self.table = table = pair_table(data)
        self._n_pairs = len(table.actions)
        self._starts = table.starts
        self._seg = table.seg
        self._logits = table.logits
        self._control = table.control
        self._n_control = np.add.reduceat(self._control.astype(np.intp), self._starts)
        self._has_control = self._n_control > 0
        self._n_steps = len(table.steps)
        self._sizes = np.diff(self._starts, append=self._n_pairs)
        self._exp_logits = table.exp_logits
        self._fail_pairs = table.fail_pairs
        self._succ_pairs = table.succ_pairs
        self._safe_steps = table.safe_steps
        self._counterfactuals = tuple(data.safe_counterfactuals)
        self._presumed = tuple(data.presumed_safe)
        self._presumed_w = (
            tuple(data.presumption_weights)
            if len(data.presumption_weights) == len(self._presumed)
            else (1.0,) * len(self._presumed)
        )
        contrast = np.asarray(data.contrast, dtype=np.intp) if data.contrast else np.zeros(0, dtype=np.intp)
        w = self.weights
        self._contrast_cost = np.where(
            contrast == 2, w.contrast_strong, np.where(contrast == 1, w.contrast_weak, 0.0)
        )
        self._contrast_pairs = table.succ_pairs[contrast > 0] if len(contrast) else np.zeros(0, dtype=np.intp)
        self._contrast_cost = self._contrast_cost[contrast > 0] if len(contrast) else self._contrast_cost
        self._presumed_cache: dict[Guard | ActionMask, int] = {}
        self._experience = bool(data.contrast)
        self._guard_cache: dict[Guard, np.ndarray] = {}
        self._mask_cache: dict[ActionMask, np.ndarray] = {}
        self._cf_cache: dict[Guard | ActionMask, int] = {}
        self._cost_cache: dict[Rule, float] = {}
        self._score_cache: dict[Rule, Score] = {}
        self._fires_terms: dict[int, tuple[float, float, float, float, bool, float | None]] = {}
        self._guard_bits_cache: dict[Guard, int] = {}
        self._mask_bits_cache: dict[ActionMask, int] = {}
        self._control_bits = _to_bits(self._control)
        self._presumed_totals: dict[int, float] = {}
        self._n_control_pairs = int(self._control.sum())
        self._existing = tuple(self.rule_vector(r) for r in (*self.core_rules, *self.current_rules))
        self._base_counts = (
            np.sum(self._existing, axis=0, dtype=np.intp)
            if self._existing
            else np.zeros(self._n_pairs, dtype=np.intp)
        )
        self._base_p, self._base_fb = self._policy(self._base_counts)
        floor = math.exp(-LOG_CAP)
        self._base_logp = np.log(np.maximum(self._base_p, floor))
        self._base_fb_logp = np.log(np.maximum(self._base_fb, floor))
        every = np.arange(self._n_steps)
        # KL(π_{S_t}‖π_{S_t}) per step: 0 up to the log floor; the value a step keeps when a candidate leaves it alone
        self._base_kl = self._step_kl(self._base_p, self._base_fb, _ALL, self._starts, every)

    # ---- fires vectors -------------------------------------------------------------------------------------------
    def guard_vector(self, guard: Guard) -> np.ndarray:
        """g(q, a) over every recorded pair, cached per (sub)guard."""
        cached = self._guard_cache.get(guard)
        if cached is not None:
            return cached
        if isinstance(guard, And):
            vec = functools.reduce(np.logical_and, [self.guard_vector(g) for g in guard.operands])
        elif isinstance(guard, Or):
            vec = functools.reduce(np.logical_or, [self.guard_vector(g) for g in guard.operands])
        else:
            vec = self._atom_vector(guard)
        self._guard_cache[guard] = vec
        return vec

    def _atom_vector(self, guard: Guard) -> np.ndarray:
        table = self.table
        feature = _atom_feature(guard)
        groups = None if feature is None else table.partition(feature)
        if groups is None:
            return np.fromiter(
                (
                    guard_holds(guard, table.contexts[table.seg[i]], a, self.classes)
                    for i, a in enumerate(table.actions)
                ),
                dtype=bool,
                count=self._n_pairs,
            )
        codes, reps, _ = groups
        truth = np.fromiter(
            (guard_holds(guard, table.contexts[table.seg[i]], table.actions[i], self.classes) for i in reps),
            dtype=bool,
            count=len(reps),
        )
        return truth[codes]

    def mask_vector(self, mask: ActionMask) -> np.ndarray:
        cached = self._mask_cache.get(mask)
        if cached is None:
            table = self.table
            groups = table.mask_partition(mask.arg_name if isinstance(mask, ForbidToolArg) else None)
            if groups is None:
                cached = np.fromiter(
                    (mask_covers(mask, a) for a in table.actions), dtype=bool, count=self._n_pairs
                )
            else:
                codes, reps, _ = groups
                truth = np.fromiter(
                    (mask_covers(mask, table.actions[i]) for i in reps), dtype=bool, count=len(reps)
                )
                cached = truth[codes]
            self._mask_cache[mask] = cached
        return cached

    def rule_vector(self, rule: Rule) -> np.ndarray:
        """fires(rule, q, a) over every recorded pair (only control actions can be covered by a mask)."""
        guard = rule.guard
        if isinstance(guard, And):  # a candidate's own conjunction is met once: only its operands are cached
            vec = functools.reduce(np.logical_and, [self.guard_vector(g) for g in guard.operands])
        else:
            vec = self.guard_vector(guard)
        return self.mask_vector(rule.mask) & vec

    def _guard_bits(self, guard: Guard) -> int:
        """``guard_vector(guard)`` as a bit set (bit i: pair i), cached per (sub)guard."""
        bits = self._guard_bits_cache.get(guard)
        if bits is None:
            bits = self._guard_bits_cache[guard] = _to_bits(self.guard_vector(guard))
        return bits

    def _mask_bits(self, mask: ActionMask) -> int:
        """``mask_vector(mask)`` as a bit set, cached per mask."""
        bits = self._mask_bits_cache.get(mask)
        if bits is None:
            bits = self._mask_bits_cache[mask] = _to_bits(self.mask_vector(mask))
        return bits

    def _vector(self, bits: int) -> np.ndarray:
        """A bit set over the pairs as a boolean vector (``_to_bits`` inverted)."""
        raw = np.frombuffer(bits.to_bytes((self._n_pairs + 7) // 8, "little"), dtype=np.uint8)
        return np.unpackbits(raw, count=self._n_pairs, bitorder="little").view(bool)

    def _presumed_total(self, bits: int) -> float:
        """The weighted count of the presumptions (``SynthesisData.presumed_safe``) in a bit set, in index order."""
        total = self._presumed_totals.get(bits)
        if total is None:
            key, total, i = bits, 0.0, 0
            while bits:
                if bits & 1:
                    total += self._presumed_w[i]
                bits >>= 1
                i += 1
            self._presumed_totals[key] = total
        return total

    def _bits(self, node: Guard | ActionMask, pairs, cache: dict) -> int:
        bits = cache.get(node)
        if bits is None:
            if isinstance(node, And | Or):
                parts = [self._bits(g, pairs, cache) for g in node.operands]
                bits = parts[0]
                for b in parts[1:]:
                    bits = bits & b if isinstance(node, And) else bits | b
            else:
                bits = 0
                for i, (q, a) in enumerate(pairs):
                    if (
                        mask_covers(node, a)
                        if isinstance(node, ForbidEnvAction | ForbidToolCall | ForbidToolArg)
                        else guard_holds(node, q, a, self.classes)
                    ):
                        bits |= 1 << i
            cache[node] = bits
        return bits

    def _cf_bits(self, node: Guard | ActionMask) -> int:
        bits = self._cf_cache.get(node)
        if bits is None:
            if isinstance(node, And | Or):
                parts = [self._cf_bits(g) for g in node.operands]
                bits = parts[0]
                for b in parts[1:]:
                    bits = bits & b if isinstance(node, And) else bits | b
            else:
                bits = 0
                for i, (q, a) in enumerate(self._counterfactuals):
                    if (
                        guard_holds(node, q, a, self.classes)
                        if not isinstance(node, ForbidEnvAction | ForbidToolCall | ForbidToolArg)
                        else mask_covers(node, a)
                    ):
                        bits |= 1 << i
            self._cf_cache[node] = bits
        return bits

    # ---- policies --------------------------------------------------------------------------------------------------
    def _policy(
        self,
        counts: np.ndarray,
        pairs: slice | np.ndarray = _ALL,
        starts: np.ndarray | None = None,
        seg: np.ndarray | None = None,
        steps: slice | np.ndarray = _ALL,
    ) -> tuple[np.ndarray, np.ndarray]:
        """π over the pairs (and the fallback per step) given how many rules fire on each pair.

        ``pairs``/``starts``/``seg``/``steps``: a subset of whole steps (in order), their pairs, where each step
        starts among them and each pair's position in ``steps``; by default every step. Each step's numbers depend on
        that step's pairs only, so a subset gives bit-for-bit the values the full computation gives for those steps.
        """
        w = self.weights
        starts = self._starts if starts is None else starts
        seg = self._seg if seg is None else seg
        if w.mask_mode == "soft":
            z = self._logits[pairs] + w.soft_bias * counts
            zmax = np.maximum.reduceat(z, starts)
            e = np.exp(z - zmax[seg])
            return e / np.add.reduceat(e, starts)[seg], np.zeros(len(starts))
        keep = counts == 0
        n_open = np.add.reduceat(keep & self._control[pairs], starts)
        fallback = (self._has_control[steps] & (n_open == 0)).astype(float)
        if fallback.any():
            keep &= fallback[seg] == 0
        # exp(logit − max over the whole step) is computed once; masking only removes terms, so the sums stay
        # ≥ exp(kept logit − step max), far from underflow for any logits a policy produces (|Δ| < 700).
        e = np.where(keep, self._exp_logits[pairs], 0.0)
        sums = np.add.reduceat(e, starts)
        return e / np.where(sums > 0, sums, 1.0)[seg], fallback

    def _step_kl(
        self, p: np.ndarray, fallback: np.ndarray, pairs: slice | np.ndarray, starts: np.ndarray, steps
    ) -> np.ndarray:
        """KL(π'‖π_{S_t}) of each step of a subset (outcomes: the step's actions and the fallback)."""
        positive = p > 0
        terms = np.where(positive, p * (np.log(np.where(positive, p, 1.0)) - self._base_logp[pairs]), 0.0)
        kl = np.add.reduceat(terms, starts)
        # The fallback is either 0 or 1, so its own term is 1·(log 1 − log π_{S_t}(a_⊥|q)).
        kl -= fallback * self._base_fb_logp[steps]
        return kl

    def _touched(self, new: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The steps where ``new`` fires on some pair (the only steps whose π' can differ from π_{S_t}), their pairs
        in order, where each of those steps starts among them, and each pair's position in ``steps``."""
        hit = self._seg[np.flatnonzero(new)]  # nondecreasing: pairs are in step order
        steps = hit[np.concatenate(([True], hit[1:] != hit[:-1]))] if len(hit) else hit
        sizes = self._sizes[steps]
        starts = np.zeros(len(steps), dtype=np.intp)
        np.cumsum(sizes[:-1], out=starts[1:])
        local = np.repeat(np.arange(len(steps), dtype=np.intp), sizes)
        pairs = np.arange(len(local), dtype=np.intp) + (self._starts[steps] - starts)[local]
        return steps, pairs, starts, local

    # ---- the objective ---------------------------------------------------------------------------------------------
    def cost(self, rule: Rule) -> float:
        cached = self._cost_cache.get(rule)
        if cached is None:
            cached = self._cost_cache[rule] = _description_length(rule, self.weights.lambdas)
        return cached

    def score(self, rule: Rule) -> Score:
        """Every term of the objective for ΔS = {rule} joined to H ∪ S_t.

        π' differs from π_{S_t} only on the steps where the rule fires, so only those are recomputed; the result is
        bit-for-bit the full computation's (every per-step number depends on that step's pairs only, and the
        means add the same per-step values in the same order). Memoised per rule.
        """
        cached = self._score_cache.get(rule)
        if cached is None:
            cached = self._score_cache[rule] = self._score(rule)
        return cached

    def signature(self, node: Guard | ActionMask) -> tuple[int, int, int]:
        """A guard operand or a mask as three bit sets: the recorded pairs it holds on (covers, for a mask), the
        presumptions and the certified-safe counterfactuals (each cached per node). A rule's are the AND of its
        mask's and its guard's operands'."""
        if isinstance(node, ForbidEnvAction | ForbidToolCall | ForbidToolArg):
            pairs = self._mask_bits(node)
        else:
            pairs = self._guard_bits(node)
        presumed = self._bits(node, self._presumed, self._presumed_cache) if self._presumed else 0
        counterfactual = self._cf_bits(node) if self._counterfactuals else 0
        return pairs, presumed, counterfactual

    def score_signed(
        self,
        rule: Rule,
        mask: tuple[int, int, int],
        operands: Sequence[tuple[int, int, int]],
        description_length: float | None = None,
    ) -> Score:
        """``score(rule)`` from the signatures of its mask and of its guard's operands (``signature``; one operand
        unless the guard is an ``And``), for a caller that keeps them per derivation step (the search): no rule
        or node is hashed. ``rule.guard`` must be canonical (C is read off it as given, unless the caller passes
        it: ``description_length``, e.g. ``dsl.cost.conjunction_cost``). Not memoised."""
        return self._score_from(rule, mask, operands, canonical_guard=True, cost=description_length)

    def _score(self, rule: Rule) -> Score:
        guard = rule.guard
        # A candidate's own conjunction is not cached, only its operands.
        operands = guard.operands if isinstance(guard, And) else (guard,)
        return self._score_from(
            rule, self.signature(rule.mask), [self.signature(g) for g in operands], canonical_guard=False
        )

    def _score_from(
        self,
        rule: Rule,
        mask: tuple[int, int, int],
        operands: Sequence[tuple[int, int, int]],
        canonical_guard: bool,
        cost: float | None = None,
    ) -> Score:
        w = self.weights
        held, presumed, counterfactual = operands[0]
        for h, p, c in operands[1:]:
            held &= h
            presumed &= p
            counterfactual &= c
        # the pairs where the rule fires (bit i: pair i); ``held``, the guard's, decides its width too
        new = mask[0] & held
        # Every term but C, the presumptions, the width and the counterfactuals is a function of where the rule
        # fires alone, and most candidates of a search fire on pairs an earlier one fired on (an added condition
        # that holds wherever the others do): those terms are computed once per distinct set of pairs.
        terms = self._fires_terms.get(new)
        if terms is None:
            terms = self._fires_terms[new] = self._terms_of(self._vector(new))
        l_fail, l_succ, l_drift, l_conflict, replay_passed, contrast = terms

        l_contrast = 0.0
        if contrast is not None:
            l_contrast += contrast
        if self._presumed:
            l_contrast += w.presumption * self._presumed_total(mask[1] & presumed)
        if self._experience:
            # narrow first among equally cheap rules: the share of every recorded control pair (any verb) the guard
            # holds on — "obj == desklamp 1" before "is_clean == false", an instance before its type
            n_control = self._n_control_pairs
            if n_control:
                l_contrast += w.width * float((held & self._control_bits).bit_count()) / n_control
        c = (
            cost
            if cost is not None
            else _canonical_description_length(rule, w.lambdas)
            if canonical_guard
            else _description_length(rule, w.lambdas)
        )
        total = (
            (c if w.use_description_length else 0.0)
            + w.beta1 * l_fail
            + w.beta2 * l_succ
            + w.beta3 * l_drift
            + w.beta4 * l_conflict
            + l_contrast
        )
        return Score(
            description_length=c,
            l_fail=l_fail,
            l_succ=l_succ,
            l_drift=l_drift,
            l_conflict=l_conflict,
            total=float(total),
            replay_passed=replay_passed,
            within_drift_budget=l_drift <= w.drift_budget,
            counterfactual_safe=not (self._counterfactuals and mask[2] & counterfactual),
            l_contrast=l_contrast,
        )

    def _terms_of(self, new: np.ndarray) -> tuple[float, float, float, float, bool, float | None]:
        """(L_fail, L_succ, L_drift, L_conflict, ReplayPass, the contrast successes' cost or None) of a candidate
        that fires on exactly the pairs ``new``."""
        w = self.weights
        steps, pairs, starts, local = self._touched(new)
        if len(steps):
            p_touched, fallback_touched = self._policy(
                self._base_counts[pairs] + new[pairs], pairs, starts, local, steps
            )
            p = self._base_p.copy()
            p[pairs] = p_touched
        else:
            p = self._base_p

        # L_fail: mean over cases of Σ_{a∈F} π'(a|q).
        n_minus = len(self.data.D_minus)
        l_fail = float(p[self._fail_pairs].sum() / n_minus)
        replay_passed = bool(np.all(self._base_counts[self._fail_pairs] + new[self._fail_pairs] > 0))

        # L_succ: mean −log π'(a*|q), capped at LOG_CAP.
        if len(self._succ_pairs):
            ps = p[self._succ_pairs]
            nll = np.where(ps > 0, -np.log(np.where(ps > 0, ps, 1.0)), LOG_CAP)
            l_succ = float(np.minimum(nll, LOG_CAP).sum() / len(nll))
        else:
            l_succ = 0.0

        # L_drift: mean over Q_safe of KL(π'‖π_{S_t}); steps the rule leaves alone keep their base value.
        if len(self._safe_steps):
            kl = self._base_kl
            if len(steps):
                kl = kl.copy()
                kl[steps] = self._step_kl(p_touched, fallback_touched, pairs, starts, steps)
            l_drift = float(np.maximum(kl[self._safe_steps], 0.0).sum() / len(self._safe_steps))
        else:
            l_drift = 0.0

        contrast = None
        if len(self._contrast_pairs):
            contrast = float(self._contrast_cost[new[self._contrast_pairs] > 0].sum())
        exhausted = fallback_touched if len(steps) and w.mask_mode == "hard" else None
        l_conflict = float(self._conflicts(new, steps, pairs, starts, exhausted))
        return l_fail, l_succ, l_drift, l_conflict, replay_passed, contrast

    def _conflicts(
        self,
        new: np.ndarray,
        steps: np.ndarray,
        pairs: np.ndarray,
        starts: np.ndarray,
        exhausted: np.ndarray | None = None,
    ) -> int:
        """Σ over σ_i ∈ H ∪ S_t of 1[σ_i and ΔS co-fire on a context and jointly (only) exhaust its control actions].

        Only the steps where ΔS fires (``steps``, with their ``pairs`` and ``starts``) can hold a conflict.
        ``exhausted``: the hard-mask fallback of π' on those steps when known — 1 exactly where H ∪ S_t ∪ {ΔS}
        blocks every control action, which a conflict needs."""
        if not self._existing or not len(steps) or (exhausted is not None and not exhausted.any()):
            return 0
        ctrl = self._control[pairs]
        new = new[pairs]
        new_fired = np.add.reduceat(new & ctrl, starts) > 0
        base = self._base_counts[pairs]

        def open_count(blocked: np.ndarray) -> np.ndarray:
            return np.add.reduceat(ctrl & ~blocked, starts)

        # Every control action blocked once ΔS joins H ∪ S_t (σ_i ∪ the others is all of H ∪ S_t): the same for
        # every σ_i and necessary for a conflict, so most candidates stop here.
        both = new_fired & self._has_control[steps] & (open_count((base > 0) | new) == 0)
        if not both.any():
            return 0
        conflicts = 0
        for full in self._existing:
            vec = full[pairs]
            others = (base - vec) > 0
            fired = np.add.reduceat(vec & ctrl, starts) > 0
            without_new = open_count(others | vec) == 0
            without_old = open_count(others | new) == 0
            hit = fired & both & ~without_new & ~without_old
            conflicts += bool(hit.any())
        return conflicts


def _to_bits(vector: np.ndarray) -> int:
    """A boolean vector as a bit set: bit i is element i."""
    return int.from_bytes(np.packbits(vector, bitorder="little").tobytes(), "little")


_DL_MEMO: dict[tuple[Rule, Lambdas], float] = {}
_DL_MEMO_SIZE = 1 << 16


def _description_length(rule: Rule, lambdas: Lambdas) -> float:
    """``float(description_length(rule, lambdas))``, memoised in the process: the searches of one run meet the same
    rules again and again (equal rules are the same rule, literals' types included: see ``dsl.ast``)."""
    key = (rule, lambdas)
    cost = _DL_MEMO.get(key)
    if cost is None:
        if len(_DL_MEMO) >= _DL_MEMO_SIZE:  # bounded: drop everything rather than track recency
            _DL_MEMO.clear()
        cost = _DL_MEMO[key] = float(description_length(rule, lambdas))
    return cost


def _canonical_description_length(rule: Rule, lambdas: Lambdas) -> float:
    """``float(description_length(rule, lambdas))`` of a rule whose guard is canonical (``canonical`` would return
    it unchanged; C does not read the mask's literal): not canonicalised again."""
    return float(canonical_cost(rule, lambdas))


def score_rule(
    rule: Rule,
    data: SynthesisData,
    current_rules: Iterable[Rule] = (),
    core_rules: Iterable[Rule] = (),
    classes: Classes | None = None,
    weights: ObjectiveWeights | None = None,
) -> Score:
    """The objective of SPEC §4 for one candidate rule (one-shot form of :class:`ObjectiveEvaluator`)."""
    return ObjectiveEvaluator(data, current_rules, core_rules, classes, weights).score(rule)
