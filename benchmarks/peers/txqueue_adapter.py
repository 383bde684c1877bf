"""txqueue (the project under test), through its public API (SPEC.md §4).

params: engine=sqlite|postgres (default sqlite)
        batch=N        receive batch size and ack batch size (default 1)
        sync=FULL|NORMAL  SQLite synchronous setting, passed as ?synchronous= (default FULL)
One queue `BenchQ (Id STRING(36), Payload BYTES(MAX)) PRIMARY KEY (Id)`.
Consumers use db.receive(...) and ack each received batch in one transaction, with the
lease token (fenced ack), i.e. the library's own per-message semantics.
"""

from __future__ import annotations

import os
from datetime import timedelta

from .base import Adapter, ThreadedConsumeMixin

DDL = "CREATE QUEUE BenchQ (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


class TxQueue(ThreadedConsumeMixin, Adapter):
    name = "txqueue"
    system = "txqueue"
    supports_batch_enqueue = True
    multi_worker_model = "processes"
    concurrency_kind = "process"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.engine = self.params.get("engine", "sqlite")
        self.backend = "postgres" if self.engine.startswith("p") else "sqlite"
        self.batch = int(self.params.get("batch", 1))
        self.sync = self.params.get("sync", "FULL").upper()
        if self.backend == "sqlite":
            workdir = cfg.get("workdir", "/tmp/peers-work")
            self.path = os.path.join(workdir, f"txqueue-{self.sync.lower()}.db")
            self.url = f"sqlite:///{self.path}?synchronous={self.sync}"
        else:
            dsn = cfg.get("pg_dsn", "host=127.0.0.1 port=55432 user=bench")
            kv = dict(p.split("=", 1) for p in dsn.split())
            self.url = (
                f"postgresql://{kv.get('user', 'postgres')}@{kv.get('host', '127.0.0.1')}:"
                f"{kv.get('port', '5432')}/{cfg.get('txqueue_db', 'bench_txqueue')}"
            )

    def describe(self):
        import txqueue

        return {
            "txqueue": getattr(txqueue, "__version__", "?"),
            "url": self.url,
            "receive_and_ack_batch": self.batch,
        }

    def quiesce(self):
        """Right before each timed section, what the harness's other adapters of the same
        engine do (PgAdminMixin: CHECKPOINT; rawsqlite and huey: wal_checkpoint(TRUNCATE)):
        the shipped adapter has none, so txqueue alone ran its sections with the previous
        section's WAL and dirty pages still to write."""
        self._administer(sqlite=["PRAGMA wal_checkpoint(TRUNCATE)"], postgres=["CHECKPOINT"])

    def _administer(self, sqlite, postgres):
        """Run the engine's statements on a connection of their own, each committed alone."""
        if self.backend == "sqlite":
            import sqlite3

            connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            try:
                for statement in sqlite:
                    connection.execute(statement)
            finally:
                connection.close()
        else:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as connection:
                for statement in postgres:
                    connection.execute(statement)

    def counters(self):
        """PostgreSQL: cluster WAL position and this database's commits, as PgAdminMixin
        reports them (the report's cost-per-message table)."""
        if self.backend == "sqlite":
            return {}
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            row = connection.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, (SELECT"
                " xact_commit FROM pg_stat_database WHERE datname = current_database())"
            ).fetchone()
        return {"wal_bytes": row[0], "xact_commit": row[1]}

    def _connect(self):
        import txqueue

        return txqueue.connect(self.url, dialect="googlesql")

    def setup(self):
        if self.backend == "sqlite":
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.remove(self.path + suffix)
        else:
            import psycopg

            base = self.url.rsplit("/", 1)[0] + "/postgres"
            name = self.url.rsplit("/", 1)[1]
            with psycopg.connect(base, autocommit=True) as c:
                c.execute(f"DROP DATABASE IF EXISTS {name}")
                c.execute(f"CREATE DATABASE {name}")
        db = self._connect()
        db.update_ddl([DDL])
        self._close(db)

    @staticmethod
    def _close(db):
        close = getattr(db, "close", None)
        if close:
            close()

    def reset(self):
        """Empty the queue between sections as the other adapters of the engine do: PostgreSQL
        ``TRUNCATE`` (rawpg, PgQueuer), SQLite ``DELETE`` without a condition and a WAL
        checkpoint (rawsqlite, huey). The shipped adapter deleted row by row through the
        public API, which on PostgreSQL left each section's rows as dead tuples for the next
        timed section (and autovacuum running beside it); not what its peers measure."""
        self._administer(
            sqlite=["DELETE FROM BenchQ", "PRAGMA wal_checkpoint(TRUNCATE)"],
            postgres=["TRUNCATE benchq"],
        )

    def producer_open(self):
        self._prod = self._connect()

    def producer_close(self):
        self._close(self._prod)

    def enqueue(self, payloads, batch):
        db = self._prod
        for i in range(0, len(payloads), batch):
            with db.batch() as b:
                for p in payloads[i : i + batch]:
                    b.send(queue="BenchQ", key=(os.urandom(16).hex(),), payload=p)

    def admin_open(self):
        self._admin = self._connect()

    def admin_close(self):
        self._close(self._admin)
        self._admin = None

    def pending(self):
        # run.py calls pending() before admin_open() (after enqueue): open one on demand,
        # as the rawsqlite and PgAdminMixin adapters do.
        own = getattr(self, "_admin", None) is None
        db = self._connect() if own else self._admin
        try:
            with db.snapshot() as s:
                return [tuple(r) for r in s.execute_sql("SELECT COUNT(*) FROM BenchQ")][0][0]
        finally:
            if own:
                self._close(db)

    def worker_open(self, concurrency):
        self._dbs = [self._connect() for _ in range(concurrency)]

    def worker_close(self):
        for db in self._dbs:
            self._close(db)

    def consume_loop(self, i, on_message, stop):
        db = self._dbs[i]
        while not stop():
            held = []
            for m in db.receive(
                "BenchQ", max_duration=timedelta(milliseconds=500), max_batch_size=self.batch
            ):
                on_message(bytes(m.payload))
                held.append(m)
                if m.last_in_batch or len(held) >= self.batch:
                    self._ack(db, held)
                    held = []
                if stop():
                    break
            if held:
                self._ack(db, held)

    @staticmethod
    def _ack(db, msgs):
        def work(t):
            for m in msgs:
                t.ack("BenchQ", m.key, lease_token=m.lease_token)

        db.run_in_transaction(work)
