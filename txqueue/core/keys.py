"""Keys and times as JSON, one encoding for the dashboard, its HTTP API and the CLI.

A key is a JSON array of its parts in primary-key order; each part is read by its column's
type: bytes as base64, timestamps as RFC 3339, dates ISO 8601, NUMERIC as text, the rest as
JSON's own numbers, strings and booleans (``[124, "welcome-email"]``).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from txqueue.core.schema import ColumnType, Table
from txqueue.core.values import MAX_JSON_NESTING
from txqueue.errors import InvalidArgument

__all__ = ["key_from_json", "key_to_json", "load_json", "parse_key", "rfc3339", "whole_key"]


def load_json(text: str | bytes, field: str) -> Any:
    """``json.loads(text)``, refusing (InvalidArgument naming ``field``) a value nested deeper
    than `MAX_JSON_NESTING` levels, JSON's limit everywhere in txqueue, before anything
    recurses into it; text that is not JSON raises ValueError, for the caller to word."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidArgument(_too_deep(field)) from None
    if _openings(text) > MAX_JSON_NESTING and _nesting(value) > MAX_JSON_NESTING:
        raise InvalidArgument(_too_deep(field))
    return value


def _too_deep(field: str) -> str:
    return f"{field} is nested deeper than {MAX_JSON_NESTING} levels of arrays and objects"


def _openings(text: str | bytes) -> int:
    """How many '[' and '{' the text holds: at most that many levels (a quick bound)."""
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def _nesting(value: Any) -> int:
    """How many levels of arrays and objects ``value`` nests (stops past the limit)."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest = 0
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_NESTING:
            break
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def rfc3339(moment: datetime | None) -> str | None:
    """A timestamp as RFC 3339 in UTC (``2026-12-03T09:01:03.123456Z``)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def key_to_json(table: Table, key: tuple[Any, ...]) -> list[Any]:
    """A primary key as a JSON array: bytes as base64, timestamps as RFC 3339, dates ISO."""
    return [_part_to_json(part) for part in key]


def _part_to_json(part: Any) -> Any:
    if isinstance(part, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(part)).decode("ascii")
    if isinstance(part, datetime):
        return rfc3339(part)
    if isinstance(part, date):
        return part.isoformat()
    if isinstance(part, Decimal):
        return str(part)
    return part


def key_from_json(table: Table, value: Any, field: str = "key") -> tuple[Any, ...]:
    """A JSON array back into a key of ``table``, each part read by its column's type
    (InvalidArgument naming ``field`` when a part cannot be one)."""
    if not isinstance(value, list):
        raise InvalidArgument(f"{field} must be a JSON array of the key's parts, got {value!r}")
    columns = table.key_columns
    if len(value) > len(columns):
        raise InvalidArgument(
            f"{field} of {table.name} has at most {len(columns)} part(s), got {len(value)}"
        )
    return tuple(
        _part_from_json(column.type, part, f"{field}[{index}]")
        for index, (column, part) in enumerate(zip(columns, value))
    )


def _part_from_json(kind: ColumnType, part: Any, field: str) -> Any:
    if not isinstance(part, str):
        return part  # numbers, bools and null are JSON's own; the library checks their type
    try:
        if kind is ColumnType.BYTES:
            return base64.b64decode(part, validate=True)
        if kind is ColumnType.TIMESTAMP:
            moment = datetime.fromisoformat(part.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                raise ValueError("no time zone")
            return moment
        if kind is ColumnType.DATE:
            return date.fromisoformat(part)
        if kind is ColumnType.NUMERIC:
            return Decimal(part)
    except (ValueError, binascii.Error, ArithmeticError) as error:
        raise InvalidArgument(f"{field} is not a {kind.value} value: {part!r}") from error
    return part


def parse_key(table: Table, text: str, field: str = "key") -> tuple[Any, ...]:
    """A key written as JSON (``[124, "welcome"]``); InvalidArgument when it is not one."""
    try:
        value = load_json(text, field)
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"{field} must be a JSON array, got {text!r}") from error
    return whole_key(table, value, field)


def whole_key(table: Table, value: Any, field: str = "key") -> tuple[Any, ...]:
    """A complete key of ``table`` from its JSON array (every key column given)."""
    key = key_from_json(table, value, field)
    if len(key) != len(table.key_columns):
        raise InvalidArgument(
            f"{field} of {table.name} must have {len(table.key_columns)} part(s), got {len(key)}"
        )
    return key
