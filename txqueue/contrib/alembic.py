"""``op.update_ddl([...])``: queues (and any txqueue DDL) in Alembic migrations.

    # env.py: import once, and give each migration its own transaction
    import txqueue.contrib.alembic  # noqa: F401  (registers op.update_ddl)
    context.configure(connection=connection, transaction_per_migration=True, ...)

    # versions/xxxx_order_emails.py
    def upgrade() -> None:
        op.update_ddl(["CREATE QUEUE OrderEmails (OrderId STRING(36) NOT NULL,"
                       " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (OrderId)"])

    def downgrade() -> None:
        op.update_ddl(["DROP QUEUE OrderEmails"])

The DDL runs through ``Database.update_ddl`` on txqueue's own connection to the migration's
database (its URL is taken from the migration's connection, or given as ``database_url=``) and
commits at once. That connection cannot see, and must not wait for, what the migration's own
transaction changed before: ``update_ddl`` refuses (``FailedPrecondition``) when that
transaction has changes, so put it first in its migration, and on PostgreSQL run each
migration in a transaction of its own (``transaction_per_migration=True``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from alembic.operations import MigrateOperation, Operations
except ImportError as missing:  # pragma: no cover - exercised in a subprocess
    raise ImportError(f"{missing}: pip install 'txqueue[alembic]'") from missing

import txqueue
from txqueue.errors import FailedPrecondition, InvalidArgument

__all__ = ["UpdateDdlOp", "txqueue_url"]

ORDER_RULE = (
    "txqueue's DDL runs on its own connection and cannot see or wait for the uncommitted "
    "changes of the migration's transaction: put op.update_ddl first in its migration, and "
    "on PostgreSQL pass transaction_per_migration=True to context.configure in env.py"
)


@Operations.register_operation("update_ddl")
class UpdateDdlOp(MigrateOperation):
    """Apply txqueue DDL statements (``CREATE QUEUE``, ``DROP QUEUE``, tables, indexes)."""

    def __init__(
        self,
        statements: Sequence[str],
        *,
        database_url: str | None = None,
        dialect: str | None = None,
    ) -> None:
        if isinstance(statements, str) or not isinstance(statements, Sequence) or not statements:
            raise InvalidArgument("op.update_ddl takes a non-empty list of DDL statements")
        if not all(isinstance(s, str) and s.strip() for s in statements):
            raise InvalidArgument("op.update_ddl: every statement must be a non-empty string")
        self.statements = list(statements)
        self.database_url = database_url
        self.dialect = dialect

    @classmethod
    def update_ddl(
        cls,
        operations: Operations,
        statements: Sequence[str],
        *,
        database_url: str | None = None,
        dialect: str | None = None,
    ) -> None:
        """Apply txqueue DDL on the migration's database (or ``database_url``)."""
        operations.invoke(cls(statements, database_url=database_url, dialect=dialect))


@Operations.implementation_for(UpdateDdlOp)
def _update_ddl(operations: Operations, operation: UpdateDdlOp) -> None:
    if operations.migration_context.as_sql:
        raise InvalidArgument(
            "op.update_ddl runs through txqueue and cannot be written out as SQL (--sql); "
            "run the migration online"
        )
    bind = operations.get_bind()
    _check_nothing_pending(bind)
    url = operation.database_url or txqueue_url(bind.engine.url)
    with txqueue.connect(url, dialect=operation.dialect) as database:
        database.update_ddl(operation.statements)


def txqueue_url(url: Any) -> str:
    """txqueue's URL for a SQLAlchemy ``URL``: the same database without SQLAlchemy's driver
    name (``postgresql+psycopg://...`` → ``postgresql://...``); txqueue refuses what it cannot
    run on when it opens it."""
    rendered: str = url.set(drivername=url.get_backend_name()).render_as_string(hide_password=False)
    return rendered


def _check_nothing_pending(bind: Any) -> None:
    """Refuse when the migration's transaction has changes txqueue's connection cannot see.

    psycopg: the transaction has an id once it changed anything; sqlite3 (legacy transaction
    control, as SQLAlchemy uses it): a transaction is open only after a change.
    """
    raw = bind.connection.driver_connection
    if hasattr(getattr(raw, "info", None), "transaction_status"):
        pending = bind.exec_driver_sql("SELECT txid_current_if_assigned()").scalar()
    else:
        pending = getattr(raw, "in_transaction", False)
    if pending:
        raise FailedPrecondition(f"the migration's transaction has changes already; {ORDER_RULE}")
