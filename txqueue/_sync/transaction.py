# Generated from txqueue/_async/transaction.py by tools/async_to_sync.py; do not edit.
"""Transactions of the sync face: Transaction, Batch, Snapshot.

Generated from ``txqueue/_async/transaction.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from txqueue import telemetry
from txqueue.core.schema import Dialect, Table
from txqueue.drivers._sync_protocol import DriverTransaction
from txqueue.drivers.base import (
    WriteKind,
)
from txqueue.errors import InvalidArgument, NotFound
from txqueue.models import ResultSet
from txqueue.mutations import prepare_ack, prepare_delete, prepare_send, prepare_write
from txqueue.sql import (
    DmlPlan,
    Plan,
    QueryPlan,
    ReceivePlan,
    RenewPlan,
    StreamingResultSet,
    parse_sql,
)

if TYPE_CHECKING:
    from txqueue._sync.database import Database

__all__ = ["Batch", "Snapshot", "Transaction"]


class Transaction:
    """A read-write transaction handed to ``run_in_transaction``'s function."""

    def __init__(self, database: Database, transaction: DriverTransaction) -> None:
        self._database = database
        self._transaction = transaction

    def insert(self, table: str, columns: Sequence[str], values: Sequence[Sequence[Any]]) -> None:
        """Insert rows; AlreadyExists when a key is taken."""
        self._write(table, WriteKind.INSERT, columns, values)

    def update(self, table: str, columns: Sequence[str], values: Sequence[Sequence[Any]]) -> None:
        """Update existing rows; NotFound when a key is missing."""
        self._write(table, WriteKind.UPDATE, columns, values)

    def insert_or_update(
        self, table: str, columns: Sequence[str], values: Sequence[Sequence[Any]]
    ) -> None:
        """Insert rows, or update the given columns of rows that exist."""
        self._write(table, WriteKind.INSERT_OR_UPDATE, columns, values)

    def replace(self, table: str, columns: Sequence[str], values: Sequence[Sequence[Any]]) -> None:
        """Delete each row if present (with its cascades), then insert it as given."""
        self._write(table, WriteKind.REPLACE, columns, values)

    def _write(
        self, table: str, kind: WriteKind, columns: Sequence[str], values: Sequence[Sequence[Any]]
    ) -> None:
        schema = self._database._table(table, self._transaction.load_catalog)
        self._transaction.write(prepare_write(schema, kind, columns, values))

    def delete(self, table: str, keys: Sequence[Any] | None) -> int:
        """Delete rows by primary key (``keys=None``: every row); returns how many."""
        schema = self._database._table(table, self._transaction.load_catalog)
        return self._transaction.delete(prepare_delete(schema, keys))

    def send(
        self, queue: str, key: Any, payload: Any, deliver_time: datetime | None = None
    ) -> None:
        """Send a message, atomically with the rest of the transaction."""
        schema = self._database._queue(queue, self._transaction.load_catalog)
        if deliver_time is None:
            deliver_time = self._database.now()  # a pinned clock decides "now" here too
        params = prepare_send(schema, key, payload, deliver_time)
        span = telemetry.start_send(schema.name, params.key, self._database)
        if span is None:
            self._transaction.send(params)
            return
        with telemetry.ending(span):
            self._transaction.send(params)
            context = telemetry.sent_context(span)
            if context is not None:  # only then: a message without a context costs nothing
                self._transaction.store_trace_context(params, context)

    def ack(
        self,
        queue: str,
        key: Any,
        ignore_not_found: bool = False,
        lease_token: str | None = None,
    ) -> None:
        """Acknowledge (delete) a message; with ``lease_token`` only while it holds the lease."""
        schema = self._database._queue(queue, self._transaction.load_catalog)
        params = prepare_ack(schema, key, ignore_not_found, lease_token, self._database.now())
        self._transaction.ack(params)

    def flush(self) -> None:
        """Apply buffered sends and acks now, raising their errors here instead of at commit.

        Sends and acks are buffered like Spanner mutations and applied in batches with the
        next statement or at commit; call this to learn, say, that an ack was refused
        before doing the work that depends on it.
        """
        self._transaction.flush()

    def once(self, key: str) -> bool:
        """Record ``key`` as processed in this transaction; False when it already was.

        The idempotency ledger: write it in the same transaction as the effects, and a
        repeat (a redelivered message, a re-published event, a re-run after an unknown
        commit outcome) is detected and skipped instead of applied twice::

            if not txn.once(f"charge:{order_id}"):
                return  # done before
        """
        if not isinstance(key, str) or not key:
            raise InvalidArgument("key must be a non-empty string")
        return self._transaction.record_once(key)

    def execute_sql(
        self, sql: str, params: Any = None, param_types: Any = None
    ) -> ResultSet | StreamingResultSet:
        """Run a query in the database's dialect (``@name`` / ``$1`` parameters)."""
        return _execute_sql(self._database, self._transaction, sql, params, param_types)

    def execute_update(self, sql: str, params: Any = None, param_types: Any = None) -> int:
        """Run INSERT, UPDATE or DELETE in the database's dialect; returns the row count.

        With ``ASSERT_ROWS_MODIFIED n`` a different count fails this statement alone with
        OutOfRange; the transaction stays open with its earlier writes.
        """
        plan = _plan(self._database, self._transaction, sql, params, param_types)
        if not isinstance(plan, DmlPlan):
            raise InvalidArgument(
                "execute_update runs INSERT, UPDATE and DELETE; use execute_sql for queries"
            )
        count = self._transaction.execute_update(plan.sql, plan.params, plan.expected_rows)
        for queue in plan.sends_to:
            self._transaction.note_sent(queue)
        return count

    def execute_internal_sql(self, sql: str, params: Any = None) -> ResultSet:
        """Run a query of txqueue's own layers: GoogleSQL with ``@name`` parameters, which may
        name its reserved ``txqueue_`` tables, translated for the engine whatever the
        database's dialect (the worker registry's SQL, portable to every engine)."""
        plan = _plan(self._database, self._transaction, sql, params, None, internal=True)
        if not isinstance(plan, QueryPlan):
            raise InvalidArgument("execute_internal_sql runs queries")
        return plan.result(self._transaction.execute_sql(plan.sql, plan.params))

    def execute_internal_update(self, sql: str, params: Any = None) -> int:
        """Run DML of txqueue's own layers (see `execute_internal_sql`); returns the row count."""
        plan = _plan(self._database, self._transaction, sql, params, None, internal=True)
        if not isinstance(plan, DmlPlan):
            raise InvalidArgument("execute_internal_update runs INSERT, UPDATE and DELETE")
        return self._transaction.execute_update(plan.sql, plan.params, plan.expected_rows)

    def execute_engine_sql(self, sql: str, params: Any = None) -> ResultSet:
        """Run a query in the engine's own SQL (SQLite or PostgreSQL), untranslated.

        For txqueue's own layers (which read their ``txqueue_`` tables this way) and for
        engine features the Spanner front end does not cover. Parameters use the engine
        driver's style (sqlite3 ``?``, psycopg ``%s``); values are not converted.
        """
        return self._transaction.execute_sql(_sql(sql), params)

    def execute_engine_update(self, sql: str, params: Any = None) -> int:
        """Run DML in the engine's own SQL, untranslated; returns the row count."""
        return self._transaction.execute_update(_sql(sql), params)

    def batch_update(self, statements: Sequence[Any]) -> list[int]:
        """Run DML statements in order: each ``sql``, ``(sql, params)`` or
        ``(sql, params, param_types)``; stops at the first error, which propagates."""
        if isinstance(statements, str) or not isinstance(statements, Sequence):
            raise InvalidArgument("statements must be a list of SQL statements")
        counts = []
        for statement in statements:
            if isinstance(statement, str):
                statement = (statement,)
            if not isinstance(statement, (tuple, list)) or not 1 <= len(statement) <= 3:
                raise InvalidArgument(
                    "each statement is sql, (sql, params) or (sql, params, types)"
                )
            sql, params, types = (*statement, None, None)[:3]
            counts.append(self.execute_update(sql, params, types))
        return counts


def _plan(
    database: Database,
    transaction: DriverTransaction,
    sql: str,
    params: Any,
    param_types: Any,
    internal: bool = False,
) -> Plan:
    """Translate ``sql`` (the database's dialect; GoogleSQL if ``internal``) for the
    database's engine."""
    dialect = Dialect.GOOGLESQL if internal else database.dialect
    statement = parse_sql(sql, dialect, internal=internal)
    tables: dict[str, Table] = {}
    unknown: dict[str, InvalidArgument | None] = {}
    for name in statement.tables:
        try:
            tables[name.lower()] = database._table(name, transaction.load_catalog)
        except NotFound:  # an unknown name: the plan reports it, with its position
            unknown[name] = None
        except InvalidArgument as error:  # a name txqueue refuses may be the application's
            unknown[name] = error
    if unknown and not internal:  # not txqueue's: maybe one of the application's own
        tables.update(database._application_tables(list(unknown), transaction))
    for name, refusal in unknown.items():
        if refusal is not None and name.lower() not in tables:
            raise refusal
    # INFORMATION_SCHEMA lists the whole schema, as this transaction sees it.
    catalog = None
    if statement.reads_information_schema:
        known, indexes = transaction.load_catalog()
        application = database._application_tables(None, transaction)
        catalog = ({**application, **known}, indexes)
    engine = database._sql_engine
    return statement.plan(tables, engine, params, param_types, database.now(), catalog)


def _execute_sql(
    database: Database,
    transaction: DriverTransaction,
    sql: str,
    params: Any,
    param_types: Any,
    snapshot: bool = False,
) -> ResultSet | StreamingResultSet:
    """A query's rows; RECEIVE_ streams and RENEWLEASE_ renews (in snapshots only)."""
    plan = _plan(database, transaction, sql, params, param_types)
    if isinstance(plan, DmlPlan):
        raise InvalidArgument(
            "a snapshot is read-only: run INSERT, UPDATE and DELETE with execute_update in "
            "run_in_transaction"
            if snapshot
            else "execute_sql runs queries; use execute_update for INSERT, UPDATE and DELETE"
        )
    if isinstance(plan, (ReceivePlan, RenewPlan)) and not snapshot:
        raise InvalidArgument(
            "RECEIVE_/RENEWLEASE_ take leases in their own short transactions, not in this "
            "one: run them in db.snapshot(), or use db.receive() / db.renew_lease()"
        )
    if isinstance(plan, ReceivePlan):
        messages = database.receive(plan.queue, plan.max_duration, plan.max_batch_size)
        return StreamingResultSet(plan.fields, plan.row, messages)
    if isinstance(plan, RenewPlan):
        return plan.result(database.renew_lease(plan.queue, plan.tokens))
    return plan.result(transaction.execute_sql(plan.sql, plan.params))


def _sql(sql: object) -> str:
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidArgument("sql must be a non-empty string")
    return sql


class Batch:
    """Mutations buffered in order and committed together when the block ends without error."""

    def __init__(self, database: Database, connection: Any) -> None:
        self._database = database
        self._connection = connection
        self._operations: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def _add(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._operations.append((name, args, kwargs))

    def insert(self, table: str, columns: Sequence[str], values: Sequence[Sequence[Any]]) -> None:
        self._add("insert", table, columns, values)

    def update(self, table: str, columns: Sequence[str], values: Sequence[Sequence[Any]]) -> None:
        self._add("update", table, columns, values)

    def insert_or_update(
        self, table: str, columns: Sequence[str], values: Sequence[Sequence[Any]]
    ) -> None:
        self._add("insert_or_update", table, columns, values)

    def replace(self, table: str, columns: Sequence[str], values: Sequence[Sequence[Any]]) -> None:
        self._add("replace", table, columns, values)

    def delete(self, table: str, keys: Sequence[Any] | None) -> None:
        self._add("delete", table, keys)

    def send(
        self, queue: str, key: Any, payload: Any, deliver_time: datetime | None = None
    ) -> None:
        self._add("send", queue, key, payload, deliver_time)

    def ack(
        self, queue: str, key: Any, ignore_not_found: bool = False, lease_token: str | None = None
    ) -> None:
        self._add("ack", queue, key, ignore_not_found, lease_token)

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None or not self._operations:
            return
        self._database.run_in_transaction(self._apply, connection=self._connection)

    def _apply(self, transaction: Transaction) -> None:
        for name, args, kwargs in self._operations:
            getattr(transaction, name)(*args, **kwargs)


class Snapshot:
    """A read-only transaction: ``execute_sql`` sees one consistent state."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._transaction: DriverTransaction | None = None

    def __enter__(self) -> Snapshot:
        self._transaction = self._database._driver.begin(read_only=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._transaction is not None:
            self._transaction.rollback()
            self._transaction = None

    def execute_sql(
        self, sql: str, params: Any = None, param_types: Any = None
    ) -> ResultSet | StreamingResultSet:
        """Run a query in the database's dialect; ``RECEIVE_`` returns a stream of rows."""
        if self._transaction is None:
            raise InvalidArgument("use the snapshot inside its with-block")
        return _execute_sql(
            self._database, self._transaction, sql, params, param_types, snapshot=True
        )

    def execute_internal_sql(self, sql: str, params: Any = None) -> ResultSet:
        """Run a query of txqueue's own layers (see Transaction)."""
        if self._transaction is None:
            raise InvalidArgument("use the snapshot inside its with-block")
        plan = _plan(self._database, self._transaction, sql, params, None, internal=True)
        if not isinstance(plan, QueryPlan):
            raise InvalidArgument("execute_internal_sql runs queries")
        return plan.result(self._transaction.execute_sql(plan.sql, plan.params))

    def execute_engine_sql(self, sql: str, params: Any = None) -> ResultSet:
        """Run a query in the engine's own SQL, untranslated (see Transaction)."""
        if self._transaction is None:
            raise InvalidArgument("use the snapshot inside its with-block")
        return self._transaction.execute_sql(_sql(sql), params)
