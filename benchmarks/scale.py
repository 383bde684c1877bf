"""Scale: does receive slow down as the backlog (and the dead rows of acked ones) grows?

    python benchmarks/scale.py --database postgresql://user@host/db --backlog 1000000
    python benchmarks/scale.py --database sqlite:////tmp/scale.db --backlog 1000000

For each backlog (``--small``, default 10,000, then ``--backlog``) the queue is emptied and
filled with that many ready messages by plain SQL (``INSERT ... SELECT``: hidden state takes
its defaults, as for any application INSERT); then one process drains ``--window`` messages
at a time through the public API (``receive`` batches of ``--batch``, each acked with its
lease tokens in one transaction) and reports each window's rate. The first window of the big
backlog has 1M waiting; the later ones also walk past the dead rows of everything acked
before them (no VACUUM in between). Each timed part starts after a checkpoint of the fill
(``quiesce``), as in the shared harness. With ``--dead N``, N more are filled and drained, and
``--small`` is measured again behind their dead rows (``median_vs_clean``). With
``--worker-memory`` a worker process
(``txqueue.App``, async no-op handler) then drains the big backlog and its peak RSS is read
from ``/proc``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta

import txqueue

DDL = "CREATE QUEUE ScaleQ (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
PAYLOAD = b'{"seq": 0, "ts": 0.0, "pad": "' + b"x" * 64 + b'"}'


def fill(db: txqueue.Database, count: int) -> None:
    """Empty the queue, then add ``count`` ready messages with plain SQL, 50,000 per txn."""
    db.run_in_transaction(lambda t: t.execute_update("DELETE FROM ScaleQ WHERE TRUE"))
    postgres = db.engine == "postgres"
    done = 0
    while done < count:
        step = min(50_000, count - done)
        if postgres:
            # A deliver time of its own per message, as sends over time have: equal ones
            # share a posting list in the ready index, and their dead entries take a
            # fraction of the pages to skip.
            sql = (
                "INSERT INTO scaleq (id, payload, delivertime) SELECT lpad(i::text, 12, '0'),"
                " %s, now() - interval '1 hour' + i * interval '1 microsecond'"
                " FROM generate_series(%s::bigint, %s::bigint) AS i"
            )
            arguments: list[object] = [PAYLOAD, done, done + step - 1]
        else:
            sql = (
                "WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
                " INSERT INTO ScaleQ (Id, Payload) SELECT printf('%012d', i), ? FROM n"
            )
            arguments = [done, done + step - 1, PAYLOAD]
        db.run_in_transaction(lambda t, q=sql, a=arguments: t.execute_engine_update(q, a))
        done += step


def quiesce(url: str) -> None:
    """Before a timed part, what the shared harness's adapters do: write the fill out of the
    WAL (SQLite ``wal_checkpoint(TRUNCATE)``, PostgreSQL ``CHECKPOINT``), so a part is not
    timed against a checkpoint of the fill it follows."""
    from txqueue.drivers.engines import parse_url

    target = parse_url(url).target
    if url.startswith("sqlite"):
        import sqlite3

        connection = sqlite3.connect(target, timeout=30, isolation_level=None)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as connection:
        connection.execute("CHECKPOINT")


def drain_window(db: txqueue.Database, count: int, batch: int) -> float:
    """Receive and ack ``count`` messages; messages per second."""
    started, done = time.perf_counter(), 0
    while done < count:
        held = []
        for message in db.receive(
            "ScaleQ", max_duration=timedelta(milliseconds=200), max_batch_size=batch
        ):
            held.append(message)
            if message.last_in_batch or len(held) >= batch:
                break
        if not held:
            break

        def ack(transaction: txqueue.Transaction, held: list[txqueue.Message] = held) -> None:
            for message in held:
                transaction.ack("ScaleQ", message.key, lease_token=message.lease_token)

        db.run_in_transaction(ack)
        done += len(held)
    return done / (time.perf_counter() - started)


def worker_peak_rss(url: str, count: int) -> dict[str, float]:
    """Run a worker process over ``count`` messages; its rate and peak RSS (MiB)."""
    code = f"""
import asyncio, time, txqueue
from txqueue.worker.runtime import Worker
app = txqueue.App({url!r})
done = 0
@app.handler("ScaleQ")
async def handle(message):
    global done
    done += 1
    if done >= {count}:
        worker.stop()
worker = Worker(app, concurrency=64)
started = time.perf_counter()
asyncio.run(worker.run())
print(done / (time.perf_counter() - started))
"""
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    samples = []
    while process.poll() is None:
        try:
            with open(f"/proc/{process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        samples.append(int(line.split()[1]) / 1024)
        except FileNotFoundError:
            break
        time.sleep(0.5)
    out, _ = process.communicate()
    return {
        "rate": float(out.strip().splitlines()[-1]),
        "peak_rss_mib": max(samples),
        "rss_at_10pct_mib": samples[len(samples) // 10],
    }


def behind_dead_rows(db: txqueue.Database, args: argparse.Namespace, clean: float) -> object:
    """Drain ``--dead`` messages, then ``--small`` waiting behind their dead rows: the rates."""
    fill(db, args.dead)
    deadline, rate = time.perf_counter() + 3600, 1.0
    while rate and time.perf_counter() < deadline:  # each acked row stays dead until VACUUM
        rate = drain_window(db, 50_000, 1_000)  # 0 once the queue is empty
    fill_keep_dead(db, args.small)
    quiesce(args.database)
    windows = max(1, min(args.windows, args.small // args.window))
    rates = [drain_window(db, args.window, args.batch) for _ in range(windows)]
    result = {
        "acked_before": args.dead,
        "window_rates": [round(r) for r in rates],
        "median_vs_clean": round(statistics.median(rates) / clean, 3),
        "vacuum": last_vacuum(db),
    }
    print(
        f"{args.small:,} waiting behind the dead rows of {args.dead:,} acked: "
        + ", ".join(f"{r:,.0f}/s" for r in rates)
        + f" (median / clean median: {result['median_vs_clean']:.2f}; {result['vacuum']})",
        flush=True,
    )
    return result


def fill_keep_dead(db: txqueue.Database, count: int) -> None:
    """``fill`` without its DELETE (the queue is empty already)."""
    if db.engine == "postgres":
        sql = (
            "INSERT INTO scaleq (id, payload, delivertime) SELECT 'late' || lpad(i::text, 12,"
            " '0'), %s, now() - interval '1 second' + i * interval '1 microsecond'"
            " FROM generate_series(1::bigint, %s::bigint) AS i"
        )
        arguments: list[object] = [PAYLOAD, count]
    else:
        sql = (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
            " INSERT INTO ScaleQ (Id, Payload) SELECT printf('late%012d', i), ? FROM n"
        )
        arguments = [count, PAYLOAD]
    db.run_in_transaction(lambda t: t.execute_engine_update(sql, arguments))


def last_vacuum(db: txqueue.Database) -> str:
    """PostgreSQL: when the queue table was last vacuumed (autovacuum may run meanwhile)."""
    if db.engine != "postgres":
        return "SQLite: deleted rows free their pages at once"
    with db.snapshot() as snapshot:
        rows = list(
            snapshot.execute_engine_sql(
                "SELECT n_dead_tup, last_autovacuum, last_vacuum FROM pg_stat_user_tables"
                " WHERE relname = 'scaleq'"
            )
        )
    dead, autovacuum, vacuum = rows[0] if rows else (None, None, None)
    return f"dead tuples {dead}, last autovacuum {autovacuum}, last vacuum {vacuum}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=2_000)
    parser.add_argument("--windows", type=int, default=5, help="windows drained per backlog")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--worker-memory", action="store_true")
    parser.add_argument(
        "--dead",
        type=int,
        default=0,
        help="then fill and drain this many through the API, and measure --small again "
        "behind their dead rows (no VACUUM in between unless autovacuum runs)",
    )
    args = parser.parse_args()

    db = txqueue.connect(args.database, dialect="googlesql")
    if "scaleq" not in {table.name.lower() for table in db.queues()}:
        db.update_ddl([DDL])
    report: dict[str, object] = {"database": args.database.split("@")[-1], "batch": args.batch}
    fill(db, args.window)  # warm up: connections, prepared statements, table statistics
    drain_window(db, args.window, args.batch)
    for backlog in (args.small, args.backlog):
        fill(db, backlog)
        quiesce(args.database)
        windows = max(1, min(args.windows, backlog // args.window))
        rates = [drain_window(db, args.window, args.batch) for _ in range(windows)]
        report[f"backlog_{backlog}"] = {"window_rates": [round(r) for r in rates]}
        print(f"backlog {backlog:>9,}: " + ", ".join(f"{r:,.0f}/s" for r in rates), flush=True)
    small = statistics.median(report[f"backlog_{args.small}"]["window_rates"])  # type: ignore[index]
    first_big = report[f"backlog_{args.backlog}"]["window_rates"][0]  # type: ignore[index]
    big = statistics.median(report[f"backlog_{args.backlog}"]["window_rates"])  # type: ignore[index]
    report["big_first_window_vs_small_median"] = round(first_big / small, 3)
    report["big_median_vs_small_median"] = round(big / small, 3)
    print(
        f"with {args.backlog:,} waiting / median with {args.small:,}: first window "
        f"{first_big / small:.2f}, median {big / small:.2f}"
    )
    if args.dead:
        report["dead"] = behind_dead_rows(db, args, small)
    if args.worker_memory:
        fill(db, args.backlog)
        result = worker_peak_rss(args.database, args.backlog)
        report["worker"] = result
        print(
            f"worker over {args.backlog:,}: {result['rate']:,.0f}/s, peak RSS "
            f"{result['peak_rss_mib']:.0f} MiB (at 10%: {result['rss_at_10pct_mib']:.0f} MiB)"
        )
    db.close()
    print(json.dumps(report))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
