# Generated from txqueue/sql/_async_streaming.py by tools/async_to_sync.py; do not edit.
"""The rows of a RECEIVE_ query as they arrive, on the sync face: iterating, closing early.

``txqueue.sql.results`` builds the public result sets on this (``StreamingResultSet``)
and on its sync twin (``StreamingResultSet``).

Generated from ``txqueue/sql/_async_streaming.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from txqueue.models import Message

__all__ = ["Row", "RowStream"]

Row = tuple[Any, ...]
Stream = TypeVar("Stream", bound="RowStream")


class RowStream:
    """One pass over the rows of the messages received, each kept in ``rows`` as it is read.

    Closing (or leaving the ``with`` block) ends the stream early, which hands back the leases
    of messages not yet read. A subclass holds the slots ``rows``, ``_row`` and ``_messages``.
    """

    __slots__ = ()
    rows: list[Row]
    _row: Callable[[Message], Row]
    _messages: Iterator[Message]

    def __iter__(self) -> Iterator[Row]:
        return self

    def __next__(self) -> Row:
        row = self._row(self._messages.__next__())
        self.rows.append(row)
        return row

    def close(self) -> None:
        """End the stream; the leases of messages not yet read are handed back."""
        close = getattr(self._messages, "close", None)
        if close is not None:
            close()

    def __enter__(self: Stream) -> Stream:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
