"""Typed values inside SQL: timestamp, date, interval and bytes literals, CAST target types.

Statement-level constants are folded here (into bound values) so both engines see the same
instant and the same bytes: a zone-less TIMESTAMP literal is UTC on either engine.
"""

from __future__ import annotations

import datetime as _dt
import re

from sqlglot import exp

from txqueue.core.schema import Column, ColumnType, Dialect
from txqueue.errors import InvalidArgument

__all__ = [
    "UNIT_MICROS",
    "cast_column",
    "interval_micros",
    "parse_bytes",
    "parse_date",
    "parse_timestamp",
    "type_of",
    "typed",
]

UNIT_MICROS = {
    "MICROSECOND": 1,
    "MILLISECOND": 1_000,
    "SECOND": 1_000_000,
    "MINUTE": 60_000_000,
    "HOUR": 3_600_000_000,
    "DAY": 86_400_000_000,
    "WEEK": 604_800_000_000,
}
_UNIT_WORDS = {
    "us": "MICROSECOND",
    "usec": "MICROSECOND",
    "microsecond": "MICROSECOND",
    "ms": "MILLISECOND",
    "msec": "MILLISECOND",
    "millisecond": "MILLISECOND",
    "s": "SECOND",
    "sec": "SECOND",
    "second": "SECOND",
    "m": "MINUTE",
    "min": "MINUTE",
    "minute": "MINUTE",
    "h": "HOUR",
    "hr": "HOUR",
    "hour": "HOUR",
    "d": "DAY",
    "day": "DAY",
    "w": "WEEK",
    "week": "WEEK",
}
_INTERVAL_PART = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([A-Za-z]+)")
_TIMESTAMP = re.compile(
    r"\s*(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{1,2}(?::?\d{2})?)?\s*\Z",
    re.IGNORECASE,
)
_TYPE_KEY = "txq_type"

_DTYPES = {
    ColumnType.STRING: ("TEXT", "VARCHAR", "CHAR", "NCHAR", "NVARCHAR", "NAME"),
    ColumnType.BYTES: ("BINARY", "VARBINARY", "BLOB"),
    ColumnType.INT64: ("BIGINT", "INT", "SMALLINT", "TINYINT", "UBIGINT"),
    ColumnType.FLOAT64: ("DOUBLE",),
    ColumnType.FLOAT32: ("FLOAT",),
    ColumnType.BOOL: ("BOOLEAN",),
    ColumnType.TIMESTAMP: ("TIMESTAMPTZ", "TIMESTAMP", "TIMESTAMPLTZ"),
    ColumnType.DATE: ("DATE",),
    ColumnType.JSON: ("JSON", "JSONB"),
    ColumnType.NUMERIC: ("DECIMAL", "BIGDECIMAL"),
}
_BY_DTYPE = {name: kind for kind, names in _DTYPES.items() for name in names}


def typed(node: exp.Expression, column: Column | None) -> exp.Expression:
    """Record the SQL type of ``node`` (None: unknown) and return it."""
    node.meta[_TYPE_KEY] = column
    return node


def type_of(node: exp.Expression | None) -> Column | None:
    if node is None:
        return None
    found = node.meta.get(_TYPE_KEY) if node._meta else None
    return found if isinstance(found, Column) else None


def cast_column(to: exp.DataType) -> Column | None:
    """The column type a CAST target names (``STRING(36)`` → STRING, ``bytea`` → BYTES)."""
    if to.this == exp.DataType.Type.ARRAY:
        inner = to.expressions[0] if to.expressions else None
        element = cast_column(inner) if isinstance(inner, exp.DataType) else None
        return None if element is None else Column("", element.type, array=True)
    kind = _BY_DTYPE.get(to.this.name)
    return None if kind is None else Column("", kind)


def parse_timestamp(text: str, where: str = "") -> _dt.datetime:
    """A GoogleSQL/PostgreSQL timestamp literal; no zone means UTC."""
    match = _TIMESTAMP.match(text)
    if match is None:
        raise InvalidArgument(f"invalid TIMESTAMP literal {text!r}{where}")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        value = _dt.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            micros,
            tzinfo=_zone(zone),
        )
    except ValueError as error:
        raise InvalidArgument(f"invalid TIMESTAMP literal {text!r}{where}: {error}") from None
    return value.astimezone(_dt.timezone.utc)


def _zone(text: str | None) -> _dt.tzinfo:
    if text is None or text.upper() in ("Z", "UTC"):
        return _dt.timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = (digits, "0") if len(digits) <= 2 else (digits[:-2], digits[-2:])
    if int(hours) > 14 or int(minutes) > 59:
        raise ValueError(f"time zone offset {text} is out of range")
    return _dt.timezone(sign * _dt.timedelta(hours=int(hours), minutes=int(minutes)))


def parse_date(text: str, where: str = "") -> _dt.date:
    try:
        return _dt.date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidArgument(f"invalid DATE literal {text!r}{where}") from None


def interval_micros(amount: str, unit: str | None) -> int | None:
    """Microseconds in ``INTERVAL amount unit`` (or ``'1 hour 30 minutes'``).

    None when the interval uses months or years (their length depends on the date);
    InvalidArgument when it cannot be read.
    """
    text = f"{amount} {unit}" if unit else amount
    total, position = 0.0, 0
    for match in _INTERVAL_PART.finditer(text):
        if match.start() != position:
            break
        word = match.group(2).lower()
        if word.rstrip("s") in ("month", "year", "mon", "decade", "century"):
            return None
        name = _UNIT_WORDS.get(word) or _UNIT_WORDS.get(word.rstrip("s"))
        if name is None:
            raise InvalidArgument(f"unknown interval unit {match.group(2)!r} in {text!r}")
        total += float(match.group(1)) * UNIT_MICROS[name]
        position = match.end()
    if position == 0 or text[position:].strip():
        raise InvalidArgument(f"invalid INTERVAL {text!r}: write e.g. INTERVAL '29 DAY'")
    return round(total)


def parse_bytes(text: str, dialect: Dialect) -> bytes:
    """The bytes of ``CAST('…' AS BYTES/bytea)``: UTF-8, or PostgreSQL's bytea input format."""
    if dialect is not Dialect.POSTGRESQL or "\\" not in text:
        return text.encode()
    if text.startswith("\\x"):
        try:
            return bytes.fromhex(text[2:])
        except ValueError:
            raise InvalidArgument(f"invalid hexadecimal bytea literal {text!r}") from None
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out += char.encode()
            index += 1
        elif text[index + 1 : index + 2] == "\\":
            out.append(0x5C)
            index += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", text[index + 1 : index + 4]):
            out.append(int(text[index + 1 : index + 4], 8))
            index += 4
        else:
            raise InvalidArgument(f"invalid escape in bytea literal {text!r}")
    return bytes(out)
