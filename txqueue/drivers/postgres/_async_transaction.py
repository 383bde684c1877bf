"""A PostgreSQL transaction for the asyncio face.

Round trips (and, on the client, statements) are what a transaction costs beyond its
commit, so this class spends few: BEGIN travels in one pipeline with the first statement;
sends and acks are buffered (like Spanner's mutations) and applied as one statement per run
of the same operation. At commit they travel in one pipeline with the commit marker (folded
into the first run's statement; it resolves a lost COMMIT reply) and COMMIT itself. A
transaction of sends and acks only needs neither BEGIN nor COMMIT (an implicit transaction,
committed at the pipeline's Sync): a lone send or ack is one statement, as raw SQL's is.
Receivers are woken after COMMIT by the driver's ``Notifier``, off this path (a NOTIFY inside
the transaction would serialise commits). A run that cannot apply in full fails
its statement inside the server, so the COMMIT behind it never runs. Errors of buffered
operations surface at the next statement or at commit, as Spanner's mutation errors surface
at commit.

The sync twin ``txqueue/drivers/postgres/_sync_transaction.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import psycopg

from txqueue.core.schema import Catalog, Table, catalog_from_rows
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
from txqueue.drivers.buffered import FLUSH_AT, runs
from txqueue.drivers.postgres import application, writes
from txqueue.drivers.postgres.codec import checked_token_parts, encode, map_errors
from txqueue.drivers.postgres.runs import commit_statement, encoded_key, run_statement
from txqueue.drivers.postgres.statements import (
    CHANNEL,
    COMMIT_MARKER,
    NOTIFY_SENT,
    ident,
    queue_statements,
    with_commit_marker,
)
from txqueue.errors import (
    Aborted,
    CommitOutcomeUnknown,
    NotFound,
    OutOfRange,
    Unavailable,
)
from txqueue.models import ResultSet

__all__ = ["AsyncPostgresTransaction"]


#: The SQLSTATE of ``txqueue_refuse``: a buffered item could not apply.
_REFUSED = "TQ001"
#: A run of sends met a taken key (or a unique index of the application's).
_UNIQUE_VIOLATION = "23505"


class AsyncPostgresTransaction:
    """A transaction on a pooled connection, or a savepoint in the caller's own transaction."""

    def __init__(self, driver: Any, connection: Any, owned: bool, read_only: bool = False) -> None:
        self._driver = driver
        self._connection = connection
        self._owned = owned
        self._read_only = read_only
        self._begun = not owned  # the caller's transaction is open (our savepoint too)
        self._pending: list[SendParams | AckParams] = []
        self._sent: set[str] = set()
        self._token: int | None = None  # the commit marker's, once the COMMIT is sent
        self._finished = False

    # ---- statements --------------------------------------------------------------------

    async def load_catalog(self) -> Catalog:
        return await read_catalog(self._connection)

    async def application_tables(self, names: Sequence[str] | None) -> dict[str, Table]:
        with map_errors():
            cursor = await self._connection.execute(
                application.APPLICATION_COLUMNS, application.parameters(names)
            )
            return application.application_tables(await cursor.fetchall())

    async def _execute(self, sql: str, params: Any = None) -> Any:
        """Run one statement after the buffered operations; BEGIN rides along if needed."""
        await self._flush()
        with map_errors():
            if self._begun:
                return await self._connection.execute(sql, params)
            self._begun = True
            async with self._connection.pipeline():
                await self._connection.execute("BEGIN READ ONLY" if self._read_only else "BEGIN")
                cursor = await self._connection.execute(sql, params)
            return cursor

    async def _begin_in_pipeline(self) -> None:
        """Inside a pipeline block: send BEGIN first when the transaction has not begun."""
        if not self._begun:
            self._begun = True
            await self._connection.execute("BEGIN READ ONLY" if self._read_only else "BEGIN")

    async def write(self, params: WriteParams) -> None:
        table, columns = params.table, params.columns
        schema = [table.column(c) for c in columns]
        rows = [[encode(c, v) for c, v in zip(schema, row)] for row in params.rows]
        positions = writes.key_positions(table, columns)
        await self._flush()
        with map_errors():
            cursor = self._connection.cursor()  # outlives the pipeline: results arrive at sync
            async with self._connection.pipeline():
                await self._begin_in_pipeline()
                if params.kind is WriteKind.INSERT:
                    await cursor.executemany(writes.insert_sql(table, columns), rows)
                elif params.kind is WriteKind.INSERT_OR_UPDATE:
                    await cursor.executemany(writes.upsert_sql(table, columns), rows)
                elif params.kind is WriteKind.REPLACE:
                    keys = [[row[i] for i in positions] for row in rows]
                    await cursor.executemany(writes.delete_sql(table), keys)
                    await cursor.executemany(writes.insert_sql(table, columns), rows)
                else:
                    sql = writes.update_sql(table, columns)
                    if sql is None:
                        return
                    others = [i for i in range(len(columns)) if i not in positions]
                    arguments = [[r[i] for i in others] + [r[i] for i in positions] for r in rows]
                    await cursor.executemany(sql, arguments, returning=True)
            if params.kind is WriteKind.UPDATE:
                for row in rows:  # results are read after the pipeline's sync
                    if cursor.rowcount == 0:
                        key = tuple(row[i] for i in positions)
                        raise NotFound(f"table {table.name} has no row with key {key!r}")
                    cursor.nextset()

    async def delete(self, params: DeleteParams) -> int:
        table = params.table
        if params.keys is None:
            cursor = await self._execute(f"DELETE FROM {ident(table.name)}")
            return int(cursor.rowcount)
        await self._flush()
        keys = [encoded_key(table, key) for key in params.keys]
        with map_errors():
            cursor = self._connection.cursor()  # outlives the pipeline: results arrive at sync
            async with self._connection.pipeline():
                await self._begin_in_pipeline()
                await cursor.executemany(writes.delete_sql(table), keys, returning=True)
            total = 0
            for _ in keys:
                total += max(cursor.rowcount, 0)
                cursor.nextset()
        return total

    def note_sent(self, queue: str) -> None:
        self._sent.add(queue)  # receivers woken after the COMMIT

    async def flush(self) -> None:
        await self._flush()

    async def record_once(self, key: str) -> bool:
        cursor = await self._execute(
            "INSERT INTO txqueue_ledger (key) VALUES (%s) ON CONFLICT DO NOTHING", [key]
        )
        return bool(cursor.rowcount)

    async def execute_sql(self, sql: str, params: Any = None) -> ResultSet:
        cursor = await self._execute(sql, params)
        with map_errors():
            rows = [tuple(row) for row in await cursor.fetchall()] if cursor.description else []
        return ResultSet([d.name for d in cursor.description or ()], rows)

    async def execute_update(
        self, sql: str, params: Any = None, expected_rows: int | None = None
    ) -> int:
        if expected_rows is None:
            cursor = await self._execute(sql, params)
            return int(cursor.rowcount)
        # A savepoint scopes ASSERT_ROWS_MODIFIED to this statement: PostgreSQL would
        # otherwise abort the whole transaction on an error.
        await self._execute("SAVEPOINT txqueue_assert")
        try:
            cursor = await self._execute(sql, params)
        except BaseException:
            await self._execute("ROLLBACK TO SAVEPOINT txqueue_assert")
            raise
        count = int(cursor.rowcount)
        if count != expected_rows:
            await self._execute("ROLLBACK TO SAVEPOINT txqueue_assert")
            raise OutOfRange(
                f"ASSERT_ROWS_MODIFIED {expected_rows} failed: {count} row(s) modified"
            )
        await self._execute("RELEASE SAVEPOINT txqueue_assert")
        return count

    # ---- buffered sends and acks -------------------------------------------------------

    async def send(self, params: SendParams) -> None:
        self._pending.append(params)
        self._sent.add(params.queue.name)
        if len(self._pending) >= FLUSH_AT:
            await self._flush()

    async def store_trace_context(self, params: SendParams, context: str) -> None:
        statement = queue_statements(params.queue, self._driver.deliver_column).trace
        await self._execute(statement, [context, *encoded_key(params.queue, params.key)])

    async def ack(self, params: AckParams) -> None:
        self._pending.append(params)
        if len(self._pending) >= FLUSH_AT:
            await self._flush()

    async def _flush(self) -> None:
        """Apply the buffered operations: one statement per run, all in one pipeline.

        A run of sends (or acks) to one queue travels as one ``INSERT … SELECT FROM unnest``
        (``DELETE … USING unnest``) whose RETURNING names the rows it touched; a row it did
        not touch is a taken key, a lost lease or a missing message, examined afterwards
        (the transaction stays usable, as after any refused mutation).
        """
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        deliver = self._driver.deliver_column
        results = []
        with map_errors():
            async with self._connection.pipeline():
                await self._begin_in_pipeline()
                for items in runs(pending):
                    sql, arguments = run_statement(items, deliver, refusing=False)
                    results.append((items, await self._connection.execute(sql, arguments)))
            # Every item touched a row (a statement touches a row once): nothing to examine.
            partial = [(items, c) for items, c in results if c.rowcount != len(items)]
            touched = [Counter(map(tuple, await cursor.fetchall())) for _, cursor in partial]
        for (items, _), done in zip(partial, touched):
            for item in items:
                key = tuple(encoded_key(item.queue, item.key))
                if done[key] > 0:
                    done[key] -= 1
                else:
                    await self._fail(item)

    async def _fail(self, item: SendParams | AckParams) -> None:
        """Raise the error of a buffered item its statement did not apply (within this
        transaction, which stays usable); an optional ack of a missing message passes."""
        table = item.queue
        if isinstance(item, SendParams):
            raise key_taken(table, item.key)
        if item.lease_token is not None:
            statements = queue_statements(table, self._driver.deliver_column)
            with map_errors():
                key = encoded_key(table, item.key)
                cursor = await self._connection.execute(statements.exists, key)
                exists = await cursor.fetchone() is not None
            if exists:
                raise lease_lost(table, item.key)
        if not item.ignore_not_found:
            raise message_missing(table, item.key)

    async def _flush_and_commit(self) -> None:
        """One pipeline: the buffered runs (as statements that fail when an item cannot
        apply, so the server skips the rest), the commit marker and COMMIT; when nothing ran
        before, the runs and the marker without BEGIN and COMMIT.

        Acks that may miss (``ignore_not_found``) need their rows examined before COMMIT:
        then the runs are flushed first and COMMIT follows in a second round trip.
        """
        if any(isinstance(item, AckParams) and item.ignore_not_found for item in self._pending):
            await self._flush()
        pending, self._pending = self._pending, []
        deliver = self._driver.deliver_column
        grouped = runs(pending)
        # Nothing ran yet: the statements up to the pipeline's Sync are one transaction by
        # themselves, committed at that Sync, so BEGIN and COMMIT are left out: a lone send
        # or ack is then one statement, as raw SQL's is.
        implicit = bool(grouped) and not (self._begun or self._read_only)
        # One statement alone goes without a pipeline (psycopg's costs ~80 µs of CPU more).
        alone = implicit and len(grouped) == 1
        # Alone, it runs on the connection's kept cursor (its result is not read).
        execute = self._connection.execute_kept if alone else self._connection.execute
        with map_errors():
            try:
                async with nullcontext() if alone else self._connection.pipeline():
                    if not implicit:
                        await self._begin_in_pipeline()
                    marker = [] if self._read_only else self._new_marker()
                    for number, items in enumerate(grouped):
                        sql, arguments = commit_statement(items, deliver, number)
                        if marker:  # the first run's statement carries the marker too
                            sql, arguments = with_commit_marker(sql), [*marker, *arguments]
                        await execute(sql, arguments)
                        marker = []
                    if not implicit:
                        await self._end_in_pipeline(marker)
            except psycopg.Error as error:
                if error.sqlstate == _REFUSED:
                    number = int((error.diag.message_detail or "").rpartition(":")[2])
                    raise _Refused(grouped[number]) from error
                if error.sqlstate != _UNIQUE_VIOLATION:
                    raise
                sends = _sends_to(grouped, error.diag.table_name)
                if not sends:
                    raise
                raise _Refused(sends, violation=error) from error

    def _new_marker(self) -> list[Any]:
        """The arguments of this commit's marker: the connection's slot, a fresh token."""
        self._token = random.getrandbits(63)
        return [self._connection.commit_slot, self._token]

    async def _end_in_pipeline(self, marker: list[Any]) -> None:
        """Inside the commit's pipeline: the commit marker unless a run's statement carried
        it (a transaction that wrote records a token first known here, so a lost reply can be
        resolved), then COMMIT."""
        if marker:
            await self._connection.execute(COMMIT_MARKER, marker)
        await self._connection.execute("COMMIT")

    # ---- ending --------------------------------------------------------------------------

    async def commit(self) -> None:
        if self._finished:
            return
        if not self._owned:
            try:
                await self._flush()
            except BaseException:
                await self.rollback()
                raise
            self._finished = True
            if self._sent:  # the application's COMMIT, which we do not see, delivers it
                self._driver.floors.forget(self._sent)
                await self._execute(NOTIFY_SENT, [CHANNEL, sorted(self._sent)])
            await self._execute("RELEASE SAVEPOINT txqueue")
            return
        if not self._begun and not self._pending:
            self._finished = True  # nothing ran: nothing to commit
            await self._driver.put(self._connection)
            return
        try:
            await self._flush_and_commit()
        except _Refused as refused:
            await self.rollback()
            if refused.violation is not None and not await self._on_primary_key(refused.violation):
                with map_errors():  # a unique index of the application's: its own error
                    raise refused.violation from None
            await self._explain(refused.items)
        except Unavailable as error:
            if not (self._connection.broken or self._connection.closed):
                await self.rollback()  # the server answered: nothing committed
                raise
            self._finished = True
            try:
                await self._resolve(error)
            finally:
                await self._driver.put(self._connection)
            self._notify()
            return
        except BaseException:
            await self.rollback()
            raise
        self._finished = True
        await self._driver.put(self._connection)
        self._notify()

    def _notify(self) -> None:
        """After COMMIT: wake the receivers of the queues this transaction sent to."""
        if self._sent:
            self._driver.notify(self._sent)

    async def _on_primary_key(self, violation: psycopg.Error) -> bool:
        """Whether a unique_violation was the primary key's (a taken key) and not that of a
        unique index the application added to the queue."""
        diag = violation.diag
        rows = await self._driver.query(
            "SELECT 1 FROM pg_constraint WHERE contype = 'p' AND conname = %s"
            " AND conrelid = to_regclass(quote_ident(%s) || '.' || quote_ident(%s))",
            [diag.constraint_name, diag.schema_name, diag.table_name],
        )
        return bool(rows)

    async def _explain(self, items: list[SendParams] | list[AckParams]) -> None:
        """Raise the error of the first item of a refused run, found by looking at the rows
        as they are now (the transaction is rolled back by then, its connection returned);
        if every item would apply now, the rows changed meanwhile: ``Aborted``, run it again.
        (No ``ignore_not_found`` acks here: those runs are examined before COMMIT.)"""
        seen: set[tuple[Any, ...]] = set()
        for item in items:
            table = item.queue
            key = encoded_key(table, item.key)
            again = tuple(key) in seen  # an earlier item of the run had this key
            seen.add(tuple(key))
            statements = queue_statements(table, self._driver.deliver_column)
            exists = again or bool(await self._driver.query(statements.exists, key))
            if isinstance(item, SendParams):
                if exists:
                    raise key_taken(table, item.key)
            elif again or not exists:
                raise message_missing(table, item.key)  # acked by an earlier item, or gone
            elif item.lease_token is not None:
                stored, location = checked_token_parts(item.lease_token)
                held = [*key, stored, location, item.now]
                if not await self._driver.query(statements.lease_held, held):
                    raise lease_lost(table, item.key)
        raise Aborted("buffered sends or acks could not apply: the rows changed meanwhile")

    async def _resolve(self, error: Unavailable) -> None:
        """The connection dropped during the commit's pipeline: did COMMIT happen?"""
        if self._token is None:
            raise error  # a read-only transaction: there is nothing to resolve
        slot = self._connection.commit_slot
        outcome = await self._driver.resolve_commit(slot, self._token)
        if outcome == "committed":
            return
        if outcome == "aborted":
            raise Aborted(
                f"the connection dropped at COMMIT and the transaction was rolled back: {error}"
            ) from error
        raise CommitOutcomeUnknown(
            f"the connection dropped at COMMIT and its outcome could not be determined: {error}"
        ) from error

    async def rollback(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._pending = []
        if self._owned:
            try:
                if self._begun and not self._connection.closed:
                    with map_errors():
                        await self._connection.execute("ROLLBACK")
            finally:
                await self._driver.put(self._connection)
        else:
            with map_errors():
                await self._connection.execute("ROLLBACK TO SAVEPOINT txqueue")
                await self._connection.execute("RELEASE SAVEPOINT txqueue")


class _Refused(Exception):
    """A run of buffered items failed its statement in the commit's pipeline (sends: with
    ``violation``, a unique_violation on their queue)."""

    def __init__(self, items: list[Any], violation: psycopg.Error | None = None) -> None:
        super().__init__("refused")
        self.items = items
        self.violation = violation


def _sends_to(grouped: list[list[Any]], table: str | None) -> list[SendParams]:
    """The buffered sends to ``table`` (as the server names it), in order."""
    return [
        item
        for items in grouped
        if isinstance(items[0], SendParams) and items[0].queue.name.lower() == table
        for item in items
    ]


async def read_catalog(connection: Any) -> Catalog:
    """Every table and index txqueue knows, read on ``connection`` (inside its transaction,
    if one is open)."""
    with map_errors():
        cursor = await connection.execute("SELECT kind, definition FROM txqueue_objects")
        return catalog_from_rows(await cursor.fetchall())
