"""Parser of the patch DSL (paper §4.2, SPEC §2): text -> frozen AST (``synthesis.dsl.ast``).

The grammar lives in ``grammar.lark`` and runs on Lark's LALR(1) parser. Tokens come from ``_DSLLexer``, a
context-free lexer built from the grammar's own terminals (like Lark's basic lexer, only faster). Being
context-free (not Lark's contextual lexer) is what makes keywords reserved: ``and``/``if``/``true``/… are
always lexed as keywords, never as a feature name, whatever the parser state. The AST is built by callbacks that run
during the LALR parse itself (no intermediate parse tree, no recursive tree walk), so parsing never recurses
in Python. Parenthesis nesting is bounded by ``MAX_NESTING`` (checked before parsing), which bounds the depth
of the resulting guard, so the printer, canonical form and hashing (which do recurse) are safe too.

Every failure, for any input string, is a ``synthesis.errors.DSLSyntaxError`` with a 1-based line and column
and the tokens the parser expected there, in words (``expected one of: 'and', 'or', 'then'``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import Lexer

from scars.synthesis.dsl.ast import (
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
    Value,
)
from scars.synthesis.errors import DSLSyntaxError

GRAMMAR_PATH = Path(__file__).with_name("grammar.lark")

MAX_NESTING = 100
"""Deepest parenthesis nesting accepted. Guards nested deeper than this are rejected with a DSLSyntaxError
(rather than a RecursionError later, when the AST is printed, canonicalised or hashed)."""

KEYWORDS: frozenset[str] = frozenset(
    {
        "if",
        "then",
        "and",
        "or",
        "true",
        "false",
        "intent_is",
        "data_scope_is",
        "tool_is",
        "action_is",
        "in_class",
        "forbid_tool_call",
        "forbid_tool_arg",
        "forbid_env_action",
    }
)
"""Reserved words: none of them may be a feature name or a segment of a dotted feature name."""

NUMBER_WORDS: frozenset[str] = frozenset({"nan", "inf", "infinity"})
"""Words that read as numbers the DSL does not have: refused as the right side of a relational comparison
(``x < inf`` is a mistake for a number, not a comparison with a feature called ``inf``). Compared in lower case."""

# How each terminal is named in an error message ("expected one of: …"). Keywords and punctuation are quoted.
_TERMINAL_WORDS: dict[str, str] = {
    "FEATURE": "a feature name",
    "STRING": "a string",
    "INT": "a number",
    "FLOAT": "a number",
    "OP": "a comparison operator (== != < <= > >=)",
    "$END": "end of input",
}


class _BadToken(Exception):
    """Raised inside a parse callback: a token lexed and parsed, but its value is not acceptable."""

    def __init__(self, token: Token, message: str, expected: tuple[str, ...] = (), offset: int = 0):
        super().__init__(message)
        self.token = token
        self.message = message
        self.expected = expected
        self.offset = offset  # within the token: where exactly the bad part starts


_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def unencodable_offset(raw: str) -> int | None:
    """Offset in a string literal's source text of its first lone surrogate (raw or ``\\uD800``-escaped), or None.

    A surrogate is only valid as half of an escaped pair (``\\ud83d\\ude00``); alone it is not a character and
    cannot be encoded, so the rule could be neither hashed into a scar id nor written to the ledger.
    """
    i, end = 0, len(raw)
    while i < end:
        char = raw[i]
        if 0xD800 <= ord(char) <= 0xDFFF:
            return i
        if char == "\\" and i + 1 < end:
            if raw[i + 1] == "u" and _HEX4.fullmatch(raw, i + 2, i + 6):
                code = int(raw[i + 2 : i + 6], 16)
                if 0xDC00 <= code <= 0xDFFF:
                    return i
                if 0xD800 <= code <= 0xDBFF:
                    pair = raw[i + 6 : i + 8] == "\\u" and _HEX4.fullmatch(raw, i + 8, i + 12)
                    if not pair or not 0xDC00 <= int(raw[i + 8 : i + 12], 16) <= 0xDFFF:
                        return i
                    i += 12
                    continue
                i += 6
                continue
            i += 2
            continue
        i += 1
    return None


def _string(token: Token) -> str:
    # The STRING terminal is exactly JSON's string syntax, so json.loads decodes every escape correctly.
    value = json.loads(token.value)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            offset = unencodable_offset(token.value) or 0
            raise _BadToken(
                token,
                f"string {token.value!r} holds a lone surrogate at offset {offset} of the literal "
                "(not a Unicode character: it cannot be encoded as UTF-8)",
                ("a string of Unicode characters (a surrogate only as an escaped pair like \\ud83d\\ude00)",),
                offset=offset,
            ) from None
    return value


def _feature(token: Token) -> str:
    for segment in token.value.split("."):
        if segment in KEYWORDS:
            raise _BadToken(
                token,
                f"feature name {token.value!r} uses the reserved word {segment!r}",
                ("a feature name that is not a keyword",),
            )
    return token.value


class _BuildAst(Transformer):
    """LALR callbacks: each grammar rule becomes its AST node as soon as it is reduced (no parse tree)."""

    def start_rule(self, children):
        guard, mask = children
        return Rule(guard, mask)

    def start_guard(self, children):
        return children[0]

    def disjunction(self, children):
        return Or(tuple(children))

    def conjunction(self, children):
        return And(tuple(children))

    def named(self, children):
        name, value = children
        return Named(name.value, value)

    def compare(self, children):
        feature, op, value = children
        return Compare(_feature(feature), op.value, value)

    def compare_features(self, children):
        feature, op, other = children
        if other.value.lower() in NUMBER_WORDS:
            raise _BadToken(
                other,
                f"{other.value!r} reads as a number, but the DSL has no NaN or infinity (and a feature of that "
                "name cannot be compared against)",
                ("a finite number", "a feature name"),
            )
        return CompareFeatures(_feature(feature), op.value, _feature(other))

    def in_class(self, children):
        feature, class_name = children
        return InClass(_feature(feature), _string(class_name))

    def forbid_tool_call(self, children):
        return ForbidToolCall(_string(children[0]))

    def forbid_tool_arg(self, children):
        tool_id, arg_name, value = children
        return ForbidToolArg(_string(tool_id), _string(arg_name), value)

    def forbid_env_action(self, children):
        return ForbidEnvAction(_string(children[0]))

    def value(self, children) -> Value:
        (token,) = children
        kind = token.type
        if kind == "STRING":
            return _string(token)
        if kind == "TRUE":
            return True
        if kind == "FALSE":
            return False
        if kind == "INT":
            try:
                return int(token.value)
            except ValueError:  # Python refuses int() of more than sys.get_int_max_str_digits() digits
                raise _BadToken(
                    token, f"integer literal of {len(token.value)} digits is too long", ("a shorter number",)
                ) from None
        number = float(token.value)
        if not math.isfinite(number):
            raise _BadToken(
                token,
                f"number {token.value} is out of range (it is not a finite float)",
                ("a finite number",),
            )
        return number


class _DSLLexer(Lexer):
    """The DSL's lexer: one compiled alternation of the grammar's own terminals, scanned with ``re.match``.

    Its token set and patterns come from ``grammar.lark`` (nothing is restated here); it does what Lark's
    basic lexer does, at about half the cost per token, because the search and the ledger parse many rules.
    Keywords are reserved as in Lark's basic lexer: a FEATURE-shaped word equal to a keyword is that keyword.
    """

    def __init__(self, lexer_conf) -> None:
        by_name = {terminal.name: terminal for terminal in lexer_conf.terminals}
        literals = {t.pattern.value: t.name for t in lexer_conf.terminals if t.pattern.type == "str"}
        self.keywords = {value: name for value, name in literals.items() if value.isidentifier()}
        self.punctuation = {value: name for value, name in literals.items() if not value.isidentifier()}
        # FLOAT before INT (its priority in the grammar), so `1.5` is one FLOAT and `15` an INT.
        groups = [r"(?P<WS>[ \t\r\n]+)"]
        groups += [f"(?P<{name}>{by_name[name].pattern.to_regexp()})" for name in _REGEX_TERMINALS]
        symbols = sorted(self.punctuation, key=len, reverse=True)
        groups.append("(?P<PUNCT>" + "|".join(re.escape(symbol) for symbol in symbols) + ")")
        self.match = re.compile("|".join(groups)).match

    def lex(self, text: str) -> Iterator[Token]:
        match, keywords, punctuation, new_token = self.match, self.keywords, self.punctuation, Token
        pos, end, line, line_start = 0, len(text), 1, 0
        while pos < end:
            found = match(text, pos)
            if found is None:
                raise UnexpectedCharacters(text, pos, line, pos - line_start + 1)
            kind, value = found.lastgroup, found.group()
            if kind == "WS":
                newlines = value.count("\n")
                if newlines:  # only whitespace can hold a newline (strings cannot)
                    line += newlines
                    line_start = pos + value.rfind("\n") + 1
            else:
                if kind == "FEATURE":
                    kind = keywords.get(value, "FEATURE")
                elif kind == "PUNCT":
                    kind = punctuation[value]
                yield new_token(kind, value, pos, line, pos - line_start + 1)
            pos = found.end()


_REGEX_TERMINALS = ("STRING", "FLOAT", "INT", "FEATURE", "OP")


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The LALR parser, compiled from the grammar on the first parse (not at import: the gate's import stays light)."""
    return Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        lexer=_DSLLexer,
        start=["start_rule", "start_guard"],
        transformer=_BuildAst(),
        maybe_placeholders=False,
    )


@lru_cache(maxsize=1)
def _lexer() -> _DSLLexer:
    return _DSLLexer(_parser().lexer_conf)


def _words(terminals) -> tuple[str, ...]:
    words = set()
    for name in terminals:
        if name in _TERMINAL_WORDS:
            words.add(_TERMINAL_WORDS[name])
            continue
        try:
            pattern = _parser().get_terminal(name).pattern
        except KeyError:
            words.add(name)
            continue
        words.add(repr(pattern.value) if pattern.type == "str" else name)
    return tuple(sorted(words))


def _line_column(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _acceptable(interactive, fallback, start: str) -> tuple[str, ...]:
    """The terminals the parser accepts next, in words.

    ``accepts()`` trial-feeds each candidate terminal into a copy of the parser, so it is exact; the LALR
    state's own lookahead set (``fallback``) can include terminals that only fit elsewhere (``')'`` at the
    top level, end of input inside a rule) because LALR merges states. Errors are rare; exactness wins.
    """
    if interactive is not None:
        try:
            return _words(interactive.accepts())
        except (LarkError, _BadToken):  # a pending reduction hits a bad literal: use the state's set
            pass
    terminals = set(fallback)
    if start == "start_rule" and len(terminals) > 1:
        terminals.discard("$END")  # inside a rule the input may only end after the mask
    return _words(terminals)


def _expected_before(text: str, pos: int, start: str) -> tuple[str, ...]:
    """What the parser would accept after the well-formed prefix ``text[:pos]`` (for lexer errors)."""
    try:
        interactive = _parser().parse_interactive(text[:pos], start=start)
        interactive.exhaust_lexer()
    except (LarkError, _BadToken):
        return ()
    choices = {name for name in interactive.choices() if name.isupper() or name == "$END"}
    return _acceptable(interactive, choices, start)


def _describe(text: str, pos: int) -> str:
    if pos >= len(text):
        return "unexpected end of input"
    char = text[pos]
    if char == '"':
        return "unterminated or malformed string (strings are double-quoted with JSON escapes)"
    return f"unexpected character {char!r}"


def _nesting_error(text: str) -> DSLSyntaxError | None:
    """The first parenthesis nested deeper than MAX_NESTING (outside strings), if any."""
    if text.count("(") <= MAX_NESTING:  # fast path: cannot be too deep
        return None
    depth = 0
    in_string = escaped = False
    for pos, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "(":
            depth += 1
            if depth > MAX_NESTING:
                line, column = _line_column(text, pos)
                return DSLSyntaxError(
                    f"parentheses nested deeper than {MAX_NESTING} levels",
                    text=text,
                    line=line,
                    column=column,
                    expected=(f"at most {MAX_NESTING} levels of parentheses",),
                )
        elif char == ")":
            depth -= 1
    return None


def _parse(text: str, start: str):
    too_deep = _nesting_error(text)
    if too_deep is not None:
        raise too_deep
    try:
        return _parser().parse(text, start=start)
    except _BadToken as bad:
        line, column = _line_column(text, bad.token.start_pos + bad.offset)
        raise DSLSyntaxError(
            bad.message + (f"; expected {', '.join(bad.expected)}" if bad.expected else ""),
            text=text,
            line=line,
            column=column,
            expected=bad.expected,
        ) from None
    except UnexpectedToken as err:
        expected = _acceptable(getattr(err, "interactive_parser", None), err.expected, start)
        if err.token.type == "$END":
            pos = len(text)
            found = "unexpected end of input"
        else:
            pos = err.token.start_pos
            found = f"unexpected {err.token.value!r}"
        line, column = _line_column(text, pos)
        raise DSLSyntaxError(
            f"{found}; expected one of: {', '.join(expected)}",
            text=text,
            line=line,
            column=column,
            expected=expected,
        ) from None
    except UnexpectedCharacters as err:
        pos = err.pos_in_stream
        expected = _expected_before(text, pos, start)
        line, column = _line_column(text, pos)
        tail = f"; expected one of: {', '.join(expected)}" if expected else ""
        raise DSLSyntaxError(
            _describe(text, pos) + tail, text=text, line=line, column=column, expected=expected
        ) from None
    except (UnexpectedInput, LarkError) as err:  # any other parse failure Lark may report
        raise DSLSyntaxError(f"cannot parse: {err}", text=text, line=1, column=1) from None


def _require_str(text: object) -> None:
    if not isinstance(text, str):
        raise DSLSyntaxError(
            f"rule text must be a str, got {type(text).__name__}", text=repr(text), line=1, column=1
        )


@lru_cache(maxsize=8192)
def _parse_rule_cached(text: str) -> Rule:
    return _parse(text, "start_rule")


@lru_cache(maxsize=8192)
def _parse_guard_cached(text: str) -> Guard:
    return _parse(text, "start_guard")


def parse_rule(text: str) -> Rule:
    """Parse ``if GUARD then MASK`` into a frozen ``Rule`` (SPEC §2). Memoised: the AST is immutable.

    Raises ``DSLSyntaxError`` (line, column, expected tokens) for every input that is not a rule.
    """
    _require_str(text)
    return _parse_rule_cached(text)


def parse_guard(text: str) -> Guard:
    """Parse a bare guard (``a and b or c``) into its frozen AST. Raises ``DSLSyntaxError`` on bad input."""
    _require_str(text)
    return _parse_guard_cached(text)


def lex(text: str) -> list[Token]:
    """The lexer's tokens of ``text`` (whitespace dropped): the unit of the token count (``cost.token_count``)."""
    try:
        return list(_lexer().lex(text))
    except UnexpectedCharacters as err:
        line, column = _line_column(text, err.pos_in_stream)
        raise DSLSyntaxError(
            _describe(text, err.pos_in_stream), text=text, line=line, column=column
        ) from None
