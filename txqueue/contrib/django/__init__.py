"""Django integration: sends that commit with ``transaction.atomic()``, queues in migrations.

    INSTALLED_APPS = [..., "txqueue.contrib.django"]     # adds `manage.py txqueue ...`
    TXQUEUE = {"DIALECT": "googlesql"}                  # optional, see .settings

    from django.db import transaction
    from txqueue.contrib import django as txq

    with transaction.atomic():
        order = Order.objects.create(...)
        with txq.batch() as batch:                       # joins Django's transaction
            batch.send("OrderEmails", (order.pk,), b"...")

The send runs on Django's own connection (SQLite or PostgreSQL backend) inside a savepoint,
so it commits exactly when the ``atomic`` block does, and is rolled back with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import txqueue
from txqueue.contrib.django.settings import database_url, read_settings
from txqueue.errors import InvalidArgument

__all__ = ["batch", "close_databases", "connection", "database", "run_in_transaction"]

T = TypeVar("T")

_databases: dict[str, txqueue.Database] = {}
_lock = threading.Lock()


def database(using: str | None = None) -> txqueue.Database:
    """The txqueue ``Database`` of Django's database ``using`` (default ``TXQUEUE["USING"]``),
    opened on first use and shared by the process's threads.

    It is keyed by URL, so after Django's test runner switches to the test database the next
    call opens that one.
    """
    url = database_url(using)
    with _lock:
        opened = _databases.get(url)
        if opened is None:
            opened = txqueue.connect(url, dialect=read_settings().dialect)
            _databases[url] = opened
        return opened


def close_databases() -> None:
    """Close every database ``database()`` opened (before Django drops a test database, whose
    DROP would wait on txqueue's connections)."""
    with _lock:
        opened = list(_databases.values())
        _databases.clear()
    for each in opened:
        each.close()


def connection(using: str | None = None) -> Any:
    """The DB-API connection under Django's connection ``using``, inside its open
    ``transaction.atomic()`` block; ``InvalidArgument`` outside one (a send there would
    commit on its own, not with the application's writes)."""
    from django.db import connections

    alias = read_settings().using if using is None else using
    if alias not in connections:
        raise InvalidArgument(f"DATABASES has no database {alias!r}")
    django_connection = connections[alias]
    if not django_connection.in_atomic_block:
        raise InvalidArgument(
            f"txqueue joins Django's transaction: call it inside transaction.atomic() "
            f"(Django's connection {alias!r} is in autocommit mode here)"
        )
    django_connection.ensure_connection()
    return django_connection.connection


def batch(using: str | None = None) -> txqueue.Batch:
    """A batch that applies its mutations in Django's current ``transaction.atomic()`` block on
    connection ``using`` when its ``with`` block ends; they commit when that block commits."""
    return database(using).batch(connection=connection(using))


def run_in_transaction(
    function: Callable[..., T], *args: Any, using: str | None = None, **kwargs: Any
) -> T:
    """``function(transaction, *args, **kwargs)`` inside Django's current ``atomic`` block
    (``execute_sql``, ``send``, ``ack``, ... on Django's connection); it neither commits nor
    retries: the ``atomic`` block does."""
    return database(using).run_in_transaction(
        function, *args, connection=connection(using), **kwargs
    )
