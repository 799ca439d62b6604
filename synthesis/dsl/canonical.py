"""Canonical form of DSL rules and guards (SPEC §2): equal-by-construction rules compare and hash equal.

The canonical form rewrites only what is equal by construction of ``and``/``or`` (associativity,
commutativity, idempotence), never anything that needs reasoning about meaning:

1. nested connectives of the same kind are flattened (``a and (b and c)`` -> ``a and b and c``);
2. operands are sorted by ``sort_key``, a total order over guards;
3. duplicate operands are dropped; a connective left with one operand is replaced by it;
4. a float literal with an integer value becomes that integer (``20.0`` -> ``20``, ``-0.0`` -> ``0``,
   ``1e3`` -> ``1000``), in comparisons, named predicates and ``forbid_tool_arg`` alike;
5. a relational comparison ``x op y`` of two features is read from one fixed side: an ``action.*`` feature before
   a context feature, else the alphabetically first name, on the left (``sustainable_share < action.amount`` ->
   ``action.amount > sustainable_share``).

Rule 5 is exact too: ``semantics.compare_features`` is symmetric in its two sides (missing on either side, a
non-number on either side of an ordering: false; ``==``/``!=`` the same read from either side), so ``x < y`` and
``y > x`` fire on the same pairs and are one rule.

Rule 4 is about meaning, but it is exact: ``semantics.compare`` compares numbers by value (``20 == 20.0`` and
``x < 20`` iff ``x < 20.0`` for every x), and a boolean never equals a number, so ``x < 20.0`` and ``x < 20`` fire
on exactly the same (q, a) and must be *one* rule — one scar id, so a retired scar cannot come back by
rewriting its threshold. The parsed AST keeps the literal as written (``parse_rule`` then ``to_text`` round-trips
``20.0``); only the canonical form, and so the scar id, merges them. Booleans stay apart from numbers:
``x == true`` and ``x == 1`` mean different things (``True == 1`` must not hold), and so do non-integer floats.

It is idempotent (``canonical(canonical(r)) == canonical(r)``) and insensitive to operand order.

Deduplication uses ``sort_key``, not ``==``: the frozen dataclasses compare ``True == 1`` equal (Python value
equality), so the key tags every value with its type and both ``x == true`` and ``x == 1`` are kept.
"""

from __future__ import annotations

from scars.synthesis.dsl.ast import (
    FLIPPED_OPS,
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
)
from scars.synthesis.dsl.printer import DSLValueError, to_text

_BOOL, _NUMBER, _STR, _FEATURE_REF = 0, 1, 2, 3


def _side_key(feature: str) -> tuple[bool, str]:
    """Which feature of a relational comparison goes on the left: the action's side first, then by name."""
    return (not feature.startswith("action."), feature)


def value_key(value: object) -> tuple:
    """Total order over DSL values: booleans < numbers (numeric order; int before an equal float) < strings."""
    cls = value.__class__  # exact-class fast paths first; subclasses fall through to isinstance below
    if cls is str:
        return (_STR, value)
    if cls is int:
        return (_NUMBER, value, 0)
    if cls is float and value == value:
        return (_NUMBER, value, 1)
    if isinstance(value, bool):
        return (_BOOL, int(value))
    if isinstance(value, int):
        return (_NUMBER, value, 0)
    if isinstance(value, float):
        if value != value:  # NaN has no place in a total order
            raise DSLValueError("value nan is not a finite number; the DSL has no NaN")
        return (_NUMBER, value, 1)
    if isinstance(value, str):
        return (_STR, value)
    raise DSLValueError(f"value {value!r} is not a DSL value; expected str, int, float or bool")


def _canonical_guard(guard: object) -> tuple[Guard, tuple]:
    """(canonical guard, its sort key), computed bottom-up so each key is built once.

    A node that is already canonical is returned as is (same object), so re-canonicalising allocates nothing.
    """
    cls = guard.__class__
    if cls is Compare:
        value = guard.value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
            guard = Compare(guard.feature, guard.op, value)
        return guard, (0, guard.feature, guard.op, value_key(value))
    if cls is CompareFeatures:
        if _side_key(guard.other) < _side_key(guard.feature):
            guard = CompareFeatures(guard.other, FLIPPED_OPS[guard.op], guard.feature)
        # beside the literal comparisons of its left feature: a feature reference sorts after every literal
        return guard, (0, guard.feature, guard.op, (_FEATURE_REF, guard.other))
    if cls is Named:
        value = guard.value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
            guard = Named(guard.name, value)
        return guard, (1, guard.name, value_key(value))
    if cls is InClass:
        return guard, (2, guard.feature, guard.class_name)
    if cls is And or cls is Or:
        keyed: dict[tuple, Guard] = {}
        unchanged = True  # every operand canonical as given, none nested in its own kind, no duplicate
        for operand in guard.operands:
            node, key = _canonical_guard(operand)
            if node.__class__ is cls:  # flatten: its operands are canonical already, keyed below
                unchanged = False
                for inner in node.operands:
                    keyed.setdefault(_key(inner), inner)
            else:
                if node is not operand or key in keyed:
                    unchanged = False
                keyed.setdefault(key, node)
        if not keyed:
            raise DSLValueError(f"{cls.__name__} with no operands is not a guard")
        if len(keyed) == 1:
            ((key, node),) = keyed.items()
            return node, key
        ordered = sorted(keyed)
        kind_rank = 3 if cls is And else 4
        if unchanged and list(keyed) == ordered:
            return guard, (kind_rank, tuple(ordered))
        return cls(tuple(keyed[key] for key in ordered)), (kind_rank, tuple(ordered))
    raise DSLValueError(f"not a guard: {guard!r}")


def _key(canonical_guard: Guard) -> tuple:
    return _canonical_guard(canonical_guard)[1]


def sort_key(guard: Guard) -> tuple:
    """The total order canonical forms sort operands by: Compare and CompareFeatures (by left feature, op, then
    the literal or — after every literal — the right feature) < Named < InClass < And < Or, then fields."""
    return _canonical_guard(guard)[1]


def _canonical_mask(mask):
    if isinstance(mask, ForbidToolArg):
        value = mask.value
        if isinstance(value, float) and value.is_integer():
            return ForbidToolArg(mask.tool_id, mask.arg_name, int(value))
        return mask
    if isinstance(mask, ForbidToolCall | ForbidEnvAction):
        return mask
    raise DSLValueError(f"not an action mask: {mask!r}")


def canonical(node: Rule | Guard) -> Rule | Guard:
    """The canonical form of a rule or guard (flattened, sorted, deduplicated; see the module docstring)."""
    try:
        if isinstance(node, Rule):
            guard, mask = _canonical_guard(node.guard)[0], _canonical_mask(node.mask)
            return node if guard is node.guard and mask is node.mask else Rule(guard, mask)
        return _canonical_guard(node)[0]
    except RecursionError:
        raise DSLValueError("guard is nested too deeply to canonicalise") from None


_MEMO_SIZE = 65536
_memo: dict[str, str] = {}


def canonical_text(node: Rule | Guard) -> str:
    """``to_text(canonical(node))``: the identity of a rule as text. Memoised on the node's printed text.

    The memo is keyed on text, not on the AST, because the AST's dataclass equality treats ``True`` and ``1`` as
    equal and an AST-keyed cache could hand back ``x == 1`` for ``x == true``.
    """
    text = to_text(node)
    cached = _memo.get(text)
    if cached is None:
        if len(_memo) >= _MEMO_SIZE:  # bounded: drop everything rather than track recency
            _memo.clear()
        cached = _memo[text] = to_text(canonical(node))
    return cached
