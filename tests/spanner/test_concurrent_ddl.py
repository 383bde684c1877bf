"""txqueue's own tables made by several processes at once on Cloud Spanner (the worker
registry's, when workers start together; the event layer's).

Two processes that both find a table missing both create it: the second's schema change
then fails ("Duplicate name in schema"), or, on the emulator, is refused while the first's
runs or while any read-write transaction is open. Neither may undo what the other made:
before, the loser dropped the winner's tables while the winner recorded them in txqueue's
catalog, and every heartbeat of every worker then failed with "Table not found:
txqueue_worker_throughput".
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

from spannerfixtures import SpannerAppTransaction

import txqueue
from txqueue.drivers.spanner.statements import create_table
from txqueue.worker.observe import Stats
from txqueue.worker.registry import TABLES, Registration, throughput, workers


def _client_database(url: str) -> object:
    from google.cloud import spanner

    path = url.removeprefix("spanner://")
    _, project, _, instance, _, database = path.split("/")
    return spanner.Client(project=project).instance(instance).database(database)


def test_tables_another_process_made_meanwhile_are_kept(spanner_url: str) -> None:
    with txqueue.connect(spanner_url) as db:
        # another process's schema change made them; it has not recorded them yet
        ddl = [s for table in TABLES for s in create_table(table, "DeliverTime")]
        _client_database(spanner_url).update_ddl(ddl).result()  # type: ignore[attr-defined]

        db.ensure_internal_tables(TABLES)  # refused before, and dropped them

    async def beat() -> None:
        database = await txqueue.connect_async(spanner_url)
        try:
            stats = Stats()
            stats.started(["jobs"], 1)
            await Registration(database, stats, ["jobs"], 1, timedelta(seconds=5)).beat()
        finally:
            await database.close()

    asyncio.run(beat())
    with txqueue.connect(spanner_url) as db:
        assert [w.queues for w in workers(db)] == [("jobs",)]
        assert throughput(db) == []  # both tables are there


def test_a_schema_change_refused_for_an_open_transaction_is_tried_again(spanner_url: str) -> None:
    with txqueue.connect(spanner_url) as db:
        db.update_ddl(["CREATE TABLE Notes (Id INT64 NOT NULL) PRIMARY KEY (Id)"])
        own = SpannerAppTransaction(spanner_url)
        try:
            own.execute("INSERT INTO Notes (Id) VALUES (:id)", {"id": 1})  # holds the emulator
            committer = threading.Timer(1.0, own.commit)
            committer.start()
            db.update_ddl(["CREATE TABLE Later (Id INT64 NOT NULL) PRIMARY KEY (Id)"])
            committer.join(30)
        finally:
            own.close()
        with db.snapshot() as snapshot:
            assert list(snapshot.execute_sql("SELECT Id FROM Notes")) == [(1,)]
            assert list(snapshot.execute_sql("SELECT COUNT(*) FROM Later")) == [(0,)]
