"""Values and errors at the Cloud Spanner client's boundary (shared by both faces' drivers).

The client takes and returns BYTES as base64 text (raw bytes would be stored as if they
were base64, silently wrong), JSON as text, INT64 as Python ints; its errors are
``google.api_core`` exceptions, mapped here to ``txqueue.errors`` with the original kept as
``__cause__``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from google.api_core import exceptions as api
from google.cloud.spanner_v1 import TypeCode, param_types

from txqueue.core.schema import Column, ColumnType, Table
from txqueue.core.values import JsonText
from txqueue.errors import (
    Aborted,
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    TxqueueError,
    Unavailable,
)

__all__ = [
    "decode_row",
    "encode",
    "encode_key",
    "encode_params",
    "map_error",
    "map_errors",
    "positional",
    "replace_markers",
    "utc",
]

_TYPES = {
    ColumnType.INT64: param_types.INT64,
    ColumnType.FLOAT64: param_types.FLOAT64,
    ColumnType.FLOAT32: param_types.FLOAT32,
    ColumnType.BOOL: param_types.BOOL,
    ColumnType.STRING: param_types.STRING,
    ColumnType.BYTES: param_types.BYTES,
    ColumnType.TIMESTAMP: param_types.TIMESTAMP,
    ColumnType.DATE: param_types.DATE,
    ColumnType.JSON: param_types.JSON,
    ColumnType.NUMERIC: param_types.NUMERIC,
}


def column_type(column: Column) -> Any:
    """The client's parameter type of a column."""
    kind = _TYPES[column.type]
    return param_types.Array(kind) if column.array else kind


def encode(column: Column, value: Any) -> Any:
    """A checked Python value as the client takes it for ``column``."""
    if value is None:
        return None
    if column.array:
        element = Column(column.name, column.type)
        return [encode(element, item) for item in value]
    kind = column.type
    if kind is ColumnType.BYTES:
        return base64.b64encode(bytes(value))
    if kind is ColumnType.JSON:
        return value if isinstance(value, JsonText) else json.dumps(value)
    if kind is ColumnType.TIMESTAMP:
        return utc(value)
    return value


def encode_key(table: Table, key: Sequence[Any]) -> list[Any]:
    return [encode(c, v) for c, v in zip(table.key_columns, key)]


def key_params(table: Table, key: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``@k0, @k1, …`` of ``QueueStatements`` for one key, and their types."""
    values = {f"k{i}": v for i, v in enumerate(encode_key(table, key))}
    types = {f"k{i}": column_type(c) for i, c in enumerate(table.key_columns)}
    return values, types


def _value_type(value: Any) -> Any:
    """The client's type of a query parameter, by its Python value (None: untyped NULL)."""
    if isinstance(value, bool):
        return param_types.BOOL
    if isinstance(value, int):
        return param_types.INT64
    if isinstance(value, float):
        return param_types.FLOAT64
    if isinstance(value, str):
        return param_types.STRING
    if isinstance(value, (bytes, bytearray, memoryview)):
        return param_types.BYTES
    if isinstance(value, datetime):
        return param_types.TIMESTAMP
    if isinstance(value, _dt.date):
        return param_types.DATE
    if isinstance(value, decimal.Decimal):
        return param_types.NUMERIC
    if isinstance(value, _JsonParameter):
        return param_types.JSON
    if isinstance(value, (list, tuple)):
        for item in value:
            if item is not None:
                return param_types.Array(_value_type(item))
        return param_types.Array(param_types.STRING)
    return None


class _JsonParameter(str):
    """A JSON query parameter's text (``encode_parameter`` marks it so)."""

    __slots__ = ()


def json_parameter(value: Any) -> str:
    """A JSON query parameter as the driver sends it."""
    return _JsonParameter(value if isinstance(value, JsonText) else json.dumps(value))


def _encode_param(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value))
    if isinstance(value, _JsonParameter):
        return str(value)
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, (list, tuple)):
        return [_encode_param(item) for item in value]
    return value


def positional(sql: str, params: Any) -> tuple[str, Any]:
    """Engine SQL written with ``?`` markers (the engine's marker) and a sequence of values,
    as Spanner takes it: ``@p1, @p2, …`` and a dict. Markers inside quotes are left alone."""
    if params is None or isinstance(params, Mapping):
        return sql, params
    if isinstance(params, (str, bytes)) or not isinstance(params, Sequence):
        raise InvalidArgument(f"params must be a dict or a list, got {type(params).__name__}")
    count = 0

    def number(_: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return f"@p{count}"

    sql = replace_markers(sql, r"\?", number)
    if count != len(params):
        raise InvalidArgument(f"the statement has {count} ? marker(s) for {len(params)} value(s)")
    return sql, {f"p{n}": value for n, value in enumerate(params, 1)}


#: A quoted string or name, inside which no marker is one.
_QUOTED = r"'[^']*'|\"[^\"]*\"|`[^`]*`"


def replace_markers(sql: str, marker: str, replace: Callable[[re.Match[str]], str]) -> str:
    """``sql`` with every match of the ``marker`` pattern outside quotes replaced."""
    pattern = re.compile(f"({_QUOTED})|{marker}")
    return pattern.sub(lambda match: match.group(1) or replace(match), sql)


def encode_params(params: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A statement's named parameters and their types, as the client takes them."""
    if not params:
        return None, None
    if not isinstance(params, Mapping):
        raise InvalidArgument("Spanner statements take named parameters (a dict)")
    values: dict[str, Any] = {}
    types: dict[str, Any] = {}
    for name, value in params.items():
        values[name] = _encode_param(value)
        kind = _value_type(value)
        if kind is not None:
            types[name] = kind
    return values, types


def utc(value: datetime) -> datetime:
    """An aware datetime in UTC, as a plain ``datetime`` (the client's has nanoseconds)."""
    value = value.astimezone(timezone.utc)
    return datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=timezone.utc,
    )


def _decode(code: Any, element: Any, value: Any) -> Any:
    if value is None:
        return None
    if code == TypeCode.ARRAY:
        return [_decode(element, None, item) for item in value]
    if code == TypeCode.BYTES:
        return base64.b64decode(value)
    if code == TypeCode.TIMESTAMP:
        return utc(value)
    if code == TypeCode.JSON:
        serialize = getattr(value, "serialize", None)
        return json.loads(serialize()) if callable(serialize) else value
    return value


def decode_row(fields: Sequence[Any], row: Sequence[Any]) -> tuple[Any, ...]:
    """One result row as Python values, by the result's field types."""
    return tuple(
        _decode(
            field.type_.code,
            field.type_.array_element_type.code if field.type_.code == TypeCode.ARRAY else None,
            value,
        )
        for field, value in zip(fields, row)
    )


def map_error(error: Exception) -> TxqueueError:
    """The most specific txqueue error for a client error."""
    message = str(getattr(error, "message", None) or error)
    if isinstance(error, api.Aborted):
        return Aborted(message)
    if isinstance(error, api.AlreadyExists):
        return AlreadyExists(message)
    if isinstance(error, api.NotFound):
        return NotFound(message)
    if isinstance(error, (api.InvalidArgument, api.BadRequest)):
        return InvalidArgument(message)
    if isinstance(error, api.FailedPrecondition):
        return FailedPrecondition(message)
    if isinstance(error, api.OutOfRange):
        return OutOfRange(message)
    if isinstance(error, api.DeadlineExceeded):
        return DeadlineExceeded(message)
    if isinstance(error, (api.ServiceUnavailable, api.RetryError)):
        return Unavailable(message)
    return Unavailable(f"Cloud Spanner failed: {message}")


@contextmanager
def map_errors() -> Iterator[None]:
    """Client errors raised inside become txqueue errors (the original as ``__cause__``);
    so does the client's refusal of a value it cannot encode."""
    try:
        yield
    except api.GoogleAPIError as error:
        raise map_error(error) from error
    except (ValueError, TypeError, OverflowError) as error:  # the client refusing a value
        raise InvalidArgument(f"Cloud Spanner cannot take the value: {error}") from error
