"""The Django app: ``manage.py txqueue ...``, a system check of ``settings.TXQUEUE``, and
txqueue's database opened when Django first connects to the one it shares."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core import checks

from txqueue.errors import InvalidArgument

__all__ = ["TxqueueConfig"]


class TxqueueConfig(AppConfig):  # type: ignore[misc]
    """Registers ``check_settings`` and ``open_with_django``."""

    name = "txqueue.contrib.django"
    label = "txqueue"
    verbose_name = "txqueue"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        checks.register(check_settings)
        connection_created.connect(open_with_django, dispatch_uid="txqueue.open_with_django")


def open_with_django(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Open txqueue's ``Database`` as Django opens its connection, before any transaction.

    Opened later, inside an ``atomic`` block that has written already, it would wait on that
    block's own lock on SQLite (opening writes txqueue's catalog).
    """
    from txqueue.contrib.django import database
    from txqueue.contrib.django.settings import read_settings

    if connection.alias == read_settings().using:
        database(connection.alias)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """``settings.TXQUEUE`` and the database it names, as ``manage.py check`` reports them."""
    from txqueue.contrib.django.settings import database_url

    try:
        database_url()
    except InvalidArgument as error:
        return [checks.Error(str(error), id="txqueue.E001")]
    return []
