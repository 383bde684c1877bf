"""Parsing database URLs: ``sqlite:///path?synchronous=NORMAL`` and ``postgresql://…``."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from txqueue.errors import InvalidArgument

__all__ = ["DatabaseUrl", "integer_option", "parse_url"]

_SQLITE_OPTIONS = {"synchronous", "busy_timeout_ms"}
_POSTGRES_OPTIONS = {"pool_size", "pool_min_size"}


@dataclass(frozen=True)
class DatabaseUrl:
    """An engine name, its target (file path or libpq conninfo URL) and txqueue's own options."""

    engine: str
    target: str
    options: dict[str, str] = field(default_factory=dict)


#: The largest value each numeric option takes: SQLite's busy timeout is a C int of
#: milliseconds (~24.8 days); a pool holds at most as many connections as a server allows.
OPTION_MAXIMUMS = {"busy_timeout_ms": 2**31 - 1, "pool_size": 10_000, "pool_min_size": 10_000}


def integer_option(url: DatabaseUrl, name: str, default: int) -> int:
    """The URL option ``name`` as a positive integer up to its maximum; InvalidArgument naming
    it otherwise (``?busy_timeout_ms=abc`` or a number no engine takes)."""
    text = url.options.get(name)
    if text is None:
        return default
    maximum = OPTION_MAXIMUMS[name]
    digits = text.strip().lstrip("0")
    if not digits.isascii() or not digits.isdigit():  # "" (all zeros) included
        raise InvalidArgument(f"URL option {name} must be a positive integer, got {text[:30]!r}")
    if len(digits) > len(str(maximum)) or int(digits) > maximum:
        raise InvalidArgument(f"URL option {name} must be at most {maximum}, got {text[:30]!r}")
    return int(digits)


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
        if "\x00" in path or "%00" in path:
            raise InvalidArgument(
                f"SQLite URL path {path!r} contains a NUL character (%00); file names cannot"
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
