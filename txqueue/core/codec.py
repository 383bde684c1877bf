"""Typed JSON for keys and payloads kept outside their queue (dead letters, archives).

JSON loses types (bytes, timestamps, decimals), so values are encoded by their declared
column type and decoded the same way: a round trip returns equal Python values.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
from collections.abc import Sequence
from typing import Any

from txqueue.core.schema import Column, ColumnType, Table

__all__ = ["dump_key", "dump_payload", "load_key", "load_payload"]


def _to_json(column: Column, value: Any) -> Any:
    if value is None:
        return None
    if column.array:
        element = Column(column.name, column.type)
        return [_to_json(element, item) for item in value]
    kind = column.type
    if kind is ColumnType.BYTES:
        return base64.b64encode(bytes(value)).decode()
    if kind in (ColumnType.TIMESTAMP, ColumnType.DATE):
        return value.isoformat()
    if kind is ColumnType.NUMERIC:
        return str(value)
    return value


def _from_json(column: Column, value: Any) -> Any:
    if value is None:
        return None
    if column.array:
        element = Column(column.name, column.type)
        return [_from_json(element, item) for item in value]
    kind = column.type
    if kind is ColumnType.BYTES:
        return base64.b64decode(value)
    if kind is ColumnType.TIMESTAMP:
        return _dt.datetime.fromisoformat(value)
    if kind is ColumnType.DATE:
        return _dt.date.fromisoformat(value)
    if kind is ColumnType.NUMERIC:
        return decimal.Decimal(value)
    return value


def dump_key(table: Table, key: Sequence[Any]) -> str:
    """A key as compact JSON text (stable: equal keys give equal text)."""
    return json.dumps(
        [_to_json(c, v) for c, v in zip(table.key_columns, key)], separators=(",", ":")
    )


def load_key(table: Table, text: str) -> tuple[Any, ...]:
    return tuple(_from_json(c, v) for c, v in zip(table.key_columns, json.loads(text)))


def dump_payload(table: Table, payload: Any) -> str:
    return json.dumps(_to_json(table.payload_column, payload))


def load_payload(table: Table, text: str) -> Any:
    return _from_json(table.payload_column, json.loads(text))
