"""Description length of scars (paper §3.3, SPEC §2): C(ΔS) = λ_tok·|ΔS|_tok + λ_ast·|ΔS|_ast + λ_pred·|ΔS|_pred.

All three sizes are measured on the canonical form (``synthesis.dsl.canonical``), so rules that are equal by
construction cost the same, and are counted straight from the AST (no printing, no re-parsing):

- ``token_count``: the number of tokens the DSL's lexer produces for ``canonical_text(rule)`` (whitespace is
  not a token). A feature name, however dotted (``action.obj_type``), is one token; a literal is one token
  (``-1.5``, ``"send_data"``, ``true``); each keyword, operator, parenthesis and comma is one token. Because it
  is defined by the DSL's own lexer on a fixed printed form, it does not depend on any LLM tokenizer. The
  paper's example ``if intent_is("database_export") and data_scope_is("internal") and tool_is("send_data")
  then forbid_tool_call("send_data")`` has 20 tokens.
- ``ast_node_count``: nodes of the canonical AST: the ``Rule``, its mask, every predicate and every
  ``And``/``Or``. Literals and feature names are fields of their predicate, not nodes. The paper's example has
  6 (Rule, And, 3 predicates, mask).
- ``predicate_count``: predicates (``Compare``, ``CompareFeatures``, ``Named``, ``InClass``) in the canonical
  guard. The example has 3.

A relational comparison ``action.amount > sustainable_share`` costs exactly what a literal one
(``action.amount > 10``) costs: 3 tokens, 1 node, 1 predicate. That is what the text is (a feature name is one
token, as a literal is), and it is the neutral choice: the objective then prefers a relation over thresholds
only on evidence — when one relation covers failures that would need several thresholds, or spares successes a
threshold would mask — never because the DSL made relations cheaper or dearer by fiat.

The cost of a set of rules is the sum of their costs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scars.synthesis.dsl.ast import (
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
)
from scars.synthesis.dsl.canonical import canonical
from scars.synthesis.dsl.printer import DSLValueError
from scars.synthesis.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Lambdas:
    """Weights of the three size terms of C (paper §3.3).

    The paper gives no values. The default 1/1/1 weighs a token, an AST node and a predicate alike, so C reads
    as "how much rule there is"; the predicate term then adds an extra charge for each condition, which is
    what makes an over-specific guard (many predicates) lose to a general one of similar length.
    """

    tok: float = 1.0
    """λ_tok: weight of the token count."""
    ast: float = 1.0
    """λ_ast: weight of the AST node count."""
    pred: float = 1.0
    """λ_pred: weight of the predicate count."""

    def __post_init__(self) -> None:
        for name in ("tok", "ast", "pred"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ConfigError(f"Lambdas.{name} must be a finite number, got {value!r}")
            if value < 0:
                raise ConfigError(f"Lambdas.{name} must be >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    """The three sizes of a rule (or a set of rules, summed) and C under the given λ."""

    tokens: int
    ast_nodes: int
    predicates: int
    lambdas: Lambdas

    @property
    def total(self) -> float:
        """C = λ_tok·tokens + λ_ast·ast_nodes + λ_pred·predicates."""
        lam = self.lambdas
        return lam.tok * self.tokens + lam.ast * self.ast_nodes + lam.pred * self.predicates


DEFAULT_LAMBDAS = Lambdas()

# Tokens of each predicate form as printed: `f op v`; `f op g`; `name(v)`; `in_class(f, "c")`.
_PREDICATE_TOKENS = {Compare: 3, CompareFeatures: 3, Named: 4, InClass: 6}
# Tokens of each mask as printed: `forbid_tool_call("t")`; `forbid_tool_arg("t", "a", v)`; `forbid_env_action("a")`.
_MASK_TOKENS = {ForbidToolCall: 4, ForbidToolArg: 8, ForbidEnvAction: 4}


def _guard_sizes(guard: Guard) -> tuple[int, int, int]:
    """(tokens of ``to_text(guard)``, AST nodes, predicates) of a guard exactly as given (not canonicalised)."""
    kind = guard.__class__
    if kind is And or kind is Or:
        tokens = len(guard.operands) - 1  # the connectives between operands
        nodes, predicates = 1, 0
        for operand in guard.operands:
            t, n, p = _guard_sizes(operand)
            # Same parenthesisation as the printer: an Or inside an And, or a connective inside its own kind.
            inner = operand.__class__
            if inner is Or or (kind is And and inner is And):
                t += 2
            tokens += t
            nodes += n
            predicates += p
        return tokens, nodes, predicates
    try:
        return _PREDICATE_TOKENS[kind], 1, 1
    except KeyError:
        raise DSLValueError(f"not a guard: {guard!r}") from None


def operand_sizes(guard: Guard, conjunct: bool) -> tuple[int, int, int]:
    """(tokens, AST nodes, predicates) of a guard as given, alone (``conjunct=False``) or as an operand of an ``And``
    (``conjunct=True``: parenthesised as the printer does) — the parts :func:`conjunction_cost` adds up."""
    tokens, nodes, predicates = _guard_sizes(guard)
    if conjunct and guard.__class__ in (And, Or):
        tokens += 2
    return tokens, nodes, predicates


def conjunction_cost(
    mask: ActionMask, operands: Sequence[tuple[int, int, int]], lambdas: Lambdas = DEFAULT_LAMBDAS
) -> float:
    """``canonical_cost`` of ``if g1 and … and gk then mask`` (canonical as given) from the operands' sizes
    (:func:`operand_sizes`; ``conjunct`` when k ≥ 2): the same integers, so the same C, with no rule walked — for a
    caller that keeps each operand's sizes (the search)."""
    if len(operands) == 1:
        tokens, nodes, predicates = operands[0]
    else:
        tokens, nodes, predicates = len(operands) - 1, 1, 0
        for t, n, p in operands:
            tokens += t
            nodes += n
            predicates += p
    tokens += 2 + _MASK_TOKENS[type(mask)]
    nodes += 2
    return lambdas.tok * tokens + lambdas.ast * nodes + lambdas.pred * predicates


def _sizes(node: Rule | Guard) -> tuple[int, int, int]:
    """(tokens, AST nodes, predicates) of the canonical form of one rule or guard."""
    return _sizes_as_given(canonical(node))


def _sizes_as_given(node: Rule | Guard) -> tuple[int, int, int]:
    """(tokens, AST nodes, predicates) of one rule or guard as given."""
    if node.__class__ is Rule:
        tokens, nodes, predicates = _guard_sizes(node.guard)
        # `if` + guard + `then` + mask; the Rule and the mask are one node each.
        return tokens + 2 + _MASK_TOKENS[type(node.mask)], nodes + 2, predicates
    return _guard_sizes(node)


_SINGLE = (Rule, Compare, CompareFeatures, Named, InClass, And, Or)


def _totals(rule_or_rules) -> tuple[int, int, int]:
    """(tokens, AST nodes, predicates) summed over one rule/guard or an iterable of them."""
    if rule_or_rules.__class__ in _SINGLE:
        return _sizes(rule_or_rules)
    if isinstance(rule_or_rules, str) or not isinstance(rule_or_rules, Iterable):
        raise DSLValueError(
            f"expected a Rule, a guard or an iterable of rules, got {type(rule_or_rules).__name__}"
        )
    tokens = nodes = predicates = 0
    for node in rule_or_rules:
        if node.__class__ not in _SINGLE:
            raise DSLValueError(f"expected a Rule or a guard in the set, got {node!r}")
        t, n, p = _sizes(node)
        tokens += t
        nodes += n
        predicates += p
    return tokens, nodes, predicates


def cost_breakdown(rule_or_rules, lambdas: Lambdas = DEFAULT_LAMBDAS) -> CostBreakdown:
    """Tokens, AST nodes and predicates of a rule, a guard or a set of rules (summed), with C under ``lambdas``."""
    return CostBreakdown(*_totals(rule_or_rules), lambdas)


def description_length(rule_or_rules, lambdas: Lambdas = DEFAULT_LAMBDAS) -> float:
    """C(ΔS) = λ_tok·|ΔS|_tok + λ_ast·|ΔS|_ast + λ_pred·|ΔS|_pred (paper §3.3); a set of rules costs the sum."""
    tokens, nodes, predicates = _totals(rule_or_rules)
    return lambdas.tok * tokens + lambdas.ast * nodes + lambdas.pred * predicates


def canonical_cost(rule: Rule, lambdas: Lambdas = DEFAULT_LAMBDAS) -> float:
    """``description_length(rule, lambdas)`` of a rule whose guard is already canonical (``canonical`` returns it
    unchanged; the mask's literal is never counted), without canonicalising it again — for a caller whose rules are
    canonical by construction (the search's conjunctions of a canonical pool taken in pool order)."""
    tokens, nodes, predicates = _sizes_as_given(rule)
    return lambdas.tok * tokens + lambdas.ast * nodes + lambdas.pred * predicates


def token_count(rule_or_rules) -> int:
    """|ΔS|_tok: lexer tokens of the canonical printed text (see the module docstring), summed over a set."""
    return _totals(rule_or_rules)[0]


def ast_node_count(rule_or_rules) -> int:
    """|ΔS|_ast: nodes of the canonical AST (Rule, mask, predicates, connectives), summed over a set."""
    return _totals(rule_or_rules)[1]


def predicate_count(rule_or_rules) -> int:
    """|ΔS|_pred: predicates in the canonical guard, summed over a set."""
    return _totals(rule_or_rules)[2]
