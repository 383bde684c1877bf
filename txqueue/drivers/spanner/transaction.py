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

from typing import Any

from google.cloud.spanner_v1 import KeySet, param_types

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
from txqueue.drivers.spanner import catalog
from txqueue.drivers.spanner.codec import (
    encode,
    encode_key,
    encode_params,
    key_params,
    map_errors,
    positional,
)
from txqueue.drivers.spanner.engine import SpannerDatabase, query, rollback
from txqueue.drivers.spanner.statements import TRACE_CONTEXT, queue_statements, quote
from txqueue.errors import (
    Aborted,
    AlreadyExists,
    CommitOutcomeUnknown,
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    OutOfRange,
    TxqueueError,
    Unavailable,
)
from txqueue.models import ResultSet

__all__ = ["Work"]

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
        except BaseException:
            if session is not None:
                database.release(session, healthy=False)
            raise
        self.read_only = read_only

    # ---- reads and statements ----------------------------------------------------------

    def load_catalog(self) -> Catalog:
        return catalog.load_catalog(self.transaction)

    def execute_sql(self, sql: str, params: Any) -> ResultSet:
        self.flush()
        fields, rows = query(self.transaction, *positional(sql, params))
        return ResultSet(fields, rows)

    def execute_update(self, sql: str, params: Any, expected_rows: int | None) -> int:
        self.flush()
        sql, params = positional(sql, params)
        values, types = encode_params(params)
        if expected_rows is not None:
            sql = f"{sql.rstrip().rstrip(';')} ASSERT_ROWS_MODIFIED {int(expected_rows)}"
        try:
            with map_errors():
                count = self.transaction.execute_update(sql, params=values, param_types=types)
        except (OutOfRange, InvalidArgument) as error:
            # The emulator says INVALID_ARGUMENT where Spanner documents OUT_OF_RANGE.
            if expected_rows is None or "ASSERT_ROWS_MODIFIED" not in str(error):
                raise
            raise OutOfRange(f"ASSERT_ROWS_MODIFIED {expected_rows} failed: {error}") from error
        return int(count)

    def record_once(self, key: str) -> bool:
        if key in self.recorded:  # its insert is a mutation, which no read here can see
            return False
        self.flush()
        _, rows = query(
            self.transaction,
            "SELECT 1 FROM txqueue_ledger WHERE key = @key",
            {"key": key},
        )
        if rows:
            return False
        from google.cloud.spanner_v1 import COMMIT_TIMESTAMP

        with map_errors():
            self.transaction.insert(
                "txqueue_ledger", columns=("key", "recorded_at"), values=[(key, COMMIT_TIMESTAMP)]
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
        if params.kind in (WriteKind.INSERT, WriteKind.UPDATE):
            places = [params.columns.index(k) for k in table.primary_key]
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
            key = tuple(row[params.columns.index(k)] for k in table.primary_key)
            self.written[(table.name.lower(), key)] = True

    def _present(self, table: Table, keys: list[tuple[Any, ...]]) -> list[bool]:
        """Whether each key has a row, as this transaction would commit it (its own earlier
        mutations included, which its reads cannot see)."""
        unknown = [k for k in keys if (table.name.lower(), k) not in self.written]
        stored: set[tuple[Any, ...]] = set()
        if unknown:
            names = [quote(k) for k in table.primary_key]
            values: dict[str, Any] = {}
            types: dict[str, Any] = {}
            matches = []
            for n, key in enumerate(unknown):
                one, kinds = key_params(table, key)
                values.update({f"{name}_{n}": v for name, v in one.items()})
                types.update({f"{name}_{n}": t for name, t in kinds.items()})
                matches.append(
                    "(" + " AND ".join(f"{k} = @k{i}_{n}" for i, k in enumerate(names)) + ")"
                )
            _, rows = query(
                self.transaction,
                f"SELECT {', '.join(names)} FROM {quote(table.name)} WHERE {' OR '.join(matches)}",
                values,
                types,
            )
            stored = {tuple(row) for row in rows}
        return [self.written.get((table.name.lower(), k), k in stored) for k in keys]

    def delete(self, params: DeleteParams) -> int:
        """A delete mutation, in order with the others; the count reads the keys first."""
        self.flush()
        table = params.table
        if params.keys is None:
            _, rows = query(self.transaction, f"SELECT COUNT(*) FROM {quote(table.name)}")
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

    def flush(self) -> None:
        """Apply the buffered sends and acks, in order, refusing what the other engines
        refuse (a taken key, a missing message, a lost lease) before any mutation."""
        pending, self.pending = self.pending, []
        for run in runs(pending):
            if isinstance(run[0], SendParams):
                self._apply_sends([p for p in run if isinstance(p, SendParams)])
            else:
                for ack in run:
                    assert isinstance(ack, AckParams)
                    self._apply_ack(ack)

    def _apply_sends(self, sends: list[SendParams]) -> None:
        table = sends[0].queue
        keys = [tuple(p.key) for p in sends]
        seen: set[tuple[Any, ...]] = set()
        for key, present in zip(keys, self._present(table, keys)):
            if present or key in seen:
                raise key_taken(table, key)
            seen.add(key)
        with map_errors():
            for params in sends:
                key = tuple(params.key)
                columns = [*table.primary_key, table.payload_column.name]
                values = [*encode_key(table, key), encode(table.payload_column, params.payload)]
                if params.deliver_time is not None:
                    columns.append(self.deliver)
                    values.append(params.deliver_time)
                trace = self.traces.pop((table.name.lower(), key), None)
                if trace is not None:
                    columns.append(TRACE_CONTEXT)
                    values.append(trace)
                self.transaction.insert(table.name, columns=columns, values=[values])
                self.written[(table.name.lower(), key)] = True

    def _apply_ack(self, params: AckParams) -> None:
        """Read the message's lease, refuse a missing one or a lost lease, delete it."""
        table = params.queue
        key = tuple(params.key)
        mine = self.written.get((table.name.lower(), key))
        if mine is not None and params.lease_token is None:  # sent or acked here before
            if not mine and not params.ignore_not_found:
                raise message_missing(table, params.key)
            self._delete_message(params)
            return
        values, types = key_params(table, params.key)
        _, rows = query(
            self.transaction,
            queue_statements(table, self.deliver).lease_of,
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
        self._delete_message(params)

    def _delete_message(self, params: AckParams) -> None:
        table = params.queue
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
            with map_errors():
                if self.read_only:
                    return
                self.transaction.commit()
        except (DeadlineExceeded, Unavailable) as error:
            rollback(self.transaction)
            raise CommitOutcomeUnknown(
                f"the commit's outcome is unknown ({error}); txqueue does not guess"
            ) from error
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
