"""Frozen abstract syntax of the patch DSL (paper §4.2, SPEC §2).

    Rule       := "if" Guard "then" ActionMask
    Guard      := Predicate | Guard "and" Guard | Guard "or" Guard | "(" Guard ")"
    Predicate  := intent_is(v) | data_scope_is(v) | tool_is(t) | action_is(a)      (the paper's, plus action_is)
                | FEATURE OP VALUE                                                    (equality / numeric comparison)
                | FEATURE OP FEATURE                                                  (relational: two features)
                | in_class(FEATURE, "class")                                          (equivalence classes, §6.1)
    ActionMask := forbid_tool_call(t) | forbid_tool_arg(t, arg, v) | forbid_env_action(a)

A guard is evaluated on a pair (q, a): the context q (a flat mapping of named features) and the candidate
action a. Features named ``action.<part>`` read the candidate action (``action.kind``, ``action.name``, or any
argument such as ``action.obj_type``); every other name reads the context q.

Every node is a frozen, hashable dataclass. ``And``/``Or`` hold a tuple of two or more operands; the canonical
form (``synthesis.dsl.canonical``) flattens and sorts them so that equal rules compare and hash equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

Value: TypeAlias = str | int | float | bool
CompareOp: TypeAlias = Literal["==", "!=", "<", "<=", ">", ">="]
COMPARE_OPS: tuple[str, ...] = ("==", "!=", "<", "<=", ">", ">=")
FLIPPED_OPS: dict[str, str] = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
"""``x op y`` iff ``y FLIPPED_OPS[op] x``: the same relation read from the other side."""

# The paper's named predicates are sugar for a comparison on a fixed feature.
NAMED_PREDICATES: dict[str, str] = {
    "intent_is": "intent",
    "data_scope_is": "data_scope",
    "tool_is": "action.tool",  # true when the candidate action is a tool call with this tool id
    "action_is": "action.verb",  # true when the candidate action is an environment action with this verb
}


def value_identity(value: Value) -> tuple[str, Value]:
    """A literal with its type: ``true``, ``1`` and ``1.0`` are different literals of the AST (Python says
    True == 1 == 1.0), so parsing and printing round-trip what was written. The canonical form
    (``synthesis.dsl.canonical``) then merges ``1.0`` into ``1`` — they mean the same — but never ``true``."""
    return (type(value).__name__, value)


@dataclass(frozen=True, slots=True, eq=False)
class Compare:
    """``feature op value``. Numeric ops are false (never an error) when the feature is missing or not a number."""

    feature: str
    op: CompareOp
    value: Value

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Compare
            and self.feature == other.feature
            and self.op == other.op
            and value_identity(self.value) == value_identity(other.value)
        )

    def __hash__(self) -> int:
        return hash(("Compare", self.feature, self.op, value_identity(self.value)))


@dataclass(frozen=True, slots=True)
class CompareFeatures:
    """``feature op other``: one feature against another, e.g. ``action.amount > sustainable_share`` — a norm
    relative to the situation rather than a fixed threshold. Its own node (not a ``Compare`` whose value is a
    feature reference): a literal is always a ``Compare`` and a bare name on the right is always this, so the text
    is unambiguous (string literals are quoted). False — never an error — when either side is missing, and for
    ``<``/``<=``/``>``/``>=`` when either side is not a number (``semantics.compare_features``)."""

    feature: str
    op: CompareOp
    other: str


@dataclass(frozen=True, slots=True, eq=False)
class Named:
    """One of the paper's named predicates, e.g. ``tool_is("send_data")`` (kept as written for printing)."""

    name: str  # a key of NAMED_PREDICATES
    value: Value

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Named
            and self.name == other.name
            and value_identity(self.value) == value_identity(other.value)
        )

    def __hash__(self) -> int:
        return hash(("Named", self.name, value_identity(self.value)))


@dataclass(frozen=True, slots=True)
class InClass:
    """``in_class(feature, "dishware")``: the feature's value is a member of the named equivalence class."""

    feature: str
    class_name: str


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Guard, ...]


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Guard, ...]


Predicate: TypeAlias = Compare | CompareFeatures | Named | InClass
Guard: TypeAlias = Predicate | And | Or


@dataclass(frozen=True, slots=True)
class ForbidToolCall:
    tool_id: str


@dataclass(frozen=True, slots=True, eq=False)
class ForbidToolArg:
    tool_id: str
    arg_name: str
    value: Value

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is ForbidToolArg
            and (self.tool_id, self.arg_name) == (other.tool_id, other.arg_name)
            and value_identity(self.value) == value_identity(other.value)
        )

    def __hash__(self) -> int:
        return hash(("ForbidToolArg", self.tool_id, self.arg_name, value_identity(self.value)))


@dataclass(frozen=True, slots=True)
class ForbidEnvAction:
    action_id: str  # an environment verb, e.g. "clean", "move", "harvest"


ActionMask: TypeAlias = ForbidToolCall | ForbidToolArg | ForbidEnvAction


@dataclass(frozen=True, slots=True)
class Rule:
    guard: Guard
    mask: ActionMask


@dataclass(frozen=True, slots=True)
class Action:
    """A structured action. Masks and ``action.*`` features read its parts, never its surface string.

    kind:  "env" (A_env), "tool" (A_tool), "text" (A_text, never hard-masked) or "fallback" (a_⊥).
    name:  the verb of an environment action, the tool id of a tool call, the fallback's name.
    args:  sorted (name, value) pairs, e.g. (("obj", "cup 1"), ("obj_type", "cup"), ("recep", "sinkbasin 1")).
    text:  the surface form (the command string an environment accepts); not part of identity.
    """

    kind: Literal["env", "tool", "text", "fallback"]
    name: str
    args: tuple[tuple[str, Value], ...] = ()
    text: str = ""

    @property
    def is_control(self) -> bool:
        """A_ctrl = A_tool ∪ A_env: the only actions hard masks apply to (SPEC §1)."""
        return self.kind in ("env", "tool")

    def arg(self, name: str, default: Value | None = None) -> Value | None:
        for key, value in self.args:
            if key == name:
                return value
        return default

    @classmethod
    def env(cls, verb: str, text: str = "", **args: Value) -> Action:
        return cls("env", verb, tuple(sorted(args.items())), text)

    @classmethod
    def tool(cls, tool_id: str, text: str = "", **args: Value) -> Action:
        return cls("tool", tool_id, tuple(sorted(args.items())), text)

    @classmethod
    def from_dict(cls, d: dict) -> Action:
        """Build from the plain form environments put in ``info`` (``{"kind", "name", "args", "text"}``)."""
        return cls(d["kind"], d["name"], tuple(sorted(d.get("args", {}).items())), d.get("text", ""))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "args": dict(self.args), "text": self.text}


FALLBACK_ACTIONS: tuple[str, ...] = ("safe_refusal", "ask_human", "no_op")
