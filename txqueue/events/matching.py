"""Enrollment conditions: CEL expressions over a CloudEvent's attributes, as in Eventarc Advanced.

An expression sees one variable, ``message``, a map of the event's context attributes
(``message.type``, ``message.source``, ``message.id``, ``message.subject``, ``message.time``,
``message.datacontenttype``, ``message.dataschema``, ``message.specversion`` and every
extension attribute). ``"true"`` matches every event.

Conditions are checked when they are created: the expression must parse, may name no variable
but ``message`` (and the loop variables of macros such as ``exists``), and must not read
``message.data``; as in Eventarc, routing depends on attributes only, never on the payload.
The payload is never bound, so even a reference the static check misses cannot read it.

At evaluation, a condition matches only when the expression yields ``true``. An evaluation
error (a missing attribute, a type mismatch, an undefined function) or a non-boolean result
means *no match*: routing must never fail a publish, and a condition about an attribute an
event lacks is simply not about that event. Guard optional attributes with ``has()``, e.g.
``has(message.subject) && message.subject.startsWith("orders/")``.

Conditions are bounded (`txqueue.events.cel_limits`): one over the static bounds is refused
before it is compiled, and one whose estimated cost for an event is over the budget is not
evaluated for that event (`Condition.refusal` says why; the publisher records it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import cel

from txqueue.errors import InvalidArgument
from txqueue.events.cel_limits import (
    MACROS,
    REFERENCE_ATTRIBUTE_SIZE,
    REFERENCE_ATTRIBUTES,
    Shape,
    Token,
    ends_operand,
    position,
    shape,
    string_value,
    tokenize,
)

__all__ = ["Condition", "PreparedAttributes", "compile_condition", "prepare"]

_VARIABLE = "message"
_FORBIDDEN_FIELD = "data"
_PARSE_ERROR = re.compile(r"ERROR: <input>:(\d+):(\d+): ")


class PreparedAttributes:
    """One event's attributes converted for CEL once, to be matched against many conditions.

    Converting attributes costs far more than evaluating a condition, so a bus routing one
    event to several enrollments should prepare it once. Not thread-safe (nor is ``cel.Context``).
    ``count``, ``sizes`` and ``largest`` (attributes, the characters of each and of the
    longest) size the event for the conditions' cost estimates.
    """

    __slots__ = ("_context", "count", "largest", "sizes")

    def __init__(self, attributes: Mapping[str, Any]) -> None:
        visible = _visible(attributes)
        self.sizes = {name: _size(value) for name, value in visible.items()}
        self.count, self.largest = len(visible), max(self.sizes.values(), default=0)
        try:
            self._context = cel.Context(variables={_VARIABLE: visible})
        except (ValueError, TypeError) as error:
            raise InvalidArgument(f"event attributes cannot be matched: {error}") from error


def prepare(attributes: Mapping[str, Any]) -> PreparedAttributes:
    """Convert ``attributes`` for repeated matching (see `PreparedAttributes`)."""
    return PreparedAttributes(attributes)


class Condition:
    """A validated, compiled enrollment condition; `matches` never raises.

    A condition stored by an older version that no longer passes the checks is kept as a
    refused one (`Condition.refused`): it never matches, and `refusal` says why.
    """

    __slots__ = ("_fields", "_program", "_refused", "_shape", "expression")

    def __init__(
        self, expression: str, program: Any, fields: frozenset[str] | None, shape: Shape
    ) -> None:
        self.expression = expression
        self._program = program
        # The attribute names the expression reads, when it only ever reads ``message.<name>``:
        # binding just those is several times faster than converting every attribute.
        self._fields = fields
        self._shape = shape
        self._refused: str | None = None

    @classmethod
    def refused(cls, expression: str, reason: str) -> Condition:
        """A condition that is never evaluated, because ``reason``."""
        condition = cls(expression, None, frozenset(), Shape(0, 0, 0, 0, 0, ()))
        condition._refused = reason
        return condition

    def __repr__(self) -> str:
        return f"Condition({self.expression!r})"

    def refusal(self, attributes: Mapping[str, Any] | PreparedAttributes) -> str | None:
        """Why this condition is not evaluated for this event (over its evaluation budget, or
        refused when loaded), or None when `matches` evaluates it."""
        if self._refused is not None:
            return f"its condition is refused: {self._refused}"
        if isinstance(attributes, PreparedAttributes):
            count, sizes = attributes.count, attributes.sizes
        else:
            sizes = {name: _size(value) for name, value in _visible(attributes).items()}
            count = len(sizes)
        if self._fields is not None:  # only these are read: other attributes cost nothing
            count = len(self._fields)
            largest = max((sizes.get(name, 0) for name in self._fields), default=0)
        else:
            largest = max(sizes.values(), default=0)
        return self._shape.refusal(count, largest)

    def matches(self, attributes: Mapping[str, Any] | PreparedAttributes) -> bool:
        """Whether the event with these attributes is routed; errors and non-booleans are False,
        and so is a condition that `refusal` keeps from being evaluated."""
        if self.refusal(attributes) is not None:
            return False
        if isinstance(attributes, PreparedAttributes):
            context: Any = attributes._context
        elif self._fields is None:
            context = {_VARIABLE: _visible(attributes)}
        elif not self._fields:
            context = None  # ``message`` is not read (e.g. "true"): skip converting it
        else:
            context = {
                _VARIABLE: {
                    name: attributes[name]
                    for name in self._fields
                    if attributes.get(name) is not None
                }
            }
        try:
            result = self._program.execute(context)
        except Exception:  # the binding raises KeyError, TypeError, RuntimeError, ValueError
            return False
        return result is True


def compile_condition(expression: str) -> Condition:
    """Parse and check a CEL enrollment condition; raise InvalidArgument saying what and where.

    The bounds of `txqueue.events.cel_limits` are checked before the expression is compiled,
    and its estimated cost for a reference event after.
    """
    if not isinstance(expression, str):
        raise InvalidArgument(
            f"condition must be a CEL expression string, got {type(expression).__name__}"
        )
    if not expression.strip():
        raise InvalidArgument('condition must not be empty (use "true" to match every event)')
    bounded = shape(expression)
    try:
        program = cel.compile(expression)
    except (ValueError, RuntimeError, TypeError) as error:
        raise InvalidArgument(f"condition is not valid CEL: {_describe(str(error))}") from error
    tokens = tokenize(expression)
    _refuse_data(expression, tokens)
    _refuse_unknown_variables(expression, tokens, program)
    too_costly = bounded.refusal(REFERENCE_ATTRIBUTES, REFERENCE_ATTRIBUTE_SIZE)
    if too_costly is not None:
        raise InvalidArgument(
            f"condition is too costly to evaluate: {too_costly}; use fewer or smaller "
            "comprehensions, concatenations and matches() patterns"
        )
    return Condition(expression, program, _fields_read(tokens), bounded)


def _visible(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes a condition may see: never the payload, never absent (None) values."""
    return {
        name: value
        for name, value in attributes.items()
        if value is not None and name != _FORBIDDEN_FIELD
    }


def _size(value: Any) -> int:
    """Characters (or bytes) of a string (or bytes) attribute; 0 for other values."""
    return len(value) if isinstance(value, str | bytes | bytearray) else 0


def _describe(message: str) -> str:
    """The binding's parse error without its preamble, positions as 'line L, column C'."""
    detail = message.split(": ", 1)[1] if message.startswith("Failed to parse") else message
    return _PARSE_ERROR.sub(lambda m: f"line {m.group(1)}, column {m.group(2)}: ", detail)


def _refuse_data(expression: str, tokens: list[Token]) -> None:
    """Refuse ``.data`` and ``["data"]``: conditions route on attributes, not on the payload."""
    for index, token in enumerate(tokens):
        previous = tokens[index - 1] if index else None
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        selects_data = (
            token.kind == "ident"
            and token.text == _FORBIDDEN_FIELD
            and previous is not None
            and previous.text == "."
        )
        indexes_data = (
            token.kind == "string"
            and previous is not None
            and previous.text == "["
            and following is not None
            and following.text == "]"
            and index >= 2
            and ends_operand(tokens[index - 2])
            and string_value(token) == _FORBIDDEN_FIELD
        )
        if selects_data or indexes_data:
            raise InvalidArgument(
                "condition must not reference message.data "
                f"({position(expression, token.offset)}): enrollments match on event "
                "attributes only (type, source, subject, extensions, ...), not on the payload"
            )


def _refuse_unknown_variables(expression: str, tokens: list[Token], program: Any) -> None:
    """Refuse variables other than ``message``: such a condition could never match."""
    bound = {
        tokens[i + 2].text
        for i in range(1, len(tokens) - 3)
        if tokens[i - 1].text == "."
        and tokens[i].text in MACROS
        and tokens[i + 1].text == "("
        and tokens[i + 2].kind == "ident"
        and tokens[i + 3].text == ","
    }
    unknown = sorted(set(program.variables()) - bound - {_VARIABLE})
    if unknown:
        first = next(t for t in tokens if t.kind == "ident" and t.text == unknown[0])
        raise InvalidArgument(
            f"condition references unknown variable {unknown[0]!r} "
            f"({position(expression, first.offset)}): only 'message' is defined, "
            "e.g. message.type == 'com.example.created'"
        )


def _fields_read(tokens: list[Token]) -> frozenset[str] | None:
    """The names in ``message.<name>`` if every use of ``message`` has that form, else None."""
    fields = set()
    for index, token in enumerate(tokens):
        if token.kind != "ident" or token.text != _VARIABLE:
            continue
        if index and tokens[index - 1].text == ".":
            continue  # a field called 'message', not the variable
        window = tokens[index + 1 : index + 4]
        if (
            len(window) >= 2
            and window[0].text == "."
            and window[1].kind == "ident"
            and (len(window) == 2 or window[2].text != "(")
        ):
            fields.add(window[1].text)
        else:
            return None
    return frozenset(fields)
