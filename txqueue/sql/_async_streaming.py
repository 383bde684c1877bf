"""The rows of a RECEIVE_ query as they arrive, on the asyncio face: iterating, closing early.

``txqueue.sql.results`` builds the public result sets on this (``AsyncStreamingResultSet``)
and on its sync twin (``StreamingResultSet``).

The sync twin ``txqueue/sql/_sync_streaming.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, TypeVar

from txqueue.models import Message

__all__ = ["AsyncRowStream", "Row"]

Row = tuple[Any, ...]
Stream = TypeVar("Stream", bound="AsyncRowStream")


class AsyncRowStream:
    """One pass over the rows of the messages received, each kept in ``rows`` as it is read.

    Closing (or leaving the ``with`` block) ends the stream early, which hands back the leases
    of messages not yet read. A subclass holds the slots ``rows``, ``_row`` and ``_messages``.
    """

    __slots__ = ()
    rows: list[Row]
    _row: Callable[[Message], Row]
    _messages: AsyncIterator[Message]

    def __aiter__(self) -> AsyncIterator[Row]:
        return self

    async def __anext__(self) -> Row:
        row = self._row(await self._messages.__anext__())
        self.rows.append(row)
        return row

    async def aclose(self) -> None:
        """End the stream; the leases of messages not yet read are handed back."""
        close = getattr(self._messages, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self: Stream) -> Stream:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
