"""What txqueue's own PostgreSQL statements cost, run from a bare psycopg loop.

    python benchmarks/statement_costs.py --database postgresql://user@host/db

Separates the server's share of a figure from the Python around it. Two parts, each
alternating its variants for ``--repeats`` rounds and printing medians:

- **lone send**: one-message sends per second (autocommit, prepared) of a plain ``INSERT``,
  txqueue's ``INSERT`` (its deliver time defaulted in SQL), and the same with the commit
  marker folded in (the statement a lone ``send`` commits) — plus WAL bytes per send.
- **drain**: ``--messages`` preloaded with random keys (as the shared harness's adapter uses),
  drained in batches of 100 by txqueue's leasing ``UPDATE`` and token-fenced ``DELETE``, from
  1 and 4 processes, against the raw baseline's shape (integer keys, ``UPDATE … RETURNING``,
  ``DELETE … = ANY``; ``txqueue/bench/systems.py``).

The statements come from ``txqueue.drivers.postgres.statements``, so the figures follow the
code. Tables ``StatementCostQ`` and ``statement_cost_raw`` are created in the database given.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg

import txqueue
from txqueue.drivers.postgres.codec import stored_token_array, tid_array
from txqueue.drivers.postgres.statements import queue_statements, with_commit_marker

DDL = (
    "CREATE QUEUE StatementCostQ (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (Id)"
)
RAW_DDL = (
    "CREATE TABLE IF NOT EXISTS statement_cost_raw (id bigserial PRIMARY KEY,"
    " payload bytea NOT NULL, deliver_time timestamptz NOT NULL DEFAULT now(),"
    " lease_expires timestamptz);"
    " CREATE INDEX IF NOT EXISTS statement_cost_raw_ready"
    " ON statement_cost_raw (deliver_time, id)"
)
RAW_RECEIVE = (
    "UPDATE statement_cost_raw SET lease_expires = now() + interval '30 seconds'"
    " WHERE id IN (SELECT id FROM statement_cost_raw WHERE deliver_time <= now()"
    " AND (lease_expires IS NULL OR lease_expires < now()) ORDER BY id LIMIT %s"
    " FOR UPDATE SKIP LOCKED) RETURNING id, payload"
)
RAW_ACK = "DELETE FROM statement_cost_raw WHERE id = ANY(%s)"
BATCH = 100
PAYLOAD = b"x" * 100


def _setup(url: str) -> tuple[Any, str]:
    with txqueue.connect(url, dialect="googlesql") as db:
        if "statementcostq" not in {t.name.lower() for t in db.queues()}:
            db.update_ddl([DDL])
        table = db.queue("StatementCostQ")
        deliver = db._driver.deliver_column
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(RAW_DDL)
    return table, deliver


def lone_sends(url: str, count: int, repeats: int) -> None:
    table, deliver = _setup(url)
    statements = queue_statements(table, deliver)
    plain = "INSERT INTO statementcostq (id, payload) VALUES (%s, %s)"
    own = statements.send_one_refusing  # what a lone send commits, less the marker
    variants: dict[str, tuple[str, Callable[[], list[Any]]]] = {
        "plain INSERT": (plain, lambda: [uuid.uuid4().hex, PAYLOAD]),
        "txqueue's INSERT": (own, lambda: [uuid.uuid4().hex, PAYLOAD, None]),
        "txqueue's INSERT + commit marker": (
            with_commit_marker(own),
            lambda: [
                "statement-costs",
                random.getrandbits(63),
                uuid.uuid4().hex,
                PAYLOAD,
                None,
            ],
        ),
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    wal: dict[str, list[float]] = {name: [] for name in variants}
    with psycopg.connect(url, autocommit=True) as connection:
        for _ in range(repeats):
            for name, (sql, arguments) in variants.items():
                connection.execute("TRUNCATE statementcostq")
                start_lsn = connection.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
                started = time.perf_counter()
                for _ in range(count):
                    connection.execute(sql, arguments(), prepare=True)
                rates[name].append(count / (time.perf_counter() - started))
                row = connection.execute(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", start_lsn
                ).fetchone()
                wal[name].append(float(row[0]) / count)
    print(f"lone sends, {count} per run, medians of {repeats}:")
    for name in variants:
        print(
            f"  {name:34} {statistics.median(rates[name]):8,.0f}/s"
            f"  {statistics.median(wal[name]):5.0f} B WAL/send"
        )


def _fill(url: str, count: int) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("TRUNCATE statementcostq")
        connection.execute("TRUNCATE statement_cost_raw RESTART IDENTITY")
        with (
            connection.transaction(),
            connection.cursor().copy("COPY statementcostq (id, payload) FROM STDIN") as copy,
        ):
            for _ in range(count):
                copy.write_row((uuid.uuid4().hex, PAYLOAD))
        with (
            connection.transaction(),
            connection.cursor().copy("COPY statement_cost_raw (payload) FROM STDIN") as copy,
        ):
            for _ in range(count):
                copy.write_row((PAYLOAD,))
        connection.execute("VACUUM ANALYZE statementcostq")
        connection.execute("VACUUM ANALYZE statement_cost_raw")


def _drain_txqueue(url: str, receive: str, ack: str) -> None:
    """Receive a batch, then commit its fenced acks as txqueue does: one statement carrying
    the commit marker (``ack`` is the refusing form with the marker folded in)."""
    with psycopg.connect(url, autocommit=True) as connection:
        arguments = {"now": None, "lease": timedelta(seconds=30), "limit": BATCH}
        while rows := connection.execute(receive, arguments, binary=True, prepare=True).fetchall():
            keys = [row[0] for row in rows]
            tokens = [f"{row[3]}.{int.from_bytes(row[5], 'big'):x}" for row in rows]
            marker = [f"statement-costs-{os.getpid()}", random.getrandbits(63)]
            connection.execute(
                ack,
                [
                    *marker,
                    keys,
                    stored_token_array(tokens),
                    tid_array(tokens),
                    None,
                    len(rows),
                    0,
                ],
                prepare=True,
            )


def _drain_raw(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        while rows := connection.execute(RAW_RECEIVE, [BATCH], prepare=True).fetchall():
            connection.execute(RAW_ACK, [[row[0] for row in rows]], prepare=True)


def _check_empty(url: str, table: str) -> None:
    """Every message was acked (a refused ack would leave its row behind, leased)."""
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        if row is None or row[0]:
            raise SystemExit(f"{table} kept {row} rows after its drain")


def drains(url: str, count: int, repeats: int) -> None:
    table, deliver = _setup(url)
    statements = queue_statements(table, deliver)
    # name: (drain function, its arguments, the table it empties)
    variants: dict[str, tuple[Callable[..., None], tuple[Any, ...], str]] = {
        "txqueue's statements": (
            _drain_txqueue,
            (url, statements.receive, with_commit_marker(statements.ack_leased_refusing)),
            "statementcostq",
        ),
        "raw baseline's": (_drain_raw, (url,), "statement_cost_raw"),
    }
    rates: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeats):
        for processes in (1, 4):
            for name, (target, arguments, table) in variants.items():
                _fill(url, count)
                started = time.perf_counter()
                workers = [
                    multiprocessing.Process(target=target, args=arguments) for _ in range(processes)
                ]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
                rates.setdefault((name, processes), []).append(
                    count / (time.perf_counter() - started)
                )
                _check_empty(url, table)
    print(f"drain of {count} in batches of {BATCH}, medians of {repeats}:")
    for (name, processes), values in rates.items():
        print(f"  {name:22} {processes} process(es) {statistics.median(values):8,.0f}/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", default=os.environ.get("TXQUEUE_DATABASE_URL"))
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--part", choices=["send", "drain", "all"], default="all")
    args = parser.parse_args()
    if not args.database or not args.database.startswith("postgres"):
        parser.error("--database must be a PostgreSQL URL")
    if args.part in ("send", "all"):
        lone_sends(args.database, args.sends, args.repeats)
    if args.part in ("drain", "all"):
        drains(args.database, args.messages, args.repeats)


if __name__ == "__main__":
    main()
