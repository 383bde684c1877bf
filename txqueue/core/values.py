"""Checking Python values against declared columns, before anything is written.

Every mutation and send passes through here, so bad input is refused with an error that
names the field and the rule, and no engine ever sees a value of the wrong shape.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
from collections.abc import Sequence
from typing import Any

from txqueue.core.durations import require_aware
from txqueue.core.schema import Column, ColumnType, Table
from txqueue.errors import InvalidArgument

__all__ = [
    "MAX_CELL_BYTES",
    "MAX_JSON_NESTING",
    "JsonText",
    "check_count",
    "check_key",
    "check_payload",
    "check_row",
    "check_text",
    "check_value",
    "json_text",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: Spanner's JSON nests at most 80 levels of arrays and objects; so does txqueue's, everywhere.
MAX_JSON_NESTING = 80
#: Spanner's limit on one cell (a column's value in a row; an array is one cell): 10 MiB. Every
#: engine refuses more, so what runs here runs on Spanner.
MAX_CELL_BYTES = 10 * 1024 * 1024


def check_value(column: Column, value: Any, field: str) -> Any:
    """Return ``value`` normalised for ``column`` (UTC datetimes, bytes), or raise InvalidArgument."""
    named = f"{field} ({column.name})" if column.name else field
    if value is None:
        if not column.nullable:
            raise InvalidArgument(f"{named} must not be NULL")
        return None
    if column.array:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise InvalidArgument(f"{named} must be a list")
        element = Column(column.name, column.type, True, column.length)
        items = [check_value(element, item, f"{field}[{i}]") for i, item in enumerate(value)]
        check_cell_size(sum(map(_cell_size, items)), named)
        return items
    kind = column.type
    if kind is ColumnType.INT64:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"{named} must be an int (INT64)")
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise InvalidArgument(f"{named} is outside the INT64 range")
        return value
    if kind in (ColumnType.FLOAT64, ColumnType.FLOAT32):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgument(f"{named} must be a float")
        return float(value)
    if kind is ColumnType.BOOL:
        if not isinstance(value, bool):
            raise InvalidArgument(f"{named} must be a bool")
        return value
    if kind is ColumnType.STRING:
        if not isinstance(value, str):
            raise InvalidArgument(f"{named} must be a str (STRING)")
        if not _encodable(value):
            raise InvalidArgument(
                f"{named} is not valid Unicode: it holds a lone surrogate "
                "(STRING values are UTF-8 text)"
            )
        if len(value) > MAX_CELL_BYTES // 4:  # else within the limit whatever its characters
            check_cell_size(_cell_size(value), named)
        if column.length is not None and len(value) > column.length:
            raise InvalidArgument(f"{named} is longer than STRING({column.length}): {len(value)}")
        return value
    if kind is ColumnType.BYTES:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"{named} must be bytes (BYTES)")
        value = bytes(value)
        check_cell_size(len(value), named)
        if column.length is not None and len(value) > column.length:
            raise InvalidArgument(f"{named} is longer than BYTES({column.length}): {len(value)}")
        return value
    if kind is ColumnType.TIMESTAMP:
        return require_aware(value, f"{named}")
    if kind is ColumnType.DATE:
        if isinstance(value, _dt.datetime) or not isinstance(value, _dt.date):
            raise InvalidArgument(f"{named} must be a datetime.date")
        return value
    if kind is ColumnType.NUMERIC:
        if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
            raise InvalidArgument(f"{named} must be a Decimal or int (NUMERIC)")
        return decimal.Decimal(value)
    if kind is ColumnType.JSON:
        check_cell_size(_cell_size(json_text(value, f"{named}")), named)
        return value
    raise InvalidArgument(f"{named} has unsupported type {kind}")


class JsonText(str):
    """A JSON value already serialised by its check: drivers store this text as it is
    instead of serialising the value a second time."""

    __slots__ = ()


def json_text(value: object, field: str) -> str:
    """``value`` as JSON text, or InvalidArgument naming ``field`` when it is not JSON as
    Spanner stores it: no NaN or infinity, no lone surrogate (the text is UTF-8), and at most
    `MAX_JSON_NESTING` levels of arrays and objects."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except RecursionError as error:
        raise InvalidArgument(
            f"{field} is nested deeper than {MAX_JSON_NESTING} levels (JSON's limit)"
        ) from error
    except (TypeError, ValueError) as error:  # ValueError: NaN, infinity, a cycle
        raise InvalidArgument(f"{field} is not JSON-serializable: {error}") from error
    if not _encodable(text):
        raise InvalidArgument(f"{field} is not valid Unicode: it holds a lone surrogate")
    if _nesting(value) > MAX_JSON_NESTING:
        raise InvalidArgument(
            f"{field} is nested deeper than {MAX_JSON_NESTING} levels (JSON's limit)"
        )
    return text


def _nesting(value: object) -> int:
    """How many levels of arrays and objects ``value`` nests (acyclic: json.dumps said so)."""
    deepest = 0
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_JSON_NESTING:
            return deepest
        pending.extend((child, depth + 1) for child in children)
    return deepest


def check_cell_size(size: int, named: str) -> None:
    """Refuse a value of ``size`` bytes over Spanner's cell limit (`MAX_CELL_BYTES`)."""
    if size > MAX_CELL_BYTES:
        raise InvalidArgument(
            f"{named} is {size} bytes, over Spanner's cell limit of 10 MiB ({MAX_CELL_BYTES} bytes)"
        )


def _cell_size(value: object) -> int:
    """The bytes a checked value takes in a cell: UTF-8 for text, else its length (0 for
    numbers, dates and the like, which are small)."""
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode())
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, (dict, list)):
        return _cell_size(json.dumps(value, ensure_ascii=False))
    return 0


def check_text(value: object, field: str) -> str:
    """``value`` if it is a str that encodes as UTF-8 (no lone surrogate): text to store."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{field} must be a string, got {type(value).__name__}")
    if not _encodable(value):
        raise InvalidArgument(f"{field} is not valid Unicode: it holds a lone surrogate")
    return value


def check_count(value: object, field: str) -> int:
    """A count (a receive's max_batch_size, a listing's limit): a positive int that fits INT64,
    as every engine's LIMIT takes it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{field} must be a positive integer, got {value!r}")
    if value > _INT64_MAX:
        raise InvalidArgument(f"{field} must be at most 2**63 - 1 (INT64), got {value}")
    return value


def check_key(table: Table, key: object, field: str = "key") -> tuple[Any, ...]:
    """Check a primary key given as a tuple in key-column order; a scalar is a 1-tuple."""
    if not isinstance(key, (tuple, list)):
        key = (key,)
    columns = table.key_columns
    if len(key) == len(columns) and all(map(_plainly_valid, columns, key)):
        return tuple(key)  # the common case: exact Python types, nothing to normalise
    if len(key) != len(columns):
        names = ", ".join(c.name for c in columns)
        raise InvalidArgument(
            f"{field} of {table.name} must have {len(columns)} part(s) ({names}), got {len(key)}"
        )
    return tuple(
        check_value(column, part, f"{field}[{i}]")
        for i, (column, part) in enumerate(zip(columns, key))
    )


def check_payload(table: Table, payload: object) -> Any:
    """Check a message payload against the queue's Payload column (bytes, str or JSON)."""
    column = table.payload_column
    if _plainly_valid(column, payload):
        return payload  # the common case: bytes or str of the column's type, nothing to do
    if payload is None:
        raise InvalidArgument(f"payload of {table.name} must not be None")
    if column.type is ColumnType.JSON and not column.array:
        named = f"payload ({column.name})" if column.name else "payload"  # as check_value's
        text = json_text(payload, named)  # checking it serialises it: the text is kept
        check_cell_size(_cell_size(text), named)
        return JsonText(text)
    return check_value(column, payload, "payload")


def check_row(
    table: Table, columns: Sequence[str], values: Sequence[Any], field: str = "values"
) -> tuple[Any, ...]:
    """Check one row of a write mutation: as many values as columns, each of its column's type."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidArgument(f"{field} must be a sequence of values")
    if len(values) != len(columns):
        raise InvalidArgument(
            f"{field} has {len(values)} value(s) for {len(columns)} column(s) of {table.name}"
        )
    return tuple(
        value if _valid_as_it_is(column, value) else check_value(column, value, f"{field}[{i}]")
        for i, (column, value) in enumerate(zip(map(table.column, columns), values))
    )


def _valid_as_it_is(column: Column, value: Any) -> bool:
    """True when `check_value` would return ``value`` itself: the common cells of a row
    (NULL where allowed, plain keys, floats, UTC datetimes) skip building its field name."""
    if value is None:
        return column.nullable
    if column.array:
        return False
    kind = type(value)
    if kind is float:
        return column.type in (ColumnType.FLOAT64, ColumnType.FLOAT32)
    if kind is _dt.datetime:
        return column.type is ColumnType.TIMESTAMP and value.tzinfo is _dt.timezone.utc
    return _plainly_valid(column, value)


_PLAIN: dict[ColumnType, type] = {
    ColumnType.INT64: int,
    ColumnType.STRING: str,
    ColumnType.BYTES: bytes,
}


#: Lengths of str and bytes within the cell limit whatever they hold (a character: 4 bytes at most).
_PLAIN_SIZE: dict[type, int] = {str: MAX_CELL_BYTES // 4, bytes: MAX_CELL_BYTES}


def _plainly_valid(column: Column, value: Any) -> bool:
    """True when ``value`` needs no checking beyond its exact type (fast path for keys)."""
    expected = _PLAIN.get(column.type)
    if expected is None or type(value) is not expected or column.array:
        return False
    checked: Any = value  # its exact type is known now
    if expected is int:
        return bool(_INT64_MIN <= checked <= _INT64_MAX)
    if expected is str and not _encodable(checked):
        return False
    if len(checked) > _PLAIN_SIZE[expected]:
        return False  # near the cell limit: checked in full
    return column.length is None or len(checked) <= column.length


def _encodable(text: str) -> bool:
    """True when ``text`` is UTF-8 encodable: no lone surrogate (which no engine stores)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
