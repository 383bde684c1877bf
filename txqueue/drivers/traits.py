"""What sets one engine apart, as one object: the answers the layers above a driver need.

Everything outside ``txqueue.drivers`` that must do something differently per engine asks the
engine's `EngineTraits` (found through `txqueue.drivers.engines`) instead of comparing engine
names, so adding an engine is a folder under ``txqueue/drivers`` and a registry entry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

from txqueue.core.durations import from_micros, to_micros
from txqueue.core.schema import Column
from txqueue.core.url import DatabaseUrl

if TYPE_CHECKING:
    from txqueue.drivers._async_protocol import AsyncDriver
    from txqueue.drivers._sync_protocol import Driver

__all__ = ["Clock", "EngineTraits"]

#: The pinned time of `txqueue.connect(url, clock=...)`, or None for the database's own.
Clock = Callable[[], datetime | None] | None


@dataclass(frozen=True, eq=False)
class EngineTraits:
    """One engine's traits. ``name`` is what `Database.engine` returns."""

    #: The engine's name in txqueue (`Database.engine`), e.g. ``sqlite``.
    name: str
    #: The engine's own name, for messages: ``SQLite``.
    display_name: str
    #: The URL schemes that choose this engine, lower case.
    schemes: tuple[str, ...]
    #: OpenTelemetry's ``db.system.name`` for the engine.
    db_system: str
    #: The parameter marker of the engine's DB-API driver (``?`` or ``%s``).
    marker: str
    #: True when one transaction writes at a time (callers serialise their writers).
    one_writer: bool
    #: True when the engine has LISTEN/NOTIFY (a receiver waits on it, not on a socket).
    listens: bool
    #: True when a TIMESTAMP is stored as INTEGER microseconds since the epoch (UTC).
    times_as_micros: bool
    #: True when TIMESTAMP, JSON and arrays are emulated (INTEGER µs and JSON text), so the
    #: SQL translator rewrites the expressions that use them into the engine's functions.
    emulates_types: bool
    #: True when names are folded to lower case (quoted, as txqueue quotes every name).
    lower_case_names: bool
    #: True when ``%`` in engine SQL must be doubled (the DB-API driver's marker style).
    escape_percent: bool
    #: The name prefix the engine keeps for its own objects, in any case: SQLite refuses
    #: tables named ``sqlite_…``; PostgreSQL looks unqualified names up in ``pg_catalog``
    #: first, so a ``pg_…`` table could be hidden by a system one.
    reserved_prefix: str
    #: True when the URL's target is a file, created by connecting when missing.
    file_target: bool
    #: The URL option that sizes the connection pool, or None when there is no pool.
    pool_size_option: str | None
    #: Splits this engine's URL into target and txqueue's options (InvalidArgument if bad).
    parse: Callable[[str, SplitResult, dict[str, str]], DatabaseUrl]
    #: Opens the asyncio driver (`txqueue.drivers.protocol.AsyncDriver`) for a parsed URL.
    open_async_driver: Callable[[DatabaseUrl, Clock], Awaitable[AsyncDriver]]
    #: Opens the sync driver (`txqueue.drivers.protocol.Driver`) for a parsed URL.
    open_driver: Callable[[DatabaseUrl, Clock], Driver]
    #: The sqlglot dialect that writes the engine's SQL (loaded on first use).
    sqlglot_dialect: Callable[[], Any]
    #: Encodes a query parameter as the engine takes it: ``(value, is_json) -> value``.
    encode_parameter: Callable[[Any, bool], Any]
    #: Decodes a stored value by its declared column, or None when the engine's DB-API
    #: driver already returns the Python value.
    decoder: Callable[[], Callable[[Column, Any], Any] | None]
    #: True when the SQL front end writes its parameters as ``?`` markers, in the order they
    #: appear, and binds them as a list (the driver numbers them: ``$1``, ``$2`` …); False
    #: when it binds them by name (``@name``, ``%(name)s``, ``:name``).
    positional_markers: bool = False
    #: The prefix of the hidden columns txqueue adds to a queue's table (lease state, the
    #: last error: ``_txq_last_error``); Spanner's names cannot start with ``_``.
    hidden_column_prefix: str = "_txq_"

    def engine_sql(self, sql: str) -> str:
        """``sql`` written with ``?`` markers, in the engine's marker style."""
        return sql if self.marker == "?" else sql.replace("?", self.marker)

    def engine_time(self, moment: datetime) -> Any:
        """A TIMESTAMP parameter as the engine stores it."""
        return to_micros(moment) if self.times_as_micros else moment

    @staticmethod
    def read_time(value: Any) -> datetime:
        """A TIMESTAMP as read back (integer µs or a datetime), as an aware UTC datetime."""
        if isinstance(value, datetime):
            return value.astimezone(timezone.utc)
        return from_micros(int(value))

    def with_pool_size(self, url: str, size: int) -> str:
        """``url`` with a pool of ``size`` connections, unless it sets one itself or the
        engine has no pool."""
        option = self.pool_size_option
        if option is None:
            return url
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        if any(key == option for key, _ in query):
            return url
        return urlunsplit(parts._replace(query=urlencode([*query, (option, str(size))])))
