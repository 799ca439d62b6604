"""Property tests of the patch DSL (SPEC §2): print/parse round trip, canonical form, token count, fuzzing."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scars.synthesis.dsl import (
    COMPARE_OPS,
    NAMED_PREDICATES,
    Action,
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
    ast_node_count,
    canonical,
    canonical_text,
    parse_guard,
    parse_rule,
    predicate_count,
    to_text,
    token_count,
)
from scars.synthesis.dsl.parser import KEYWORDS, NUMBER_WORDS, lex
from scars.synthesis.dsl.semantics import fires, guard_holds
from scars.synthesis.errors import DSLSyntaxError

# ---------------------------------------------------------------------------------------------- strategies
_HEAD = "abcdefghijklmnopqrstuvwxyzABCXYZ_"
IDENTIFIERS = (
    st.tuples(st.sampled_from(_HEAD), st.text(alphabet=_HEAD + "0123456789", max_size=6))
    .map("".join)
    .filter(lambda s: s not in KEYWORDS)
)
FEATURES = st.lists(IDENTIFIERS, min_size=1, max_size=3).map(".".join)
VALUES = st.one_of(
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
PREDICATES = st.one_of(
    st.builds(Compare, FEATURES, st.sampled_from(COMPARE_OPS), VALUES),
    st.builds(
        CompareFeatures,
        FEATURES,
        st.sampled_from(COMPARE_OPS),
        FEATURES.filter(lambda f: f.lower() not in NUMBER_WORDS),
    ),
    st.builds(Named, st.sampled_from(sorted(NAMED_PREDICATES)), VALUES),
    st.builds(InClass, FEATURES, st.text(max_size=10)),
)
GUARDS = st.recursive(
    PREDICATES,
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda ops: And(tuple(ops))),
        st.lists(inner, min_size=2, max_size=3).map(lambda ops: Or(tuple(ops))),
    ),
    max_leaves=8,
)
MASKS = st.one_of(
    st.builds(ForbidToolCall, st.text(max_size=10)),
    st.builds(ForbidToolArg, st.text(max_size=10), st.text(max_size=10), VALUES),
    st.builds(ForbidEnvAction, st.text(max_size=10)),
)
RULES = st.builds(Rule, GUARDS, MASKS)


def same(a, b) -> bool:
    """Strict AST equality: ``==`` treats True, 1 and 1.0 alike; ``repr`` tells them apart."""
    return a == b and repr(a) == repr(b)


def reshuffle(guard, rnd: random.Random):
    """The same guard by construction: operands permuted, some duplicated, some regrouped into nested nodes."""
    if not isinstance(guard, And | Or):
        return guard
    operands = [reshuffle(op, rnd) for op in guard.operands]
    operands += [rnd.choice(operands) for _ in range(rnd.randint(0, 2))]
    rnd.shuffle(operands)
    if len(operands) >= 4 and rnd.random() < 0.5:  # regroup a run of operands under the same connective
        cut = rnd.randint(2, len(operands) - 2)
        operands = [type(guard)(tuple(operands[:cut])), *operands[cut:]]
    return type(guard)(tuple(operands))


# ---------------------------------------------------------------------------------------------- round trip
@given(RULES)
@settings(max_examples=150, deadline=None)
def test_dsl_print_then_parse_gives_the_same_rule(rule):
    assert same(parse_rule(to_text(rule)), rule)


@given(GUARDS)
@settings(max_examples=150, deadline=None)
def test_dsl_print_then_parse_gives_the_same_guard(guard):
    assert same(parse_guard(to_text(guard)), guard)


# ---------------------------------------------------------------------------------------------- canonical form
@given(RULES)
@settings(max_examples=150, deadline=None)
def test_dsl_canonical_is_idempotent_and_round_trips(rule):
    once = canonical(rule)
    assert same(canonical(once), once)
    assert canonical_text(rule) == to_text(once)
    assert same(parse_rule(canonical_text(rule)), once)
    assert canonical_text(parse_rule(canonical_text(rule))) == canonical_text(rule)


@given(RULES, st.randoms(use_true_random=False))
@settings(max_examples=150, deadline=None)
def test_dsl_canonical_ignores_operand_order_duplicates_and_grouping(rule, rnd):
    variant = Rule(reshuffle(rule.guard, rnd), rule.mask)
    assert same(canonical(variant), canonical(rule))
    assert hash(canonical(variant)) == hash(canonical(rule))
    assert canonical_text(variant) == canonical_text(rule)


@given(RULES, st.data())
@settings(max_examples=150, deadline=None)
def test_dsl_canonical_keeps_the_meaning(rule, data):
    """The canonical rule fires on exactly the (q, a) the original fires on."""
    predicates = list(_predicates(rule.guard))
    features = sorted(
        {p.feature for p in predicates if isinstance(p, Compare | CompareFeatures | InClass)}
        | {p.other for p in predicates if isinstance(p, CompareFeatures)}
    )
    literals = [p.value for p in predicates if isinstance(p, Compare | Named)] + [0, 1, 2.5, "x", True]
    tool_id = rule.mask.tool_id if isinstance(rule.mask, ForbidToolCall | ForbidToolArg) else "t"
    classes = {
        p.class_name: frozenset(literals[:2]) for p in _predicates(rule.guard) if isinstance(p, InClass)
    }
    canon = canonical(rule)
    for _ in range(5):
        q = {f: data.draw(st.sampled_from(literals)) for f in features if not f.startswith("action.")}
        q["intent"] = data.draw(st.sampled_from(literals))
        args = {f[7:]: data.draw(st.sampled_from(literals)) for f in features if f.startswith("action.")}
        for action in (Action.tool(tool_id, **args), Action.env(tool_id, **args)):
            assert fires(canon, q, action, classes) == fires(rule, q, action, classes)
            assert guard_holds(canon.guard, q, action, classes) == guard_holds(rule.guard, q, action, classes)


def _predicates(guard):
    if isinstance(guard, And | Or):
        for operand in guard.operands:
            yield from _predicates(operand)
    else:
        yield guard


def test_dsl_canonical_keeps_booleans_apart_and_merges_integer_valued_floats():
    """``x == true`` and ``x == 1`` mean different things (True == 1 must not hold), so both stay; ``x == 1.0``
    means exactly ``x == 1`` (numbers compare by value), so the canonical form merges them (issue 13)."""
    guard = parse_guard("x == 1 or x == true or x == 1.0 or x == 1 or x == 1.5")
    assert to_text(canonical(guard)) == "x == true or x == 1 or x == 1.5"
    assert canonical_text(parse_guard("x == true")) == "x == true"
    assert canonical_text(parse_guard("x == 1")) == "x == 1"  # not served from the memo of the line above


def test_dsl_canonical_flattens_sorts_and_dedupes():
    rule = parse_rule(
        'if tool_is("send_data") and (intent_is("export") and tool_is("send_data")) then forbid_tool_call("send_data")'
    )
    assert canonical_text(rule) == (
        'if intent_is("export") and tool_is("send_data") then forbid_tool_call("send_data")'
    )
    assert canonical(parse_guard("a == 1 and a == 1")) == Compare("a", "==", 1)
    assert canonical_text(parse_guard("x < -0.0")) == "x < 0"


# ---------------------------------------------------------------------------------------------- sizes
def _nodes(guard) -> int:
    return 1 + sum(_nodes(op) for op in guard.operands) if isinstance(guard, And | Or) else 1


@given(RULES)
@settings(max_examples=150, deadline=None)
def test_dsl_token_count_from_the_ast_equals_the_lexer_count(rule):
    canon = canonical(rule)
    assert token_count(rule) == len(lex(canonical_text(rule)))
    assert token_count(canon.guard) == len(lex(to_text(canon.guard)))
    assert ast_node_count(rule) == 2 + _nodes(canon.guard)
    assert predicate_count(rule) == sum(1 for _ in _predicates(canon.guard))


# ---------------------------------------------------------------------------------------------- fuzzing
ALPHABET = ' ()",.=<>!-+eE019_\\axyz\x00\té\n'
TOKENS = [
    "if", "then", "and", "or", "true", "false", "(", ")", ",", "==", "!=", "<", "<=", ">", ">=",
    "intent_is", "tool_is", "in_class", "forbid_tool_call", "forbid_tool_arg", "forbid_env_action",
    '"x"', '"', "1", "-2.5", "1e999", "nan", "x", "a.b", "a.if", "\x00", "é",
]  # fmt: skip


# Valid rules to mutate: the paper's two examples and rules printed from a fixed random sample of ASTs.
SEED_RULES = [
    'if intent_is("database_export") and data_scope_is("internal") and tool_is("send_data") '
    'then forbid_tool_call("send_data")',
    'if pool_resource_level < 20 and tool_is("harvest") then forbid_tool_call("harvest")',
    'if (step >= 10 or in_class(action.obj_type, "dishware")) and action.recep == "sinkbasin 1" '
    'then forbid_env_action("clean")',
    'if x != -1.5e-3 or flag == false then forbid_tool_arg("send", "to", "a\\"b\\u00e9")',
    'if action.amount > sustainable_share and tool_is("harvest") then forbid_tool_call("harvest")',
]


# Each generator below is driven by one drawn seed: one draw per example keeps Hypothesis' per-draw overhead
# from dominating, so 10,000 examples fit well inside a minute.
def mutated_rule(seed: int) -> str:
    """A valid rule with 1–4 random edits: a character inserted/deleted/replaced, a token spliced in, a cut."""
    rnd = random.Random(seed)
    text = rnd.choice(SEED_RULES)
    for _ in range(rnd.randint(1, 4)):
        pos = rnd.randint(0, len(text))
        edit = rnd.choice(["insert", "delete", "replace", "cut", "token"])
        if edit == "insert":
            text = text[:pos] + rnd.choice(ALPHABET) + text[pos:]
        elif edit == "delete":
            text = text[:pos] + text[pos + 1 :]
        elif edit == "replace":
            text = text[:pos] + rnd.choice(ALPHABET) + text[pos + 1 :]
        elif edit == "token":
            text = text[:pos] + " " + rnd.choice(TOKENS) + " " + text[pos:]
        else:
            text = text[:pos]
    return text


def token_soup(seed: int) -> str:
    """Up to 25 DSL tokens (and near-tokens) in random order: inputs that get past the lexer."""
    rnd = random.Random(seed)
    return " ".join(rnd.choice(TOKENS) for _ in range(rnd.randint(0, 25)))


def character_soup(seed: int) -> str:
    """Up to 80 characters from the DSL's own alphabet plus NUL, tab, newline and a non-ASCII letter."""
    rnd = random.Random(seed)
    return "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 80)))


SEEDS = st.integers(min_value=0, max_value=2**64)
FUZZ_INPUTS = st.one_of(
    st.text(max_size=60),
    SEEDS.map(character_soup),
    SEEDS.map(token_soup),
    SEEDS.map(mutated_rule),
    SEEDS.map(mutated_rule),
    st.integers(0, 300).map(lambda n: "if " + "(" * n + "x == 1" + ")" * n + ' then forbid_tool_call("t")'),
)


def _check_one(text: str, parse) -> None:
    try:
        node = parse(text)
    except DSLSyntaxError as err:
        assert 1 <= err.line <= text.count("\n") + 1, repr(text)
        assert err.column >= 1, repr(text)
        assert str(err).startswith(f"line {err.line}, column {err.column}: "), repr(text)
    else:
        assert same(parse(to_text(node)), node), repr(text)
        canonical_text(node).encode("utf-8")  # what a scar id hashes: never a UnicodeEncodeError (issue 13)


@given(FUZZ_INPUTS)
@settings(
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
def test_dsl_fuzz_any_text_parses_or_raises_dsl_syntax_error(text):
    """≥ 10,000 inputs: the parser either succeeds (and round-trips) or raises DSLSyntaxError, nothing else."""
    _check_one(text, parse_rule)
    _check_one(text, parse_guard)


def test_dsl_fuzz_seed_rules_are_valid_rules():
    """The mutation fuzzer starts from valid rules, so its inputs sit close to the grammar."""
    for text in SEED_RULES:
        assert same(parse_rule(to_text(parse_rule(text))), parse_rule(text))


# ---------------------------------------------------------------------------------------------- lexer
def _reference_lexer():
    """Lark's own basic lexer over the same grammar: the fast DSL lexer must tokenise exactly like it."""
    from lark import Lark

    from scars.synthesis.dsl.parser import GRAMMAR_PATH

    return Lark(GRAMMAR_PATH.read_text(encoding="utf-8"), parser="lalr", lexer="basic", start=["start_rule"])


REFERENCE_LEXER = _reference_lexer()


@given(FUZZ_INPUTS)
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_dsl_lexer_matches_larks_basic_lexer(text):
    from lark.exceptions import UnexpectedCharacters

    try:
        expected = [(t.type, t.value, t.line, t.column) for t in REFERENCE_LEXER.lex(text)]
    except UnexpectedCharacters as err:
        expected = ("error", err.line, err.column)
    try:
        actual = [(t.type, t.value, t.line, t.column) for t in lex(text)]
    except DSLSyntaxError as err:
        actual = ("error", err.line, err.column)
    assert actual == expected, repr(text)


# ---------------------------------------------------------------------------------------------- issue 13
SURROGATE_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE00F, exclude_categories=()), max_size=4
)


@given(SURROGATE_TEXT, st.booleans())
@settings(max_examples=300, deadline=None)
def test_dsl_strings_near_the_surrogate_range_parse_and_hash_or_raise_a_positioned_error(inner, escape):
    """Raw or escaped lone surrogates (reachable from model-written rules) are a DSLSyntaxError at the literal;
    everything that parses can be printed, canonicalised and hashed."""
    literal = json.dumps(inner, ensure_ascii=escape) if escape else '"' + inner.replace('"', "") + '"'
    text = f'if x == {literal} then forbid_env_action("a")'
    try:
        rule = parse_rule(text)
    except DSLSyntaxError as err:
        assert "surrogate" in str(err) or "unexpected" in str(err)
        assert err.line == 1 and 9 <= err.column <= len(text)
    else:
        canonical_text(rule).encode("utf-8")
        assert same(parse_rule(to_text(rule)), rule)


@given(st.integers(min_value=-(2**60), max_value=2**60), st.sampled_from(COMPARE_OPS))
@settings(max_examples=200, deadline=None)
def test_dsl_an_integer_valued_float_literal_is_the_same_rule_as_the_integer(n, op):
    as_float = float(n)
    as_int = int(as_float)
    a = parse_rule(f'if x {op} {as_float!r} then forbid_tool_arg("t", "k", {as_float!r})')
    b = parse_rule(f'if x {op} {as_int} then forbid_tool_arg("t", "k", {as_int})')
    assert canonical_text(a) == canonical_text(b)
    for probe in (as_int - 1, as_int, as_int + 1, as_float + 0.5, True, str(as_int)):
        q = {"x": probe}
        action = Action.tool("t", k=probe)
        assert fires(a, q, action) == fires(b, q, action)
