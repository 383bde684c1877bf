"""``settings.TXQUEUE``, read and checked, and the txqueue URL of a Django database.

    TXQUEUE = {
        "USING": "default",            # the Django database whose transactions sends join
        "DATABASE_URL": None,          # default: derived from DATABASES[USING]
        "DIALECT": None,               # "googlesql" or "postgresql" (txqueue's default: by engine)
    }

Every key is optional. The URL is derived from the connection's current settings, so under
Django's test runner it names the test database.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from txqueue.errors import InvalidArgument

__all__ = ["TxqueueSettings", "database_url", "read_settings"]

KEYS = ("USING", "DATABASE_URL", "DIALECT")
DIALECTS = ("googlesql", "postgresql")

#: libpq connection parameters that Django's OPTIONS may carry and a URL can hold.
LIBPQ_OPTIONS = frozenset(
    {
        "application_name",
        "channel_binding",
        "connect_timeout",
        "gssencmode",
        "keepalives",
        "keepalives_count",
        "keepalives_idle",
        "keepalives_interval",
        "options",
        "passfile",
        "service",
        "sslcert",
        "sslkey",
        "sslmode",
        "sslpassword",
        "sslrootcert",
        "target_session_attrs",
    }
)


@dataclass(frozen=True)
class TxqueueSettings:
    """``settings.TXQUEUE`` with its defaults filled in."""

    using: str = "default"
    database_url: str | None = None
    dialect: str | None = None


def read_settings() -> TxqueueSettings:
    """``settings.TXQUEUE``, checked: unknown keys and wrong types are an ``InvalidArgument``
    naming the key, so a typo does not silently fall back to a default."""
    from django.conf import settings

    raw = getattr(settings, "TXQUEUE", None)
    if raw is None:
        return TxqueueSettings()
    if not isinstance(raw, dict):
        raise InvalidArgument(
            f"settings.TXQUEUE must be a dict, got {type(raw).__name__}",
        )
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise InvalidArgument(
            f"settings.TXQUEUE has unknown keys {unknown}; the keys are {list(KEYS)}"
        )
    using = raw.get("USING", "default")
    url = raw.get("DATABASE_URL")
    dialect = raw.get("DIALECT")
    if not isinstance(using, str) or not using:
        raise InvalidArgument('settings.TXQUEUE["USING"] must be the name of a Django database')
    if url is not None and (not isinstance(url, str) or not url):
        raise InvalidArgument(
            'settings.TXQUEUE["DATABASE_URL"] must be a URL string (sqlite:///path or '
            "postgresql://...), or absent to use Django's database"
        )
    if dialect is not None and dialect not in DIALECTS:
        raise InvalidArgument(
            f'settings.TXQUEUE["DIALECT"] must be one of {list(DIALECTS)}, got {dialect!r}'
        )
    return TxqueueSettings(using=using, database_url=url, dialect=dialect)


def database_url(using: str | None = None) -> str:
    """The txqueue URL of Django's database ``using`` (default: ``TXQUEUE["USING"]``), or
    ``TXQUEUE["DATABASE_URL"]`` when set."""
    from django.db import connections

    configured = read_settings()
    if configured.database_url is not None and using in (None, configured.using):
        return configured.database_url
    alias = configured.using if using is None else using
    if alias not in connections:
        raise InvalidArgument(f"DATABASES has no database {alias!r} (TXQUEUE['USING'])")
    connection = connections[alias]
    driver = connection.Database.__name__.partition(".")[0]  # sqlite3.dbapi2 → sqlite3
    return url_from_django(driver, connection.settings_dict, alias)


def url_from_django(driver: str, settings_dict: dict[str, Any], alias: str) -> str:
    """A txqueue URL for a Django ``DATABASES`` entry whose backend runs on ``driver`` (the
    DB-API module's name): txqueue joins transactions of ``sqlite3`` and ``psycopg`` (3)."""
    build = _URL_BUILDERS.get(driver)
    if build is None:
        raise InvalidArgument(
            f"DATABASES[{alias!r}] runs on the {driver} driver; txqueue joins Django's "
            "transactions on sqlite3 (the sqlite3 backend) and psycopg 3 (the postgresql "
            "backend)"
        )
    return build(settings_dict, alias)


def _sqlite_url(settings_dict: dict[str, Any], alias: str) -> str:
    name = str(settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or "mode=memory" in name:
        raise InvalidArgument(
            f"DATABASES[{alias!r}] is an in-memory SQLite database, which txqueue cannot "
            "share with Django: give it a file (for tests, "
            f"DATABASES[{alias!r}]['TEST']['NAME'] = a file path)"
        )
    if name.startswith("file:"):
        raise InvalidArgument(
            f"DATABASES[{alias!r}]['NAME'] is a SQLite URI; give a file path, or set "
            "TXQUEUE['DATABASE_URL']"
        )
    return f"sqlite:///{os.path.abspath(name)}"


def _postgres_url(settings_dict: dict[str, Any], alias: str) -> str:
    user = settings_dict.get("USER") or ""
    password = settings_dict.get("PASSWORD") or ""
    host = str(settings_dict.get("HOST") or "")
    port = str(settings_dict.get("PORT") or "")
    name = str(settings_dict.get("NAME") or "")
    credentials = quote(str(user), safe="")
    if password:
        credentials += ":" + quote(str(password), safe="")
    if credentials:
        credentials += "@"
    query: dict[str, str] = {}
    if host.startswith("/"):  # a Unix socket directory goes in the query, as libpq takes it
        query["host"] = host
        location = ""
    else:
        location = f"[{host}]" if ":" in host else host
    if port:
        location += f":{port}"
    for key, value in (settings_dict.get("OPTIONS") or {}).items():
        if key in LIBPQ_OPTIONS and isinstance(value, (str, int)):
            query[key] = str(value)
    suffix = f"?{urlencode(query)}" if query else ""
    return f"postgresql://{credentials}{location}/{quote(name, safe='')}{suffix}"


_URL_BUILDERS: dict[str, Callable[[dict[str, Any], str], str]] = {
    "sqlite3": _sqlite_url,
    "psycopg": _postgres_url,
}
