"""The schema and short-hands of the driver suite: parameter objects built in one place.

The tests speak the driver protocol only (``txqueue.drivers`` protocol and parameter
objects); these helpers build the parameter objects a test does not care about, and read
the tables back with the engine's own SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from blocking import Blocking, shared_loop

from txqueue._async.drivers import open_driver as open_async_driver_for_url
from txqueue._sync.drivers import open_driver as open_sync_driver_for_url
from txqueue.core.schema import Dialect, Table
from txqueue.drivers.engines import traits_for
from txqueue.drivers.protocol import (
    AckParams,
    ReceiveParams,
    ReleaseParams,
    RenewParams,
    SendParams,
    WriteKind,
    WriteParams,
)
from txqueue.models import LeaseRenewal, Message
from txqueue.sql.ddl import parse_ddl

#: GoogleSQL on both engines, so one schema and one set of values serve every driver.
DDL = (
    "CREATE TABLE Accounts (Id INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (Id)",
    "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
)
#: The same schema for a PostgreSQL-dialect Cloud Spanner database (its dialect is its own).
DDL_POSTGRESQL = (
    "CREATE TABLE accounts (id bigint NOT NULL, name varchar, PRIMARY KEY (id))",
    "CREATE QUEUE jobs (id varchar(36) NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
)
LEASE = timedelta(seconds=30)


def open_driver(face: str, url: str) -> Any:
    """The generated sync driver for ``url``, or the asyncio one behind a Blocking view."""
    if face == "sync":
        return open_sync_driver_for_url(url, None)
    loop = shared_loop()
    return Blocking(loop.run(open_async_driver_for_url(url, None)), loop)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Harness:
    """A driver (sync, or asyncio behind a Blocking view) with the suite's schema applied."""

    def __init__(
        self, driver: Any, url: str, jobs: Table, accounts: Table, dialect: Dialect
    ) -> None:
        self.driver = driver
        self.url = url
        #: the database's dialect: GoogleSQL, or PostgreSQL on a PostgreSQL-dialect Spanner
        self.dialect = dialect
        #: what the engine's SQL looks like (its parameter marker), from the engine registry
        self.traits = traits_for(url)
        self.jobs = jobs
        self.accounts = accounts

    @classmethod
    def create(cls, driver: Any, url: str) -> Harness:
        # a Spanner database's dialect is its own: GoogleSQL or PostgreSQL
        dialect = driver.initialize(None if url.startswith("spanner:") else Dialect.GOOGLESQL)
        schema = DDL_POSTGRESQL if dialect is Dialect.POSTGRESQL else DDL
        driver.apply_ddl([parse_ddl(text, dialect) for text in schema])
        tables, _ = driver.load_catalog()
        return cls(driver, url, tables["jobs"], tables["accounts"], dialect)

    def parse_ddl(self, googlesql: str, postgresql: str) -> Any:
        """A DDL statement in the database's dialect (given in both)."""
        return parse_ddl(
            postgresql if self.dialect is Dialect.POSTGRESQL else googlesql, self.dialect
        )

    # ---- writing ----------------------------------------------------------------------------

    def send(self, *ids: str, deliver_time: datetime | None = None, payload: bytes = b"x") -> None:
        """Send one message per id in one committed transaction."""
        transaction = self.driver.begin()
        try:
            for message_id in ids:
                transaction.send(SendParams(self.jobs, (message_id,), payload, deliver_time))
            transaction.commit()
        finally:
            transaction.rollback()

    def ack(self, message_id: str, lease_token: str | None, ignore_not_found: bool = False) -> None:
        transaction = self.driver.begin()
        try:
            transaction.ack(AckParams(self.jobs, (message_id,), lease_token, ignore_not_found))
            transaction.commit()
        finally:
            transaction.rollback()

    def add_accounts(self, *rows: tuple[int, str | None]) -> None:
        transaction = self.driver.begin()
        try:
            transaction.write(WriteParams(self.accounts, WriteKind.INSERT, ("Id", "Name"), rows))
            transaction.commit()
        finally:
            transaction.rollback()

    # ---- leasing ----------------------------------------------------------------------------

    def receive_now(
        self, max_batch_size: int = 10, lease: timedelta = LEASE, now: datetime | None = None
    ) -> list[Message]:
        return list(self.driver.receive_now(ReceiveParams(self.jobs, max_batch_size, lease, now)))

    def renew(
        self, tokens: Sequence[str], extension: timedelta = LEASE, now: datetime | None = None
    ) -> list[LeaseRenewal]:
        return list(self.driver.renew(RenewParams(self.jobs, list(tokens), extension, now)))

    def release(
        self,
        tokens: Sequence[str],
        delay: timedelta = timedelta(0),
        now: datetime | None = None,
        error: str | None = None,
    ) -> int:
        params = ReleaseParams(self.jobs, list(tokens), delay, now, error)
        return int(self.driver.release(params))

    # ---- reading ----------------------------------------------------------------------------

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (the engine's own SQL), in a read-only transaction."""
        transaction = self.driver.begin(read_only=True)
        try:
            return [tuple(row) for row in transaction.execute_sql(sql, params)]
        finally:
            transaction.rollback()

    def job_ids(self) -> list[str]:
        return [row[0] for row in self.query("SELECT id FROM jobs ORDER BY id")]

    def accounts_rows(self) -> list[tuple[Any, ...]]:
        return self.query("SELECT id, name FROM accounts ORDER BY id")
