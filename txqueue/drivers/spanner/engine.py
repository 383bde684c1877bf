"""One Cloud Spanner database through the (blocking) client: sessions, transactions, queries.

Both faces' drivers call these; the asyncio face runs them on worker threads. Every
read-write transaction is begun explicitly (a transaction whose first statement fails would
otherwise hang the next one) and rolled back by txqueue on any error (the client's
``run_in_transaction`` does not roll back on API errors, and Spanner would keep the
transaction's locks until it times out). ``Aborted`` re-runs txqueue's own short
transactions a few times; an application's transaction is re-run by ``run_in_transaction``.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from google.api_core import exceptions as api

from txqueue.core.schema import Dialect
from txqueue.drivers.spanner import outcome
from txqueue.drivers.spanner.codec import decode_row, encode_params, map_errors
from txqueue.drivers.spanner.spelling import (
    GOOGLESQL,
    Spelling,
    attach,
    bind,
    spelling_for,
    spelling_of,
)
from txqueue.drivers.spanner.target import check_target
from txqueue.drivers.spanner.turns import turns_for
from txqueue.errors import Aborted, TxqueueError

__all__ = ["SpannerDatabase", "current_time", "query", "rollback", "update"]

T = TypeVar("T")

#: Spanner's emulator aborts concurrent read-write transactions; txqueue's own short ones
#: (receive, renew, release, catalog records) are re-run this many times before giving up.
OWN_ATTEMPTS = 8
#: Spanner deletes a session idle for an hour; the pool drops its own well before that.
SESSION_IDLE_LIMIT = 30 * 60
#: Read-write transactions on multiplexed sessions make the emulator answer "Transaction not
#: found" under concurrency; on pooled sessions the same conflicts are clean ``Aborted``.
MULTIPLEXED_FOR_RW = "GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW"
#: How long a schema change the emulator refuses (another one runs, or a read-write
#: transaction is open) is tried again.
DDL_WAIT = 30.0
_REFUSED_DDL = "Schema change operation rejected because a concurrent schema change"


def query(
    transaction: Any, sql: str, params: Any = None, types: dict[str, Any] | None = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run a query in ``transaction`` (or snapshot): field names and decoded rows."""
    values, inferred = encode_params(params)
    if types:
        inferred = {**(inferred or {}), **types}
        values = values or {}
        for name in types:
            values.setdefault(name, None)
    sql, values, inferred = bind(spelling_of(transaction), sql, values, inferred)
    with map_errors():
        result = transaction.execute_sql(sql, params=values, param_types=inferred)
        raw = list(result)
        fields = list(result.fields or ())
    return [f.name for f in fields], [decode_row(fields, row) for row in raw]


def update(transaction: Any, sql: str, values: Any = None, types: Any = None) -> int:
    """Run DML (``@name`` parameters, as the client takes them) in ``transaction``: its count."""
    sql, values, types = bind(spelling_of(transaction), sql, values, types)
    with map_errors():
        return int(transaction.execute_update(sql, params=values, param_types=types))


class SpannerDatabase:
    """The client's ``Database`` and a pool of sessions for explicit transactions."""

    def __init__(self, target: str) -> None:
        os.environ.setdefault(MULTIPLEXED_FOR_RW, "false")
        from google.cloud import spanner

        self.project, self.instance_id, self.database_id = check_target(target)
        self.emulated = bool(os.environ.get("SPANNER_EMULATOR_HOST"))
        self.turns = turns_for(self.emulated)  # read-write transactions take turns (turns.py)
        with map_errors():
            self.client = spanner.Client(project=self.project)
            self.instance = self.client.instance(self.instance_id)
            self.database = self.instance.database(self.database_id)
        #: how its SQL is written: the database's dialect, known once ``dialect`` has read it
        self.spelling: Spelling = GOOGLESQL
        self._idle: list[tuple[Any, float]] = []  # sessions and when they were given back
        self._lock = threading.Lock()
        self._closed = False

    # ---- sessions ----------------------------------------------------------------------

    def acquire(self) -> Any:
        """A session of the pool (created when none is idle)."""
        stale: list[Any] = []
        found = None
        with self._lock:
            while self._idle and found is None:
                session, since = self._idle.pop()
                if time.monotonic() - since < SESSION_IDLE_LIMIT:
                    found = session
                else:
                    stale.append(session)
        for session in stale:
            with contextlib.suppress(Exception):
                session.delete()
        if found is not None:
            return found
        from google.cloud.spanner_v1.session import Session

        # A regular session: ``database.session()`` hands out the multiplexed one, on which
        # the emulator answers concurrent read-write transactions with "Transaction not found".
        session = Session(self.database, is_multiplexed=False)
        with map_errors():
            session.create()
        return session

    def release(self, session: Any, healthy: bool = True) -> None:
        """Give ``session`` back; one that failed oddly is deleted instead of reused."""
        if healthy and not self._closed:
            with self._lock:
                self._idle.append((session, time.monotonic()))
            return
        with contextlib.suppress(Exception):
            session.delete()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for session, _ in idle:
            with contextlib.suppress(Exception):
                session.delete()

    # ---- transactions ------------------------------------------------------------------

    def read_write(self, function: Callable[..., T], *args: Any, marked: bool = True) -> T:
        """Run ``function(transaction, *args)`` in a read-write transaction of txqueue's own
        and commit; re-run it when Spanner aborts it, roll it back on any other error.
        A commit that writes carries a commit marker unless ``marked`` is false (the
        resolver's own): an unknown outcome is resolved (``outcome``)."""
        attempt = 0
        while True:
            attempt += 1
            session = self.acquire()
            healthy = True
            transaction = attach(session.transaction(), self.spelling)
            try:
                with map_errors():
                    transaction.begin()
                result = function(transaction, *args)
                if marked:
                    outcome.commit(self, transaction)
                else:
                    with map_errors():
                        transaction.commit()
                return result
            except Aborted:
                rollback(transaction)
                if attempt >= OWN_ATTEMPTS:
                    raise
            except TxqueueError:
                rollback(transaction)
                raise
            except BaseException:
                healthy = False
                rollback(transaction)
                raise
            finally:
                self.release(session, healthy)
            time.sleep(min(0.002 * 2**attempt, 0.2) * random.uniform(0.5, 1.5))

    def read(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function(snapshot, *args)`` on a strong read-only snapshot of a pooled
        session (the client's own ``database.snapshot()`` starts a multiplexed-session
        maintenance thread that ``database.close()`` then waits up to ten minutes for)."""
        session = self.acquire()
        healthy = True
        try:
            snapshot = attach(session.snapshot(multi_use=True), self.spelling)
            with map_errors():
                snapshot.begin()
            return function(snapshot, *args)
        except TxqueueError:
            raise
        except BaseException:
            healthy = False
            raise
        finally:
            self.release(session, healthy)

    def update_ddl(self, statements: Sequence[str]) -> None:
        """Apply DDL statements in one schema change and wait for it. The emulator refuses a
        schema change while another runs or a read-write transaction is open (of any
        process), having applied nothing: it is tried again, for up to ``DDL_WAIT``."""
        deadline = time.monotonic() + DDL_WAIT
        pause = 0.01
        while True:
            try:
                with map_errors():
                    self.database.update_ddl(list(statements)).result()
                return
            except TxqueueError as error:
                if not (self.emulated and _REFUSED_DDL in str(error)):
                    raise
                if time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(pause * 2, 0.5)

    # ---- the database itself -----------------------------------------------------------

    def dialect(self) -> Dialect:
        """The database's own dialect (fixed when it was created)."""
        _, rows = self.read(
            query,
            "SELECT option_value FROM INFORMATION_SCHEMA.DATABASE_OPTIONS"
            " WHERE option_name = 'database_dialect'",
        )
        value = rows[0][0] if rows else "GOOGLE_STANDARD_SQL"
        dialect = Dialect.POSTGRESQL if value == "POSTGRESQL" else Dialect.GOOGLESQL
        self.spelling = spelling_for(dialect)
        return dialect

    def ensure_exists(self, dialect: Dialect | None) -> None:
        """On the emulator, create a missing instance or database (in ``dialect``, else
        GoogleSQL); on Cloud Spanner the database is the operator's: NotFound names it."""
        with map_errors():
            if self.database.exists():
                return
            if not self.emulated:
                raise api.NotFound(
                    f"Cloud Spanner database {self.database.name} does not exist: create it "
                    "(gcloud spanner databases create) and connect again"
                )
            if not self.instance.exists():
                config = f"projects/{self.project}/instanceConfigs/emulator-config"
                self.client.instance(
                    self.instance_id, configuration_name=config, node_count=1
                ).create().result()
            from google.cloud.spanner_admin_database_v1 import DatabaseDialect

            kind = (
                DatabaseDialect.POSTGRESQL
                if dialect is Dialect.POSTGRESQL
                else DatabaseDialect.GOOGLE_STANDARD_SQL
            )
            with contextlib.suppress(api.AlreadyExists):  # another process made it meanwhile
                self.instance.database(self.database_id, database_dialect=kind).create().result()


def rollback(transaction: Any) -> None:
    """Roll ``transaction`` back unless it is finished; errors are of no use to anyone here."""
    if transaction.committed is not None or transaction.rolled_back:
        return
    with contextlib.suppress(Exception):
        transaction.rollback()


def current_time(transaction: Any, pinned: datetime | None) -> datetime:
    """The pinned time, else the database's clock read in ``transaction``."""
    if pinned is not None:
        return pinned
    _, rows = query(transaction, f"SELECT {spelling_of(transaction).now}")
    moment: datetime = rows[0][0]
    return moment
