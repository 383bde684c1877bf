"""Declared lengths as database constraints: STRING(n) in characters, BYTES(n) in bytes.

Each driver puts a named CHECK constraint on every column with a declared length, so the
database refuses a longer value on every write path, the application's own connection
included. The constraint's name is its own explanation (``Payload BYTES(1)``): that is what
an engine's message shows to a foreign connection, and what a driver reads back to turn the
engine's refusal into an ``InvalidArgument`` naming the column and its type.
"""

from __future__ import annotations

import hashlib
import re

from txqueue.core.schema import Column, ColumnType
from txqueue.errors import InvalidArgument

__all__ = ["constraint_name", "length_refusal", "limited"]

_LABEL = re.compile(r"(?P<column>\S+) (?P<type>STRING|BYTES)\((?P<length>[0-9]+)\)\Z")


def limited(column: Column) -> bool:
    """Whether the database checks ``column``'s length with a constraint (a scalar
    STRING(n) or BYTES(n); array elements are checked by txqueue's own writes only)."""
    return (
        column.length is not None
        and not column.array
        and column.type in (ColumnType.STRING, ColumnType.BYTES)
    )


def constraint_name(column: Column, max_bytes: int | None = None) -> str:
    """The constraint's name, ``<column> <TYPE>(<n>)``, within ``max_bytes`` if given (a
    long column name is shortened and keeps a digest of itself, so names stay distinct)."""
    rule = f" {column.type.value}({column.length})"
    name = column.name + rule
    if max_bytes is None or len(name.encode()) <= max_bytes:
        return name
    digest = hashlib.sha1(column.name.encode()).hexdigest()[:8]
    room = max_bytes - len(rule) - len(digest) - 1
    return f"{column.name[:room]}~{digest}{rule}"


def length_refusal(constraint: str | None, table: str | None = None) -> InvalidArgument | None:
    """The InvalidArgument for a violated length constraint named ``constraint``, or None
    when the name is not one of ours."""
    found = _LABEL.match(constraint or "")
    if found is None:
        return None
    length = int(found["length"])
    if found["type"] == "BYTES":
        unit = "byte" if length == 1 else "bytes"
    else:
        unit = "character" if length == 1 else "characters"
    owner = f" of table {table}" if table else ""
    return InvalidArgument(
        f"value too long for column {found['column']} {found['type']}({length}){owner}: "
        f"at most {length} {unit}"
    )
