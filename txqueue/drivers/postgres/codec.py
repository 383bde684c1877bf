"""Values and errors at the PostgreSQL boundary (shared by both faces' drivers)."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
from psycopg import errors as pg
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types.json import Jsonb

from txqueue.core.leases import (
    LOCATOR_START,
    STORED_TOKEN_LENGTH,
    TOKEN_EXPIRATION_DIGITS,
    handed_out_token,
    split_token,
    token_expiration_micros,
)
from txqueue.core.lengths import length_refusal
from txqueue.core.schema import Column, ColumnType, Table
from txqueue.core.values import JsonText
from txqueue.errors import (
    Aborted,
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TxqueueError,
    Unavailable,
)
from txqueue.models import Message, new_message
from txqueue.telemetry import remember

__all__ = [
    "checked_token_parts",
    "decode",
    "encode",
    "map_error",
    "map_errors",
    "messages_from_rows",
    "refused_for_good",
    "stored_token",
    "stored_token_array",
    "tid_array",
    "token_location",
]

UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def map_error(error: Exception) -> TxqueueError:
    """The most specific txqueue error for a psycopg error."""
    text = str(error).strip()
    if isinstance(error, pg.UniqueViolation):
        return AlreadyExists(f"row already exists: {text}")
    if isinstance(error, pg.CheckViolation):
        refusal = length_refusal(error.diag.constraint_name, error.diag.table_name)
        if refusal is not None:
            return refusal
    if isinstance(error, pg.ForeignKeyViolation):
        return FailedPrecondition(
            f"interleaving rule violated (parent row missing or has children): {text}"
        )
    if isinstance(error, (pg.SerializationFailure, pg.DeadlockDetected, pg.LockNotAvailable)):
        return Aborted(text)
    if isinstance(error, pg.QueryCanceled):
        return DeadlineExceeded(text)
    if isinstance(error, pg.UndefinedTable):
        return NotFound(text)
    if isinstance(
        error,
        (
            pg.SyntaxError,
            pg.UndefinedColumn,
            pg.UndefinedFunction,
            pg.DataError,
            pg.IntegrityError,
            pg.ProgrammingError,
        ),
    ):
        return InvalidArgument(text)
    if isinstance(error, psycopg.OperationalError):
        return Unavailable(text or "connection to PostgreSQL failed")
    try:
        from psycopg_pool import PoolTimeout

        if isinstance(error, PoolTimeout):
            return Unavailable(f"no PostgreSQL connection available: {text}")
    except ImportError:  # pragma: no cover
        pass
    return Unavailable(text)


#: What a server says when it refuses a connection for good: no such database or role, a
#: wrong password, no pg_hba.conf entry. libpq reports a failed connect as text only,
#: without its SQLSTATE; a server whose messages are in another language is waited for, as
#: one that is down is.
_REFUSED_FOR_GOOD = re.compile(
    r'FATAL:\s+(?:(?:database|role) "[^"]*" does not exist'
    r"|password authentication failed|no pg_hba\.conf entry)"
)


def refused_for_good(error: psycopg.OperationalError) -> bool:
    """Whether a failed connect was the server's refusal that no wait can mend."""
    return _REFUSED_FOR_GOOD.search(str(error)) is not None


@contextmanager
def map_errors() -> Iterator[None]:
    """Translate psycopg errors raised inside the block."""
    try:
        yield
    except TxqueueError:
        raise
    except (psycopg.Error, OSError) as error:
        raise map_error(error) from error
    except Exception as error:
        if type(error).__module__.startswith("psycopg_pool"):
            raise map_error(error) from error
        raise


def encode(column: Column, value: Any) -> Any:
    """A checked Python value as psycopg should send it."""
    if value is not None and column.type is ColumnType.JSON and not column.array:
        return Jsonb(value, _as_is) if isinstance(value, JsonText) else Jsonb(value)
    return value


def _as_is(text: str) -> str:
    """The ``dumps`` of JSON already serialised (``core.values.JsonText``)."""
    return text


def decode(column: Column, value: Any) -> Any:
    """A value psycopg returned, as the Python value of its column type."""
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def stored_token(token: str | None) -> str | None:
    """The part of a handed-out token that the row stores (without its ".location")."""
    return token if token is None else split_token(token)[0]


def token_location(token: str) -> str | None:
    """The ctid a token carries, None if it is not one of ours or has no location."""
    return checked_token_parts(token)[1] if token_expiration_micros(token) is not None else None


def checked_token_parts(token: str) -> tuple[str, str | None]:
    """Stored part and ctid (``(page,item)`` text) of a token already known to be ours.

    A locator wider than a ctid's 48 bits was never handed out: it points nowhere, (0,0).
    """
    stored, locator = split_token(token)
    if not locator:
        return stored, None
    number = int(locator, 16)
    if number >= 1 << 48:
        return stored, "(0,0)"
    return stored, f"({number >> 16},{number & 0xFFFF})"


class TidArray(bytes):
    """Row locations as PostgreSQL's binary ``tid[]``, built whole (see ``tid_array``)."""


class TextArray(bytes):
    """Strings as PostgreSQL's binary ``text[]``, built whole (see ``stored_token_array``)."""


class _BuiltDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


class _TidArrayDumper(_BuiltDumper):
    oid = 1010  # tid[]


class _TextArrayDumper(_BuiltDumper):
    oid = 1009  # text[]


# Private types: registering them globally changes nothing else psycopg sends.
psycopg.adapters.register_dumper(TidArray, _TidArrayDumper)
psycopg.adapters.register_dumper(TextArray, _TextArrayDumper)

_TID_LENGTH = b"\x00\x00\x00\x06"  # each element's length: a tid is 6 bytes
_NOWHERE = bytes(6)  # (0,0): item 0 never holds a row
_HEADER = struct.Struct(">iIIii")  # dimensions, flags, element type, length, lower bound
_EMPTY = struct.Struct(">iII")  # no dimensions: an empty array
_TID, _TEXT = 27, 25


def tid_array(tokens: list[str]) -> TidArray:
    """The locations carried by handed-out tokens (already checked to be ours, or ""), as
    one binary ``tid[]``: a token's locator is its row's 6-byte ctid in hex, so each element
    is that text decoded, where psycopg's array dumper took ~0.25 µs an element and the
    locator's text form as much again. A token without a usable locator points nowhere."""
    locations = []
    for token in tokens:
        locator = token[LOCATOR_START:]
        locations.append(
            bytes.fromhex(locator.rjust(12, "0")) if 0 < len(locator) <= 12 else _NOWHERE
        )
    if not locations:
        return TidArray(_EMPTY.pack(0, 0, _TID))
    return TidArray(
        _HEADER.pack(1, 0, _TID, len(locations), 1) + _TID_LENGTH + _TID_LENGTH.join(locations)
    )


def stored_token_array(tokens: list[str]) -> TextArray:
    """The stored parts of handed-out tokens (checked to be ours, or "") as one binary
    ``text[]``. The tokens of one receive share theirs: the array is then one element
    repeated, which costs next to nothing to build."""
    if not tokens:
        return TextArray(_EMPTY.pack(0, 0, _TEXT))
    header = _HEADER.pack(1, 0, _TEXT, len(tokens), 1)
    stored = [token[:STORED_TOKEN_LENGTH] for token in tokens]
    if stored.count(stored[0]) == len(stored):
        return TextArray(header + _text_element(stored[0]) * len(stored))
    return TextArray(header + b"".join(map(_text_element, stored)))


def _text_element(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(4, "big") + data


def utc(value: datetime) -> datetime:
    """``value`` in UTC (our pooled connections run with TimeZone=UTC: usually no work)."""
    return value if value.tzinfo is UTC else value.astimezone(UTC)


#: Column types whose values psycopg already returns as txqueue's Python values.
_AS_RETURNED = frozenset({ColumnType.INT64, ColumnType.STRING, ColumnType.BOOL})


def messages_from_rows(table: Table, rows: list[tuple[Any, ...]]) -> list[Message]:
    """Messages from receive's RETURNING rows (read in binary), oldest deliver time first.

    A row ends with the stored token, the delivery count and the row's ctid (6 bytes: block,
    item); the token handed out is ``<stored>.<ctid as hex>``. Every row of one statement
    shares the stored token, hence the lease expiration it carries.
    """
    keys = table.key_columns
    payload = table.payload_column
    width = len(keys)
    plain_keys = all(c.type in _AS_RETURNED and not c.array for c in keys)
    name = table.name
    messages = []
    expirations: dict[str, datetime] = {}
    for row in rows:
        deliver_time, stored = row[width + 1], row[width + 2]
        expiration = expirations.get(stored)
        if expiration is None:
            expiration = expirations[stored] = _EPOCH + timedelta(
                microseconds=int(stored[:TOKEN_EXPIRATION_DIGITS], 16)
            )
        messages.append(
            new_message(
                name,
                row[:width] if plain_keys else tuple(map(decode, keys, row[:width])),
                decode(payload, row[width]),
                deliver_time if deliver_time.tzinfo is UTC else deliver_time.astimezone(UTC),
                expiration,
                handed_out_token(stored, int.from_bytes(row[width + 4], "big")),
                row[width + 3],
            )
        )
        if row[width + 5] is not None:
            remember(messages[-1].lease_token, row[width + 5])
    messages.sort(key=_deliver_time)
    return messages


def _deliver_time(message: Message) -> datetime:
    return message.deliver_time
