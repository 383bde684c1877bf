"""Values and errors at the PostgreSQL boundary (shared by both faces' drivers)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import psycopg
from psycopg import errors as pg
from psycopg.types.json import Jsonb

from txqueue.core.schema import Column, ColumnType, Table
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
from txqueue.models import Message

__all__ = ["decode", "encode", "map_error", "map_errors", "messages_from_rows"]


def map_error(error: Exception) -> TxqueueError:
    """The most specific txqueue error for a psycopg error."""
    text = str(error).strip()
    if isinstance(error, pg.UniqueViolation):
        return AlreadyExists(f"row already exists: {text}")
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
        return Jsonb(value)
    return value


def decode(column: Column, value: Any) -> Any:
    """A value psycopg returned, as the Python value of its column type."""
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def utc(value: datetime) -> datetime:
    return value.astimezone(timezone.utc)


def messages_from_rows(table: Table, rows: list[tuple[Any, ...]]) -> list[Message]:
    """Messages from receive's RETURNING rows, oldest deliver time first."""
    keys = table.key_columns
    payload = table.payload_column
    width = len(keys)
    messages = [
        Message(
            queue=table.name,
            key=tuple(decode(c, v) for c, v in zip(keys, row[:width])),
            payload=decode(payload, row[width]),
            deliver_time=utc(row[width + 1]),
            lease_expiration=utc(row[width + 2]),
            lease_token=row[width + 3],
            delivery_count=row[width + 4],
        )
        for row in rows
    ]
    messages.sort(key=lambda m: m.deliver_time)
    return messages
