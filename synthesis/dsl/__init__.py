"""The patch DSL (paper §4.2, SPEC §2): grammar, frozen AST, printer, canonical form, description length, semantics.

    rule = parse_rule('if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")')
    to_text(rule)              # prints back; parse_rule(to_text(rule)) == rule
    canonical_text(rule)       # flattened, sorted, deduplicated: the rule's identity as text
    description_length(rule)   # C = λ_tok·tokens + λ_ast·AST nodes + λ_pred·predicates (paper §3.3) = 21.0

Bad text raises ``synthesis.errors.DSLSyntaxError`` (line, column, expected tokens); an AST built in code that the
text form cannot express raises ``DSLValueError`` when printed.
"""

from scars.synthesis.dsl.ast import (
    COMPARE_OPS,
    FALLBACK_ACTIONS,
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
    Predicate,
    Rule,
    Value,
)
from scars.synthesis.dsl.canonical import canonical, canonical_text
from scars.synthesis.dsl.cost import (
    CostBreakdown,
    Lambdas,
    ast_node_count,
    cost_breakdown,
    description_length,
    predicate_count,
    token_count,
)
from scars.synthesis.dsl.parser import parse_guard, parse_rule
from scars.synthesis.dsl.printer import DSLValueError, to_text

__all__ = [
    "COMPARE_OPS",
    "FALLBACK_ACTIONS",
    "NAMED_PREDICATES",
    "Action",
    "ActionMask",
    "And",
    "Compare",
    "CompareFeatures",
    "ForbidEnvAction",
    "ForbidToolArg",
    "ForbidToolCall",
    "Guard",
    "InClass",
    "Named",
    "Or",
    "Predicate",
    "Rule",
    "Value",
    "CostBreakdown",
    "DSLValueError",
    "Lambdas",
    "ast_node_count",
    "canonical",
    "canonical_text",
    "cost_breakdown",
    "description_length",
    "parse_guard",
    "parse_rule",
    "predicate_count",
    "to_text",
    "token_count",
]
