"""Browsing a queue without leasing (``list_messages``, ``get_message``) and ``queue_info``'s
estimate, on both engines: key order, keyset paging, key prefixes (``%`` and ``_`` are plain
characters), states on a pinned clock, and the refusals of bad arguments."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import txqueue
from txqueue.errors import InvalidArgument, NotFound
from txqueue.testing import FakeClock

from .support import Face, dialect_name, is_spanner

LEASE = timedelta(seconds=10)
DDL = {
    "googlesql": [
        "CREATE QUEUE Orders (Tenant STRING(MAX) NOT NULL, Id INT64 NOT NULL,"
        " Payload JSON NOT NULL) PRIMARY KEY (Tenant, Id)",
        "CREATE TABLE Plain (Id INT64 NOT NULL) PRIMARY KEY (Id)",
    ],
    "postgresql": [
        "CREATE QUEUE orders (tenant varchar NOT NULL, id bigint NOT NULL,"
        " payload jsonb NOT NULL, PRIMARY KEY (tenant, id))",
        "CREATE TABLE plain (id bigint NOT NULL, PRIMARY KEY (id))",
    ],
}
TENANTS = ["a%b", "a%c", "a_b", "aXb", "ab", "b", "a%"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db(face: Face, database_url: str, clock: FakeClock) -> Iterator[txqueue.Database]:
    db = face.connect(database_url, clock=clock)
    try:
        db.update_ddl(DDL[dialect_name(db.dialect)])
        yield db
    finally:
        db.close()


def _fill(db: txqueue.Database) -> list[tuple[Any, ...]]:
    keys = [(tenant, number) for tenant in TENANTS for number in (2, 1, 3)]
    with db.batch() as batch:
        for tenant, number in keys:
            batch.send("orders", (tenant, number), {"tenant": tenant, "n": number})
    return sorted(keys)


def _all_pages(db: txqueue.Database, **filters: Any) -> list[tuple[Any, ...]]:
    keys: list[tuple[Any, ...]] = []
    after = None
    while True:
        page = db.list_messages("orders", after=after, limit=2, **filters)
        keys += [m.key for m in page]
        if len(page) < 2:
            return keys
        after = page[-1].key


def test_pages_follow_key_order_to_the_end(db: txqueue.Database) -> None:
    expected = _fill(db)
    assert _all_pages(db) == expected
    first = db.list_messages("orders", limit=3)
    assert [m.key for m in first] == expected[:3]
    assert first[0].payload == {"tenant": expected[0][0], "n": expected[0][1]}
    assert db.list_messages("orders", after=expected[-1]) == []


def test_a_string_prefix_is_literal_and_leading_values_exact(db: txqueue.Database) -> None:
    expected = _fill(db)
    starting = sorted(k for k in expected if k[0].startswith("a%"))
    assert _all_pages(db, key_prefix=("a%",)) == starting
    assert {k[0] for k in starting} == {"a%", "a%b", "a%c"}  # not "aXb", "ab" or "a_b"
    assert _all_pages(db, key_prefix=("a_",)) == [k for k in expected if k[0] == "a_b"]
    assert _all_pages(db, key_prefix="b") == [("b", 1), ("b", 2), ("b", 3)]
    assert _all_pages(db, key_prefix=("a%b", 3)) == [("a%b", 3)]
    assert _all_pages(db, key_prefix=("",)) == expected
    assert db.list_messages("orders", key_prefix=("zz",)) == []


@pytest.mark.parametrize("range_limit", [0, 10_000], ids=["key-walk", "ready-range"])
def test_states_hidden_columns_and_the_state_filter(
    db: txqueue.Database, clock: FakeClock, range_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways SQLite finds a state's messages: walking the key index, or reading the
    state's range of the ready index when it is small (PostgreSQL always walks the keys)."""
    from txqueue.drivers.sqlite import browse

    monkeypatch.setattr(browse, "RANGE_LIMIT", range_limit)
    with db.batch() as batch:
        batch.send("orders", ("t", 1), {"n": 1})
        batch.send("orders", ("t", 2), {"n": 2})
        batch.send("orders", ("t", 3), {"n": 3}, deliver_time=clock() + timedelta(hours=1))
        batch.send("orders", ("t", 4), {"n": 4})
    leased, failed = db.receive_now("orders", max_batch_size=2, lease_duration=LEASE)
    db.release_lease("orders", [failed.lease_token], delay=timedelta(seconds=30), error="boom")
    by_key = {m.key: m for m in db.list_messages("orders")}
    assert {k: m.state for k, m in by_key.items()} == {
        ("t", 1): "leased",
        ("t", 2): "scheduled",
        ("t", 3): "scheduled",
        ("t", 4): "ready",
    }
    assert by_key[("t", 1)].lease_expiration == leased.lease_expiration
    assert by_key[("t", 1)].delivery_count == 1
    assert by_key[("t", 2)].lease_expiration is None
    assert by_key[("t", 2)].last_error == "boom"
    assert by_key[("t", 3)].deliver_time == clock() + timedelta(hours=1)
    assert by_key[("t", 4)].last_error is None
    assert [m.key for m in db.list_messages("orders", state="ready")] == [("t", 4)]
    assert [m.key for m in db.list_messages("orders", state="leased")] == [("t", 1)]
    scheduled = db.list_messages("orders", state="scheduled", limit=1)
    assert [m.key for m in scheduled] == [("t", 2)]
    later = db.list_messages("orders", state="scheduled", after=scheduled[-1].key)
    assert [m.key for m in later] == [("t", 3)]
    clock.advance(LEASE + timedelta(seconds=0.5))  # lease gone, its 1 s backoff not yet
    assert db.get_message("orders", ("t", 1)).state == "scheduled"
    assert db.get_message("orders", ("t", 1)).lease_expiration is None
    clock.advance(timedelta(seconds=1))
    assert db.get_message("orders", ["t", 1]).state == "ready"
    info = db.queue_info("orders")
    assert (info.ready, info.leased, info.scheduled) == (2, 0, 2)


def test_get_message_reads_one_and_a_missing_key_is_not_found(db: txqueue.Database) -> None:
    _fill(db)
    message = db.get_message("orders", ("a_b", 2))
    assert (message.queue.lower(), message.key, message.state) == ("orders", ("a_b", 2), "ready")
    assert message.payload == {"tenant": "a_b", "n": 2}
    with pytest.raises(NotFound, match="no message with key"):
        db.get_message("orders", ("a_", 2))  # a prefix of a key is not that key
    with pytest.raises(NotFound):
        db.get_message("nowhere", ("a", 1))


def test_an_estimate_of_a_small_queue_is_exact(db: txqueue.Database, clock: FakeClock) -> None:
    _fill(db)
    db.receive_now("orders", max_batch_size=2, lease_duration=LEASE)
    clock.advance(5)
    exact = db.queue_info("orders")
    estimate = db.queue_info("orders", estimate=True)
    assert estimate == exact
    assert estimate.estimated is False
    assert (estimate.ready, estimate.leased) == (len(TENANTS) * 3 - 2, 2)
    assert estimate.oldest_ready_age_seconds == pytest.approx(5)


def test_a_large_queue_is_estimated(
    db: txqueue.Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the count limit (lowered here) the counts come from a sample: close to the truth,
    marked estimated; the oldest ready age stays exact."""
    from txqueue.drivers.postgres import _async_browse, _sync_browse
    from txqueue.drivers.sqlite import browse

    monkeypatch.setattr(browse, "COUNT_LIMIT", 100)
    if is_spanner(database_url):
        from txqueue.drivers.spanner import browse as spanner_browse

        monkeypatch.setattr(spanner_browse, "COUNT_LIMIT", 100)
    monkeypatch.setattr(_sync_browse, "COUNT_LIMIT", 100)
    monkeypatch.setattr(_async_browse, "COUNT_LIMIT", 100)
    with db.batch() as batch:
        for number in range(600):
            batch.send("orders", ("t", number), {"n": number})
    db.receive_now("orders", max_batch_size=100, lease_duration=LEASE)
    info = db.queue_info("orders", estimate=True)
    assert info.estimated is True
    assert info.ready == pytest.approx(500, rel=0.2)
    assert info.leased == pytest.approx(100, rel=0.35)
    assert info.oldest_ready_age_seconds == pytest.approx(0, abs=0.01)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"state": "done"}, "state must be one of ready, leased, scheduled"),
        ({"limit": 0}, "limit must be an int from 1 to 1000"),
        ({"limit": 1001}, "limit must be an int from 1 to 1000"),
        ({"limit": True}, "limit must be an int"),
        ({"limit": "5"}, "limit must be an int"),
        ({"key_prefix": ("a", 1, 2)}, "key_prefix of orders may hold at most 2 value"),
        ({"key_prefix": (1,)}, r"key_prefix\[0\] \(tenant\) must be a str"),
        ({"key_prefix": ("a", "1")}, r"key_prefix\[1\] \(id\) must be an int"),
        ({"key_prefix": (None,)}, r"key_prefix\[0\] \(tenant\) must not be NULL"),
        ({"after": ("a",)}, "after of orders must have 2 part"),
        ({"after": ("a", "x")}, r"after\[1\] \(id\) must be an int"),
    ],
)
def test_bad_browse_arguments_are_refused(
    db: txqueue.Database, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match="(?i)" + message):
        db.list_messages("orders", **arguments)


def test_other_bad_arguments_are_refused(db: txqueue.Database) -> None:
    with pytest.raises(InvalidArgument, match="is a table, not a queue"):
        db.list_messages("plain")
    with pytest.raises(InvalidArgument, match=r"(?i)key of orders must have 2 part"):
        db.get_message("orders", "a")
    with pytest.raises(InvalidArgument, match="estimate must be a bool"):
        db.queue_info("orders", estimate="yes")  # type: ignore[arg-type]
