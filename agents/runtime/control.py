"""The control plane: online enforcement of the core schema H and the active scars S_t (paper §3.1; SPEC §1).

Governed policy:  π_S(a | q, H) ∝ π_0(a | q, H) · exp(Φ_S(q, a)),   Φ_S = Σ_i φ_σi(q, a)
  - hard mode: φ = −∞ when σ fires on (q, a), else 0 — the masked set U_S(q) gets probability exactly 0;
  - soft mode (the *Soft Bias Only* ablation, §6.4): φ = ``soft_bias`` (finite, < 0) per firing rule.
If every control action is masked in hard mode, the safe fallback a⊥ (safe_refusal / ask_human / no_op) is
taken with probability 1 (no division by zero). Text actions (A_text) are never hard-masked; the core schema H
(read-only rules) always applies; temporary masks (storm control, §4.2) apply until their ``until_step``.

Indexing (why enforcement cost does not grow with the number of scars): every rule is filed under the
(kind, name) its mask needs (``semantics.mask_key``), so an action only meets rules that could mask it. Inside
that bucket a rule is filed under up to two discriminating equality conjuncts of its guard (a composite key
such as object type and receptacle) — ``==`` comparisons, named predicates, ``in_class`` (filed under each
member of the class) and the argument of ``forbid_tool_arg``. At decision time the action builds each key tuple
the bucket uses once and fetches only the rules filed under it. Top-level ``or`` guards are split into one entry
per disjunct. Guards are compiled once into closures with the meaning of ``semantics.guard_holds``. The index
is a pre-filter only: every candidate is still checked in full, so it never changes what is masked, only how
fast (a property test compares it with a linear scan of ``semantics.fires``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from agents.runtime.scar import Scar, scar_id_of
from synthesis.dsl import (
    FALLBACK_ACTIONS,
    NAMED_PREDICATES,
    Action,
    And,
    Compare,
    ForbidToolArg,
    InClass,
    Named,
    Or,
    Rule,
)
from synthesis.dsl.semantics import Classes, Context, compare, feature_value, mask_covers, mask_key
from synthesis.errors import ConfigError, ScarsError

Mode = Literal["hard", "soft"]
CORE_PREFIX = "H:"
TEMP_PREFIX = "tmp:"


class ControlPlaneError(ScarsError, ValueError):
    """A control-plane operation got a bad argument (unknown id, logits of the wrong shape, …)."""


@dataclass(frozen=True, slots=True)
class Governed:
    """The governed decision for one context q over the candidate actions (SPEC §1).

    logits:   governed logits (−inf where masked in hard mode; base + soft_bias·#firing rules in soft mode).
    probs:    softmax of ``logits``; exactly 0.0 on masked actions in hard mode. All zeros when ``fallback`` is
              set: the fallback then carries probability 1.
    masked:   True where some rule fires on (q, a) (in soft mode too: the action is penalised, not removed).
    fired:    (action index, ids of the rules that fired) for every action some rule fires on.
    fallback: ``Action("fallback", name)`` when every control action is masked (hard mode), else None.
    """

    logits: np.ndarray
    probs: np.ndarray
    masked: np.ndarray
    fired: tuple[tuple[int, tuple[str, ...]], ...]
    fallback: Action | None


@dataclass(frozen=True, slots=True)
class Expired:
    """What ``ControlPlane.expire`` unloaded: the caller records the scar retirements in the ledger."""

    temp_mask_ids: tuple[str, ...]
    scar_ids: tuple[str, ...]


Check = Callable[[Context, Action], bool]


@dataclass(frozen=True, slots=True)
class _Entry:
    """One indexed (rule, disjunct) pair. ``check`` is the compiled whole guard or one top-level disjunct."""

    rule_id: str
    rule: Rule
    check: Check  # guard (or disjunct) ∧ the mask's argument test; the bucket already fixed kind and name
    until_step: int | None  # temporary masks: inactive from this step on
    expires_at_step: int | None  # scars: Scope.expires_at_step


_BUCKET_FEATURES = frozenset({"action.kind", "action.name", "action.tool", "action.verb"})
_MAX_KEY_FEATURES = 2  # a composite key of up to two equality conjuncts (e.g. object type and receptacle)


def _value_key(value: Any) -> tuple[str, Any]:
    """Dict key matching ``semantics.compare(x, "==", v)``: booleans only equal booleans (True == 1 must not hold)."""
    return ("bool", value) if isinstance(value, bool) else ("value", value)


def _compile(guard: Any, classes: Classes) -> Check:
    """A closure with exactly the meaning of ``semantics.guard_holds(guard, q, a, classes)``, minus the
    per-call dispatch on node types (the decision path evaluates candidates many times)."""
    if isinstance(guard, Compare | Named):
        feature = guard.feature if isinstance(guard, Compare) else NAMED_PREDICATES[guard.name]
        op = guard.op if isinstance(guard, Compare) else "=="
        value = guard.value
        if op == "==" and isinstance(value, str):
            # compare(x, "==", s) for a string s is plain equality (a missing feature never equals a string)
            return lambda q, a: feature_value(feature, q, a) == value
        return lambda q, a: compare(feature_value(feature, q, a), op, value)
    if isinstance(guard, InClass):
        members = classes.get(guard.class_name)
        feature = guard.feature
        if members is None:
            return lambda q, a: False
        return lambda q, a: feature_value(feature, q, a) in members  # the missing marker is never a member
    if isinstance(guard, And | Or):
        parts = tuple(_compile(g, classes) for g in guard.operands)
        if isinstance(guard, And):
            return lambda q, a: all(p(q, a) for p in parts)
        return lambda q, a: any(p(q, a) for p in parts)
    raise TypeError(f"not a guard: {guard!r}")


class _Bucket:
    """The rules whose mask needs one (kind, name): unindexed entries, plus a table per tuple of discriminating
    features mapping the tuple of their value keys to the entries filed there."""

    __slots__ = ("unindexed", "tables")

    def __init__(self) -> None:
        self.unindexed: dict[tuple[str, int], _Entry] = {}
        self.tables: dict[tuple[str, ...], dict[tuple, dict[tuple[str, int], _Entry]]] = {}

    def add(
        self, key: tuple[str, int], entry: _Entry, features: tuple[str, ...], values: list[tuple]
    ) -> None:
        if not features:
            self.unindexed[key] = entry
            return
        table = self.tables.setdefault(features, {})
        for value_tuple in values:
            table.setdefault(tuple(_value_key(v) for v in value_tuple), {})[key] = entry

    def remove(self, rule_id: str) -> None:
        for key in [k for k in self.unindexed if k[0] == rule_id]:
            del self.unindexed[key]
        for features in list(self.tables):
            table = self.tables[features]
            for vkey in list(table):
                entries = table[vkey]
                for key in [k for k in entries if k[0] == rule_id]:
                    del entries[key]
                if not entries:
                    del table[vkey]
            if not table:
                del self.tables[features]

    def __len__(self) -> int:
        return len(self.unindexed) + sum(len(t) for t in self.tables.values())

    def candidates(self, q: Context, a: Action) -> list[_Entry]:
        found = list(self.unindexed.values())
        if not self.tables:
            return found
        keys: dict[str, tuple[str, Any]] = {}  # each discriminating feature is read once per action
        for features, table in self.tables.items():
            try:
                key = []
                for f in features:
                    k = keys.get(f)
                    if k is None:
                        k = keys[f] = _value_key(feature_value(f, q, a))
                    key.append(k)
                entries = table.get(tuple(key))
            except TypeError:  # an unhashable context value cannot equal a DSL literal
                continue
            if entries:
                found.extend(entries.values())
        return found


def _conjuncts(guard: Any) -> tuple[Any, ...]:
    return guard.operands if isinstance(guard, And) else (guard,)


class ControlPlane:
    """Enforces H ∪ S_t ∪ temporary masks on candidate actions (SPEC §1, §4.2).

    Args:
        core:       the read-only core schema H (rules, or scars whose rules are used); ids ``H:<hash>``.
        scars:      the initially active scars S_t.
        classes:    equivalence classes for ``in_class`` (class name → member values).
        mode:       "hard" (φ = −∞) or "soft" (φ = soft_bias per firing rule; the Soft Bias Only ablation).
        soft_bias:  the finite negative penalty of soft mode.
        fallback:   a⊥, one of safe_refusal / ask_human / no_op.
    """

    def __init__(
        self,
        core: Iterable[Rule | Scar] = (),
        scars: Iterable[Scar] = (),
        classes: Mapping[str, Iterable[str]] | None = None,
        mode: Mode = "hard",
        soft_bias: float = -5.0,
        fallback: str = "safe_refusal",
    ) -> None:
        if mode not in ("hard", "soft"):
            raise ConfigError(f"mode must be 'hard' or 'soft', got {mode!r}")
        if not (isinstance(soft_bias, int | float) and np.isfinite(soft_bias) and soft_bias < 0):
            raise ConfigError(f"soft_bias must be a finite negative number, got {soft_bias!r}")
        if fallback not in FALLBACK_ACTIONS:
            raise ConfigError(f"fallback must be one of {FALLBACK_ACTIONS}, got {fallback!r}")
        self.mode: Mode = mode
        self.soft_bias = float(soft_bias)
        self.fallback = fallback
        self.classes: Classes = {name: frozenset(members) for name, members in (classes or {}).items()}
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._core: dict[str, Rule] = {}
        self._scars: dict[str, Scar] = {}
        self._temp: dict[str, tuple[Rule, int]] = {}
        self._temp_counter = 0
        for item in core:
            rule = item.rule if isinstance(item, Scar) else item
            if not isinstance(rule, Rule):
                raise ConfigError(f"core schema items must be Rules or Scars, got {type(item).__name__}")
            rule_id = CORE_PREFIX + scar_id_of(rule)
            if rule_id not in self._core:
                self._core[rule_id] = rule
                self._index(rule_id, rule, until_step=None, expires_at_step=None)
        for scar in scars:
            self.add(scar)

    # ----------------------------------------------------------------------------------------- the index
    def _discriminator(self, bucket: _Bucket, rule: Rule, guard: Any) -> tuple[tuple[str, ...], list[tuple]]:
        """Pick up to two equality-like conjuncts to file the entry under: (features, value tuples).

        Candidates: ``==`` comparisons, named predicates, ``in_class`` (filed under every member) and the
        argument of ``forbid_tool_arg``. A feature tuple the bucket already probes is preferred (each probed
        tuple costs one lookup per decision); otherwise the most selective (fewest values) features.
        """
        options: dict[str, list[Any]] = {}
        for conjunct in _conjuncts(guard):
            if isinstance(conjunct, Compare) and conjunct.op == "==":
                option = (conjunct.feature, [conjunct.value])
            elif isinstance(conjunct, Named):
                option = (NAMED_PREDICATES[conjunct.name], [conjunct.value])
            elif isinstance(conjunct, InClass) and conjunct.class_name in self.classes:
                option = (conjunct.feature, sorted(self.classes[conjunct.class_name], key=repr))
            else:
                continue
            # within a (kind, name) bucket the action's own kind/name/tool/verb never discriminate
            if option[0] not in _BUCKET_FEATURES and (
                option[0] not in options or len(option[1]) < len(options[option[0]])
            ):
                options[option[0]] = option[1]
        mask = rule.mask
        if isinstance(mask, ForbidToolArg) and f"action.{mask.arg_name}" not in options:
            options[f"action.{mask.arg_name}"] = [mask.value]
        if not options:
            return (), []
        ranked = sorted(options, key=lambda f: (len(options[f]), f))
        choices = [tuple(sorted(ranked[:k])) for k in range(min(_MAX_KEY_FEATURES, len(ranked)), 0, -1)]
        existing = [c for c in itertools.combinations(sorted(options), min(_MAX_KEY_FEATURES, len(options)))]
        features = next((c for c in existing if c in bucket.tables), choices[0])
        return features, list(itertools.product(*(options[f] for f in features)))

    def _index(
        self, rule_id: str, rule: Rule, *, until_step: int | None, expires_at_step: int | None
    ) -> None:
        bucket = self._buckets.setdefault(mask_key(rule.mask), _Bucket())
        mask = rule.mask
        disjuncts = rule.guard.operands if isinstance(rule.guard, Or) else (rule.guard,)
        for i, guard in enumerate(disjuncts):
            check = _compile(guard, self.classes)
            if isinstance(
                mask, ForbidToolArg
            ):  # the bucket fixed kind and tool; the argument is still to test

                def check(q, a, guard_check=check, mask=mask):
                    return mask_covers(mask, a) and guard_check(q, a)

            entry = _Entry(rule_id, rule, check, until_step, expires_at_step)
            features, values = self._discriminator(bucket, rule, guard)
            bucket.add((rule_id, i), entry, features, values)

    def _unindex(self, rule_id: str, rule: Rule) -> None:
        key = mask_key(rule.mask)
        bucket = self._buckets[key]
        bucket.remove(rule_id)
        if not len(bucket):
            del self._buckets[key]

    # ------------------------------------------------------------------------------------ the schema S_t
    @property
    def active_ids(self) -> tuple[str, ...]:
        """Ids of the active scars, in admission order (core rules and temporary masks excluded)."""
        return tuple(self._scars)

    @property
    def scars(self) -> tuple[Scar, ...]:
        return tuple(self._scars.values())

    @property
    def core_ids(self) -> tuple[str, ...]:
        return tuple(self._core)

    @property
    def temporary_mask_ids(self) -> tuple[str, ...]:
        return tuple(self._temp)

    def __len__(self) -> int:
        return len(self._scars)

    def __contains__(self, scar_id: object) -> bool:
        return scar_id in self._scars

    def add(self, scar: Scar) -> bool:
        """Activate a scar. Re-adding an active id only refreshes its audit plane; returns True if newly active."""
        if not isinstance(scar, Scar):
            raise ControlPlaneError(f"add() takes a Scar, got {type(scar).__name__}")
        is_new = scar.id not in self._scars
        self._scars[scar.id] = scar
        if is_new:
            self._index(scar.id, scar.rule, until_step=None, expires_at_step=scar.scope.expires_at_step)
        return is_new

    def remove(self, scar_id: str) -> Scar:
        """Unload an active scar from the control plane (the ledger keeps its record)."""
        if scar_id in self._core:
            raise ControlPlaneError(
                f"{scar_id!r} belongs to the read-only core schema H and cannot be removed"
            )
        scar = self._scars.pop(scar_id, None)
        if scar is None:
            raise ControlPlaneError(f"no active scar with id {scar_id!r}; active: {list(self._scars)[:20]}")
        self._unindex(scar_id, scar.rule)
        return scar

    def set_temporary_mask(self, rule: Rule, *, until_step: int, mask_id: str | None = None) -> str:
        """Storm control (§4.2): mask ``rule`` immediately, for steps < ``until_step``. Returns the mask id."""
        if not isinstance(rule, Rule):
            raise ControlPlaneError(f"a temporary mask is a Rule, got {type(rule).__name__}")
        if isinstance(until_step, bool) or not isinstance(until_step, int):
            raise ControlPlaneError(f"until_step must be an int, got {until_step!r}")
        if mask_id is None:
            self._temp_counter += 1
            mask_id = f"{TEMP_PREFIX}{self._temp_counter}:{scar_id_of(rule)}"
        if mask_id in self._temp:
            raise ControlPlaneError(f"temporary mask id {mask_id!r} is already in use")
        self._temp[mask_id] = (rule, until_step)
        self._index(mask_id, rule, until_step=until_step, expires_at_step=None)
        return mask_id

    def lift_temporary_mask(self, mask_id: str) -> Rule:
        """Hot swap (§4.2): remove a temporary mask, e.g. when the mature scar is admitted."""
        item = self._temp.pop(mask_id, None)
        if item is None:
            raise ControlPlaneError(f"no temporary mask with id {mask_id!r}; active: {list(self._temp)}")
        self._unindex(mask_id, item[0])
        return item[0]

    def expire(self, step: int) -> Expired:
        """Unload temporary masks with until_step ≤ step and scars whose scope expires at or before ``step``."""
        temp_ids = tuple(m for m, (_, until) in self._temp.items() if until <= step)
        for mask_id in temp_ids:
            self.lift_temporary_mask(mask_id)
        scar_ids = tuple(s.id for s in self._scars.values() if s.scope.expired(step=step))
        for scar_id in scar_ids:
            self.remove(scar_id)
        return Expired(temp_ids, scar_ids)

    # ---------------------------------------------------------------------------------------- decisions
    def _firing(self, q: Context, a: Action, step: int | None) -> tuple[str, ...]:
        """Ids of the rules (H, scars, temporary masks) that fire on (q, a); empty for non-control actions."""
        if a.kind != "env" and a.kind != "tool":  # A_ctrl only: text and fallback actions are never masked
            return ()
        bucket = self._buckets.get((a.kind, a.name))
        if bucket is None:
            return ()
        fired: list[str] = []
        for entry in bucket.candidates(q, a):
            if step is not None and (
                (entry.until_step is not None and step >= entry.until_step)
                or (entry.expires_at_step is not None and step >= entry.expires_at_step)
            ):
                continue
            if entry.rule_id not in fired and entry.check(q, a):
                fired.append(entry.rule_id)
        return tuple(fired)

    def fired_rules(self, q: Context, a: Action, step: int | None = None) -> tuple[str, ...]:
        """The ids of every rule that fires on (q, a) (for audits and tests)."""
        return self._firing(q, a, step)

    def masked(self, q: Context, actions: Sequence[Action], step: int | None = None) -> list[bool]:
        """U_S(q) membership of each candidate action (SPEC §1)."""
        return [bool(self._firing(q, a, step)) for a in actions]

    def govern(
        self,
        q: Context,
        actions: Sequence[Action],
        logits: Sequence[float] | np.ndarray,
        step: int | None = None,
    ) -> Governed:
        """Turn base logits of π_0 into the governed distribution π_S (SPEC §1)."""
        base = np.asarray(logits, dtype=np.float64)
        n = len(actions)
        if base.shape != (n,):
            raise ControlPlaneError(
                f"logits must have shape ({n},) to match the candidate actions, got {base.shape}"
            )
        if not (base < np.inf).all():  # NaN compares false too
            raise ControlPlaneError(f"base logits must be finite or -inf, got {base.tolist()}")
        governed = base.copy()
        masked = np.zeros(n, dtype=bool)
        fired: list[tuple[int, tuple[str, ...]]] = []
        hard = self.mode == "hard"
        control_left = False  # some control action keeps a finite governed logit
        any_control = False
        for i, a in enumerate(actions):
            ids = self._firing(q, a, step)
            if ids:
                masked[i] = True
                fired.append((i, ids))
                governed[i] = -np.inf if hard else governed[i] + self.soft_bias * len(ids)
            if a.kind == "env" or a.kind == "tool":
                any_control = True
                control_left = control_left or governed[i] > -np.inf
        finite = governed > -np.inf
        # a⊥ with probability 1: every control action is masked (or no action is left at all)
        if (hard and any_control and not control_left) or not finite.any():
            return Governed(governed, np.zeros(n), masked, tuple(fired), Action("fallback", self.fallback))
        shifted = np.exp(governed - governed.max())
        return Governed(governed, shifted / shifted.sum(), masked, tuple(fired), None)
