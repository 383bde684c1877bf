"""Cloud Spanner's traits: many writers, native TIMESTAMP and JSON, ``@name`` parameters,
GoogleSQL as it is. google-cloud-spanner is imported only when a driver is opened."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult

from txqueue.core.schema import Column
from txqueue.core.url import DatabaseUrl
from txqueue.drivers.spanner.names import DISPLAY_NAME, RESERVED_PREFIX
from txqueue.drivers.traits import Clock, EngineTraits
from txqueue.errors import InvalidArgument

if TYPE_CHECKING:
    from txqueue.drivers._async_protocol import AsyncDriver
    from txqueue.drivers._sync_protocol import Driver

__all__ = ["TRAITS"]

_NEEDS_CLIENT = "Cloud Spanner support needs google-cloud-spanner: pip install 'txqueue[spanner]'"


def _parse(url: str, parts: SplitResult, query: dict[str, str]) -> DatabaseUrl:
    """``spanner://projects/P/instances/I/databases/D``: the target is the database's name."""
    from txqueue.drivers.spanner.target import QUEUES_OPTION, check_target, queues_mode

    unknown = sorted(set(query) - {QUEUES_OPTION})
    if unknown:
        names = ", ".join(unknown)
        raise InvalidArgument(f"unknown Cloud Spanner URL option {names} (it takes queues=)")
    target = f"{parts.netloc}{parts.path}".rstrip("/")
    check_target(target)
    options = {QUEUES_OPTION: queues_mode(query)} if QUEUES_OPTION in query else {}
    return DatabaseUrl(TRAITS.name, target, options)


async def _open_async_driver(url: DatabaseUrl, clock: Clock) -> AsyncDriver:
    try:
        from txqueue.drivers.spanner._async import AsyncSpannerDriver
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise InvalidArgument(_NEEDS_CLIENT) from error
    return AsyncSpannerDriver(url.target, clock, url.options.get("queues", "auto"))


def _open_driver(url: DatabaseUrl, clock: Clock) -> Driver:
    try:
        from txqueue.drivers.spanner._sync import SpannerDriver
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise InvalidArgument(_NEEDS_CLIENT) from error
    return SpannerDriver(url.target, clock, url.options.get("queues", "auto"))


def _dialect() -> Any:
    """GoogleSQL is written as sqlglot's BigQuery: backtick names, ``@name`` parameters."""
    from sqlglot.dialects.bigquery import BigQuery

    return BigQuery


def _encode_parameter(value: Any, is_json: bool) -> Any:
    """A query parameter as the driver takes it: JSON marked as such, a tuple as a list."""
    if is_json or isinstance(value, dict):
        from txqueue.drivers.spanner.codec import json_parameter

        return json_parameter(value)
    return list(value) if isinstance(value, tuple) else value


def _decoder() -> Callable[[Column, Any], Any] | None:
    return None  # the driver decodes by the result's own column types


TRAITS = EngineTraits(
    name="spanner",
    display_name=DISPLAY_NAME,
    schemes=("spanner",),
    db_system="gcp.spanner",
    marker="?",
    one_writer=False,
    listens=False,
    times_as_micros=False,
    emulates_types=False,
    lower_case_names=False,
    escape_percent=False,
    reserved_prefix=RESERVED_PREFIX,
    file_target=False,
    pool_size_option=None,
    parse=_parse,
    open_async_driver=_open_async_driver,
    open_driver=_open_driver,
    sqlglot_dialect=_dialect,
    encode_parameter=_encode_parameter,
    decoder=_decoder,
)
