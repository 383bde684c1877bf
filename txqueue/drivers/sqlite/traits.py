"""SQLite's traits: one writer at a time, TIMESTAMP as INTEGER microseconds, ``?`` markers,
a file as the target. Nothing heavy is imported until a driver is opened."""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import json
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult

from txqueue.core.durations import to_micros
from txqueue.core.schema import Column
from txqueue.core.url import DatabaseUrl, integer_option
from txqueue.drivers.sqlite.names import DISPLAY_NAME, RESERVED_PREFIX
from txqueue.drivers.traits import Clock, EngineTraits
from txqueue.errors import InvalidArgument

if TYPE_CHECKING:
    from txqueue.drivers._async_protocol import AsyncDriver
    from txqueue.drivers._sync_protocol import Driver

__all__ = ["TRAITS"]

_OPTIONS = {"synchronous", "busy_timeout_ms"}


def _parse(url: str, parts: SplitResult, query: dict[str, str]) -> DatabaseUrl:
    if parts.netloc:
        raise InvalidArgument(
            f"SQLite URL {url!r} has a host; write sqlite:///relative.db or sqlite:////abs.db"
        )
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path or path == ":memory:":
        raise InvalidArgument(
            "SQLite URL needs a file path (in-memory databases are not shared between "
            "connections); e.g. sqlite:///app.db"
        )
    if "\x00" in path or "%00" in path:
        raise InvalidArgument(
            f"SQLite URL path {path!r} contains a NUL character (%00); file names cannot"
        )
    unknown = set(query) - _OPTIONS
    if unknown:
        raise InvalidArgument(f"unknown SQLite URL option(s): {', '.join(sorted(unknown))}")
    return DatabaseUrl(TRAITS.name, path, query)


def _driver_options(url: DatabaseUrl) -> tuple[str, str, timedelta]:
    busy = timedelta(milliseconds=integer_option(url, "busy_timeout_ms", 5000))
    return url.target, url.options.get("synchronous", "FULL"), busy


async def _open_async_driver(url: DatabaseUrl, clock: Clock) -> AsyncDriver:
    from txqueue.drivers.sqlite._async import AsyncSqliteDriver

    return AsyncSqliteDriver(*_driver_options(url), clock)


def _open_driver(url: DatabaseUrl, clock: Clock) -> Driver:
    from txqueue.drivers.sqlite._sync import SqliteDriver

    return SqliteDriver(*_driver_options(url), clock)


@functools.cache
def _dialect() -> Any:
    """SQLite with `backtick` names only: a misspelt "name" would silently be a string there."""
    from sqlglot.dialects.sqlite import SQLite

    class _SQLite(SQLite):
        class Tokenizer(SQLite.Tokenizer):
            IDENTIFIERS = ["`"]

    return _SQLite


def _encode_parameter(value: Any, is_json: bool) -> Any:
    """A query parameter as SQLite stores it: TIMESTAMP as µs, JSON and arrays as JSON text,
    DATE as ISO text, NUMERIC as text, BOOL as 0/1."""
    if is_json or isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, _dt.datetime):
        return to_micros(value)
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (list, tuple)):
        return json.dumps([_json_item(item) for item in value])
    if isinstance(value, (int, float, str, bytes)):
        return value
    raise InvalidArgument(f"unsupported parameter value of type {type(value).__name__}")


def _json_item(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (_dt.date, decimal.Decimal)):
        return _encode_parameter(value, False)
    return value


def _decoder() -> Callable[[Column, Any], Any] | None:
    from txqueue.drivers.sqlite.engine import decode

    return decode


TRAITS = EngineTraits(
    name="sqlite",
    display_name=DISPLAY_NAME,
    schemes=("sqlite",),
    db_system="sqlite",
    marker="?",
    one_writer=True,
    listens=False,
    times_as_micros=True,
    emulates_types=True,
    lower_case_names=False,
    escape_percent=False,
    reserved_prefix=RESERVED_PREFIX,
    file_target=True,
    pool_size_option=None,
    parse=_parse,
    open_async_driver=_open_async_driver,
    open_driver=_open_driver,
    sqlglot_dialect=_dialect,
    encode_parameter=_encode_parameter,
    decoder=_decoder,
)
