"""Results of translated statements: rows typed by their declared columns, and streams.

A query's rows come back as Python values of the columns' declared types (on SQLite a
TIMESTAMP is stored as microseconds and returned as an aware UTC datetime). A RECEIVE_ query
returns a stream: rows arrive as messages become ready, until its max_duration ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from txqueue.core.schema import Column
from txqueue.drivers.engines import traits_named
from txqueue.errors import InvalidArgument
from txqueue.models import Message, ResultSet
from txqueue.sql._async_streaming import AsyncRowStream, Row
from txqueue.sql._sync_streaming import RowStream
from txqueue.sql.compiler import Output

__all__ = ["AsyncStreamingResultSet", "QueryPlan", "StreamingResultSet"]


@dataclass(frozen=True)
class QueryPlan:
    """Engine SQL for a query, its bound values (by name, or a list for an engine that takes
    ``?`` markers in order), and its output columns (None: unknown)."""

    sql: str
    params: Any
    outputs: list[Output] | None
    engine: str

    def result(self, raw: ResultSet) -> ResultSet:
        """The engine's rows with the statement's column names and typed values."""
        outputs = self.outputs
        if outputs is None or len(outputs) != len(raw.fields):
            outputs = [Output(None, None)] * len(raw.fields)
        fields = [o.name if o.name is not None else f for o, f in zip(outputs, raw.fields)]
        decoders = [self._decoder(o.column) for o in outputs]
        rows = [tuple(d(v) for d, v in zip(decoders, row)) for row in raw]
        return ResultSet(fields, rows)

    def _decoder(self, column: Column | None) -> Callable[[Any], Any]:
        decode = None if column is None else traits_named(self.engine).decoder()
        if column is None or decode is None:  # the engine's driver returns typed values
            return _plain

        def typed(value: Any) -> Any:
            try:
                return _plain(decode(column, value))
            except (TypeError, ValueError, OverflowError):
                return _plain(value)  # not what the column type promises: leave it as is

        return typed


def _plain(value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc)
    return value


class StreamingResultSet(RowStream, ResultSet):
    """Rows of a RECEIVE_ query, arriving while you iterate (one pass).

    ``rows`` holds the rows received so far; ``len()`` and ``one()`` wait for the whole
    stream. ``close()`` (or leaving a ``with`` block) ends it early and hands back leases of
    messages not yet yielded.
    """

    __slots__ = ("_messages", "_read", "_row")

    def __init__(
        self, fields: Sequence[str], row: Callable[[Message], Row], messages: Iterator[Message]
    ) -> None:
        super().__init__(list(fields), [])
        self._row = row
        self._messages = messages
        self._read = 0  # rows handed to the iterating caller so far

    def __next__(self) -> Row:
        # Rows that len() already waited for come first: list(result) asks for len() before
        # it iterates, and must still get every row.
        row = self.rows[self._read] if self._read < len(self.rows) else RowStream.__next__(self)
        self._read += 1
        return row

    def __len__(self) -> int:
        with suppress(StopIteration):
            while True:
                RowStream.__next__(self)
        return len(self.rows)

    def one(self) -> Row:
        len(self)
        return super().one()


class AsyncStreamingResultSet(AsyncRowStream):
    """Rows of a RECEIVE_ query on the asyncio face: ``async for row in result``."""

    __slots__ = ("_messages", "_row", "fields", "rows")

    def __init__(
        self,
        fields: Sequence[str],
        row: Callable[[Message], Row],
        messages: AsyncIterator[Message],
    ) -> None:
        self.fields = list(fields)
        self.rows: list[Row] = []
        self._row = row
        self._messages = messages

    def __iter__(self) -> Iterator[Row]:
        raise InvalidArgument("a RECEIVE_ result arrives over time: iterate it with 'async for'")
