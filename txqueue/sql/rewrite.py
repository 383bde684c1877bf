"""Per-expression rewrites from Spanner SQL to one engine, applied bottom-up.

SQLite keeps every TIMESTAMP as INTEGER microseconds, so every timestamp-valued expression
becomes integer arithmetic there (``CURRENT_TIMESTAMP()`` is a bound constant,
``TIMESTAMP_ADD(t, INTERVAL 29 DAY)`` is ``t + 2505600000000``); functions that would read
those integers as something else are refused rather than answered wrongly. PostgreSQL keeps
native types and sqlglot's own translation.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any

from sqlglot import exp

from txqueue.core.schema import Column, ColumnType, Dialect
from txqueue.drivers.engines import traits_named
from txqueue.errors import InvalidArgument
from txqueue.sql.params import Binder
from txqueue.sql.source import Source
from txqueue.sql.values import (
    UNIT_MICROS,
    cast_column,
    interval_micros,
    parse_bytes,
    parse_date,
    parse_timestamp,
    type_of,
    typed,
)

__all__ = ["TIMESTAMP", "Rewriter"]

TIMESTAMP = Column("", ColumnType.TIMESTAMP)
STRING = Column("", ColumnType.STRING)
BOOL = Column("", ColumnType.BOOL)
INT64 = Column("", ColumnType.INT64)
_MICROS_PER_DAY = 86_400_000_000
_TABLE_FUNCTION = re.compile(r"(receive|renewlease)_\w+\Z", re.IGNORECASE)
# Functions that only pass TIMESTAMP values through (safe on SQLite's integers).
_PASS_THROUGH = (
    exp.Coalesce,
    exp.Max,
    exp.Min,
    exp.AnyValue,
    exp.If,
    exp.Case,
    exp.Count,
    exp.Nullif,
    exp.Greatest,
    exp.Least,
    exp.Cast,
    exp.TryCast,
    exp.TimestampAdd,
    exp.TimestampSub,
    exp.First,
    exp.Last,
)
_SAME_AS_ARGUMENT = (
    exp.Min,
    exp.Max,
    exp.AnyValue,
    exp.Coalesce,
    exp.Nullif,
    exp.Greatest,
    exp.Least,
    exp.Paren,
    exp.Alias,
    exp.Window,
    exp.Neg,
    exp.First,
    exp.Last,
)
_BOOLEAN = (exp.Predicate, exp.Connector, exp.Not, exp.Exists, exp.Boolean, exp.Xor)
_STRINGS = (exp.Concat, exp.Lower, exp.Upper, exp.Substring, exp.Trim, exp.DPipe)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_FLOATS = (ColumnType.FLOAT64, ColumnType.FLOAT32)
#: The strings Spanner's CAST to FLOAT64 reads as infinities and NaN (any case).
_SPECIAL_FLOATS = frozenset(
    f"{sign}{word}" for sign in ("", "+", "-") for word in ("inf", "infinity", "nan")
)


def is_timestamp(column: Column | None) -> bool:
    return column is not None and column.type is ColumnType.TIMESTAMP and not column.array


class Rewriter:
    """Rewrites one statement's expressions for ``engine``; one instance per statement."""

    def __init__(
        self,
        engine: str,
        dialect: Dialect,
        binder: Binder,
        now: _dt.datetime | None,
        source: Source,
    ) -> None:
        #: TIMESTAMP, JSON and arrays are emulated: rewrite what uses them (SQLite)
        self.emulated = traits_named(engine).emulates_types
        #: the engine folds unquoted names to lower case (PostgreSQL): an application's
        #: table or column in mixed case is named exactly, and aliased in lower case
        self.folds_names = traits_named(engine).lower_case_names
        self.dialect = dialect
        self.binder = binder
        self.pinned = now
        self.source = source
        self._now: _dt.datetime | None = None

    def where(self, node: exp.Expression) -> str:
        """`` (at line L, column C)`` for ``node`` when its position is known."""
        for candidate in node.walk():
            start = candidate.meta.get("start") if candidate._meta else None
            if isinstance(start, int):
                return f" (at {self.source.where(start)})"
        return ""

    # ---- constants -------------------------------------------------------------------------

    def now(self) -> exp.Expression:
        """This statement's CURRENT_TIMESTAMP: one instant for the whole statement."""
        if not self.emulated and self.pinned is None:
            return typed(exp.CurrentTimestamp(), TIMESTAMP)
        if self._now is None:
            self._now = self.pinned or _dt.datetime.now(_dt.timezone.utc)
        return typed(self.binder.bind(self._now, TIMESTAMP), TIMESTAMP)

    @property
    def read_clock(self) -> bool:
        """Whether the statement bound the clock's time (no pinned time): its SQL holds this
        run's instant, so it must not be reused for another run."""
        return self._now is not None and self.pinned is None

    def constant(self, value: Any, column: Column) -> exp.Expression:
        return typed(self.binder.bind(value, column), column)

    # ---- the rewrite of one node (its children are done) ----------------------------------

    def node(self, node: exp.Expression) -> exp.Expression:
        """The expression standing for ``node`` on the engine, with its SQL type recorded."""
        new = self._rewrite(node)
        if new is not node:
            node.replace(new)
        return new

    def _rewrite(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter):
            return self.parameter(node)
        if isinstance(node, exp.Placeholder):
            if str(node.name).startswith(self.binder.prefix):
                return node
            style = "$1" if self.dialect is Dialect.POSTGRESQL else "@name"
            raise InvalidArgument(f"write query parameters as {style}{self.where(node)}")
        if isinstance(node, exp.ByteString):
            return self.byte_string(node)
        if isinstance(node, exp.Literal):
            return typed(node, STRING if node.is_string else _number_type(node.this))
        if isinstance(node, exp.CurrentTimestamp):
            return self.now()
        if isinstance(node, exp.CurrentDate):
            if not self.emulated and self.pinned is None:
                return typed(node, Column("", ColumnType.DATE))
            self.now()
            assert self._now is not None
            return self.constant(self._now.date(), Column("", ColumnType.DATE))
        if isinstance(node, exp.Anonymous) and node.name.upper() == "PENDING_COMMIT_TIMESTAMP":
            return self.now()
        if isinstance(node, exp.Anonymous) and _TABLE_FUNCTION.match(node.name):
            raise InvalidArgument(
                f"{node.name}() is a table function: write SELECT ... FROM {node.name}(...)"
                f"{self.where(node)}"
            )
        if isinstance(node, exp.Uuid):
            if self.emulated:
                return typed(_sqlite_uuid(), STRING)
            # Each engine's writer spells it: GENERATE_UUID(), GEN_RANDOM_UUID() …
            return typed(exp.cast(exp.Uuid(), exp.DataType.build("TEXT")), STRING)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.cast(node)
        if isinstance(node, exp.Interval) and not isinstance(node.this, exp.Literal):
            raise InvalidArgument(f"INTERVAL needs a literal amount{self.where(node)}")
        if isinstance(node, (exp.TimestampAdd, exp.TimestampSub)):
            return self.timestamp_add(node, -1 if isinstance(node, exp.TimestampSub) else 1)
        if isinstance(node, (exp.Add, exp.Sub)) and (
            isinstance(node.this, exp.Interval) or isinstance(node.expression, exp.Interval)
        ):
            return self.add_interval(node)
        if isinstance(node, (*_COMPARISONS, exp.Between, exp.In)):
            self.fold_against_timestamps(node)
            if isinstance(node, exp.In) and node.args.get("unnest") is not None and self.emulated:
                return self.in_unnest(node)
            if isinstance(node, exp.EQ) and isinstance(node.expression, exp.Any) and self.emulated:
                return self.eq_any(node)
        self.refuse_timestamp_misuse(node)
        return typed(node, _infer(node))

    def parameter(self, node: exp.Parameter) -> exp.Expression:
        inner = node.this
        if isinstance(inner, exp.Literal) and not inner.is_string:
            reference = f"${inner.this}"
        elif isinstance(inner, (exp.Var, exp.Identifier)):
            reference = f"@{inner.name}"
        else:
            raise InvalidArgument(f"unsupported parameter {node.sql()!r}{self.where(node)}")
        placeholder = self.binder.user(reference, self.where(node))
        return typed(placeholder, self.binder.types.get(placeholder.name))

    def byte_string(self, node: exp.ByteString) -> exp.Expression:
        if not node.args.get("is_bytes"):  # PostgreSQL's E'…' escape string: text
            return typed(exp.Literal.string(node.this), STRING)
        try:
            value = str(node.this).encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidArgument(
                f"bytes literal {node.sql(dialect='bigquery')!r} has characters beyond \\xff"
                f"{self.where(node)}"
            ) from None
        return self.constant(value, Column("", ColumnType.BYTES))

    # ---- casts and time arithmetic -------------------------------------------------------------

    def cast(self, node: exp.Cast) -> exp.Expression:
        to = node.to
        if to.this in (
            exp.DataType.Type.TEXT,
            exp.DataType.Type.BINARY,
            exp.DataType.Type.VARBINARY,
        ):
            to.set("expressions", [])  # STRING(36), BYTES(MAX): the length is not checked
        target = cast_column(to)
        child = node.this
        if target is None:
            return typed(node, None)
        literal = child.this if isinstance(child, exp.Literal) and child.is_string else None
        kind = target.type
        if literal is not None and not target.array:
            where = self.where(child)
            if kind is ColumnType.TIMESTAMP:
                return self.constant(parse_timestamp(literal, where), target)
            if kind is ColumnType.DATE:
                return self.constant(parse_date(literal, where), target)
            if kind is ColumnType.BYTES:
                return self.constant(parse_bytes(literal, self.dialect), target)
            if self.emulated and kind in _FLOATS and literal.strip().lower() in _SPECIAL_FLOATS:
                return self._special_float(node, literal, target)
        if self.emulated and not target.array:
            replaced = self._sqlite_cast(child, kind)
            if replaced is not None:
                return typed(replaced, target)
        return typed(node, target)

    def _special_float(self, node: exp.Cast, literal: str, target: Column) -> exp.Expression:
        """``CAST('nan' AS FLOAT64)``, ``'inf'``, ``'-infinity'`` … on SQLite, whose own CAST
        reads them as 0.0. Infinities are constants. SQLite has no NaN (it stores one as
        NULL), so a NaN travels as the text 'NaN', typed FLOAT64, and becomes ``float('nan')``
        in the result; that works only for a selected column of the statement itself."""
        value = float(literal.strip())
        if not math.isnan(value):
            return self.constant(value, target)
        holder = node.parent.parent if isinstance(node.parent, exp.Alias) else node.parent
        if not isinstance(holder, exp.Select) or holder.parent is not None:
            raise InvalidArgument(
                f"CAST({literal!r} AS {target.type.value}): SQLite has no NaN, so it can only "
                f"be a column the query selects, not part of an expression{self.where(node)}"
            )
        return typed(exp.Literal.string("NaN"), target)

    def _sqlite_cast(self, child: exp.Expression, kind: ColumnType) -> exp.Expression | None:
        from_timestamp = is_timestamp(type_of(child))
        seconds = [
            exp.Div(this=exp.paren(child.copy()), expression=exp.Literal.number("1000000.0"))
        ]
        epoch = [*seconds, exp.Literal.string("unixepoch")]
        if kind is ColumnType.TIMESTAMP:
            if from_timestamp:
                return child
            days = exp.Sub(
                this=_call("julianday", child.copy()), expression=exp.Literal.number("2440587.5")
            )
            micros = exp.Mul(this=exp.paren(days), expression=exp.Literal.number(_MICROS_PER_DAY))
            return exp.paren(exp.cast(micros, exp.DataType.build("BIGINT")))
        if kind is ColumnType.STRING and from_timestamp:
            text = _call("strftime", exp.Literal.string("%Y-%m-%d %H:%M:%f"), *epoch)
            return exp.paren(exp.DPipe(this=text, expression=exp.Literal.string("+00")))
        if kind is ColumnType.DATE:
            return _call("date", *epoch) if from_timestamp else _call("date", child.copy())
        return None

    def timestamp_add(self, node: exp.Expression, sign: int) -> exp.Expression:
        unit = node.text("unit").upper()
        if not self.emulated:
            return typed(node, TIMESTAMP)
        if unit not in UNIT_MICROS:
            raise InvalidArgument(
                f"TIMESTAMP_ADD/SUB by {unit or '?'} is not supported{self.where(node)}"
            )
        amount = node.expression
        if isinstance(amount, exp.Literal):
            try:
                step: exp.Expression = exp.Literal.number(int(amount.this) * UNIT_MICROS[unit])
            except ValueError:
                raise InvalidArgument(
                    f"TIMESTAMP_ADD/SUB needs a whole number of {unit}s, got {amount.this!r}"
                ) from None
        else:
            whole = exp.cast(amount.copy(), exp.DataType.build("BIGINT"))
            step = exp.paren(exp.Mul(this=whole, expression=exp.Literal.number(UNIT_MICROS[unit])))
        return typed(self._shift(node.this, step, sign), TIMESTAMP)

    def add_interval(self, node: exp.Add | exp.Sub) -> exp.Expression:
        interval, base = node.expression, node.this
        if isinstance(base, exp.Interval):
            if isinstance(node, exp.Sub):
                raise InvalidArgument(
                    f"cannot subtract a timestamp from an INTERVAL{self.where(node)}"
                )
            interval, base = base, interval
        if not self.emulated:
            return typed(node, TIMESTAMP)
        if not is_timestamp(type_of(base)):
            raise InvalidArgument(
                f"INTERVAL arithmetic needs a TIMESTAMP on SQLite{self.where(node)}"
            )
        amount = interval.this
        if not isinstance(amount, exp.Literal):
            raise InvalidArgument(f"INTERVAL needs a literal amount on SQLite{self.where(node)}")
        micros = interval_micros(str(amount.this), interval.text("unit") or None)
        if micros is None:
            raise InvalidArgument(
                f"INTERVALs of months or years are not supported on SQLite{self.where(node)}"
            )
        sign = -1 if isinstance(node, exp.Sub) else 1
        return typed(self._shift(base, exp.Literal.number(micros), sign), TIMESTAMP)

    @staticmethod
    def _shift(base: exp.Expression, step: exp.Expression, sign: int) -> exp.Expression:
        operator = exp.Add if sign > 0 else exp.Sub
        return exp.paren(operator(this=exp.paren(base.copy()), expression=step))

    # ---- literals next to timestamps ---------------------------------------------------------

    def coerce(self, node: exp.Expression, column: Column) -> exp.Expression:
        """A string literal assigned to or compared with ``column``'s type, as GoogleSQL does."""
        if not (isinstance(node, exp.Literal) and node.is_string) or column.array:
            return node
        where = self.where(node)
        value: Any
        if column.type is ColumnType.TIMESTAMP:
            value = parse_timestamp(node.this, where)
        elif column.type is ColumnType.BYTES:
            if self.dialect is Dialect.GOOGLESQL:
                raise InvalidArgument(
                    f"column {column.name} is BYTES: write a bytes literal b'...'{where}"
                )
            value = parse_bytes(node.this, self.dialect)
        else:
            return node
        replacement = self.constant(value, Column("", column.type))
        node.replace(replacement)
        return replacement

    def fold_against_timestamps(self, node: exp.Expression) -> None:
        operands = [node.this, node.expression, node.args.get("low"), node.args.get("high")]
        operands += node.expressions
        present = [o for o in operands if isinstance(o, exp.Expression)]
        if any(is_timestamp(type_of(o)) for o in present):
            for operand in present:
                self.coerce(operand, TIMESTAMP)

    def in_unnest(self, node: exp.In) -> exp.Expression:
        """``x IN UNNEST(@list)`` on SQLite, where arrays are JSON text."""
        unnest = node.args["unnest"]
        array = unnest.expressions[0].copy() if unnest.expressions else exp.Null()
        node.set("unnest", None)
        node.set("query", exp.Subquery(this=_json_values(array)))
        return typed(node, BOOL)

    def eq_any(self, node: exp.EQ) -> exp.Expression:
        """``x = ANY($1)`` on SQLite: ``x IN (the array's values)``."""
        inner = node.expression.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        query = inner if isinstance(inner, exp.Query) else _json_values(inner.copy())
        if isinstance(query, exp.Subquery):
            query = query.this
        return typed(exp.In(this=node.this.copy(), query=exp.Subquery(this=query.copy())), BOOL)

    def refuse_timestamp_misuse(self, node: exp.Expression) -> None:
        """On SQLite, refuse functions and operators that would read µs integers as numbers."""
        if not self.emulated or isinstance(node, _PASS_THROUGH + _COMPARISONS):
            return
        if not isinstance(node, (exp.Func, exp.Binary)) or isinstance(node, exp.Connector):
            return
        if isinstance(node, (exp.Predicate, exp.Alias)):
            return
        if any(is_timestamp(type_of(child)) for child in node.iter_expressions()):
            name = node.sql_name() if isinstance(node, exp.Func) else node.key.upper()
            raise InvalidArgument(
                f"{name} on TIMESTAMP values is not supported on SQLite{self.where(node)}"
            )


def _sqlite_uuid() -> exp.Expression:
    """A random (version 4) UUID string in SQLite's SQL."""

    def random_hex(size: int, skip_first: bool = False) -> exp.Expression:
        text = _call("hex", _call("randomblob", exp.Literal.number(size)))
        return _call("substr", text, exp.Literal.number(2)) if skip_first else text

    variant = _call(
        "substr",
        exp.Literal.string("89ab"),
        exp.Add(
            this=exp.Literal.number(1),
            expression=exp.paren(
                exp.Mod(this=_call("abs", _call("random")), expression=exp.Literal.number(4))
            ),
        ),
        exp.Literal.number(1),
    )
    parts = [
        random_hex(4),
        exp.Literal.string("-"),
        random_hex(2),
        exp.Literal.string("-4"),
        random_hex(2, True),
        exp.Literal.string("-"),
        variant,
        random_hex(2, True),
        exp.Literal.string("-"),
        random_hex(6),
    ]
    text = parts[0]
    for part in parts[1:]:
        text = exp.DPipe(this=text, expression=part)
    return exp.paren(_call("lower", text))


def _json_values(array: exp.Expression) -> exp.Expression:
    """``SELECT value FROM json_each(array)``: the elements of a JSON array (SQLite)."""
    rows = exp.Table(this=_call("json_each", array))
    return exp.Select(expressions=[exp.column("value")]).from_(rows)


def _call(name: str, *arguments: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(arguments))


def _number_type(text: str) -> Column:
    integral = text.isdigit() or text.lower().startswith("0x")
    return INT64 if integral else Column("", ColumnType.FLOAT64)


def _infer(node: exp.Expression) -> Column | None:
    """The SQL type of a node from its children's types (None when unknown)."""
    if isinstance(node, _BOOLEAN):
        return BOOL
    if isinstance(node, exp.Count):
        return INT64
    if isinstance(node, exp.Length):
        return INT64
    if isinstance(node, _STRINGS):
        return STRING
    if isinstance(node, exp.If):
        return type_of(node.args.get("true")) or type_of(node.args.get("false"))
    if isinstance(node, exp.Case):
        branches = [i.args.get("true") for i in node.args.get("ifs") or []]
        branches.append(node.args.get("default"))
        return next((type_of(b) for b in branches if type_of(b) is not None), None)
    if isinstance(node, _SAME_AS_ARGUMENT):
        arguments = [node.this, *node.expressions]
        return next((type_of(a) for a in arguments if type_of(a) is not None), None)
    return None
