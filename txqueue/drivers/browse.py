"""Checking the arguments of message browsing, shared by both faces and both drivers.

A browse reads a queue in primary-key order without leasing anything: keyset paging from the
last key of the previous page (never OFFSET), optionally narrowed to a key prefix and a state.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from txqueue.core.schema import ColumnType, Table
from txqueue.core.values import check_key, check_value
from txqueue.drivers.base import MESSAGE_STATES, BrowseParams
from txqueue.errors import InvalidArgument

__all__ = ["MAX_PAGE", "browse_params", "lookup_params", "prefix_end", "string_prefix"]

#: The most messages one page may hold.
MAX_PAGE = 1000


def browse_params(
    table: Table,
    state: object,
    key_prefix: object,
    after: object,
    limit: object,
    now: datetime | None,
) -> BrowseParams:
    """The checked parameters of ``list_messages``; InvalidArgument names the field and rule."""
    if state is not None and state not in MESSAGE_STATES:
        raise InvalidArgument(
            f"state must be one of {', '.join(MESSAGE_STATES)} (or None for all), got {state!r}"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be an int from 1 to {MAX_PAGE}, got {limit!r}")
    prefix = _prefix(table, key_prefix)
    checked_after = None if after is None else check_key(table, after, "after")
    return BrowseParams(table, state, prefix, checked_after, limit, now)


def lookup_params(table: Table, key: object, now: datetime | None) -> BrowseParams:
    """The parameters reading the one message whose key is ``key``."""
    return BrowseParams(table, None, check_key(table, key), None, 1, now, exact=True)


def _prefix(table: Table, key_prefix: object) -> tuple[Any, ...]:
    if key_prefix is None:
        return ()
    if not isinstance(key_prefix, (tuple, list)):
        key_prefix = (key_prefix,)
    columns = table.key_columns
    if len(key_prefix) > len(columns):
        names = ", ".join(c.name for c in columns)
        raise InvalidArgument(
            f"key_prefix of {table.name} may hold at most {len(columns)} value(s) ({names}),"
            f" got {len(key_prefix)}"
        )
    checked = []
    for i, (column, part) in enumerate(zip(columns, key_prefix)):
        if part is None:
            raise InvalidArgument(f"key_prefix[{i}] ({column.name}) must not be NULL")
        checked.append(check_value(column, part, f"key_prefix[{i}]"))
    return tuple(checked)


def string_prefix(table: Table, params: BrowseParams) -> str | None:
    """The final prefix value when it is matched as a string prefix (else None)."""
    if params.exact or not params.key_prefix:
        return None
    last = params.key_prefix[-1]
    column = table.key_columns[len(params.key_prefix) - 1]
    if column.type is ColumnType.STRING and not column.array and isinstance(last, str):
        return last
    return None


def prefix_end(prefix: str) -> str | None:
    """The least string above every string starting with ``prefix`` in code-point order
    (UTF-8 byte order, SQLite's BINARY and PostgreSQL's "C" collation); None when there is
    none (the prefix is all U+10FFFF). ``col >= prefix AND col < end`` is then an index range
    matching exactly the strings starting with ``prefix``, ``%`` and ``_`` included."""
    characters = list(prefix)
    while characters:
        code = ord(characters[-1]) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates are not characters: skip past them
            code = 0xE000
        if code <= 0x10FFFF:
            characters[-1] = chr(code)
            return "".join(characters)
        characters.pop()
    return None
