"""SQLite: what the order of message keys costs txqueue's own statements, against raw SQL.

    python benchmarks/sqlite_key_order.py [--messages 20000] [--batch 100] [--repeats 3]

No txqueue Python on the measured path: a bare ``sqlite3`` loop runs txqueue's send
``INSERT`` (a transaction per batch), its receive (in a lease transaction, as the driver
does) and its token-fenced ack ``DELETE`` per batch, against the raw baseline's ``INSERT``,
``UPDATE … RETURNING`` and ``DELETE … IN`` on an integer-keyed table. Both files are WAL at
``synchronous=FULL``. Keys are random (UUID4 hex, as the shared harness sends) or
time-ordered; the raw table numbers its rows either way. Prints send, receive and ack time
per message (medians), and the batched send and the drain as shares of raw's rates.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable

import txqueue
from txqueue.bench.systems import KEYS
from txqueue.core.schema import Table
from txqueue.drivers.sqlite.leasing import _lease_transaction
from txqueue.drivers.sqlite.statements import queue_statements

DDL = "CREATE QUEUE BenchQ (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
RAW_DDL = (
    "CREATE TABLE rawq (id INTEGER PRIMARY KEY, payload BLOB NOT NULL,"
    " deliver_time REAL NOT NULL, lease_expires REAL);"
    " CREATE INDEX rawq_deliver ON rawq (deliver_time, id);"
)
RAW_RECEIVE = (
    "UPDATE rawq SET lease_expires = ?1 + 30 WHERE id IN (SELECT id FROM rawq"
    " WHERE deliver_time <= ?1 AND (lease_expires IS NULL OR lease_expires < ?1)"
    " ORDER BY id LIMIT ?2) RETURNING id, payload"
)
PAYLOAD = b'{"seq": 0, "ts": 0.0, "pad": "' + b"x" * 64 + b'"}'


def connect(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    return connection


Rows = list[tuple[object, ...]]


def cycle(
    connection: sqlite3.Connection,
    table: str,
    insert: str,
    rows: Rows,
    batch: int,
    receive: Callable[[], Rows],
    ack: Callable[[Rows], None],
) -> tuple[float, float, float]:
    """Empty ``table``, send ``rows`` with ``insert`` in transactions of ``batch``, then
    receive and ack batches until every message is done; seconds per message spent
    sending, receiving and acking."""
    connection.execute(f"DELETE FROM {table}")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    started = time.perf_counter()
    for start in range(0, len(rows), batch):
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany(insert, rows[start : start + batch])
        connection.execute("COMMIT")
    messages = len(rows)
    sending = time.perf_counter() - started
    receiving = acking = 0.0
    done = 0
    while done < messages:
        started = time.perf_counter()
        leased = receive()
        received = time.perf_counter()
        ack(leased)
        receiving += received - started
        acking += time.perf_counter() - received
        done += len(leased)
    return sending / messages, receiving / messages, acking / messages


def cycle_raw(
    connection: sqlite3.Connection, messages: int, batch: int
) -> tuple[float, float, float]:
    def receive() -> Rows:
        connection.execute("BEGIN IMMEDIATE")
        leased = connection.execute(RAW_RECEIVE, (time.time(), batch)).fetchall()
        connection.execute("COMMIT")
        return leased

    def ack(leased: Rows) -> None:
        ids = [row[0] for row in leased]
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(f"DELETE FROM rawq WHERE id IN ({','.join('?' * len(ids))})", ids)
        connection.execute("COMMIT")

    insert = "INSERT INTO rawq (payload, deliver_time) VALUES (?, ?)"
    rows: Rows = [(PAYLOAD, time.time())] * messages
    return cycle(connection, "rawq", insert, rows, batch, receive, ack)


def cycle_txqueue(
    connection: sqlite3.Connection, table: Table, messages: int, batch: int, key: Callable[[], str]
) -> tuple[float, float, float]:
    statements = queue_statements(table, "DeliverTime")

    def receive() -> Rows:
        now = time.time_ns() // 1000
        expiration = now + 10_000_000
        arguments = {
            "now": now,
            "expiration": expiration,
            "token": f"{expiration:014x}{secrets.token_hex(8)}",
            "limit": batch,
        }
        with _lease_transaction(connection):
            return connection.execute(statements.receive, arguments).fetchall()

    def ack(leased: Rows) -> None:
        # columns: Id, Payload, DeliverTime, lease expiration, lease token, delivery count
        now = time.time_ns() // 1000
        acks = [(row[0], row[4], row[4], now) for row in leased]
        connection.execute("BEGIN IMMEDIATE")
        deleted = connection.executemany(statements.ack, acks).rowcount
        connection.execute("COMMIT")
        assert deleted == len(leased), "every fenced ack must apply"

    rows: Rows = [(key(), PAYLOAD, None) for _ in range(messages)]  # deliver time: now
    return cycle(connection, '"BenchQ"', statements.send, rows, batch, receive, ack)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="txqueue-keys-")
    raw = connect(os.path.join(directory, "raw.db"))
    raw.executescript(RAW_DDL)
    for order, key in KEYS.items():
        path = os.path.join(directory, f"txqueue-{order}.db")  # a fresh file per key order
        with txqueue.connect(f"sqlite:///{path}", dialect="googlesql") as db:
            db.update_ddl([DDL])
            table = db.queue("BenchQ")
        ours = connect(path)
        sends, drains, measured = [], [], []
        for _ in range(options.repeats):
            raw_times = cycle_raw(raw, options.messages, options.batch)
            txqueue_times = cycle_txqueue(ours, table, options.messages, options.batch, key)
            sends.append(raw_times[0] / txqueue_times[0])
            drains.append(sum(raw_times[1:]) / sum(txqueue_times[1:]))
            measured.append(txqueue_times + raw_times)
        send, receive, ack, raw_send, raw_receive, raw_ack = (
            statistics.median(m[i] * 1e6 for m in measured) for i in range(6)
        )
        print(
            f"{order:7s} keys: txqueue send {send:4.1f} µs, receive {receive:4.1f} µs,"
            f" ack {ack:4.1f} µs | raw send {raw_send:4.1f} µs, receive {raw_receive:4.1f} µs,"
            f" ack {raw_ack:4.1f} µs | txqueue SQL sends at {_span(sends)},"
            f" drains at {_span(drains)} of raw"
        )


def _span(shares: list[float]) -> str:
    return f"{min(shares):.0%}–{max(shares):.0%}"


if __name__ == "__main__":
    main()
