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
lookup proves the key conjuncts, so a candidate only checks the rest of its guard. Each bucket is compiled into
one generated Python function (on the first decision after a change to it): it reads the discriminating features
once, probes each table with one dict lookup and calls the matched key's function, whose residual tests are
inlined comparisons with the meaning of ``semantics.guard_holds``. Every literal (values, rule ids, tables) is
bound as a global of the compiled code, never spliced into its text. Property tests compare the fired rules with
a linear scan of ``semantics.fires``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from scars.agents.runtime.scar import Scar, scar_id_of
from scars.synthesis.dsl import (
    FALLBACK_ACTIONS,
    NAMED_PREDICATES,
    Action,
    And,
    Compare,
    CompareFeatures,
    ForbidToolArg,
    InClass,
    Named,
    Or,
    Rule,
)
from scars.synthesis.dsl.semantics import Classes, Context, compare, mask_key
from scars.synthesis.errors import ConfigError, ScarsError

if TYPE_CHECKING:
    import numpy as np

Mode = Literal["hard", "soft"]
CORE_PREFIX = "H:"
TEMP_PREFIX = "tmp:"


def core_rule_id(rule: Rule) -> str:
    """The id a rule of the core schema H has in every control plane (and in ``Governed.fired``)."""
    return CORE_PREFIX + scar_id_of(rule)


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


Source = tuple[str, str]  # ("arg", argument name) or ("ctx", context key): where a feature is read
Decider = Callable[
    [Context, tuple, "int | None"], list
]  # (q, the action's args pairs, step) -> fired rule ids

_Fired = tuple[tuple[int, tuple[str, ...]], ...]  # (action index, ids of the rules that fired on it)
_ABSENT = object()  # a feature the action or the context does not have (``semantics`` treats it alike)
_BOOL = object()  # tags boolean index keys: True == 1 must not hold (``semantics.compare``)
_NUMBER = (int, float)
_ORDER = ("<", "<=", ">", ">=")
_MEMO_SIZE = 2048  # decisions a control plane remembers (``ControlPlane._decided``); then it starts again
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


@dataclass(frozen=True, slots=True)
class _Atom:
    """One conjunct of a disjunct, resolved inside a (kind, name) bucket: ``source`` is where its feature is read
    (None when the bucket fixes it: action.kind/name/tool/verb), ``op``/``value`` the test of the read value
    (``op == "in"``: ``value`` is the class's members, None for an unknown class)."""

    source: Source | None
    constant: Any  # the fixed feature value when ``source`` is None
    op: str
    value: Any
    key_values: tuple | None  # equality-like: the values that make it hold (index keys), else None
    threshold: tuple[str, float] | None  # numeric ``<``/``<=``/``>``/``>=`` with a number: (op, value)

    def holds_on(self, x: Any) -> bool:
        """The test on a read value x (``_ABSENT`` when missing), as ``semantics`` means it."""
        if self.op == "in":
            return self.value is not None and x is not _ABSENT and x in self.value
        if x is _ABSENT:
            return self.op == "!="
        return compare(x, self.op, self.value)


def _relate(x: Any, op: str, y: Any) -> bool:
    """``semantics.compare_features`` on read values (``_ABSENT`` when missing): the generated code's fallback for
    a relational ``==``/``!=`` and for a relation the bucket decides."""
    if x is _ABSENT or y is _ABSENT:
        return op == "!="
    return compare(x, op, y)


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
        return _Atom(source, constant, op, value, (value,) if indexable else None, threshold)
    if isinstance(conjunct, InClass):
        members = classes.get(conjunct.class_name)
        source, constant = _resolve(conjunct.feature, kind, name)
        keys = None if members is None else tuple(sorted(members, key=repr))
        return _Atom(source, constant, "in", members, keys, None)
    return None


def _flatten(guard: Any) -> list[Any]:
    if isinstance(guard, And):
        return [c for g in guard.operands for c in _flatten(g)]
    return [guard]


@dataclass(frozen=True, slots=True)
class _Entry:
    """One filed disjunct: what its index key does not prove (``atoms`` and nested ``rest`` guards) and the
    step at which it stops applying (None: never)."""

    rule_id: str
    atoms: tuple[_Atom, ...]
    rest: tuple[Any, ...]
    stop: int | None


class _Source:
    """Python source of one bucket's decider, with every literal kept out of the text: values, rule ids and
    lookup tables are bound as globals ``c<n>`` of the compiled code (strings are never spliced into source)."""

    def __init__(self, kind: str, name: str, classes: Classes) -> None:
        self.kind, self.name, self.classes = kind, name, classes
        self.names: dict[str, Any] = {
            "_A": _ABSENT,
            "_BOOL": _BOOL,
            "_NUM": _NUMBER,
            "_cmp": compare,
            "_rel": _relate,
            "_bisect_left": bisect.bisect_left,
            "_bisect_right": bisect.bisect_right,
        }
        self._known: dict[tuple[type, Any], str] = {}
        self.context_keys: set[str] = set()  # the context keys the emitted code reads
        self.reads_step = False  # the emitted code reads the step (an entry with a stop)

    def const(self, value: Any) -> str:
        """The global name bound to ``value`` (one name per (type, value): True, 1 and 1.0 stay apart)."""
        try:
            known = (value.__class__, value)
            hash(known)
        except TypeError:  # a lookup table or list: always its own name
            known = None
        if known is not None and known in self._known:
            return self._known[known]
        ref = f"c{len(self.names)}"
        self.names[ref] = value
        if known is not None:
            self._known[known] = ref
        return ref

    def read(self, source: Source) -> str:
        where, key = source
        if where != "arg":
            self.context_keys.add(key)
        return f"{'d' if where == 'arg' else 'q'}.get({self.const(key)}, _A)"

    def test(self, op: str, value: Any, x: str) -> str | bool:
        """An expression for ``semantics.compare(<x>, op, value)`` (x reads ``_A`` when missing), or a bool."""
        if op == "in":
            return False if value is None else f"({x} in {self.const(value)})"  # _A is never a member
        if op == "==":
            c = self.const(value)
            if isinstance(value, bool):
                return f"({x} is {c})"
            if isinstance(value, str):
                return f"({x} == {c})"  # neither _A nor a bool equals a string
            if _is_number(value):
                return f"((x := {x}).__class__ is not bool and x == {c})"
            return f"((x := {x}) is not _A and _cmp(x, '==', {c}))"
        if op == "!=":
            equal = self.test("==", value, x)
            return not equal if isinstance(equal, bool) else f"(not {equal})"
        if op in _ORDER:
            if not _is_number(value):
                return False
            # a NaN read fails every ordering comparison, as in ``compare``; bools and numpy ints are no numbers
            return (
                f"((x := {x}).__class__ is not bool and isinstance(x, _NUM) and x {op} {self.const(value)})"
            )
        return f"((x := {x}) is not _A and _cmp(x, {self.const(op)}, {self.const(value)}))"

    def atom(self, atom: _Atom) -> str | bool:
        if atom.source is None:
            return atom.holds_on(atom.constant)
        return self.test(atom.op, atom.value, self.read(atom.source))

    def guard(self, guard: Any) -> str | bool:
        """``semantics.guard_holds`` inside this bucket, as an expression over (q, d), or a bool when the bucket's
        (kind, name) already decides it."""
        atom = _atom(guard, self.kind, self.name, self.classes)
        if atom is not None:
            return self.atom(atom)
        if isinstance(guard, CompareFeatures):
            return self.relation(guard)
        if isinstance(guard, And | Or):
            parts = [self.guard(g) for g in guard.operands]
            absorbing, neutral = (False, True) if isinstance(guard, And) else (True, False)
            if any(p is absorbing for p in parts):
                return absorbing
            parts = [p for p in parts if p is not neutral]
            if not parts:
                return neutral
            return "(" + (" and " if isinstance(guard, And) else " or ").join(parts) + ")"
        raise TypeError(f"not a guard: {guard!r}")

    def relation(self, guard: CompareFeatures) -> str | bool:
        """``semantics.compare_features`` of the two features' reads, as an expression over (q, d), or a bool when
        the bucket fixes both sides (action.kind/name/tool/verb)."""
        (left, left_constant), (right, right_constant) = (
            _resolve(guard.feature, self.kind, self.name),
            _resolve(guard.other, self.kind, self.name),
        )
        if left is None and right is None:
            return _relate(left_constant, guard.op, right_constant)
        x = self.read(left) if left is not None else self.const(left_constant)
        y = self.read(right) if right is not None else self.const(right_constant)
        if guard.op in _ORDER:  # both numbers (a NaN fails every ordering, as in ``compare``); else false
            return (
                f"((x := {x}).__class__ is not bool and isinstance(x, _NUM) and "
                f"(y := {y}).__class__ is not bool and isinstance(y, _NUM) and x {guard.op} y)"
            )
        return f"_rel({x}, {self.const(guard.op)}, {y})"

    def condition(self, entry: _Entry) -> str | bool:
        """When the entry fires, given that its index key matched."""
        parts: list[str | bool] = [self.atom(a) for a in entry.atoms] + [self.guard(g) for g in entry.rest]
        if entry.stop is not None:
            self.reads_step = True
            parts.insert(0, f"(step is None or step < {self.const(entry.stop)})")
        if any(p is False for p in parts):
            return False
        parts = [p for p in parts if p is not True]
        return " and ".join(parts) if parts else True

    def emit(self, entries: Iterable[_Entry], indent: str) -> list[str]:
        lines = []
        for entry in entries:
            condition = self.condition(entry)
            if condition is False:
                continue
            rule_id = self.const(entry.rule_id)
            add = f"if {rule_id} not in fired: fired.append({rule_id})"  # an or fires once
            if condition is True:
                lines.append(indent + add)
            else:
                lines += [f"{indent}if {condition}:", f"{indent}    {add}"]
        return lines

    def group(self, entries: Iterable[_Entry], out: list[str]) -> str:
        """A function appending the ids of ``entries`` that fire (one per index key); returns its name."""
        ref = f"g{len(out)}"
        body = self.emit(entries, "    ") or ["    return"]
        out.append("\n".join([f"def {ref}(q, d, step, fired):", *body]))
        return ref


class _Bucket:
    """The rules whose mask needs one action (kind, name), filed so that an action meets only candidates:

    - ``tables``: per tuple of discriminating sources, index key tuple → entries (equality / ``in_class`` /
      the argument of ``forbid_tool_arg``); the key conjuncts are proved by the lookup and not re-checked;
    - ``ranges``: per (source, op), entries sorted by a numeric threshold; a bisection finds those whose
      threshold the read value passes;
    - ``unindexed``: the rest (checked on every action of this (kind, name)).

    Decisions do not walk these structures: ``decider()`` compiles them into one Python function (rebuilt after
    any change) that reads each discriminating feature once into a local, probes each table with one dict
    lookup and runs only the matched keys' residual tests, inlined as comparisons.
    """

    __slots__ = (
        "kind",
        "name",
        "classes",
        "unindexed",
        "tables",
        "ranges",
        "where",
        "hazards",
        "seen",
        "_fn",
        "_reads",
    )

    def __init__(self, kind: str, name: str, classes: Classes) -> None:
        self.kind, self.name, self.classes = kind, name, classes
        self.unindexed: dict[tuple[str, int], _Entry] = {}
        self.tables: dict[tuple[Source, ...], dict[Any, dict[tuple[str, int], _Entry]]] = {}
        self.ranges: dict[tuple[Source, str], list[tuple[float, tuple[str, int], _Entry]]] = {}
        self.where: dict[str, list[tuple]] = {}  # rule id → where its entries are filed (for removal)
        # index keys a boolean could wrongly find (True == 1 and hash(True) == hash(1)): while there are none,
        # action values need no boolean tagging
        self.hazards = 0
        self.seen: dict[Source, set] = {}  # source → literal values rules filed here name (key selectivity)
        self._fn: Decider | None = None
        self._reads: tuple[frozenset[str], bool] = (frozenset(), False)

    def __len__(self) -> int:
        return len(self.where)

    def file(self, key: tuple[str, int], atoms: list[_Atom], rest: list[Any], stop: int | None) -> None:
        """File one disjunct: pick its index (composite equality key, else a threshold, else none); what the
        index does not prove stays in the entry, to be tested."""
        self._fn = None
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
        entry = _Entry(key[0], tuple(a for a in atoms if id(a) not in proved), tuple(rest), stop)
        if _Source(self.kind, self.name, self.classes).condition(entry) is False:
            return  # can never fire in this bucket
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
        self._fn = None
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

    def decider(self) -> Decider:
        """The compiled decision function of the rules filed now (built once per change)."""
        if self._fn is None:
            self._fn = self._compile()
        return self._fn

    def reads(self) -> tuple[frozenset[str], bool]:
        """What the decider of the rules filed now reads besides the action: (the context keys, whether the step)."""
        self.decider()
        return self._reads

    def _reads_args(self, entry: _Entry) -> bool:
        def reads(guard: Any) -> bool:
            atom = _atom(guard, self.kind, self.name, self.classes)
            if atom is not None:
                return atom.source is not None and atom.source[0] == "arg"
            if isinstance(guard, CompareFeatures):
                sides = (_resolve(f, self.kind, self.name)[0] for f in (guard.feature, guard.other))
                return any(side is not None and side[0] == "arg" for side in sides)
            return any(map(reads, guard.operands))

        return any(a.source is not None and a.source[0] == "arg" for a in entry.atoms) or any(
            map(reads, entry.rest)
        )

    def _compile(self) -> Decider:
        src = _Source(self.kind, self.name, self.classes)
        groups: list[str] = []
        sources = sorted({s for t in self.tables for s in t} | {s for s, _ in self.ranges})
        entries = [
            *self.unindexed.values(),
            *(e for t in self.tables.values() for g in t.values() for e in g.values()),
            *(e for items in self.ranges.values() for _, _, e in items),
        ]
        reads_args = any(where == "arg" for where, _ in sources) or any(map(self._reads_args, entries))
        body = ["def fire(q, args, step):"]
        if reads_args:  # the action's arguments by name; the first of a repeated name wins (``Action.arg``)
            body += ["    d = dict(args)", "    if len(d) != len(args):", "        d = dict(reversed(args))"]
        else:
            body.append("    d = args")
        body.append("    fired = []")
        body += src.emit(self.unindexed.values(), "    ")
        value = {s: f"v{i}" for i, s in enumerate(sources)}
        key = dict(value)
        for s in sources:  # each discriminating feature is read once per action
            body.append(f"    {value[s]} = {src.read(s)}")
        for s in {s for t in self.tables for s in t} if self.hazards else ():
            key[s] = "k" + value[s][1:]  # a boolean must not find the key of 1 or 0
            body.append(f"    {key[s]} = (_BOOL, {value[s]}) if {value[s]}.__class__ is bool else {value[s]}")
        resolve: list[tuple[dict | list, Any]] = []  # group names to replace by the compiled functions
        for t, table in self.tables.items():
            lookup = {k: src.group(group.values(), groups) for k, group in table.items()}
            resolve += [(lookup, k) for k in lookup]
            probe = key[t[0]] if len(t) == 1 else "(" + ", ".join(key[s] for s in t) + ")"
            body += [
                "    try:",
                f"        g = {src.const(lookup)}.get({probe})",
                "    except TypeError:",  # an unhashable value cannot equal a DSL literal
                "        g = None",
                "    if g is not None:",
                "        g(q, d, step, fired)",
            ]
        for (s, op), items in self.ranges.items():
            thresholds = src.const([v for v, _, _ in items])
            funcs = [src.group([e], groups) for _, _, e in items]
            resolve += [(funcs, i) for i in range(len(funcs))]
            cut = {
                "<": f"[_bisect_right({thresholds}, x):]",
                "<=": f"[_bisect_left({thresholds}, x):]",
                ">": f"[:_bisect_left({thresholds}, x)]",
                ">=": f"[:_bisect_right({thresholds}, x)]",
            }[op]
            body += [
                f"    x = {value[s]}",  # a NaN passes no threshold
                "    if x.__class__ is not bool and isinstance(x, _NUM) and x == x:",
                f"        for g in {src.const(funcs)}{cut}:",
                "            g(q, d, step, fired)",
            ]
        body.append("    return fired")
        namespace = dict(src.names)
        code = compile("\n\n".join([*groups, "\n".join(body)]), f"<decider {self.kind} {self.name}>", "exec")
        exec(code, namespace)  # noqa: S102 - our own generated source; every literal is a bound global
        for container, slot in resolve:
            container[slot] = namespace[container[slot]]
        self._reads = (frozenset(src.context_keys), src.reads_step)
        return namespace["fire"]


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
        if not (isinstance(soft_bias, int | float) and math.isfinite(soft_bias) and soft_bias < 0):
            raise ConfigError(f"soft_bias must be a finite negative number, got {soft_bias!r}")
        if fallback not in FALLBACK_ACTIONS:
            raise ConfigError(f"fallback must be one of {FALLBACK_ACTIONS}, got {fallback!r}")
        self.mode: Mode = mode
        self.soft_bias = float(soft_bias)
        self.fallback = fallback
        self.classes: Classes = {name: frozenset(members) for name, members in (classes or {}).items()}
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._deciders: dict[tuple[str, str], Decider] = {}  # (kind, name) → its bucket's compiled decider
        self._core: dict[str, Rule] = {}
        self._scars: dict[str, Scar] = {}
        self._expiry: dict[str, int | None] = {}  # scar id -> the expires_at_step its index enforces
        self._temp: dict[str, tuple[Rule, int]] = {}
        self._temp_counter = 0
        # decisions remembered per (actions tuple, values of the context keys the rules read): ``_decided``
        self._memo: dict[tuple, tuple[tuple[int, ...], _Fired]] = {}
        # the action tuples whose identities the memo's keys hold, kept alive with it (so no identity is reused);
        # one list, not a reference in each entry: an entry is then plain ints and strings, which the garbage
        # collector untracks instead of walking it in every full collection
        self._memo_kept: list[tuple[Action, ...]] = []
        # and per action of those tuples: (its identity, the same context values) -> ids of the rules that fire on it
        # (a new admissible set is mostly actions met before, in the same situation)
        self._memo_actions: dict[tuple, tuple[str, ...]] = {}
        self._memo_reads: tuple[str, ...] | None = None  # None: not known since the last change
        self._memo_on = False  # off while some rule reads the step (a temporary mask, a step-scoped scar)
        for item in core:
            rule = item.rule if isinstance(item, Scar) else item
            if not isinstance(rule, Rule):
                raise ConfigError(f"core schema items must be Rules or Scars, got {type(item).__name__}")
            rule_id = core_rule_id(rule)
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
        bucket = self._buckets.get((kind, name))
        if bucket is None:
            bucket = self._buckets[kind, name] = _Bucket(kind, name, self.classes)
        folding = _Source(kind, name, self.classes)
        stops = [s for s in (until_step, expires_at_step) if s is not None]
        stop = min(stops) if stops else None
        disjuncts = rule.guard.operands if isinstance(rule.guard, Or) else (rule.guard,)
        for i, disjunct in enumerate(disjuncts):
            atoms: list[_Atom] = []
            rest: list[Any] = []
            for conjunct in _flatten(disjunct):
                atom = _atom(conjunct, kind, name, self.classes)
                if (
                    atom is None
                ):  # a nested or, a relation: tested whole (unless the bucket's (kind, name) decides it)
                    folded = folding.guard(conjunct)
                    if folded is False:
                        break
                    if folded is not True:
                        rest.append(conjunct)
                elif atom.source is None:  # decided by the bucket's (kind, name)
                    if not atom.holds_on(atom.constant):
                        break
                else:
                    atoms.append(atom)
            else:
                mask = rule.mask
                if isinstance(mask, ForbidToolArg):  # the bucket fixed kind and tool; the argument is to test
                    # read as an argument even when it is called "name" or "kind" (not action.name/kind)
                    value = mask.value
                    keys = (value,) if not isinstance(value, float) or value == value else None
                    atoms.append(_Atom(("arg", mask.arg_name), None, "==", value, keys, None))
                bucket.file((rule_id, i), atoms, rest, stop)
        self._deciders[kind, name] = self._stale(kind, name)
        self._forget()

    def _unindex(self, rule_id: str, rule: Rule) -> None:
        key = mask_key(rule.mask)
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.remove(rule_id)
            if len(bucket):
                self._deciders[key] = self._stale(*key)
            else:
                del self._buckets[key], self._deciders[key]
            self._forget()

    def _forget(self) -> None:
        """The rules changed: no remembered decision holds any more."""
        self._memo.clear()
        self._memo_kept.clear()
        self._memo_actions.clear()
        self._memo_reads = None

    def _stale(self, kind: str, name: str) -> Decider:
        """Stands in for a changed bucket's decider: compiles it on the next decision (a burst of additions
        compiles once), installs it and answers."""

        def compile_then_fire(q: Context, args: tuple, step: int | None) -> list:
            fire = self._deciders[kind, name] = self._buckets[kind, name].decider()
            return fire(q, args, step)

        return compile_then_fire

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
    def core_rules(self) -> tuple[Rule, ...]:
        """The read-only core schema H."""
        return tuple(self._core.values())

    @property
    def temporary_mask_ids(self) -> tuple[str, ...]:
        return tuple(self._temp)

    @property
    def temporary_masks(self) -> dict[str, tuple[Rule, int]]:
        """mask id → (rule, until_step) of every temporary mask in force (a copy)."""
        return dict(self._temp)

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
            # the step expiry is part of enforcement: fixed when the scar becomes active (a re-admission only
            # refreshes the audit plane), and ``expire`` reads the same value the index enforces
            self._expiry[scar.id] = scar.scope.expires_at_step
            self._index(scar.id, scar.rule, until_step=None, expires_at_step=scar.scope.expires_at_step)
        return is_new

    def remove(self, scar_id: str) -> Scar:
        """Unload an active scar from the control plane (the ledger keeps its record)."""
        if scar_id in self._core:
            raise ControlPlaneError(
                f"{scar_id!r} belongs to the read-only core schema H and cannot be removed"
            )
        scar = self._scars.pop(scar_id, None)
        self._expiry.pop(scar_id, None)
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
        scar_ids = tuple(sid for sid, stop in self._expiry.items() if stop is not None and step >= stop)
        for scar_id in scar_ids:
            self.remove(scar_id)
        return Expired(temp_ids, scar_ids)

    # ---------------------------------------------------------------------------------------- decisions
    def _firing(self, q: Context, a: Action, step: int | None) -> tuple[str, ...]:
        """Ids of the rules (H, scars, temporary masks) that fire on (q, a); empty for non-control actions."""
        if a.kind != "env" and a.kind != "tool":  # A_ctrl only: text and fallback actions are never masked
            return ()
        fire = self._deciders.get((a.kind, a.name))
        return () if fire is None else tuple(fire(q, a.args, step))

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
        import numpy as np  # here, not at import: a gate that only checks calls never loads numpy

        base = np.asarray(logits, dtype=np.float64)
        n = len(actions)
        if base.shape != (n,):
            raise ControlPlaneError(
                f"logits must have shape ({n},) to match the candidate actions, got {base.shape}"
            )
        # Plain Python floats for the per-action work and the softmax (numpy calls cost microseconds each on
        # vectors of ~10 actions); arrays are built once, at the end.
        governed = base.tolist()
        if not all(map(math.inf.__gt__, governed)):  # x < inf; NaN compares false too
            raise ControlPlaneError(f"base logits must be finite or -inf, got {governed}")
        control, fired = self._decided(q, actions, step)
        hard = self.mode == "hard"
        # every base logit the same finite number (a learner whose policy the plane does not see, a shield's zeros)
        level = governed[0] if n else -math.inf
        uniform = hard and level > -math.inf and governed.count(level) == n
        masked = [False] * n
        for i, ids in fired:
            masked[i] = True
            governed[i] = -math.inf if hard else governed[i] + self.soft_bias * len(ids)
        if uniform:  # only control actions fire: one is left unmasked exactly when fewer fired than there are
            control_left, top = len(control) > len(fired), level if n > len(fired) else -math.inf
        else:
            # a control action keeps a finite logit
            control_left = max(map(governed.__getitem__, control), default=-math.inf) > -math.inf
            top = max(governed, default=-math.inf)
        logits_out = np.array(governed, dtype=np.float64)
        masked_out = np.array(masked, dtype=bool)
        # a⊥ with probability 1: every control action is masked (or no action is left at all)
        if (hard and control and not control_left) or top == -math.inf:
            return Governed(logits_out, np.zeros(n), masked_out, fired, Action("fallback", self.fallback))
        if (
            uniform
        ):  # exp(0) = 1 on each of the k unmasked actions, exp(-inf) = 0 on the rest: 1/k and 0, exactly
            return Governed(
                logits_out, np.where(masked_out, 0.0, 1.0 / (n - len(fired))), masked_out, fired, None
            )
        shifted = [math.exp(x - top) for x in governed]  # exp(-inf) = 0.0: a masked action gets exactly 0
        total = sum(shifted)
        probs = np.array([x / total for x in shifted], dtype=np.float64)
        return Governed(logits_out, probs, masked_out, fired, None)

    def _decided(
        self, q: Context, actions: Sequence[Action], step: int | None
    ) -> tuple[tuple[int, ...], _Fired]:
        """(the indices of the control actions, (index, ids of the rules that fire) of each action some rule fires
        on) — the per-action work of ``govern``. A decision over a tuple of actions is remembered, keyed by the
        tuple's identity (the memo keeps it alive) and the values, with their types, of the context keys the
        compiled rules read (True == 1 and they hash alike, but only 1 is a number for the DSL), until the rules
        change: a learner's view hands out one tuple per admissible set, met again and again. So is each action of
        such a tuple with the same values (a new admissible set is mostly actions met before). While some rule
        reads the step (a temporary mask, a step-scoped scar) nothing is remembered. At most ``_MEMO_SIZE``
        decisions (and 16 times as many actions) are kept; then the memo starts again."""
        key = None
        if actions.__class__ is tuple:
            reads = self._memo_reads
            if reads is None:
                reads = self._memo_reads = self._reads()
            if self._memo_on:
                values = [q.get(k, _ABSENT) for k in reads]
                key = (id(actions), *values, *map(type, values))
                try:
                    hit = self._memo.get(key)
                except TypeError:  # an unhashable context value: decided afresh
                    key, hit = None, None
                if hit is not None:
                    return hit
        control: list[int] = []
        fired: list[tuple[int, tuple[str, ...]]] = []
        deciders = self._deciders
        if key is not None and (len(self._memo) >= _MEMO_SIZE or len(self._memo_actions) >= 16 * _MEMO_SIZE):
            self._memo.clear()
            self._memo_kept.clear()
            self._memo_actions.clear()
        known = None if key is None else self._memo_actions
        situation = None if key is None else key[1:]
        for i, a in enumerate(actions):
            kind = a.kind
            if kind != "env" and kind != "tool":  # A_ctrl only: text and fallback actions are never masked
                continue
            control.append(i)
            if known is None:
                fire = deciders.get((kind, a.name))
                ids = None if fire is None else fire(q, a.args, step)
                if ids:
                    fired.append((i, tuple(ids)))
                continue
            # an action of a tuple the memo keeps alive: its identity is not reused while remembered
            remembered = known.get((id(a), situation))
            if remembered is None:
                fire = deciders.get((kind, a.name))
                remembered = known[id(a), situation] = () if fire is None else tuple(fire(q, a.args, step))
            if remembered:
                fired.append((i, remembered))
        decided = (tuple(control), tuple(fired))
        if key is not None:
            self._memo[key] = decided
            self._memo_kept.append(actions)
        return decided

    def _reads(self) -> tuple[str, ...]:
        """The context keys some compiled rule reads (sorted); turns the memo off while some rule reads the step."""
        keys: set[str] = set()
        steps = False
        for bucket in self._buckets.values():
            context, step = bucket.reads()
            keys |= context
            steps = steps or step
        self._memo_on = not steps
        return tuple(sorted(keys))
