"""What the dashboard's pages cost the database with 1,000,000 messages in one queue.

    python benchmarks/dashboard_render.py                       # SQLite and a private PostgreSQL
    python benchmarks/dashboard_render.py --database sqlite:////tmp/dash.db --messages 1000000
    python benchmarks/dashboard_render.py --database postgresql://user@host/db --explain

Fills queue ``Orders`` (key ``(Tenant, Id)``, 20 tenants, JSON payloads) with ``--messages``
messages by plain SQL in chunks (a recursive CTE on SQLite, ``generate_series`` on
PostgreSQL): 90 % ready, 5 % leased (a live lease, one delivery), 5 % scheduled an hour
ahead, one in 100 with a recorded failure; plus 20,000 dead letters. PostgreSQL is then
VACUUM ANALYZEd (the state autovacuum reaches); SQLite is left without ANALYZE. Then times,
median of ``--repeat`` runs, each library call the overview and a queue page make, and prints
one JSON line per engine.

``measure(url)`` returns those figures for one database; ``fill(url, messages)`` builds it.
``page_calls`` are the library calls; ``web_calls`` the pages themselves, ``GET /`` and
``GET /queues/Orders`` through ``httpx.ASGITransport`` on ``txqueue.web.create_app`` (the
server's time for a page: routing, the library calls and the template, no network). Without ``--database`` a PostgreSQL server is started
with ``tests/pgserver.py`` (``initdb`` on PATH) and removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import txqueue
from txqueue.worker.registry import throughput, workers

QUEUE = "Orders"
DDL = (
    "CREATE QUEUE Orders (Tenant STRING(64) NOT NULL, Id STRING(36) NOT NULL,"
    " Payload JSON NOT NULL) PRIMARY KEY (Tenant, Id)"
)
PG_DDL = (
    "CREATE QUEUE orders (tenant varchar(64) NOT NULL, id varchar(36) NOT NULL,"
    " payload jsonb NOT NULL, PRIMARY KEY (tenant, id))"
)
TENANTS = 20
DEAD_LETTERS = 20_000
CHUNK = 100_000
PAYLOAD = '{"order": 12345, "lines": [{"sku": "A-1", "qty": 2}], "note": "' + "x" * 60 + '"}'


def fill(url: str, messages: int) -> None:
    """Create ``Orders`` and fill it (see the module docstring)."""
    with txqueue.connect(url) as db:
        postgres = db.engine == "postgres"
        db.update_ddl([PG_DDL if postgres else DDL])
        done = 0
        while done < messages:
            step = min(CHUNK, messages - done)
            sql, arguments = (_pg_chunk if postgres else _sqlite_chunk)(done, done + step - 1)
            db.run_in_transaction(lambda t, q=sql, a=arguments: t.execute_engine_update(q, a))
            done += step
        sql, arguments = (_pg_dead if postgres else _sqlite_dead)()
        db.run_in_transaction(lambda t: t.execute_engine_update(sql, arguments))
    if postgres:
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("VACUUM (ANALYZE) orders")
            connection.execute("VACUUM (ANALYZE) txqueue_dead_letters")


# The state of message i follows s = (i / 20) % 20, independent of its tenant (i % 20):
# s == 0 leased, s == 1 scheduled, the rest ready; i % 100 == 42 failed once (ready again).
def _sqlite_chunk(first: int, last: int) -> tuple[str, list[Any]]:
    now = "(CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER))"
    return (
        "WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i < ?),"
        f" c(now) AS (SELECT {now}), m(i, s, now) AS (SELECT i, (i / 20) % 20, now FROM n, c)"
        " INSERT INTO Orders (Tenant, Id, Payload, DeliverTime, _txq_ready_at,"
        " _txq_lease_expiration, _txq_lease_token, _txq_delivery_count, _txq_last_error)"
        f" SELECT printf('tenant-%02d', i % {TENANTS}), printf('%012d', i), ?,"
        " CASE WHEN s = 1 THEN now + 3600000000 ELSE now - 3600000000 + i END,"
        " CASE WHEN s = 0 THEN now + 302000000 END,"
        " CASE WHEN s = 0 THEN now + 300000000 END,"
        " CASE WHEN s = 0 THEN printf('%014x', now + 300000000) || 'abcdef0123456789' END,"
        " CASE WHEN s = 0 OR i % 100 = 42 THEN 1 ELSE 0 END,"
        " CASE WHEN i % 100 = 42 THEN 'ValueError: boom' END"
        " FROM m",
        [first, last, PAYLOAD],
    )


def _pg_chunk(first: int, last: int) -> tuple[str, list[Any]]:
    return (
        "INSERT INTO orders (tenant, id, payload, deliver_time, _txq_lease_expiration,"
        " _txq_lease_token, _txq_delivery_count, _txq_last_error)"
        f" SELECT 'tenant-' || lpad(mod(i, {TENANTS})::text, 2, '0'), lpad(i::text, 12, '0'),"
        " %s::jsonb,"
        " CASE WHEN s = 1 THEN now() + interval '1 hour'"
        " ELSE now() - interval '1 hour' + i * interval '1 microsecond' END,"
        " CASE WHEN s = 0 THEN now() + interval '5 minutes' END,"
        " CASE WHEN s = 0 THEN 'token' END,"
        " CASE WHEN s = 0 OR mod(i, 100) = 42 THEN 1 ELSE 0 END,"
        " CASE WHEN mod(i, 100) = 42 THEN 'ValueError: boom' END"
        " FROM (SELECT i, mod(i / 20, 20) AS s FROM generate_series(%s::bigint, %s::bigint)"
        " AS i) AS m",
        [PAYLOAD, first, last],
    )


def _sqlite_dead() -> tuple[str, list[Any]]:
    return (
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
        " INSERT INTO txqueue_dead_letters (queue, key, payload, attempts, last_error,"
        " first_failure, last_failure)"
        " SELECT 'orders', printf('[\"dead\",\"%012d\"]', i), ?, 5, 'KeyError: gone', i, i FROM n",
        [DEAD_LETTERS - 1, json.dumps(json.loads(PAYLOAD))],
    )


def _pg_dead() -> tuple[str, list[Any]]:
    return (
        "INSERT INTO txqueue_dead_letters (queue, key, payload, attempts, last_error,"
        " first_failure, last_failure)"
        " SELECT 'orders', '[\"dead\",\"' || lpad(i::text, 12, '0') || '\"]', %s, 5,"
        " 'KeyError: gone', now(), now() FROM generate_series(0, %s) AS i",
        [json.dumps(json.loads(PAYLOAD)), DEAD_LETTERS - 1],
    )


def middle_key(messages: int) -> tuple[str, str]:
    """A key halfway through the queue (of tenant-07)."""
    number = messages // 2 - messages // 2 % TENANTS + 7
    return ("tenant-07", f"{number:012d}")


def page_calls(db: txqueue.Database, messages: int) -> dict[str, Callable[[], Any]]:
    """The library calls of the overview and of a queue page, by name."""
    middle = middle_key(messages)
    return {
        "overview: queues": db.queues,
        "overview: queue_info(estimate=True)": lambda: db.queue_info(QUEUE, estimate=True),
        "overview: workers": lambda: workers(db),
        "overview: throughput(1 h)": lambda: throughput(db),
        "queue: first page (50)": lambda: db.list_messages(QUEUE),
        "queue: page after a middle key": lambda: db.list_messages(QUEUE, after=middle),
        "queue: page state=ready": lambda: db.list_messages(QUEUE, state="ready"),
        "queue: page state=leased": lambda: db.list_messages(QUEUE, state="leased"),
        "queue: page state=scheduled": lambda: db.list_messages(QUEUE, state="scheduled"),
        "queue: page prefix (tenant-07, '00000050')": lambda: db.list_messages(
            QUEUE, key_prefix=("tenant-07", "00000050")
        ),
        "queue: page prefix ('tenant-1',)": lambda: db.list_messages(
            QUEUE, key_prefix=("tenant-1",)
        ),
        "queue: get_message": lambda: db.get_message(QUEUE, middle),
        "dead letters: first 50": lambda: db.dead_letters(QUEUE, limit=50),
        "for contrast: queue_info() exact": lambda: db.queue_info(QUEUE),
    }


@contextmanager
def web_calls(db: txqueue.Database) -> Iterator[dict[str, Callable[[], Any]]]:
    """``GET /`` and ``GET /queues/Orders`` of `txqueue.web.create_app` over ``db``, through
    ``httpx.ASGITransport``: the server's whole time for a page (routing, the library calls,
    the template), without a network or a browser. Each call raises unless the answer is 200."""
    import asyncio

    import httpx

    import txqueue.web

    loop = asyncio.new_event_loop()
    token = "benchmark-token"
    transport = httpx.ASGITransport(app=txqueue.web.create_app(db, token=token))
    client = httpx.AsyncClient(
        transport=transport,
        base_url="http://dashboard",
        headers={"authorization": f"Bearer {token}"},
    )

    def get(path: str) -> Callable[[], Any]:
        def call() -> Any:
            answer = loop.run_until_complete(client.get(path))
            if answer.status_code != 200:
                raise RuntimeError(f"GET {path}: {answer.status_code} {answer.text[:500]}")
            return answer

        return call

    try:
        yield {"page: GET /": get("/"), f"page: GET /queues/{QUEUE}": get(f"/queues/{QUEUE}")}
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


def measure(url: str, messages: int, repeat: int = 5) -> dict[str, Any]:
    """Median milliseconds of each of ``page_calls`` and ``web_calls`` over ``repeat`` runs
    (after one warm-up)."""
    figures: dict[str, Any] = {}
    with txqueue.connect(url) as db, web_calls(db) as pages:
        for name, call in {**page_calls(db, messages), **pages}.items():
            call()
            runs = []
            for _ in range(repeat):
                started = time.perf_counter()
                call()
                runs.append((time.perf_counter() - started) * 1000)
            figures[name] = round(statistics.median(runs), 2)
        info = db.queue_info(QUEUE, estimate=True)
        exact = db.queue_info(QUEUE)
    figures["estimate"] = _counts(info)
    figures["exact"] = _counts(exact)
    return figures


def _counts(info: txqueue.QueueInfo) -> dict[str, Any]:
    return {
        "ready": info.ready,
        "leased": info.leased,
        "scheduled": info.scheduled,
        "dead_letters": info.dead_letters,
        "oldest_ready_age_seconds": round(info.oldest_ready_age_seconds or 0, 1),
        "estimated": info.estimated,
    }


def explain(url: str, messages: int) -> None:
    """Print the plan of each browse query (the library's own SQL, run under EXPLAIN)."""
    with txqueue.connect(url) as db:
        table = db.queue(QUEUE)
        calls = {
            "first page": {},
            "state=leased": {"state": "leased"},
            "prefix": {"key_prefix": ("tenant-07", "00000050")},
            "after": {"after": middle_key(messages)},
        }
        from txqueue.drivers.browse import browse_params

        for name, arguments in calls.items():
            params = browse_params(
                table,
                arguments.get("state"),
                arguments.get("key_prefix"),
                arguments.get("after"),
                50,
                None,
            )
            print(f"-- {db.engine} {name}")
            if db.engine == "sqlite":
                _explain_sqlite(url, params)
            else:
                _explain_postgres(url, params)


class _Explaining:
    """A connection that prints the plan of each statement before running it."""

    def __init__(self, connection: Any, prefix: str) -> None:
        self.connection = connection
        self.prefix = prefix

    def execute(self, sql: str, arguments: Any = None) -> Any:
        if sql.lstrip().upper().startswith(("SELECT", "WITH")) and "pg_database" not in sql:
            for row in self.connection.execute(self.prefix + sql, arguments).fetchall():
                print("   ", row[-1])
        return self.connection.execute(sql, arguments)


def _explain_sqlite(url: str, params: Any) -> None:
    import sqlite3

    from txqueue.drivers.engines import parse_url
    from txqueue.drivers.sqlite import browse

    connection = sqlite3.connect(parse_url(url).target)
    try:
        browse.list_messages(_Explaining(connection, "EXPLAIN QUERY PLAN "), params, "DeliverTime")  # type: ignore[arg-type]
    finally:
        connection.close()


def _explain_postgres(url: str, params: Any) -> None:
    import psycopg

    from txqueue.drivers.postgres import _sync_browse

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET TIME ZONE 'UTC'")
        _sync_browse.list_messages(
            _Explaining(connection, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) "),
            params,
            "deliver_time",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", action="append", help="a URL (repeatable)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--explain", action="store_true", help="print the browse query plans")
    parser.add_argument("--keep", action="store_true", help="do not fill: the queue exists")
    options = parser.parse_args()
    server = None
    scratch = tempfile.TemporaryDirectory(prefix="txqueue-dashboard-")
    urls = options.database
    if not urls:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from pgserver import PostgresServer  # type: ignore[import-not-found]

        server = PostgresServer.start()
        urls = [f"sqlite:///{scratch.name}/dashboard.db", server.create_database("dashboard")]
    try:
        for url in urls:
            started = time.perf_counter()
            if not options.keep:
                fill(url, options.messages)
            filled = time.perf_counter() - started
            if options.explain:
                explain(url, options.messages)
            engine = "sqlite" if url.startswith("sqlite") else "postgres"
            result = {
                "engine": engine,
                "messages": options.messages,
                "fill_seconds": round(filled, 1),
            }
            result.update(measure(url, options.messages, options.repeat))
            print(json.dumps(result, indent=1), flush=True)
    finally:
        if server is not None:
            server.stop()
            server.cleanup()
        scratch.cleanup()


if __name__ == "__main__":
    main()
