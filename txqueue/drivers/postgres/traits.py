"""PostgreSQL's traits: many writers, native TIMESTAMP and JSONB, ``%s`` markers, LISTEN, a
connection pool sized by ``?pool_size=``. psycopg is imported only when a driver is opened
or a JSON parameter is encoded."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlencode, urlunsplit

from txqueue.core.schema import Column
from txqueue.core.url import DatabaseUrl, integer_option
from txqueue.drivers.postgres.names import DISPLAY_NAME, RESERVED_PREFIX
from txqueue.drivers.traits import Clock, EngineTraits
from txqueue.errors import InvalidArgument

if TYPE_CHECKING:
    from txqueue.drivers._async_protocol import AsyncDriver
    from txqueue.drivers._sync_protocol import Driver

__all__ = ["TRAITS"]

_OPTIONS = {"pool_size", "pool_min_size"}
_NEEDS_PSYCOPG = "PostgreSQL support needs psycopg: pip install 'txqueue[postgres]'"


def _parse(url: str, parts: SplitResult, query: dict[str, str]) -> DatabaseUrl:
    """txqueue's options apart; the rest of the query stays in the libpq URL."""
    options = {k: v for k, v in query.items() if k in _OPTIONS}
    rest = urlencode([(k, v) for k, v in query.items() if k not in _OPTIONS])
    target = urlunsplit(("postgresql", parts.netloc, parts.path, rest, parts.fragment))
    return DatabaseUrl(TRAITS.name, target, options)


async def _open_async_driver(url: DatabaseUrl, clock: Clock) -> AsyncDriver:
    try:
        from txqueue.drivers.postgres._async import AsyncPostgresDriver
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise InvalidArgument(_NEEDS_PSYCOPG) from error
    driver = AsyncPostgresDriver(
        url.target, pool_size=integer_option(url, "pool_size", 10), clock=clock
    )
    await driver.open()
    return driver


def _open_driver(url: DatabaseUrl, clock: Clock) -> Driver:
    try:
        from txqueue.drivers.postgres._sync import PostgresDriver
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise InvalidArgument(_NEEDS_PSYCOPG) from error
    driver = PostgresDriver(url.target, pool_size=integer_option(url, "pool_size", 10), clock=clock)
    driver.open()
    return driver


def _dialect() -> Any:
    from sqlglot.dialects.postgres import Postgres

    return Postgres


def _encode_parameter(value: Any, is_json: bool) -> Any:
    """A query parameter as psycopg takes it: JSON as JSONB, a tuple as an array."""
    if is_json or isinstance(value, dict):
        from psycopg.types.json import Jsonb

        return Jsonb(value)
    return list(value) if isinstance(value, tuple) else value


def _decoder() -> Callable[[Column, Any], Any] | None:
    return None  # psycopg returns Python values of the declared types


TRAITS = EngineTraits(
    name="postgres",
    display_name=DISPLAY_NAME,
    schemes=("postgresql", "postgres", "postgresql+psycopg"),
    db_system="postgresql",
    marker="%s",
    one_writer=False,
    listens=True,
    times_as_micros=False,
    emulates_types=False,
    lower_case_names=True,
    escape_percent=True,
    reserved_prefix=RESERVED_PREFIX,
    file_target=False,
    pool_size_option="pool_size",
    parse=_parse,
    open_async_driver=_open_async_driver,
    open_driver=_open_driver,
    sqlglot_dialect=_dialect,
    encode_parameter=_encode_parameter,
    decoder=_decoder,
)
