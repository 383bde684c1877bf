"""Bounds on enrollment conditions: what a CEL expression may be, and what it may cost per event.

The CEL library (``common-expression-language``, written in Rust) has no limits of its own. Its
parser and evaluator recurse once per level of the expression tree, so a long operator chain
(``1 + 1 + ...``, 20,000 terms) overflows the native stack and kills the process; it evaluates
macros (``all``, ``exists``, ``map``, ...) and compiles ``matches`` patterns on every call,
without any budget, holding the GIL. So every condition passes two checks:

- `shape` (before compiling, at creation and whenever a stored condition is loaded): length,
  tokens, bracket nesting, operators, comprehension nesting and ranges, and literal
  ``matches`` patterns. It works on tokens, never on a tree, so checking a hostile condition
  costs time linear in its length and no recursion.
- `Shape.estimate` (before every evaluation): an upper bound of the evaluation's cost for an
  event with that many attributes of that size; over `EVALUATION_BUDGET` the condition is not
  evaluated. At creation the condition must fit the budget for a reference event.

One cost unit is about 0.1 µs of evaluation on a current x86-64 core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import cel

from txqueue.errors import InvalidArgument

__all__ = [
    "EVALUATION_BUDGET",
    "MAX_COMPREHENSION_NESTING",
    "MAX_CONDITION_LENGTH",
    "MAX_CONDITION_TOKENS",
    "MAX_NESTING_DEPTH",
    "MAX_OPERATORS",
    "REFERENCE_ATTRIBUTES",
    "REFERENCE_ATTRIBUTE_SIZE",
    "Shape",
    "Token",
    "pattern_weight",
    "position",
    "shape",
    "tokenize",
]

#: Characters in a condition.
MAX_CONDITION_LENGTH = 4096
#: Tokens (names, literals, operators, brackets) in a condition.
MAX_CONDITION_TOKENS = 1024
#: Parentheses, brackets and braces open at once (calls and literals included).
MAX_NESTING_DEPTH = 16
#: Operators in the whole condition: binary and unary operators, ``?``, ``in``, member
#: selections (``.``) and indexes (``[``). Any chain is part of the whole, so this bounds
#: the depth of the expression tree the library recurses over.
MAX_OPERATORS = 256
#: Comprehension macros (all, exists, exists_one, map, filter) inside one another.
MAX_COMPREHENSION_NESTING = 2
#: Estimated cost units one evaluation may take (about 10 ms).
EVALUATION_BUDGET = 100_000
#: At creation a condition must fit the budget for an event with this many attributes ...
REFERENCE_ATTRIBUTES = 32
#: ... each at most this many characters long.
REFERENCE_ATTRIBUTE_SIZE = 1024

MACROS = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter"})
_KEYWORDS = frozenset({"in", "true", "false", "null"})
_OPERATORS = frozenset(
    {"+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "!", "?", "."}
)
_VARIABLE = "message"
# A comprehension's range: the event's attributes, or a loop variable (its size is only known
# as "at most the larger of the condition's tokens and the event's attributes").
_ATTRIBUTES, _LOOP_VARIABLE = -1, -2
# Cost units per weight unit of a ``matches`` pattern (compiled anew on every call: ``\w``,
# weight 200, takes about 0.45 ms to compile, twice that on a busy machine), and the weight
# of the call itself.
_PATTERN_UNIT = 45
_PATTERN_CALL = 10
# Cost units per KiB a reader goes through (about 10 ns a byte).
_UNITS_PER_KIB = 100
_READERS = frozenset({"==", "!=", "<", "<=", ">", ">=", "+", "in"})

TOKEN = re.compile(
    r"""
      (?P<space>\s+|//[^\n]*)
    | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''
                 |\"\"\"[^"\\]*(?:(?:\\.|"(?!\"\"))[^"\\]*)*\"\"\"
                 |'[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"))
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[uU]?)
    | (?P<punct>&&|\|\||==|!=|<=|>=|.)
    """,
    re.VERBOSE | re.DOTALL,
)


class Token:
    """One token of a condition: its kind (string, ident, number, punct), text and offset."""

    __slots__ = ("kind", "offset", "text")

    def __init__(self, kind: str, text: str, offset: int) -> None:
        self.kind = kind
        self.text = text
        self.offset = offset


def tokenize(expression: str, limit: int | None = None) -> list[Token]:
    """The tokens of ``expression`` (spaces and comments left out); with ``limit``, at most
    one more than that (an unterminated quote costs a scan to the end of the expression)."""
    tokens = []
    for match in TOKEN.finditer(expression):
        kind = match.lastgroup or "punct"
        if kind != "space":
            tokens.append(Token(kind, match.group(), match.start()))
            if limit is not None and len(tokens) > limit:
                break
    return tokens


def position(expression: str, offset: int) -> str:
    """``line L, column C`` of ``offset`` in ``expression``."""
    line = expression.count("\n", 0, offset) + 1
    column = offset - (expression.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def ends_operand(token: Token) -> bool:
    """Whether ``[`` after ``token`` indexes (``x["k"]``) rather than opens a list (``in ["k"]``)."""
    if token.kind == "ident":
        return token.text not in _KEYWORDS
    return token.kind in ("string", "number") or token.text in (")", "]", "}")


def string_value(token: Token) -> Any:
    """The value of a string literal token, as CEL decodes it (None if it does not)."""
    try:
        return cel.evaluate(token.text)  # CEL decodes its own escapes exactly
    except Exception:
        return None


@dataclass(frozen=True)
class Shape:
    """What a condition's cost depends on, counted from its tokens.

    ``loops`` holds one tuple per comprehension: the sizes of the ranges it and the
    comprehensions around it iterate over (a literal's element count, or a marker for the
    event's attributes or a loop variable).
    """

    tokens: int
    concatenations: int
    readers: int
    longest_literal: int
    pattern_weight: int
    loops: tuple[tuple[int, ...], ...]

    def estimate(self, attributes: int, largest: int) -> int:
        """Cost units, at most, of one evaluation over ``attributes`` attributes of at most
        ``largest`` characters each.

        Every token counts as one node evaluated once per iteration of every comprehension
        around it. A value is at most ``(concatenations + 1)²`` times the largest literal or
        attribute (a loop variable may hold a concatenation, concatenated again), and every
        reader (comparison, ``in``, ``+``, call, index, element of a literal that is not
        constant) may read all of it, at about
        10 ns a byte (string equality, ``endsWith`` and pattern matching go character by
        character). Every ``matches`` compiles its pattern on each call.
        """
        iterations = 1
        for path in self.loops:
            product = 1
            for size in path:
                if size == _ATTRIBUTES:
                    size = attributes
                elif size == _LOOP_VARIABLE:
                    size = max(self.tokens, attributes)
                product *= size
            iterations += product
        value = (self.concatenations + 1) ** 2 * max(largest, self.longest_literal, 1)
        per_evaluation = (
            self.tokens
            + self.readers * value * _UNITS_PER_KIB // 1024
            + self.pattern_weight * _PATTERN_UNIT
        )
        return iterations * per_evaluation

    def refusal(self, attributes: int, largest: int) -> str | None:
        """Why the condition must not be evaluated for such an event, or None when it may."""
        cost = self.estimate(attributes, largest)
        if cost <= EVALUATION_BUDGET:
            return None
        return (
            f"its estimated evaluation cost, {cost:,} units, is over the budget of "
            f"{EVALUATION_BUDGET:,} for an event with {attributes} attributes of up to "
            f"{largest:,} characters"
        )


class _Open:
    """An open bracket while scanning: its kind, token index, top-level commas and, for a
    comprehension, its loop variable and the size of its range."""

    __slots__ = ("commas", "empty", "index", "kind", "size", "variable")

    def __init__(
        self, kind: str, index: int, empty: bool, variable: str | None = None, size: int = 0
    ) -> None:
        self.kind = kind  # "macro", "call", "group", "list", "map" or "index"
        self.index = index
        self.empty = empty
        self.commas = 0
        self.variable = variable
        self.size = size


def shape(expression: str) -> Shape:
    """Check ``expression`` against the static bounds before it is compiled; its `Shape`.

    Raises InvalidArgument naming the bound and where it is exceeded. Whether the expression
    is valid CEL is left to the compiler, once it is known to be safe to compile.
    """
    if len(expression) > MAX_CONDITION_LENGTH:
        raise InvalidArgument(
            f"condition is {len(expression):,} characters long: at most "
            f"{MAX_CONDITION_LENGTH:,} are allowed"
        )
    tokens = tokenize(expression, MAX_CONDITION_TOKENS)
    if len(tokens) > MAX_CONDITION_TOKENS:
        raise InvalidArgument(
            f"condition has more than {MAX_CONDITION_TOKENS:,} tokens (names, literals, "
            "operators and brackets count)"
        )
    stack: list[_Open] = []
    literals: dict[int, int] = {}  # token index of the ] or } closing a literal: its elements
    loops: list[tuple[int, ...]] = []
    operators = concatenations = readers = longest = weight = 0
    for index, token in enumerate(tokens):
        text = token.text
        if token.kind == "string":
            longest = max(longest, len(text))
        elif text in ("(", "[", "{"):
            opened = _open(expression, tokens, index, stack, literals)
            if opened.kind == "macro":
                enclosing = tuple(o.size for o in stack if o.kind == "macro")
                loops.append((*enclosing, opened.size))
            stack.append(opened)
            if len(stack) > MAX_NESTING_DEPTH:
                raise InvalidArgument(
                    f"condition nests brackets more than {MAX_NESTING_DEPTH} deep "
                    f"({position(expression, token.offset)})"
                )
            operators += opened.kind == "index"
            readers += opened.kind in ("call", "macro", "index")
        elif text in (")", "]", "}") and stack:
            closed = stack.pop()
            if closed.kind in ("list", "map"):
                literals[index] = elements = 0 if closed.empty else closed.commas + 1
                if _computed(tokens, closed.index, index):  # each element may be read in full
                    readers += elements
            elif closed.kind == "call" and tokens[closed.index - 1].text == "matches":
                weight += _pattern(expression, tokens, closed.index, index)
        elif text == ",":
            if stack:
                stack[-1].commas += 1
        elif text in _OPERATORS or (token.kind == "ident" and text == "in"):
            operators += 1
            concatenations += text == "+"
            readers += text in _READERS
        if operators > MAX_OPERATORS:
            raise InvalidArgument(
                f"condition has more than {MAX_OPERATORS} operators "
                f"({position(expression, token.offset)}): split it into several enrollments, "
                'or test a list with "in" (message.type in ["a", "b"])'
            )
    return Shape(len(tokens), concatenations, readers, longest, weight, tuple(loops))


def _computed(tokens: list[Token], start: int, end: int) -> bool:
    """Whether the literal between these tokens holds more than constants."""
    return any(token.kind == "ident" and token.text not in _KEYWORDS for token in tokens[start:end])


def _open(
    expression: str, tokens: list[Token], index: int, stack: list[_Open], literals: dict[int, int]
) -> _Open:
    """The bracket opened at ``index``; for a comprehension, its nesting and range checked."""
    text = tokens[index].text
    following = tokens[index + 1] if index + 1 < len(tokens) else None
    empty = following is not None and following.text in (")", "]", "}")
    previous = tokens[index - 1] if index else None
    if text == "[":
        kind = "index" if previous is not None and ends_operand(previous) else "list"
        return _Open(kind, index, empty)
    if text == "{":
        return _Open("map", index, empty)
    if previous is None or previous.kind != "ident" or previous.text in _KEYWORDS:
        return _Open("group", index, empty)
    if not (index >= 2 and tokens[index - 2].text == "." and previous.text in MACROS):
        return _Open("call", index, empty)
    nesting = 1 + sum(1 for opened in stack if opened.kind == "macro")
    if nesting > MAX_COMPREHENSION_NESTING:
        raise InvalidArgument(
            f"condition nests comprehensions ({previous.text} inside another) more than "
            f"{MAX_COMPREHENSION_NESTING} deep ({position(expression, previous.offset)})"
        )
    size = _range(tokens, index - 3, stack, literals)
    if size is None:
        raise InvalidArgument(
            f"{previous.text}() must range over message, a list or map literal, or a loop "
            f"variable ({position(expression, previous.offset)}), so that its cost is known"
        )
    variable = following.text if following is not None and following.kind == "ident" else None
    return _Open("macro", index, empty, variable, size)


def _range(
    tokens: list[Token], at: int, stack: list[_Open], literals: dict[int, int]
) -> int | None:
    """The size of the range ending at token ``at``: a literal's element count, a marker for
    the attributes or a loop variable, or None for anything else (a computed list)."""
    if at < 0:
        return None
    token = tokens[at]
    selected = at >= 1 and tokens[at - 1].text == "."
    if token.kind == "ident" and not selected:
        if any(o.kind == "macro" and o.variable == token.text for o in stack):
            return _LOOP_VARIABLE
        if token.text == _VARIABLE:
            return _ATTRIBUTES
        return None
    return literals.get(at)


def _pattern(expression: str, tokens: list[Token], opened: int, closed: int) -> int:
    """The weight of the pattern of the ``matches`` call between these brackets, which must be
    a string literal (its cost is then known before any event arrives)."""
    pattern = tokens[closed - 1] if closed - 1 > opened else None
    value = None
    if pattern is not None and pattern.kind == "string" and tokens[closed - 2].text in "(,":
        value = string_value(pattern)
    if not isinstance(value, str):
        raise InvalidArgument(
            "matches() takes a string literal pattern "
            f"({position(expression, tokens[opened - 1].offset)}), so that its cost is known"
        )
    return _PATTERN_CALL + pattern_weight(value)


# Weights of the escapes of the regex crate that stand for large Unicode classes.
_CLASS_WEIGHTS = {"w": 200, "W": 200, "p": 160, "P": 160, "d": 30, "D": 40, "s": 5, "S": 5}
_QUANTIFIER = re.compile(r"\{(\d*)(?:,(\d*))?\}\??")


def pattern_weight(pattern: str) -> int:
    """How costly compiling ``pattern`` is, roughly: each repetition of an atom counts, and
    Unicode classes (``\\w``, ``\\pL``, ``\\d``) count for more than one character.

    An upper estimate for the regex crate's compile time: one weight unit is about 4.5 µs.
    Case-insensitive flags multiply the whole pattern by 10.
    """
    groups: list[list[int]] = [[0, 0]]  # per open group: [weight so far, weight of last atom]
    index, length = 0, len(pattern)
    while index < length:
        char = pattern[index]
        atom = 1
        if char == "\\" and index + 1 < length:
            escaped = pattern[index + 1]
            atom = _CLASS_WEIGHTS.get(escaped, 1)
            index += 2
            if escaped in "pP" and index < length and pattern[index] == "{":
                index = pattern.find("}", index) + 1 or length
            elif escaped in "pP":
                index += 1
            elif escaped in "xu" and index < length and pattern[index] == "{":
                index = pattern.find("}", index) + 1 or length
        elif char == "[":
            index, atom = _class(pattern, index)
        elif char == ".":
            atom, index = 2, index + 1  # any character but a newline: a UTF-8 automaton
        elif char == "(":
            groups.append([0, 0])
            index += 1
            if pattern.startswith(("?P<", "?<"), index):  # a named group: skip its name
                index = pattern.find(">", index) + 1 or length
            elif pattern.startswith("?", index):  # flags: (?i) or (?i:...)
                index += 1
                while index < length and (pattern[index].isalpha() or pattern[index] == "-"):
                    index += 1
                index += index < length and pattern[index] == ":"
            continue
        elif char == ")" and len(groups) > 1:
            inner = groups.pop()[0]
            groups[-1][0] += inner
            groups[-1][1] = inner
            index += 1
            continue
        elif char in "*+?":
            groups[-1][0] += groups[-1][1]  # a repeated atom compiles about twice
            index += 1
            continue
        elif char == "{":
            match = _QUANTIFIER.match(pattern, index)
            if match is not None:
                low = int(match.group(1) or 0)
                high = match.group(2)
                times = max(low, int(high) if high else low + 1, 1)
                groups[-1][0] += groups[-1][1] * (times - 1)
                index = match.end()
                continue
            index += 1
        else:
            index += 1
        groups[-1][0] += atom
        groups[-1][1] = atom
    total = sum(group[0] for group in groups)
    if re.search(r"\(\?[a-zA-Z]*i", pattern):
        total *= 10
    return total


def _class(pattern: str, start: int) -> tuple[int, int]:
    """Where the bracketed class at ``start`` ends, and its weight."""
    index, weight, depth = start + 1, 1, 1
    if pattern.startswith("^", index):  # the complement of a class spans all of Unicode
        index, weight = index + 1, 4
    if pattern.startswith("]", index):
        index += 1
    while index < len(pattern) and depth:
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            weight += _CLASS_WEIGHTS.get(pattern[index + 1], 1)
            index += 2
            continue
        if char == "[":
            depth += 1
            weight += 5  # a named or nested class: [[:alpha:]], [a-z&&[^x]]
        elif char == "]":
            depth -= 1
        else:
            weight += 1
        index += 1
    return index, weight
