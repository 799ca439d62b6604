"""Printer of the patch DSL (paper §4.2, SPEC §2): frozen AST -> text that parses back to the same AST.

Layout is fixed so that printed text is a function of the AST alone: one space between tokens, none inside
call parentheses (``tool_is("x")``), ``", "`` between call arguments. Parentheses appear only where the AST
needs them to survive a re-parse: an ``Or`` inside an ``And`` (``and`` binds tighter than ``or``) and a
connective nested directly in one of the same kind (``a and (b and c)`` is a different tree from
``a and b and c``; the canonical form flattens it away). Strings print in JSON syntax, floats with ``repr``
(shortest round-tripping form), booleans as ``true``/``false``.

ASTs the grammar cannot express (a NaN or infinite number, a feature name that is not a dotted identifier
or uses a keyword, an ``And`` with fewer than two operands, …) raise ``DSLValueError`` instead of printing
text that would not parse back.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from functools import lru_cache

from scars.synthesis.dsl.ast import (
    COMPARE_OPS,
    NAMED_PREDICATES,
    And,
    Compare,
    CompareFeatures,
    ForbidEnvAction,
    ForbidToolArg,
    ForbidToolCall,
    InClass,
    Named,
    Or,
    Rule,
)
from scars.synthesis.dsl.parser import KEYWORDS, NUMBER_WORDS
from scars.synthesis.errors import ScarsError

_FEATURE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# The characters JSON (ensure_ascii=False) escapes; a string without them prints as itself in quotes.
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def _quote(text: str) -> str:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DSLValueError(
                f"string {text!r} holds a lone surrogate at index {exc.start} (not a Unicode character: it "
                "cannot be encoded as UTF-8); allowed: strings of Unicode characters"
            ) from None
    if _NEEDS_ESCAPE.search(text) is None:  # fast path: json.dumps costs ~10x more
        return f'"{text}"'
    return json.dumps(text, ensure_ascii=False)


class DSLValueError(ScarsError, ValueError):
    """An AST (built in code, not parsed) that the DSL's text form cannot express."""


def format_value(value: object) -> str:
    """One literal: ``true``/``false``, an integer, a finite float, or a JSON double-quoted string."""
    cls = value.__class__
    if cls is str:
        return _quote(value)
    if cls is int and -(10**18) < value < 10**18:
        return str(value)
    if cls is float and math.isfinite(value):
        return float.__repr__(value)
    # Subclasses (numpy scalars, IntEnum, …) and the error cases take the general path.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, numbers.Integral):
        try:
            return str(int(value))
        except ValueError:  # more digits than Python will print
            raise DSLValueError("integer value has too many digits to print") from None
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            raise DSLValueError(f"value {number!r} is not a finite number; the DSL has no NaN or infinity")
        return float.__repr__(number)
    raise DSLValueError(
        f"value {value!r} of type {type(value).__name__} is not a DSL value; expected str, int, float or bool"
    )


def format_feature(feature: object) -> str:
    """A feature name, checked: a dotted identifier with no reserved word as a segment."""
    if feature.__class__ is str:
        return _checked_feature(feature)
    raise DSLValueError(
        f"feature {feature!r} is not a dotted identifier such as 'pool_resource_level' or 'action.obj_type'"
    )


@lru_cache(maxsize=4096)
def _checked_feature(feature: str) -> str:
    # Memoised: a search prints the same few feature names millions of times.
    if not _FEATURE_RE.fullmatch(feature):
        raise DSLValueError(
            f"feature {feature!r} is not a dotted identifier such as 'pool_resource_level' or 'action.obj_type'"
        )
    reserved = [segment for segment in feature.split(".") if segment in KEYWORDS]
    if reserved:
        raise DSLValueError(f"feature {feature!r} uses the reserved word {reserved[0]!r}")
    return feature


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise DSLValueError(f"{what} must be a str, got {value!r}")
    return _quote(value)


def _guard_text(guard: object) -> str:
    # Dispatch on the exact class (not `match`): printing sits on the search's hot path.
    cls = guard.__class__
    if cls is Compare:
        if guard.op not in COMPARE_OPS:
            raise DSLValueError(f"comparison operator {guard.op!r} is not one of {', '.join(COMPARE_OPS)}")
        return f"{format_feature(guard.feature)} {guard.op} {format_value(guard.value)}"
    if cls is CompareFeatures:
        if guard.op not in COMPARE_OPS:
            raise DSLValueError(f"comparison operator {guard.op!r} is not one of {', '.join(COMPARE_OPS)}")
        other = format_feature(guard.other)
        if other.lower() in NUMBER_WORDS:
            raise DSLValueError(
                f"feature {other!r} reads as a number on the right of a comparison; not a DSL feature there"
            )
        return f"{format_feature(guard.feature)} {guard.op} {other}"
    if cls is Named:
        if guard.name not in NAMED_PREDICATES:
            raise DSLValueError(f"named predicate {guard.name!r} is not one of {', '.join(NAMED_PREDICATES)}")
        return f"{guard.name}({format_value(guard.value)})"
    if cls is InClass:
        return f"in_class({format_feature(guard.feature)}, {_string(guard.class_name, 'class name')})"
    if cls is And or cls is Or:
        operands = guard.operands
        if operands.__class__ is not tuple or len(operands) < 2:
            raise DSLValueError(f"{cls.__name__} needs a tuple of at least two operands, got {operands!r}")
        parts = []
        for operand in operands:
            text = _guard_text(operand)
            # Parenthesise exactly where a re-parse would otherwise build a different tree:
            # an Or inside an And (`and` binds tighter), a connective directly inside its own kind.
            inner = operand.__class__
            if inner is Or or (cls is And and inner is And):
                text = f"({text})"
            parts.append(text)
        return (" and " if cls is And else " or ").join(parts)
    raise DSLValueError(f"not a guard: {guard!r}")


def _mask_text(mask: object) -> str:
    match mask:
        case ForbidToolCall(tool_id):
            return f"forbid_tool_call({_string(tool_id, 'tool id')})"
        case ForbidToolArg(tool_id, arg_name, value):
            return (
                f"forbid_tool_arg({_string(tool_id, 'tool id')}, {_string(arg_name, 'argument name')}, "
                f"{format_value(value)})"
            )
        case ForbidEnvAction(action_id):
            return f"forbid_env_action({_string(action_id, 'action id')})"
    raise DSLValueError(f"not an action mask: {mask!r}")


def to_text(node: object) -> str:
    """Print a ``Rule``, a guard or an action mask in the DSL's text form (SPEC §2).

    ``parse_rule(to_text(rule)) == rule`` for every rule this function accepts (property-tested).
    """
    try:
        if isinstance(node, Rule):
            return f"if {_guard_text(node.guard)} then {_mask_text(node.mask)}"
        if isinstance(node, ForbidToolCall | ForbidToolArg | ForbidEnvAction):
            return _mask_text(node)
        return _guard_text(node)
    except RecursionError:
        raise DSLValueError("guard is nested too deeply to print") from None
