"""The systems a benchmark compares: txqueue's public API, and raw SQL on the same engine.

The raw baselines do the least a correct queue must: one INSERT per send; a receive that
leases with ``UPDATE … RETURNING`` (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; on Cloud Spanner
a read of the oldest ready rows and update mutations in one read-write transaction of the
google-cloud-spanner client); an ack that DELETEs. They keep no lease tokens, no redelivery backoff, no wake-ups: they bound what any
queue on that engine can reach.
"""

from __future__ import annotations

import base64
import os
import secrets
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import txqueue
from txqueue.drivers.engines import POSTGRES, SPANNER, SQLITE, parse_url, traits_for

QUEUE = "TxqueueBench"
DDL = "CREATE QUEUE TxqueueBench (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


class System(ABC):
    """One system under test; ``drain_loop`` runs inside a worker process."""

    name = "?"

    def __init__(self, url: str) -> None:
        self.url = url

    @abstractmethod
    def setup(self) -> None:
        """Create the queue if needed and empty it."""

    @abstractmethod
    def send(self, payloads: list[bytes], batch: int) -> None:
        """Send ``payloads`` in transactions of ``batch``."""

    @abstractmethod
    def pending(self) -> int:
        """Messages sent and not yet acked."""

    @abstractmethod
    def drain_loop(
        self, batch: int, on_message: Callable[[bytes], None], stop: Callable[[], bool]
    ) -> None:
        """Receive, hand each payload to ``on_message``, ack; until ``stop()``."""

    @abstractmethod
    def close(self) -> None:
        """Close connections."""


def random_key() -> str:
    """A random key of 32 hex digits (the shape of the shared harness's UUID4 hex keys):
    every insert lands at a random place in the primary key's index. Made from the bytes
    directly: ``uuid.uuid4().hex`` costs ~2 µs of the client's CPU, a quarter of a batched
    send's, and raw SQL's numbered rows make no key at all."""
    return os.urandom(16).hex()


def ordered_key() -> str:
    """A time-ordered key (in the manner of UUIDv7: nanoseconds, then random bits): inserts
    append to the primary key's index and a batch's rows share its pages."""
    return f"{time.time_ns():016x}{secrets.token_hex(8)}"


KEYS: dict[str, Callable[[], str]] = {"random": random_key, "ordered": ordered_key}


class TxqueueSystem(System):
    """txqueue through its public API: batch() sends, receive() + token-fenced acks."""

    name = "txqueue"

    def __init__(self, url: str, keys: str = "random") -> None:
        super().__init__(url)
        self.db = txqueue.connect(url, dialect="googlesql")
        self.key = KEYS[keys]

    def setup(self) -> None:
        """Create the queue if needed and empty it as the raw baseline empties its table: on
        PostgreSQL a ``TRUNCATE`` (a delete of every row would leave the previous section's
        rows as dead tuples for this one to skip, and autovacuum at work beside it)."""
        if QUEUE.lower() not in {t.name.lower() for t in self.db.queues()}:
            self.db.update_ddl([DDL])
        parsed = parse_url(self.url)
        if traits_for(self.url) is not POSTGRES:  # the raw baseline's own way, per engine
            self.db.run_in_transaction(lambda t: t.delete(QUEUE, None))
            return
        import psycopg

        from txqueue.drivers.postgres.statements import ident  # the driver's name for it

        with psycopg.connect(parsed.target, autocommit=True) as connection:
            connection.execute(f"TRUNCATE {ident(QUEUE)}")

    def send(self, payloads: list[bytes], batch: int) -> None:
        for start in range(0, len(payloads), batch):
            with self.db.batch() as b:
                for payload in payloads[start : start + batch]:
                    b.send(QUEUE, (self.key(),), payload)

    def pending(self) -> int:
        info = self.db.queue_info(QUEUE)
        return info.ready + info.leased + info.scheduled

    def drain_loop(
        self, batch: int, on_message: Callable[[bytes], None], stop: Callable[[], bool]
    ) -> None:
        while not stop():
            held: list[txqueue.Message] = []
            stream = self.db.receive(
                QUEUE, max_duration=timedelta(milliseconds=500), max_batch_size=batch
            )
            for message in stream:
                on_message(message.payload)
                held.append(message)
                if message.last_in_batch:
                    self._ack(held)
                    held = []
                if stop():
                    break
            if held:
                self._ack(held)

    def _ack(self, messages: list[txqueue.Message]) -> None:
        def work(transaction: txqueue.Transaction) -> None:
            for message in messages:
                transaction.ack(QUEUE, message.key, lease_token=message.lease_token)

        self.db.run_in_transaction(work)

    def close(self) -> None:
        self.db.close()


class RawSqliteSystem(System):
    """Raw sqlite3 in WAL mode at the URL's synchronous setting."""

    name = "raw-sqlite"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        parsed = parse_url(url)
        self.path = parsed.target + ".raw"
        self.synchronous = parsed.options.get("synchronous", "FULL")
        self.connection = self._connect()

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={self.synchronous}")
        return connection

    def setup(self) -> None:
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS txqueue_bench_raw (id INTEGER PRIMARY KEY, payload BLOB NOT NULL,"
            " ready_at REAL NOT NULL DEFAULT 0)"
        )
        self.connection.execute(
            "CREATE INDEX IF NOT EXISTS txqueue_bench_raw_ready ON txqueue_bench_raw (ready_at)"
        )
        self.connection.execute("DELETE FROM txqueue_bench_raw")

    def send(self, payloads: list[bytes], batch: int) -> None:
        for start in range(0, len(payloads), batch):
            chunk = [(p,) for p in payloads[start : start + batch]]
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.executemany("INSERT INTO txqueue_bench_raw (payload) VALUES (?)", chunk)
            self.connection.execute("COMMIT")

    def pending(self) -> int:
        return int(self.connection.execute("SELECT count(*) FROM txqueue_bench_raw").fetchone()[0])

    def drain_loop(
        self, batch: int, on_message: Callable[[bytes], None], stop: Callable[[], bool]
    ) -> None:
        connection = self.connection
        while not stop():
            now = time.time()
            connection.execute("BEGIN IMMEDIATE")
            rows = connection.execute(
                "UPDATE txqueue_bench_raw SET ready_at = ? WHERE id IN (SELECT id FROM txqueue_bench_raw WHERE"
                " ready_at <= ? ORDER BY ready_at LIMIT ?) RETURNING id, payload",
                (now + 10, now, batch),
            ).fetchall()
            connection.execute("COMMIT")
            if not rows:
                time.sleep(0.002)
                continue
            for _, payload in rows:
                on_message(payload)
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(
                "DELETE FROM txqueue_bench_raw WHERE id = ?", [(r[0],) for r in rows]
            )
            connection.execute("COMMIT")

    def close(self) -> None:
        self.connection.close()


class RawPostgresSystem(System):
    """Raw psycopg: autocommit statements, SKIP LOCKED leasing, ``DELETE … = ANY`` acks."""

    name = "raw-postgres"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        import psycopg

        self.connection: Any = psycopg.connect(parse_url(url).target, autocommit=True)

    def setup(self) -> None:
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS txqueue_bench_raw (id bigserial PRIMARY KEY, payload bytea NOT NULL,"
            " ready_at timestamptz NOT NULL DEFAULT now())"
        )
        self.connection.execute(
            "CREATE INDEX IF NOT EXISTS txqueue_bench_raw_ready ON txqueue_bench_raw (ready_at)"
        )
        self.connection.execute("TRUNCATE txqueue_bench_raw")

    def send(self, payloads: list[bytes], batch: int) -> None:
        if batch == 1:
            for payload in payloads:
                self.connection.execute(
                    "INSERT INTO txqueue_bench_raw (payload) VALUES (%s)", (payload,), prepare=True
                )
            return
        for start in range(0, len(payloads), batch):
            with self.connection.transaction(), self.connection.cursor() as cursor:
                rows = [(p,) for p in payloads[start : start + batch]]
                cursor.executemany("INSERT INTO txqueue_bench_raw (payload) VALUES (%s)", rows)

    def pending(self) -> int:
        return int(self.connection.execute("SELECT count(*) FROM txqueue_bench_raw").fetchone()[0])

    def drain_loop(
        self, batch: int, on_message: Callable[[bytes], None], stop: Callable[[], bool]
    ) -> None:
        while not stop():
            rows = self.connection.execute(
                "UPDATE txqueue_bench_raw SET ready_at = now() + interval '10 s' WHERE id IN (SELECT id FROM"
                " txqueue_bench_raw WHERE ready_at <= now() ORDER BY ready_at LIMIT %s FOR UPDATE SKIP LOCKED)"
                " RETURNING id, payload",
                (batch,),
                prepare=True,
            ).fetchall()
            if not rows:
                time.sleep(0.002)
                continue
            for _, payload in rows:
                on_message(payload)
            ids = [r[0] for r in rows]
            self.connection.execute(
                "DELETE FROM txqueue_bench_raw WHERE id = ANY(%s)", (ids,), prepare=True
            )

    def close(self) -> None:
        self.connection.close()


class RawSpannerSystem(System):
    """The raw google-cloud-spanner client: insert mutations, a leasing read-write
    transaction (read the oldest ready rows, update their ready time), delete mutations."""

    name = "raw-spanner"
    TABLE = "txqueue_bench_raw"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        # as txqueue does: the emulator answers concurrent read-write transactions on
        # multiplexed sessions with "Transaction not found"
        os.environ.setdefault("GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW", "false")
        from google.cloud import spanner

        from txqueue.drivers.spanner.target import check_target

        project, instance, database = check_target(parse_url(url).target)
        self.client = spanner.Client(project=project)
        self.database: Any = self.client.instance(instance).database(database)

    def setup(self) -> None:
        with self.database.snapshot() as snapshot:
            found = list(
                snapshot.execute_sql(
                    "SELECT 1 FROM INFORMATION_SCHEMA.TABLES WHERE table_name = @name",
                    params={"name": self.TABLE},
                    param_types={"name": _spanner_types().STRING},
                )
            )
        if not found:
            self.database.update_ddl(
                [
                    f"CREATE TABLE {self.TABLE} (id STRING(32) NOT NULL, payload BYTES(MAX) NOT NULL,"
                    " ready_at TIMESTAMP NOT NULL DEFAULT (CURRENT_TIMESTAMP()))"
                    " PRIMARY KEY (id)",
                    f"CREATE INDEX {self.TABLE}_ready ON {self.TABLE} (ready_at)",
                ]
            ).result()
        self.database.execute_partitioned_dml(f"DELETE FROM {self.TABLE} WHERE true")

    def send(self, payloads: list[bytes], batch: int) -> None:
        for start in range(0, len(payloads), batch):
            rows = [
                (random_key(), base64.b64encode(payload))
                for payload in payloads[start : start + batch]
            ]  # ready_at: the column's default, the commit's time
            self.database.run_in_transaction(
                lambda t, rows=rows: t.insert(self.TABLE, columns=("id", "payload"), values=rows)
            )

    def pending(self) -> int:
        with self.database.snapshot() as snapshot:
            [[count]] = list(snapshot.execute_sql(f"SELECT COUNT(*) FROM {self.TABLE}"))
        return int(count)

    def _lease(self, transaction: Any, batch: int) -> list[tuple[str, bytes]]:
        rows = list(
            transaction.execute_sql(
                f"SELECT id, payload, TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL 10 SECOND)"
                f" FROM {self.TABLE}@{{FORCE_INDEX={self.TABLE}_ready}}"
                " WHERE ready_at <= CURRENT_TIMESTAMP() ORDER BY ready_at LIMIT @n",
                params={"n": batch},
                param_types={"n": _spanner_types().INT64},
            )
        )
        if rows:
            transaction.update(
                self.TABLE, columns=("id", "ready_at"), values=[(r[0], r[2]) for r in rows]
            )
        return [(r[0], base64.b64decode(r[1])) for r in rows]  # the client gives base64

    def drain_loop(
        self, batch: int, on_message: Callable[[bytes], None], stop: Callable[[], bool]
    ) -> None:
        from google.cloud.spanner_v1 import KeySet

        while not stop():
            rows = self.database.run_in_transaction(self._lease, batch)
            if not rows:
                time.sleep(0.002)
                continue
            for _, payload in rows:
                on_message(payload)
            keys = KeySet(keys=[[key] for key, _ in rows])
            self.database.run_in_transaction(lambda t, keys=keys: t.delete(self.TABLE, keys))

    def close(self) -> None:
        self.client.close()


def _spanner_types() -> Any:
    from google.cloud.spanner_v1 import param_types

    return param_types


def make_system(kind: str, url: str, keys: str = "random") -> System:
    """A system by name: ``txqueue`` or ``raw`` (the raw baseline of the URL's engine);
    ``keys`` (random or ordered) are txqueue's message keys (raw SQL numbers its rows)."""
    if kind == "txqueue":
        return TxqueueSystem(url, keys)
    raw: dict[Any, Callable[[str], System]] = {
        SQLITE: RawSqliteSystem,
        POSTGRES: RawPostgresSystem,
        SPANNER: RawSpannerSystem,
    }
    return raw[traits_for(url)](url)


def remove_sqlite_files(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
