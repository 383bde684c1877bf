"""A database URL once parsed: the engine, its target and txqueue's own options.

Which engine a URL names, and how its URL is read, is each engine's own business:
``txqueue.drivers.engines.parse_url`` asks the engine's traits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from txqueue.errors import InvalidArgument

__all__ = ["DatabaseUrl", "integer_option", "redact_url"]


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


#: A password given as a URL option (libpq's ``?password=``, ``?sslpassword=``).
_PASSWORD_OPTION = re.compile(r"(?i)([?&](?:ssl)?password=)[^&#]*")


def redact_url(url: str) -> str:
    """``url`` as it may be shown (a start line, a title, a log): its password, in the user
    part or as an option, is ``***``; the user, host, database and other options stay."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    ends = [index for index in (rest.find(mark) for mark in "/?#") if index >= 0]
    end = min(ends, default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo, at, host = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.split(':', 1)[0]}:***@{host}"
    return scheme + separator + authority + _PASSWORD_OPTION.sub(r"\1***", tail)
