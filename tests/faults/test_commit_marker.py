"""The commit marker behind the one-round-trip COMMIT on PostgreSQL (docs/guarantees.md).

A transaction that wrote records a fresh token in its connection's row of
``txqueue_commits`` in the COMMIT's own pipeline; a read-only one records nothing (it must
stay read-only: no xid, no WAL flush). Rows of connections gone for a day are deleted when a
``Database`` opens; recent ones are kept, since a resolver may still need them.
"""

from __future__ import annotations

import psycopg
import pytest

import txqueue

pytestmark = pytest.mark.postgres


def _markers(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute("SELECT slot, token FROM txqueue_commits").fetchall()
    return {str(slot): int(token) for slot, token in rows}


def test_only_writing_transactions_record_a_token(pg_database_url: str) -> None:
    with txqueue.connect(pg_database_url + "?pool_size=1") as db:
        db.update_ddl("CREATE TABLE notes (id bigint NOT NULL, PRIMARY KEY (id))")
        before = _markers(pg_database_url)

        db.run_in_transaction(lambda txn: txn.execute_sql("SELECT count(*) FROM notes"))
        assert _markers(pg_database_url) == before, "a read-only transaction wrote a marker"

        db.run_in_transaction(lambda txn: txn.insert("notes", ("id",), [(1,)]))
        first = _markers(pg_database_url)
        changed = {slot for slot, token in first.items() if before.get(slot) != token}
        assert len(changed) == 1, "the writing transaction recorded one token in its slot"

        db.run_in_transaction(lambda txn: txn.insert("notes", ("id",), [(2,)]))
        second = _markers(pg_database_url)
        (slot,) = changed
        assert second.keys() == first.keys(), "one row per connection, not per transaction"
        assert second[slot] != first[slot], "each commit records a fresh token"


def test_stale_slots_are_forgotten_when_a_database_opens(pg_database_url: str) -> None:
    txqueue.connect(pg_database_url).close()  # creates the catalog
    with psycopg.connect(pg_database_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO txqueue_commits (slot, token, touched) VALUES"
            " ('1@stale', 1, now() - interval '2 days'), ('2@recent', 2, now() - interval '1 hour')"
        )
    txqueue.connect(pg_database_url).close()
    markers = _markers(pg_database_url)
    assert "1@stale" not in markers
    assert markers.get("2@recent") == 2
