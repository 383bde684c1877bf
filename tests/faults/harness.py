"""Shared pieces of the fault tests: schema, worker processes, PostgreSQL gates, ground truth.

Worker processes come from a ``forkserver`` that has imported txqueue once, so starting one
costs a fork and a connect, not a second of imports: the kill test starts hundreds.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import txqueue

from . import worker as worker_module
from .history import Effect, History, Send, read_journal, receives_from, renewals_from
from .worker import WorkerConfig

QUEUE = "jobs"
EFFECTS = "effects"
SCHEMA = {
    "googlesql": (
        "CREATE QUEUE jobs (jobid INT64 NOT NULL, payload BYTES(MAX) NOT NULL) PRIMARY KEY (jobid)",
        "CREATE TABLE effects (effectid STRING(32) NOT NULL, msgkey INT64 NOT NULL,"
        " token STRING(64) NOT NULL, worker STRING(64) NOT NULL,"
        " appliedat TIMESTAMP NOT NULL) PRIMARY KEY (effectid)",
    ),
    "postgresql": (
        "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))",
        "CREATE TABLE effects (effectid varchar(32) NOT NULL, msgkey bigint NOT NULL,"
        " token varchar(64) NOT NULL, worker varchar(64) NOT NULL,"
        " appliedat timestamptz NOT NULL, PRIMARY KEY (effectid))",
    ),
}

# PostgreSQL test gates (see worker.py): a connection whose application_name is
# "<gate>:<lock>" blocks on advisory lock <lock> at that gate until the test releases it.
GATES_SQL = """
CREATE OR REPLACE FUNCTION txq_fault_gate() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  app text := current_setting('application_name');
BEGIN
  IF split_part(app, ':', 1) = TG_ARGV[0] THEN
    PERFORM pg_advisory_xact_lock_shared(split_part(app, ':', 2)::bigint);
  END IF;
  IF TG_WHEN = 'BEFORE' THEN RETURN NEW; END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER jobs_receive_gate BEFORE UPDATE ON jobs FOR EACH ROW
  WHEN (NEW._txq_delivery_count > OLD._txq_delivery_count)
  EXECUTE FUNCTION txq_fault_gate('recv');
CREATE CONSTRAINT TRIGGER effects_commit_gate AFTER INSERT ON effects
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION txq_fault_gate('commit');
"""
#: Imported once by the forkserver (a module that does not exist is skipped).
PRELOAD = [
    "txqueue",
    "txqueue.patterns",
    "psycopg",
    "psycopg_pool",
    "txqueue.drivers.postgres._sync",
    "txqueue.drivers.sqlite._sync",
    "txqueue.drivers.spanner._sync",  # google-cloud-spanner: seconds of imports otherwise
    "faults.worker",
]
GATE_OF_POINT = {"receive-commit": "recv", "ack-commit": "commit"}


def is_postgres(url: str) -> bool:
    return url.startswith("postgres")


def with_query(url: str, **options: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(options)
    return urlunsplit(parts._replace(query=urlencode(query)))


def create_schema(db: txqueue.Database) -> None:
    db.update_ddl(list(SCHEMA[db.dialect.value]))


def install_gates(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(GATES_SQL)


class Gates:
    """The advisory locks of the PostgreSQL gates, held on the test's own connection."""

    def __init__(self, url: str, first_lock: int = 7_000) -> None:
        import psycopg

        self.connection = psycopg.connect(url, autocommit=True)
        self.next_lock = first_lock

    def take(self) -> int:
        """Hold a new lock; a worker named "<gate>:<lock>" blocks at its gate until released."""
        self.next_lock += 1
        self.connection.execute("SELECT pg_advisory_lock(%s)", [self.next_lock])
        return self.next_lock

    def _backends(self, application_name: str, waiting: bool) -> int:
        row = self.connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s AND (NOT %s OR wait_event = 'advisory')",
            [application_name, waiting],
        ).fetchone()
        return int(row[0]) if row else 0

    def waiting(self, application_name: str) -> bool:
        """A backend of that worker is blocked at its gate."""
        return self._backends(application_name, waiting=True) > 0

    def gone(self, application_name: str) -> bool:
        """No backend of that worker is left (an orphaned one finished its work)."""
        return self._backends(application_name, waiting=False) == 0

    def release(self, lock: int) -> None:
        self.connection.execute("SELECT pg_advisory_unlock(%s)", [lock])

    def close(self) -> None:
        self.connection.close()


def wait_for(
    condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.01
) -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _seconds(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value) / 1_000_000  # SQLite keeps TIMESTAMP as µs since the epoch


def read_effects(db: txqueue.Database) -> list[Effect]:
    with db.snapshot() as snapshot:
        rows = snapshot.execute_sql("SELECT msgkey, token, appliedat, worker FROM effects")
    return [Effect(int(k), t, _seconds(a), w) for k, t, a, w in rows]


def remaining_keys(db: txqueue.Database) -> set[int]:
    with db.snapshot() as snapshot:
        return {int(row[0]) for row in snapshot.execute_sql("SELECT jobid FROM jobs")}


def pending(db: txqueue.Database) -> int:
    info = db.queue_info(QUEUE)
    return info.ready + info.leased + info.scheduled


class _Rollback(Exception):
    pass


@dataclass
class Sender:
    """Sends numbered messages and remembers which commits happened."""

    db: txqueue.Database
    next_key: int = 1
    sends: list[Send] = field(default_factory=list)

    def send(self, count: int) -> list[int]:
        keys = list(range(self.next_key, self.next_key + count))
        self.next_key += count
        with self.db.batch() as batch:
            for key in keys:
                batch.send(QUEUE, (key,), b"job")
        self.sends.extend(Send(key, True) for key in keys)
        return keys

    def send_rolled_back(self, count: int) -> list[int]:
        """Sends inside transactions that roll back: their messages must never be seen."""
        keys = list(range(self.next_key, self.next_key + count))
        self.next_key += count

        def work(txn: txqueue.Transaction) -> None:
            for key in keys:
                txn.send(QUEUE, (key,), b"ghost")
            raise _Rollback

        with contextlib.suppress(_Rollback):
            self.db.run_in_transaction(work)
        self.sends.extend(Send(key, False) for key in keys)
        return keys


class Producer:
    """Keeps at least ``low_water`` messages ready, from a thread of its own.

    SQLite has one writer at a time: a send may wait for a worker that the test is about to
    kill for blocking inside its transaction, so sends must not hold up the test's loop.
    """

    def __init__(self, sender: Sender, low_water: int, batch: int = 10) -> None:
        self.sender = sender
        self.low_water = low_water
        self.batch = batch
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.02):
                if self.sender.db.queue_info(QUEUE).ready < self.low_water:
                    self.sender.send(self.batch)
        except BaseException as error:
            self.error = error

    def __enter__(self) -> Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the producer did not stop"

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"the producer failed: {self.error!r}") from self.error


class Workers:
    """Worker processes (from a forkserver), their journals, and SIGKILL/SIGSTOP."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(PRELOAD)
        self.processes: dict[str, Any] = {}
        self.configs: dict[str, WorkerConfig] = {}

    def config(self, name: str, url: str, lease: float, **options: Any) -> WorkerConfig:
        return WorkerConfig(
            name=name,
            url=url,
            queue=QUEUE,
            effects=EFFECTS,
            journal=str(self.directory / f"{name}.jsonl"),
            lease=lease,
            spanner_emulator_host=os.environ.get("SPANNER_EMULATOR_HOST"),
            **options,
        )

    def start(self, config: WorkerConfig, task: str = "queue", argument: str = "") -> Any:
        """Start a worker process running ``task`` (see `worker.run`)."""
        process = self.context.Process(
            target=worker_module.run, args=(config, task, argument), name=config.name, daemon=True
        )
        process.start()
        self.processes[config.name] = process
        self.configs[config.name] = config
        return process

    def journal(self, name: str) -> list[dict[str, Any]]:
        path = Path(self.configs[name].journal)
        return read_journal(path) if path.exists() else []

    def has_event(self, name: str, event: str) -> bool:
        path = Path(self.configs[name].journal)
        return path.exists() and f'"ev": "{event}"' in path.read_text()

    def kill(self, name: str) -> None:
        process = self.processes[name]
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.join(10)
        assert not process.is_alive(), f"{name} survived SIGKILL"

    def signal(self, name: str, signum: int) -> None:
        os.kill(self.processes[name].pid, signum)

    def alive(self, name: str) -> bool:
        return bool(self.processes[name].is_alive())

    def crashed(self, name: str) -> str | None:
        """The error of a worker that ended by itself with a failure, else None."""
        process = self.processes[name]
        if process.is_alive() or process.exitcode in (0, -signal.SIGKILL):
            return None
        crash = [e for e in self.journal(name) if e["ev"] == "crash"]
        return f"{name} exited {process.exitcode}: {crash[-1]['error'] if crash else '?'}"

    def events(self) -> list[dict[str, Any]]:
        return [event for name in self.configs for event in self.journal(name)]

    def close(self) -> None:
        for name, process in self.processes.items():
            if process.is_alive():
                self.signal(name, signal.SIGCONT)
                self.kill(name)


@contextlib.contextmanager
def workers_in(directory: Path) -> Iterator[Workers]:
    workers = Workers(directory)
    try:
        yield workers
    finally:
        workers.close()


def history_of(db: txqueue.Database, sender: Sender, workers: Workers) -> History:
    events = workers.events()
    return History(
        sends=list(sender.sends),
        receives=receives_from(events),
        renewals=renewals_from(events),
        effects=read_effects(db),
        remaining=remaining_keys(db),
    )
