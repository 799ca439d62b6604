"""The control plane: online enforcement of the core schema H and the active scars S_t (paper §3.1; SPEC §1).

Governed policy:  π_S(a | q, H) ∝ π_0(a | q, H) · exp(Φ_S(q, a)),   Φ_S = Σ_i φ_σi(q, a)
  - hard mode: φ = −∞ when σ fires on (q, a), else 0 — the masked set U_S(q) gets probability exactly 0;
  - soft mode (the *Soft Bias Only* ablation, §6.4): φ = ``soft_bias`` (finite, < 0) per firing rule.
If every control action is masked in hard mode, the safe fallback a⊥ (safe_refusal / ask_human / no_op) is
taken with probability 1 (no division by zero). Text actions (A_text) are never hard-masked; the core schema H
(read-only rules) always applies; temporary masks (storm control, §4.2) apply until their ``until_step``.

Indexing (why enforcement cost does not grow with the number of scars): every rule is filed under the
(kind, name) its mask needs (``semantics.mask_key``), so an action only meets rules that could mask it. Inside
that bucket ``action.kind/name/tool/verb`` are constants and are folded away; each top-level ``or`` disjunct is
filed under up to two equality-like conjuncts (``==``, named predicates, ``in_class`` — filed under each
member — and the argument of ``forbid_tool_arg``), the most selective ones, or else under one numeric
threshold (``<``, ``<=``, ``>``, ``>=``: sorted thresholds, found by bisection), or else left unindexed. The
lookup proves the key conjuncts, so a candidate only checks the rest of its guard (a closure compiled once with
the meaning of ``semantics.guard_holds``). A property test compares the fired rules with a linear scan of
``semantics.fires``.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
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
from synthesis.dsl.semantics import Classes, Context, compare, mask_key
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


Check = Callable[[Context, dict], bool]  # compiled guard part: (q, the action's arguments by name) -> holds
Source = tuple[str, str]  # ("arg", argument name) or ("ctx", context key): where a feature is read
Entry = tuple[str, Check | None, int | None]  # (rule id, residual check or None, step it stops applying at)

_ABSENT = object()  # a feature the action or the context does not have (``semantics`` treats it alike)
_BOOL = object()  # tags boolean index keys: True == 1 must not hold (``semantics.compare``)
_NUMBER = (int, float)
_ABSENTS = itertools.repeat(_ABSENT)  # the default of every read, for map(dict.get, keys, _ABSENTS)
_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_MAX_KEY_FEATURES = 2  # a composite key of up to two equality conjuncts (e.g. object type and receptacle)


def _is_number(x: object) -> bool:
    """``semantics._is_number``: an int or float, not a bool, not NaN."""
    return isinstance(x, _NUMBER) and not isinstance(x, bool) and x == x


def _index_key(value: Any) -> Any:
    """Dict key that matches exactly when ``semantics.compare(x, "==", value)`` holds (booleans only equal
    booleans; 1 == 1.0 holds in both)."""
    return (_BOOL, value) if value.__class__ is bool else value


def _bool_hazard(value: Any) -> bool:
    """Could a boolean read find this literal's index key? (It equals and hashes like 0 or 1.)"""
    return value.__class__ is bool or (isinstance(value, _NUMBER) and (value == 0 or value == 1))


def _value_test(op: str, value: Any) -> Callable[[Any], bool]:
    """``lambda x: semantics.compare(x, op, value)`` for a read x (``_ABSENT`` when missing), specialised."""
    if op == "==":
        if isinstance(value, bool):
            return lambda x: x is value
        if isinstance(value, str):
            return lambda x: x == value  # neither _ABSENT nor a bool equals a string
        if _is_number(value):
            return lambda x: x.__class__ is not bool and x == value
        return lambda x: x is not _ABSENT and compare(x, "==", value)
    if op == "!=":
        equal = _value_test("==", value)
        return lambda x: not equal(x)
    if op in _ORDER:
        if not _is_number(value):
            return lambda x: False
        order = _ORDER[op]
        # a NaN read fails every ordering comparison, as in ``compare``
        return lambda x: isinstance(x, _NUMBER) and x.__class__ is not bool and order(x, value)
    return lambda x: compare(x, op, value)  # raises the DSL's own error for an unknown operator


@dataclass(frozen=True, slots=True)
class _Atom:
    """One conjunct of a disjunct, resolved inside a (kind, name) bucket: ``source`` is where its feature is read
    (None when the bucket fixes it: action.kind/name/tool/verb), ``test`` the test of the read value."""

    source: Source | None
    constant: Any  # the fixed feature value when ``source`` is None
    test: Callable[[Any], bool]
    key_values: tuple | None  # equality-like: the values that make it hold (index keys), else None
    threshold: tuple[str, float] | None  # numeric ``<``/``<=``/``>``/``>=`` with a number: (op, value)


def _resolve(feature: str, kind: str, name: str) -> tuple[Source | None, Any]:
    """Where ``semantics.feature_value(feature, q, a)`` reads for an action of this (kind, name)."""
    if feature.startswith("action."):
        part = feature[7:]
        if part == "kind":
            return None, kind
        if part == "name":
            return None, name
        if part == "tool":
            return None, name if kind == "tool" else _ABSENT
        if part == "verb":
            return None, name if kind == "env" else _ABSENT
        return ("arg", part), None
    return ("ctx", feature), None


def _atom(conjunct: Any, kind: str, name: str, classes: Classes) -> _Atom | None:
    """The atom of a predicate (None for a nested and/or, which is compiled as a whole)."""
    if isinstance(conjunct, Compare | Named):
        feature = conjunct.feature if isinstance(conjunct, Compare) else NAMED_PREDICATES[conjunct.name]
        op = conjunct.op if isinstance(conjunct, Compare) else "=="
        value = conjunct.value
        source, constant = _resolve(feature, kind, name)
        indexable = op == "==" and (not isinstance(value, float) or value == value)  # NaN equals nothing
        threshold = (op, value) if op in _ORDER and _is_number(value) else None
        return _Atom(source, constant, _value_test(op, value), (value,) if indexable else None, threshold)
    if isinstance(conjunct, InClass):
        members = classes.get(conjunct.class_name)
        source, constant = _resolve(conjunct.feature, kind, name)
        if members is None:
            return _Atom(source, constant, lambda x: False, None, None)
        return _Atom(
            source,
            constant,
            lambda x: x in members,  # _ABSENT is never a member
            tuple(sorted(members, key=repr)),
            None,
        )
    return None


def _read(source: Source, test: Callable[[Any], bool]) -> Check:
    where, key = source
    if where == "arg":
        return lambda q, args: test(args.get(key, _ABSENT))
    return lambda q, args: test(q.get(key, _ABSENT))


def _all(parts: list[Check]) -> Check | bool:
    if not parts:
        return True
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        first, second = parts
        return lambda q, args: first(q, args) and second(q, args)
    return lambda q, args: all(p(q, args) for p in parts)


def _any(parts: list[Check]) -> Check | bool:
    if not parts:
        return False
    if len(parts) == 1:
        return parts[0]
    return lambda q, args: any(p(q, args) for p in parts)


def _compile(guard: Any, kind: str, name: str, classes: Classes) -> Check | bool:
    """``semantics.guard_holds`` for actions of one (kind, name), as a closure over (q, args) — or a constant
    when the bucket already decides it (e.g. ``tool_is`` inside the bucket of that tool)."""
    atom = _atom(guard, kind, name, classes)
    if atom is not None:
        return bool(atom.test(atom.constant)) if atom.source is None else _read(atom.source, atom.test)
    if isinstance(guard, And | Or):
        parts = [_compile(g, kind, name, classes) for g in guard.operands]
        if isinstance(guard, And):
            return False if False in parts else _all([p for p in parts if p is not True])
        return True if True in parts else _any([p for p in parts if p is not False])
    raise TypeError(f"not a guard: {guard!r}")


def _flatten(guard: Any) -> list[Any]:
    if isinstance(guard, And):
        return [c for g in guard.operands for c in _flatten(g)]
    return [guard]


class _Bucket:
    """The rules whose mask needs one action (kind, name), filed so that an action meets only candidates:

    - ``tables``: per tuple of discriminating sources, index key tuple → entries (equality / ``in_class`` /
      the argument of ``forbid_tool_arg``); the key conjuncts are proved by the lookup and not re-checked;
    - ``ranges``: per (source, op), entries sorted by a numeric threshold; a bisection finds those whose
      threshold the read value passes;
    - ``unindexed``: the rest (checked on every action of this (kind, name)).
    """

    __slots__ = ("unindexed", "tables", "ranges", "where", "hazards", "seen", "_plan")

    def __init__(self) -> None:
        self.unindexed: dict[tuple[str, int], Entry] = {}
        self.tables: dict[tuple[Source, ...], dict[Any, dict[tuple[str, int], Entry]]] = {}
        self.ranges: dict[tuple[Source, str], list[tuple[float, tuple[str, int], Entry]]] = {}
        self.where: dict[str, list[tuple]] = {}  # rule id → where its entries are filed (for removal)
        # index keys a boolean could wrongly find (True == 1 and hash(True) == hash(1)): while there are none,
        # action values need no boolean tagging
        self.hazards = 0
        self.seen: dict[Source, set] = {}  # source → literal values rules filed here name (key selectivity)
        self._plan: tuple | None = None

    def __len__(self) -> int:
        return len(self.where)

    def file(self, key: tuple[str, int], atoms: list[_Atom], rest: list[Check], stop: int | None) -> None:
        """File one disjunct: pick its index (composite equality key, else a threshold, else none) and
        compile what the index does not prove into the residual check."""
        self._plan = None
        keyed: dict[Source, _Atom] = {}
        for atom in atoms:
            if atom.source is not None and atom.key_values is not None:
                best = keyed.get(atom.source)
                if best is None or len(atom.key_values) < len(best.key_values):
                    keyed[atom.source] = atom
        chosen: list[_Atom] = []
        if keyed:
            for source, atom in keyed.items():
                self.seen.setdefault(source, set()).update(map(_index_key, atom.key_values))
            # the most selective sources: the smallest share of the values this bucket's rules name for the
            # source (an object type out of ~75 beats one of 6 rooms), then the fewest key values
            ranked = sorted(
                keyed,
                key=lambda s: (len(keyed[s].key_values) / len(self.seen[s]), len(keyed[s].key_values), s),
            )
            chosen = [keyed[s] for s in sorted(ranked[:_MAX_KEY_FEATURES])]
        else:
            thresholds = [a for a in atoms if a.source is not None and a.threshold is not None]
            if thresholds:
                probed = [a for a in thresholds if (a.source, a.threshold[0]) in self.ranges]
                chosen = [(probed or thresholds)[0]]
        proved = {id(a) for a in chosen}
        residual = _all([_read(a.source, a.test) for a in atoms if id(a) not in proved] + rest)
        if residual is False:
            return
        entry: Entry = (key[0], None if residual is True else residual, stop)
        places = self.where.setdefault(key[0], [])
        if chosen and chosen[0].key_values is not None:
            sources = tuple(a.source for a in chosen)
            table = self.tables.setdefault(sources, {})
            for values in itertools.product(*(a.key_values for a in chosen)):
                index_key = _index_key(values[0]) if len(values) == 1 else tuple(map(_index_key, values))
                table.setdefault(index_key, {})[key] = entry
                hazard = any(_bool_hazard(v) for v in values)
                self.hazards += hazard
                places.append(("table", sources, index_key, key, hazard))
        elif chosen:
            op, value = chosen[0].threshold
            bisect.insort(self.ranges.setdefault((chosen[0].source, op), []), (value, key, entry))
            places.append(("range", (chosen[0].source, op), key))
        else:
            self.unindexed[key] = entry
            places.append(("unindexed", key))

    def remove(self, rule_id: str) -> None:
        self._plan = None
        for place in self.where.pop(rule_id, ()):
            if place[0] == "unindexed":
                self.unindexed.pop(place[1], None)
            elif place[0] == "table":
                _, sources, index_key, key, hazard = place
                self.hazards -= hazard
                table = self.tables[sources]
                entries = table[index_key]
                entries.pop(key, None)
                if not entries:
                    del table[index_key]
                if not table:
                    del self.tables[sources]
            else:
                _, range_key, key = place
                items = [item for item in self.ranges[range_key] if item[1] != key]
                if items:
                    self.ranges[range_key] = items
                else:
                    del self.ranges[range_key]

    def _build_plan(self) -> tuple:
        """The decision-time layout: which sources to read once per action, and the probes that use them."""
        # the action's arguments take the first slots, the context's the next ones
        sources = sorted({s for t in self.tables for s in t} | {s for s, _ in self.ranges})
        slot = {s: i for i, s in enumerate(sources)}
        arg_keys = tuple(key for where, key in sources if where == "arg")
        ctx_keys = tuple(key for where, key in sources if where == "ctx")
        singles = tuple((slot[t[0]], table) for t, table in self.tables.items() if len(t) == 1)
        pairs = tuple((slot[t[0]], slot[t[1]], table) for t, table in self.tables.items() if len(t) == 2)
        ranges = tuple(
            (slot[s], op, [v for v, _, _ in items], [e for _, _, e in items])
            for (s, op), items in self.ranges.items()
        )
        self._plan = (
            tuple(self.unindexed.values()),
            arg_keys,
            ctx_keys,
            singles,
            pairs,
            ranges,
            self.hazards,
        )
        return self._plan

    def fire(self, q: Context, args: dict, step: int | None) -> list[str]:
        """Ids of the rules filed here that fire on the action whose arguments are ``args``."""
        unindexed, arg_keys, ctx_keys, singles, pairs, ranges, hazards = self._plan or self._build_plan()
        # each discriminating feature is read once per action
        values = [*map(args.get, arg_keys, _ABSENTS), *map(q.get, ctx_keys, _ABSENTS)]
        if hazards and bool in map(type, values):  # tag booleans so that True does not find the key 1
            values = [(_BOOL, v) if v.__class__ is bool else v for v in values]
        candidates = list(unindexed)
        for i, table in singles:
            try:
                found = table.get(values[i])
            except TypeError:  # an unhashable value cannot equal a DSL literal
                continue
            if found:
                candidates.extend(found.values())
        for i, j, table in pairs:
            try:
                found = table.get((values[i], values[j]))
            except TypeError:
                continue
            if found:
                candidates.extend(found.values())
        for i, op, thresholds, entries in ranges:
            x = values[i]
            if x.__class__ is bool or not isinstance(x, _NUMBER) or x != x:  # NaN passes no threshold
                continue
            if op == "<":
                candidates.extend(entries[bisect.bisect_right(thresholds, x) :])
            elif op == "<=":
                candidates.extend(entries[bisect.bisect_left(thresholds, x) :])
            elif op == ">":
                candidates.extend(entries[: bisect.bisect_left(thresholds, x)])
            else:
                candidates.extend(entries[: bisect.bisect_right(thresholds, x)])
        fired: list[str] = []
        for rule_id, check, stop in candidates:
            if stop is not None and step is not None and step >= stop:
                continue
            if rule_id not in fired and (check is None or check(q, args)):
                fired.append(rule_id)
        return fired


def _arguments(a: Action) -> dict:
    """The action's arguments by name; the first of a repeated name wins, as in ``Action.arg``."""
    args = dict(a.args)
    return args if len(args) == len(a.args) else dict(reversed(a.args))


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
    def _index(
        self, rule_id: str, rule: Rule, *, until_step: int | None, expires_at_step: int | None
    ) -> None:
        kind, name = mask_key(rule.mask)
        bucket = self._buckets.setdefault((kind, name), _Bucket())
        stops = [s for s in (until_step, expires_at_step) if s is not None]
        stop = min(stops) if stops else None
        disjuncts = rule.guard.operands if isinstance(rule.guard, Or) else (rule.guard,)
        for i, disjunct in enumerate(disjuncts):
            atoms: list[_Atom] = []
            rest: list[Check] = []
            for conjunct in _flatten(disjunct):
                atom = _atom(conjunct, kind, name, self.classes)
                if atom is None:  # a nested or: compiled whole
                    compiled = _compile(conjunct, kind, name, self.classes)
                    if compiled is False:
                        break
                    if compiled is not True:
                        rest.append(compiled)
                elif atom.source is None:  # decided by the bucket's (kind, name)
                    if not atom.test(atom.constant):
                        break
                else:
                    atoms.append(atom)
            else:
                mask = rule.mask
                if isinstance(mask, ForbidToolArg):  # the bucket fixed kind and tool; the argument is to test
                    atoms.append(
                        _Atom(
                            ("arg", mask.arg_name), None, _value_test("==", mask.value), (mask.value,), None
                        )
                    )
                bucket.file((rule_id, i), atoms, rest, stop)

    def _unindex(self, rule_id: str, rule: Rule) -> None:
        key = mask_key(rule.mask)
        bucket = self._buckets.get(key)
        if bucket is not None:
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
        return tuple(bucket.fire(q, _arguments(a), step))

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
        # Plain Python floats for the per-action work and the softmax (numpy calls cost microseconds each on
        # vectors of ~10 actions); arrays are built once, at the end.
        governed = base.tolist()
        if not all(x < math.inf for x in governed):  # NaN compares false too
            raise ControlPlaneError(f"base logits must be finite or -inf, got {governed}")
        masked = [False] * n
        fired: list[tuple[int, tuple[str, ...]]] = []
        hard = self.mode == "hard"
        buckets = self._buckets
        any_control = False
        control_left = False  # some control action keeps a finite governed logit
        for i, a in enumerate(actions):
            kind = a.kind
            if kind != "env" and kind != "tool":  # A_ctrl only: text and fallback actions are never masked
                continue
            any_control = True
            bucket = buckets.get((kind, a.name))
            if bucket is not None:
                args = dict(a.args)  # _arguments(a), inlined on the hot path
                ids = bucket.fire(q, args if len(args) == len(a.args) else _arguments(a), step)
            else:
                ids = None
            if ids:
                masked[i] = True
                fired.append((i, tuple(ids)))
                governed[i] = -math.inf if hard else governed[i] + self.soft_bias * len(ids)
            control_left = control_left or governed[i] > -math.inf
        top = max(governed, default=-math.inf)
        logits_out = np.array(governed, dtype=np.float64)
        masked_out = np.array(masked, dtype=bool)
        # a⊥ with probability 1: every control action is masked (or no action is left at all)
        if (hard and any_control and not control_left) or top == -math.inf:
            return Governed(
                logits_out, np.zeros(n), masked_out, tuple(fired), Action("fallback", self.fallback)
            )
        shifted = [math.exp(x - top) for x in governed]  # exp(-inf) = 0.0: a masked action gets exactly 0
        total = sum(shifted)
        probs = np.array([x / total for x in shifted], dtype=np.float64)
        return Governed(logits_out, probs, masked_out, tuple(fired), None)
