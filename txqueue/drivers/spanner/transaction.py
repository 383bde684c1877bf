"""One Spanner transaction behind the driver protocol's transaction operations (blocking).

Sends, writes and acks are mutations, as on Spanner: applied at commit, not seen by this
transaction's own queries. Sends and acks are buffered (as on the other engines) and checked
when applied (the next statement, a flush, the commit): a send reads its keys (AlreadyExists
names the key), an ack reads the message (inside the transaction, so its read lock fences
the lease holder) for NotFound or FailedPrecondition. Inserts and updates of ``write`` read
their keys the same way, so every refusal comes before the commit, as on SQLite. Statements
go to Spanner as they are (GoogleSQL); ASSERT_ROWS_MODIFIED is Spanner's own, and a failed
statement leaves the transaction open with its earlier writes, as the contract asks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from google.cloud.spanner_v1 import KeySet, param_types

from txqueue.core.lengths import length_refusal
from txqueue.core.schema import Catalog, Table
from txqueue.drivers.base import (
    AckParams,
    DeleteParams,
    SendParams,
    WriteKind,
    WriteParams,
    key_taken,
    lease_lost,
    message_missing,
)
from txqueue.drivers.buffered import runs
from txqueue.drivers.spanner import application, catalog, native, outcome
from txqueue.drivers.spanner.assertion import rows_modified
from txqueue.drivers.spanner.codec import (
    column_type,
    encode,
    encode_key,
    encode_params,
    key_params,
    map_errors,
    positional,
)
from txqueue.drivers.spanner.engine import SpannerDatabase, query, rollback, update
from txqueue.drivers.spanner.spelling import Spelling, attach, bind
from txqueue.drivers.spanner.statements import TRACE_CONTEXT, key_matches, queue_statements
from txqueue.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    TxqueueError,
)
from txqueue.models import ResultSet

__all__ = ["Work"]

#: Spanner's words for a value over a column's declared length (a DML statement's).
_SIZE_LIMIT = re.compile(
    r"exceeds the maximum size limit for this column: (?P<table>\w+)\.(?P<column>\w+),"
)
#: Keys looked up by one query (over the number of key columns): Spanner takes at most
#: 1,000 functions in a statement, and each key costs a comparison per column and an OR.
KEYS_PER_READ = 240

_MUTATIONS = {
    WriteKind.INSERT: "insert",
    WriteKind.UPDATE: "update",
    WriteKind.INSERT_OR_UPDATE: "insert_or_update",
    WriteKind.REPLACE: "replace",
}


class Work:
    """A read-write transaction on a pooled session (or the application's own transaction),
    or a read-only snapshot; begun explicitly."""

    def __init__(
        self,
        database: SpannerDatabase,
        deliver: str,
        read_only: bool = False,
        joined: Any = None,
    ) -> None:
        self.database = database
        self.deliver = deliver
        self.owned = joined is None
        session = database.acquire() if joined is None else None
        self.session = session
        self.sent: set[str] = set()
        self.recorded: set[str] = set()  # ledger keys inserted by this transaction's mutations
        self.pending: list[SendParams | AckParams] = []
        self.traces: dict[tuple[str, tuple[Any, ...]], str] = {}
        #: keys this transaction's mutations inserted (True) or deleted (False), per table
        self.written: dict[tuple[str, tuple[Any, ...]], bool] = {}
        self.finished = False
        self.dml = False  # whether it ran DML (its commit then writes: outcome.commit)
        self.native_queues = False  # set by the driver: sends and acks are Spanner's own
        try:
            with map_errors():
                if session is None:
                    self.transaction = joined
                elif read_only:
                    self.transaction = session.snapshot(multi_use=True)
                    self.transaction.begin()
                else:
                    self.transaction = session.transaction()
                    self.transaction.begin()
                attach(self.transaction, database.spelling)
        except BaseException:
            if session is not None:
                database.release(session, healthy=False)
            raise
        self.read_only = read_only

    # ---- reads and statements ----------------------------------------------------------

    def load_catalog(self) -> Catalog:
        return catalog.load_catalog(self.transaction)

    def application_tables(self, names: Sequence[str] | None) -> dict[str, Table]:
        """Spanner reads INFORMATION_SCHEMA in read-only snapshots only: a read-write
        transaction reads it in a snapshot of its own."""
        if self.read_only:
            return application.application_tables(self.transaction, names)
        return self.database.read(application.application_tables, names)

    def execute_sql(self, sql: str, params: Any) -> ResultSet:
        self.flush(visible=True)
        fields, rows = query(self.transaction, *positional(sql, params))
        return ResultSet(fields, rows)

    def execute_update(self, sql: str, params: Any, expected_rows: int | None) -> int:
        self.flush(visible=True)
        sql, params = positional(sql, params)
        values, types = encode_params(params)
        spelling = self.database.spelling
        if expected_rows is not None and spelling.postgresql:
            sql, values, types = bind(spelling, sql, values, types)
            checked = rows_modified(sql)  # no ASSERT_ROWS_MODIFIED: count first (assertion.py)
            if checked is None:
                raise InvalidArgument(
                    "ASSERT_ROWS_MODIFIED on a PostgreSQL-dialect Cloud Spanner database takes"
                    " DELETE, UPDATE or INSERT whose rows can be counted first (not ON"
                    " CONFLICT, UPDATE … FROM or DELETE … USING)"
                )
            counted = checked(self.transaction, values, types)
            if counted != expected_rows:
                raise OutOfRange(
                    f"ASSERT_ROWS_MODIFIED {expected_rows} failed: the statement would"
                    f" modify {counted} row(s)"
                )
        elif expected_rows is not None:
            sql = f"{sql.rstrip().rstrip(';')} ASSERT_ROWS_MODIFIED {int(expected_rows)}"
        try:
            self.dml = True
            count = update(self.transaction, sql, values, types)
        except (OutOfRange, InvalidArgument, FailedPrecondition) as error:
            refusal = self._length_refusal(str(error))
            if refusal is not None:
                raise refusal from error
            # The emulator says INVALID_ARGUMENT where Spanner documents OUT_OF_RANGE.
            if expected_rows is None or "ASSERT_ROWS_MODIFIED" not in str(error):
                raise
            raise OutOfRange(f"ASSERT_ROWS_MODIFIED {expected_rows} failed: {error}") from error
        return int(count)

    def _length_refusal(self, message: str) -> InvalidArgument | None:
        """Spanner's refusal of a value over a column's declared length, worded as on the
        other engines (the column and its declared type, read from the schema)."""
        found = _SIZE_LIMIT.search(message)
        if found is None:
            return None
        _, rows = self.database.read(
            query,
            "SELECT spanner_type FROM INFORMATION_SCHEMA.COLUMNS"
            f" WHERE table_schema = '{self.database.spelling.schema}'"
            " AND table_name = @table AND column_name = @column",
            {"table": found["table"], "column": found["column"]},
        )
        if not rows:
            return None
        spelled = str(rows[0][0])
        if self.database.spelling.postgresql:  # "character varying(3)": STRING(3)
            column = application.postgresql_type(spelled)
            spelled = f"{column.type.value}({column.length})"
        return length_refusal(f"{found['column']} {spelled}", found["table"])

    def record_once(self, key: str) -> bool:
        if key in self.recorded:  # its insert is a mutation, which no read here can see
            return False
        self.flush()
        # The database's clock, as expire_ledger reads it (the emulator's commit timestamps
        # can run ahead of the CURRENT_TIMESTAMP() of a later transaction).
        _, rows = query(
            self.transaction,
            "SELECT EXISTS(SELECT 1 FROM txqueue_ledger WHERE key = @key),"
            f" {self.database.spelling.now}",
            {"key": key},
        )
        taken, now = rows[0]
        if taken:
            return False
        with map_errors():
            self.transaction.insert(
                "txqueue_ledger", columns=("key", "recorded_at"), values=[(key, now)]
            )
        self.recorded.add(key)
        return True

    # ---- mutations ----------------------------------------------------------------------

    def write(self, params: WriteParams) -> None:
        """A mutation; an insert of a taken key (AlreadyExists) or an update of a missing one
        (NotFound) is refused now, as on the other engines, by reading the keys first."""
        self.flush()
        table = params.table
        columns = [table.column(name) for name in params.columns]
        rows = [[encode(c, v) for c, v in zip(columns, row)] for row in params.rows]
        # names as the catalog spells them or not (Spanner's names are case-insensitive)
        places = [[c.lower() for c in params.columns].index(k.lower()) for k in table.primary_key]
        if params.kind in (WriteKind.INSERT, WriteKind.UPDATE):
            keys = [tuple(row[i] for i in places) for row in params.rows]
            present = self._present(table, keys)
            for key, found in zip(keys, present):
                if params.kind is WriteKind.INSERT and found:
                    raise AlreadyExists(f"table {table.name} already has a row with key {key!r}")
                if params.kind is WriteKind.UPDATE and not found:
                    raise NotFound(f"table {table.name} has no row with key {key!r}")
        with map_errors():
            getattr(self.transaction, _MUTATIONS[params.kind])(
                table.name, columns=params.columns, values=rows
            )
        for row in params.rows:
            key = tuple(row[i] for i in places)
            self.written[(table.name.lower(), key)] = True

    def _present(self, table: Table, keys: list[tuple[Any, ...]]) -> list[bool]:
        """Whether each key has a row, as this transaction would commit it (its own earlier
        mutations included, which its reads cannot see)."""
        unknown = [k for k in keys if (table.name.lower(), k) not in self.written]
        stored: set[tuple[Any, ...]] = set()
        # Spanner refuses a statement of more than 1,000 functions: a few per key.
        step = max(1, KEYS_PER_READ // len(table.primary_key))
        for start in range(0, len(unknown), step):
            stored |= self._stored(table, unknown[start : start + step])
        return [self.written.get((table.name.lower(), k), k in stored) for k in keys]

    def _stored(self, table: Table, unknown: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
        """Which of ``unknown`` have a row (one query)."""
        stored: set[tuple[Any, ...]] = set()
        if unknown:
            spelling = self.database.spelling
            names = [spelling.quote(k) for k in table.primary_key]
            values: dict[str, Any] = {}
            types: dict[str, Any] = {}
            for n, key in enumerate(unknown):
                one, kinds = key_params(table, key)
                values.update({f"{name}_{n}": v for name, v in one.items()})
                types.update({f"{name}_{n}": t for name, t in kinds.items()})
            _, rows = query(
                self.transaction,
                f"SELECT {', '.join(names)} FROM {spelling.quote(table.name)}"
                f" WHERE {key_matches(table, len(unknown), spelling)}",
                values,
                types,
            )
            stored = {tuple(row) for row in rows}
        return stored

    def delete(self, params: DeleteParams) -> int:
        """A delete mutation, in order with the others; the count reads the keys first."""
        self.flush()
        table = params.table
        if params.keys is None:
            name = self.database.spelling.quote(table.name)
            _, rows = query(self.transaction, f"SELECT COUNT(*) FROM {name}")
            with map_errors():
                self.transaction.delete(table.name, KeySet(all_=True))
            for place in [p for p in self.written if p[0] == table.name.lower()]:
                self.written[place] = False
            return int(rows[0][0])
        keys = list(dict.fromkeys(tuple(key) for key in params.keys))
        present = [k for k, found in zip(keys, self._present(table, keys)) if found]
        if present:
            with map_errors():
                self.transaction.delete(
                    table.name, KeySet(keys=[encode_key(table, key) for key in present])
                )
            for key in present:
                self.written[(table.name.lower(), key)] = False
        return len(present)

    def send(self, params: SendParams) -> None:
        """Buffered: applied (checked, then an insert mutation) by the next statement, a
        flush or the commit."""
        self.pending.append(params)
        self.sent.add(params.queue.name)

    def store_trace_context(self, params: SendParams, context: str) -> None:
        table = params.queue
        if any(p is params for p in self.pending):
            self.traces[(table.name.lower(), tuple(params.key))] = context
            return
        with map_errors():
            self.transaction.update(
                table.name,
                columns=(*table.primary_key, TRACE_CONTEXT),
                values=[[*encode_key(table, params.key), context]],
            )

    def ack(self, params: AckParams) -> None:
        """Buffered like a send: NotFound or FailedPrecondition surface at the flush."""
        self.pending.append(params)

    def flush(self, visible: bool = False) -> None:
        """Apply the buffered sends and acks, in order, refusing what the other engines
        refuse (a taken key, a missing message, a lost lease) before any write.

        ``visible``: a statement of this transaction follows, which must see them, as on the
        other engines: they are applied as DML (INSERT, DELETE), which Spanner's queries do
        see, rather than as mutations, which they do not. Not when mutations are already
        buffered in the transaction (say, the parent row of an interleaved message): DML runs
        at once and mutations at the commit, so the DML could not depend on them.
        """
        pending, self.pending = self.pending, []
        if self.native_queues:  # Spanner's Send / Ack mutations (native.py)
            native.apply_messages(self.transaction, pending)
            return
        dml = visible and not self.read_only and not getattr(self.transaction, "_mutations", ())
        for run in runs(pending):
            if isinstance(run[0], SendParams):
                self._apply_sends([p for p in run if isinstance(p, SendParams)], dml)
            else:
                for ack in run:
                    assert isinstance(ack, AckParams)
                    self._apply_ack(ack, dml)

    def _apply_sends(self, sends: list[SendParams], dml: bool) -> None:
        table = sends[0].queue
        keys = [tuple(p.key) for p in sends]
        seen: set[tuple[Any, ...]] = set()
        for key, present in zip(keys, self._present(table, keys)):
            if present or key in seen:
                raise key_taken(table, key)
            seen.add(key)
        statements = []
        with map_errors():
            for params in sends:
                key = tuple(params.key)
                columns = [*table.primary_key, table.payload_column.name]
                kinds = [*(column_type(c) for c in table.key_columns)]
                kinds.append(column_type(table.payload_column))
                values = [*encode_key(table, key), encode(table.payload_column, params.payload)]
                if params.deliver_time is not None:
                    columns.append(self.deliver)
                    kinds.append(param_types.TIMESTAMP)
                    values.append(params.deliver_time)
                trace = self.traces.pop((table.name.lower(), key), None)
                if trace is not None:
                    columns.append(TRACE_CONTEXT)
                    kinds.append(param_types.STRING)
                    values.append(trace)
                if dml:
                    statements.append(
                        _insert_statement(
                            self.database.spelling, table.name, columns, kinds, values
                        )
                    )
                else:
                    self.transaction.insert(table.name, columns=columns, values=[values])
                self.written[(table.name.lower(), key)] = True
        if statements:
            self._run_dml(statements)

    def _run_dml(self, statements: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
        """Run DML statements in one round trip; the first failure is raised."""
        from google.api_core.exceptions import from_grpc_status
        from grpc import StatusCode  # type: ignore[import-untyped]

        self.dml = True
        spelling = self.database.spelling
        statements = [bind(spelling, *statement) for statement in statements]  # type: ignore[misc]
        with map_errors():
            status, _ = self.transaction.batch_update(statements)
            if status.code:
                code = next((c for c in StatusCode if c.value[0] == status.code), None)
                raise from_grpc_status(code or StatusCode.UNKNOWN, status.message)

    def _apply_ack(self, params: AckParams, dml: bool = False) -> None:
        """Read the message's lease, refuse a missing one or a lost lease, delete it."""
        table = params.queue
        key = tuple(params.key)
        mine = self.written.get((table.name.lower(), key))
        if mine is not None and params.lease_token is None:  # sent or acked here before
            if not mine and not params.ignore_not_found:
                raise message_missing(table, params.key)
            self._delete_message(params, dml)
            return
        values, types = key_params(table, params.key)
        _, rows = query(
            self.transaction,
            queue_statements(table, self.deliver, self.database.spelling).lease_of,
            {**values, "now": params.now},
            {**types, "now": param_types.TIMESTAMP},
        )
        if not rows or mine is False:
            if params.ignore_not_found:
                return
            raise message_missing(table, params.key)
        token, expiration, now = rows[0]
        if params.lease_token is not None and (
            token != params.lease_token or expiration is None or expiration <= now
        ):
            raise lease_lost(table, params.key)
        self._delete_message(params, dml)

    def _delete_message(self, params: AckParams, dml: bool = False) -> None:
        table = params.queue
        if dml:
            values, types = key_params(table, params.key)
            quote = self.database.spelling.quote
            match = " AND ".join(f"{quote(k)} = @k{i}" for i, k in enumerate(table.primary_key))
            self._run_dml([(f"DELETE FROM {quote(table.name)} WHERE {match}", values, types)])
        else:
            with map_errors():
                self.transaction.delete(table.name, KeySet(keys=[encode_key(table, params.key)]))
        self.written[(table.name.lower(), tuple(params.key))] = False

    # ---- the end ------------------------------------------------------------------------

    def commit(self) -> None:
        """Commit (the application commits its own transaction: nothing to do then)."""
        if self.finished:
            return
        if not self.owned:
            try:
                self.flush()
            finally:
                self.finished = True
            return
        healthy = True
        try:
            self.flush()
            if self.read_only:
                return
            # with a commit marker; an unknown outcome is resolved (Aborted: not committed)
            outcome.commit(self.database, self.transaction, self.dml)
        except (Aborted, TxqueueError):
            rollback(self.transaction)
            raise
        except BaseException:
            healthy = False
            rollback(self.transaction)
            raise
        finally:
            self.finished = True
            self._release(healthy)

    def rollback(self) -> None:
        if self.finished:
            return
        self.finished = True
        self.pending = []
        if self.owned:
            if not self.read_only:
                rollback(self.transaction)
            self._release(True)

    def _release(self, healthy: bool) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            self.database.release(session, healthy)


def _insert_statement(
    spelling: Spelling, table: str, columns: list[str], kinds: list[Any], values: list[Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """An INSERT of one row as DML, for ``batch_update``."""
    quote = spelling.quote
    names = [f"v{i}" for i in range(len(columns))]
    sql = (
        f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)})"
        f" VALUES ({', '.join('@' + n for n in names)})"
    )
    return sql, dict(zip(names, values)), dict(zip(names, kinds))
