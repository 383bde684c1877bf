"""The engine registry: URL scheme -> `EngineTraits`. The one place an engine is chosen.

Adding an engine is a folder under ``txqueue/drivers`` (its drivers and a ``traits.py``
holding its `EngineTraits`) and one entry in `ENGINES` below.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from txqueue.core.url import DatabaseUrl
from txqueue.drivers.postgres.traits import TRAITS as POSTGRES
from txqueue.drivers.spanner.traits import TRAITS as SPANNER
from txqueue.drivers.spanner.traits import TRAITS_POSTGRESQL as SPANNER_POSTGRESQL
from txqueue.drivers.sqlite.traits import TRAITS as SQLITE
from txqueue.drivers.traits import EngineTraits
from txqueue.errors import InvalidArgument

__all__ = [
    "ENGINES",
    "POSTGRES",
    "SPANNER",
    "SPANNER_POSTGRESQL",
    "SQLITE",
    "SQL_TARGETS",
    "parse_url",
    "traits_for",
    "traits_named",
    "with_pool_size",
]

#: Every engine txqueue speaks, in the order error messages list them.
ENGINES: tuple[EngineTraits, ...] = (SQLITE, POSTGRES, SPANNER)

#: Targets of the SQL front end that are no engine of their own (no URL chooses them): a
#: driver names one as its ``sql_engine``. Spanner's PostgreSQL dialect is Cloud Spanner.
SQL_TARGETS: tuple[EngineTraits, ...] = (SPANNER_POSTGRESQL,)

_BY_SCHEME = {scheme: traits for traits in ENGINES for scheme in traits.schemes}
_BY_NAME = {traits.name: traits for traits in (*ENGINES, *SQL_TARGETS)}


def parse_url(url: str) -> DatabaseUrl:
    """Split a URL into engine, target and options; unknown schemes are an InvalidArgument."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidArgument(
            f"database URL {url!r} must look like sqlite:///path or postgresql://host/db"
        )
    try:
        url.encode()
    except UnicodeEncodeError as error:
        raise InvalidArgument(
            "database URL is not valid Unicode text: it holds a lone surrogate"
        ) from error
    try:
        parts = urlsplit(url)
    except ValueError as error:  # e.g. an unclosed "[" of an IPv6 host
        raise InvalidArgument(f"database URL {url[:80]!r} is malformed: {error}") from error
    traits = _BY_SCHEME.get(parts.scheme.lower())
    if traits is None:
        raise InvalidArgument(
            f"unsupported database URL scheme {parts.scheme!r}: use sqlite or postgresql"
        )
    return traits.parse(url, parts, dict(parse_qsl(parts.query, keep_blank_values=True)))


def traits_for(url: str) -> EngineTraits:
    """The traits of the engine ``url`` names (InvalidArgument for a URL no engine takes)."""
    return _BY_NAME[parse_url(url).engine]


def traits_named(engine: str) -> EngineTraits:
    """The traits of the engine called ``engine`` (`Database.engine`), or of the SQL front
    end's target a driver names as its ``sql_engine``."""
    traits = _BY_NAME.get(engine)
    if traits is None:
        raise InvalidArgument(f"unknown engine {engine!r}")
    return traits


def with_pool_size(url: str, size: int) -> str:
    """``url`` with a connection pool of ``size``, for an engine that pools connections and a
    URL that does not set the pool's size itself. A URL no engine takes is returned as it is,
    for connecting to report."""
    try:
        traits = traits_for(url)
    except InvalidArgument:
        return url
    return traits.with_pool_size(url, size)
