"""The events workload: txqueue's dispatcher against a raw outbox relay, to one HTTP endpoint.

Both systems deliver the same CloudEvents (binary HTTP mode, ~100-byte JSON data) to the
benchmark's endpoint (`txqueue.bench.endpoint`, its own process), each POST with keep-alive
from a pool of `CONCURRENCY` connections, and count what arrived there: the rate between the
first and the last arrival (start-up is not counted), events that arrived twice, events that
never did.

- txqueue: events are published to a bus (a transaction per ``batch``), one enrollment
  routes each to one HTTP pipeline, and ``txqueue dispatcher`` processes deliver them.
- raw: the least a correct outbox relay does. A row per event (its URL, headers and body,
  made at insert time) in ``txqueue_bench_outbox``; a relay process takes a batch of rows in
  a transaction (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, the write lock on SQLite), POSTs
  them on ``CONCURRENCY`` threads, deletes the delivered ones, writes one log row each and
  commits. No lease tokens, retries with backoff, archive or routing.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

import txqueue
from txqueue.bench.endpoint import Arrivals, Endpoint
from txqueue.drivers.engines import SQLITE, parse_url, traits_for

__all__ = ["CONCURRENCY", "latency", "plan", "run", "throughput"]

#: Attempts in flight per dispatcher (the dispatcher's default) and per raw relay.
CONCURRENCY = 8
#: Threads publishing the latency workload's events, one transaction per event.
PUBLISHERS = 4
OUTBOX = "txqueue_bench_outbox"
_PAD = "x" * 60


def _document(number: int, tag: str) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"{tag}-{number}",
        "source": "//bench",
        "type": "com.shop.order.paid",
        "data": {"order": number, "total": 42.5, "pad": _PAD},
    }


# ---- txqueue -------------------------------------------------------------------------------


class _Txqueue:
    """A bus, an enrollment matching everything and one HTTP pipeline to ``target``."""

    def __init__(self, url: str, target: str, tag: str) -> None:
        self.database = txqueue.connect(url, dialect="googlesql")  # as txqueue bench opens it
        self.events = txqueue.Events(self.database)
        self.bus = f"bench-{tag}"
        self.events.create_bus(self.bus, archive=True)
        self.events.create_pipeline(self.bus, target, allow_private=True)
        self.events.create_enrollment(self.bus, bus=self.bus, pipeline=self.bus, cel_match="true")

    def publish(self, documents: list[dict[str, Any]]) -> None:
        def work(transaction: txqueue.Transaction) -> None:
            for document in documents:
                self.events.publish(self.bus, document, txn=transaction)

        self.database.run_in_transaction(work)

    def start(self, url: str, processes: int) -> list[Any]:
        command = [sys.executable, "-m", "txqueue.cli.main", "dispatcher", "--database", url]
        options = ["--concurrency", str(CONCURRENCY), "--purge-interval", "never"]
        return [
            subprocess.Popen([*command, *options], stderr=subprocess.DEVNULL)
            for _ in range(processes)
        ]

    @staticmethod
    def stop(workers: list[Any]) -> None:
        for process in workers:
            process.send_signal(signal.SIGINT)
        for process in workers:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()

    def close(self) -> None:
        for name in ("enrollment", "pipeline", "bus"):
            getattr(self.events, f"delete_{name}")(self.bus)
        self.database.close()


# ---- raw outbox relay ----------------------------------------------------------------------


class _Raw:
    """The outbox table and its log, in a file beside the SQLite database or in PostgreSQL."""

    def __init__(self, url: str, target: str, batch: int) -> None:
        self.url, self.target, self.batch = url, target, batch
        self._local = threading.local()  # a connection per publishing thread
        self._connections: list[Any] = []
        self.connection = self._connection()
        self.sqlite = isinstance(self.connection, sqlite3.Connection)
        key = "INTEGER PRIMARY KEY" if self.sqlite else "bigserial PRIMARY KEY"
        blob = "BLOB" if self.sqlite else "bytea"
        for statement in (
            f"CREATE TABLE IF NOT EXISTS {OUTBOX} (id {key}, url TEXT NOT NULL,"
            f" headers TEXT NOT NULL, body {blob} NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {OUTBOX}_log (id {key}, outbox_id BIGINT NOT NULL,"
            " status INTEGER NOT NULL, delivered_at DOUBLE PRECISION NOT NULL)",
            f"DELETE FROM {OUTBOX}",
            f"DELETE FROM {OUTBOX}_log",
        ):
            self.connection.execute(statement)

    def publish(self, documents: list[dict[str, Any]]) -> None:
        rows = []
        for document in documents:
            headers = {f"ce-{k}": str(v) for k, v in document.items() if k != "data"}
            headers["content-type"] = "application/json"
            body = json.dumps(document["data"], separators=(",", ":")).encode()
            rows.append((self.target, json.dumps(headers), body))
        marker = "?" if self.sqlite else "%s"
        insert = f"INSERT INTO {OUTBOX} (url, headers, body) VALUES ({marker}, {marker}, {marker})"
        connection = self._connection()
        if self.sqlite:
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(insert, rows)
            connection.execute("COMMIT")
        else:
            with connection.transaction(), connection.cursor() as cursor:
                cursor.executemany(insert, rows)

    def _connection(self) -> Any:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = _connect(self.url)
            self._connections.append(connection)
        return connection

    def start(self, url: str, processes: int) -> list[Any]:
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        workers = [
            context.Process(target=_relay, args=(url, stop, self.batch), daemon=True)
            for _ in range(processes)
        ]
        for process in workers:
            process.start()
        return [stop, *workers]

    @staticmethod
    def stop(workers: list[Any]) -> None:
        stop, *processes = workers
        stop.set()
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()

    def close(self) -> None:
        for connection in self._connections:
            connection.close()


def _connect(url: str) -> Any:
    parsed = parse_url(url)
    if traits_for(url) is SQLITE:  # the raw baseline's own connection, per engine
        path = parsed.target + ".raw"
        connection = sqlite3.connect(
            path, timeout=30, isolation_level=None, check_same_thread=False
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={parsed.options.get('synchronous', 'FULL')}")
        return connection
    import psycopg

    return psycopg.connect(parsed.target, autocommit=True)


def _relay(url: str, stop: Any, batch: int) -> None:
    """A raw relay process: one transaction per batch of rows, until ``stop`` is set."""
    connection = _connect(url)
    sqlite = isinstance(connection, sqlite3.Connection)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    client = httpx.Client(trust_env=False, limits=limits, follow_redirects=False)
    threads = ThreadPoolExecutor(CONCURRENCY)

    def post(row: tuple[Any, ...]) -> int:
        try:
            response = client.post(row[1], headers=json.loads(row[2]), content=bytes(row[3]))
        except httpx.TransportError:
            return 0
        return response.status_code

    select = f"SELECT id, url, headers, body FROM {OUTBOX} ORDER BY id LIMIT {batch}"
    if sqlite:
        delete = f"DELETE FROM {OUTBOX} WHERE id = ?"
        log = f"INSERT INTO {OUTBOX}_log (outbox_id, status, delivered_at) VALUES (?, ?, ?)"
    else:
        select += " FOR UPDATE SKIP LOCKED"
        delete = f"DELETE FROM {OUTBOX} WHERE id = %s"
        log = f"INSERT INTO {OUTBOX}_log (outbox_id, status, delivered_at) VALUES (%s, %s, %s)"
    try:
        while not stop.is_set():
            if sqlite:
                connection.execute("BEGIN IMMEDIATE")
            else:
                connection.execute("BEGIN")
            rows = connection.execute(select).fetchall()
            statuses = list(threads.map(post, rows))
            now = time.time()
            delivered = [(row[0],) for row, status in zip(rows, statuses) if 200 <= status < 300]
            cursor = connection.cursor()
            cursor.executemany(delete, delivered)
            cursor.executemany(log, [(r[0], s, now) for r, s in zip(rows, statuses)])
            connection.execute("COMMIT")
            if not rows:
                time.sleep(0.002)
    finally:
        threads.shutdown()
        client.close()
        connection.close()


# ---- the measurements ----------------------------------------------------------------------


def _system(kind: str, url: str, target: str, tag: str, batch: int) -> _Txqueue | _Raw:
    return _Txqueue(url, target, tag) if kind == "txqueue" else _Raw(url, target, batch)


def throughput(
    kind: str, url: str, endpoint: Endpoint, events: int, dispatchers: int, batch: int
) -> dict[str, Any]:
    """Publish ``events`` (transactions of ``batch``), then deliver them with ``dispatchers``
    processes (txqueue dispatchers or raw relays); the rate is measured at the endpoint."""
    tag = uuid.uuid4().hex[:8]
    path = f"/{kind}-{tag}"
    system = _system(kind, url, endpoint.url(path), tag, batch)
    try:
        documents = [_document(number, tag) for number in range(events)]
        for start in range(0, events, batch):
            system.publish(documents[start : start + batch])
        workers = system.start(url, dispatchers)
        try:
            arrivals = endpoint.wait(path, events, timeout=max(120.0, events / 20))
            time.sleep(0.2)  # a late second delivery would arrive now
            arrivals = endpoint.arrivals(path)
        finally:
            system.stop(workers)
    finally:
        system.close()
    return {
        "rate": round(arrivals.rate(), 1),
        "seconds": round((arrivals.last or 0) - (arrivals.first or 0), 3),
        "delivered": len(arrivals.events),
        "duplicates": arrivals.duplicates,
        "lost": events - len(arrivals.events),
    }


def latency(
    kind: str, url: str, endpoint: Endpoint, events: int, rate: float, batch: int
) -> dict[str, Any]:
    """One dispatcher (or relay) runs while events are published one per transaction at
    ``rate``/s, from `PUBLISHERS` threads (as concurrent requests of an application would:
    one thread's commits alone may not keep that pace); from before each publish to its
    arrival at the endpoint."""
    tag = uuid.uuid4().hex[:8]
    path = f"/{kind}-latency-{tag}"
    system = _system(kind, url, endpoint.url(path), tag, batch)
    published: dict[str, tuple[float, float]] = {}
    try:
        workers = system.start(url, 1)
        try:
            system.publish([_document(-1, tag)])  # the dispatcher is up once this arrives
            if not endpoint.wait(path, 1, timeout=120).events:
                raise RuntimeError(f"{kind}: the first event did not arrive within 120 s")

            def publish(document: dict[str, Any]) -> None:
                before = time.time()
                system.publish([document])
                published[document["id"]] = (before, time.time())

            # This process stands for the application: what it imported and set up is out of
            # the cyclic GC's full collections, as a long-running service would arrange (a full
            # collection of it stopped the publishing threads for 50-80 ms every few seconds).
            gc.freeze()
            started = time.perf_counter()
            with ThreadPoolExecutor(PUBLISHERS) as publishers:
                submitted = []
                for number in range(events):
                    pause = started + number / rate - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)
                    submitted.append(publishers.submit(publish, _document(number, tag)))
            sent_for = time.perf_counter() - started
            for done in submitted:
                done.result()  # a publish that failed fails the run, rather than reading as lost
            arrivals = endpoint.wait(path, events + 1, timeout=60)
        finally:
            gc.unfreeze()
            system.stop(workers)
    finally:
        system.close()
    return _latencies(published, arrivals, events / sent_for)


def _latencies(
    published: dict[str, tuple[float, float]], arrivals: Arrivals, achieved: float
) -> dict[str, Any]:
    """p50/p99 from before each publish, and (``after_commit_*``) from its commit's return."""
    arrived = [
        (arrivals.events[i], times) for i, times in published.items() if i in arrivals.events
    ]
    if not arrived:
        return {
            "p50_ms": None,
            "p99_ms": None,
            "lost": len(published),
            "achieved_rate": round(achieved, 1),
        }
    waits = sorted((at - before) * 1000 for at, (before, _) in arrived)
    after = sorted((at - committed) * 1000 for at, (_, committed) in arrived)
    commits = sorted((committed - before) * 1000 for _, (before, committed) in arrived)
    return {
        "p50_ms": round(statistics.median(waits), 2),
        "p99_ms": _percentile(waits, 99),
        "max_ms": round(waits[-1], 2),
        "commit_p50_ms": round(statistics.median(commits), 2),
        "after_commit_p50_ms": round(statistics.median(after), 2),
        "after_commit_p99_ms": _percentile(after, 99),
        "lost": len(published) - len(arrived),
        "achieved_rate": round(achieved, 1),
    }


def _percentile(ordered: list[float], percent: float) -> float:
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))], 2)


def plan(workers: int, rate: float) -> list[tuple[str, dict[str, Any]]]:
    """The figures of ``txqueue bench --workload events``: throughput with 1, 2 and
    ``workers`` dispatchers, and the latency at ``rate``."""
    counts = sorted({1, 2, workers})
    return [
        *(
            (f"events {count} dispatcher{'s' if count > 1 else ''}", {"dispatchers": count})
            for count in counts
        ),
        (f"events latency @{rate:g}/s", {"dispatchers": 0}),
    ]


def run(
    kind: str,
    url: str,
    endpoint: Endpoint,
    events: int,
    rate: float,
    batch: int,
    spec: dict[str, Any],
) -> dict[str, Any]:
    """One measurement of `plan`'s ``spec`` for ``kind`` (raw or txqueue)."""
    if spec["dispatchers"]:
        return throughput(kind, url, endpoint, events, spec["dispatchers"], batch)
    return latency(kind, url, endpoint, min(events, 1000), rate, batch)
