"""Parsing database URLs: ``sqlite:///path?synchronous=NORMAL`` and ``postgresql://…``."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from txqueue.errors import InvalidArgument

__all__ = ["DatabaseUrl", "parse_url"]

_SQLITE_OPTIONS = {"synchronous", "busy_timeout_ms"}
_POSTGRES_OPTIONS = {"pool_size", "pool_min_size"}


@dataclass(frozen=True)
class DatabaseUrl:
    """An engine name, its target (file path or libpq conninfo URL) and txqueue's own options."""

    engine: str
    target: str
    options: dict[str, str] = field(default_factory=dict)


def parse_url(url: str) -> DatabaseUrl:
    """Split a URL into engine, target and options; unknown schemes are an InvalidArgument."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidArgument(
            f"database URL {url!r} must look like sqlite:///path or postgresql://host/db"
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if scheme == "sqlite":
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
        unknown = set(query) - _SQLITE_OPTIONS
        if unknown:
            raise InvalidArgument(f"unknown SQLite URL option(s): {', '.join(sorted(unknown))}")
        return DatabaseUrl("sqlite", path, query)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        options = {k: v for k, v in query.items() if k in _POSTGRES_OPTIONS}
        rest = urlencode([(k, v) for k, v in query.items() if k not in _POSTGRES_OPTIONS])
        target = urlunsplit(("postgresql", parts.netloc, parts.path, rest, parts.fragment))
        return DatabaseUrl("postgres", target, options)
    raise InvalidArgument(
        f"unsupported database URL scheme {parts.scheme!r}: use sqlite or postgresql"
    )
