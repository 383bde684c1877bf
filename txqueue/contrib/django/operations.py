"""``UpdateDdl``: queues (and any txqueue DDL) declared in a Django migration.

    from django.db import migrations
    from txqueue.contrib.django.operations import UpdateDdl

    class Migration(migrations.Migration):
        dependencies = [("shop", "0001_initial")]
        operations = [
            UpdateDdl(
                forward=["CREATE QUEUE OrderEmails (OrderId INT64 NOT NULL,"
                         " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (OrderId)"],
                backward=["DROP QUEUE OrderEmails"],
            ),
        ]

The DDL runs through ``Database.update_ddl`` on txqueue's own connection and commits at once,
so it cannot see what the same migration changed before it: put it first in its migration
(best, in a migration of its own). It changes no model state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import router
from django.db.migrations.exceptions import IrreversibleError
from django.db.migrations.operations.base import Operation

from txqueue.contrib.django import database
from txqueue.contrib.django.settings import read_settings
from txqueue.errors import Aborted, FailedPrecondition, InvalidArgument

__all__ = ["UpdateDdl"]

ORDER_RULE = (
    "txqueue's DDL runs on its own connection and cannot see or wait for the uncommitted "
    "changes of this migration's transaction: put UpdateDdl first in its migration (best, a "
    "migration of its own)"
)


class UpdateDdl(Operation):  # type: ignore[misc]
    """Run txqueue DDL statements forwards, and ``backward`` ones when unapplied."""

    reduces_to_sql = False
    elidable = False

    def __init__(
        self,
        forward: Sequence[str],
        backward: Sequence[str] | None = None,
        hints: dict[str, Any] | None = None,
    ) -> None:
        self.forward = _statements(forward, "forward")
        self.backward = None if backward is None else _statements(backward, "backward")
        self.hints = hints or {}
        self.reversible = self.backward is not None

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        keywords: dict[str, Any] = {"forward": self.forward}
        if self.backward is not None:
            keywords["backward"] = self.backward
        if self.hints:
            keywords["hints"] = self.hints
        return (self.__class__.__qualname__, [], keywords)

    def state_forwards(self, app_label: str, state: Any) -> None:
        """Queues are not Django models: the migration state does not change."""

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        self._apply(app_label, schema_editor, self.forward)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if self.backward is None:
            raise IrreversibleError(f"{self.describe()} has no backward statements")
        self._apply(app_label, schema_editor, self.backward)

    def describe(self) -> str:
        return f"txqueue DDL: {'; '.join(self.forward)[:80]}"

    @property
    def migration_name_fragment(self) -> str:
        return "txqueue_ddl"

    def _apply(self, app_label: str, schema_editor: Any, statements: list[str]) -> None:
        alias = schema_editor.connection.alias
        if alias != read_settings().using:
            return  # the queues live in TXQUEUE["USING"]'s database only
        if not router.allow_migrate(alias, app_label, **self.hints):
            return
        if schema_editor.collect_sql:
            raise InvalidArgument(
                "UpdateDdl runs through txqueue and cannot be shown as SQL (sqlmigrate); "
                "`txqueue sql` shows what a statement does"
            )
        _check_nothing_pending(schema_editor.connection)
        try:
            database(alias).update_ddl(statements)
        except Aborted as error:  # SQLite: Django's transaction holds the write lock
            raise FailedPrecondition(f"{error}; {ORDER_RULE}") from error


def _statements(value: Any, name: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise InvalidArgument(f"UpdateDdl {name}= must be a non-empty list of DDL statements")
    for statement in value:
        if not isinstance(statement, str) or not statement.strip():
            raise InvalidArgument(f"UpdateDdl {name}= holds a non-string or empty statement")
    return list(value)


def _check_nothing_pending(connection: Any) -> None:
    """On PostgreSQL (psycopg), refuse when the migration's transaction has written already:
    txqueue's connection would not see those changes, or would wait for its locks forever."""
    if not connection.in_atomic_block:
        return
    connection.ensure_connection()
    if not hasattr(getattr(connection.connection, "info", None), "transaction_status"):
        return  # not psycopg: SQLite's lock wait ends in Aborted instead (see _apply)
    with connection.cursor() as cursor:
        cursor.execute("SELECT txid_current_if_assigned()")
        row = cursor.fetchone()
    if row is not None and row[0] is not None:
        raise FailedPrecondition(f"this migration's transaction has changes already; {ORDER_RULE}")
