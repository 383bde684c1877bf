"""The event layer end to end (seed 004, SPEC §6): publish in a transaction, route with CEL,
deliver over HTTP to a real endpoint on 127.0.0.1, retry with the policy's delays, log every
attempt, list what failed, replay it. Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from cloudevents.core.v1.event import CloudEvent
from events_receiver import Receiver, wait_until

import txqueue
from txqueue.events.records import DELIVERIES

SECOND = timedelta(seconds=1)
PAID = "com.shop.order.paid"


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    database = txqueue.connect(database_url)
    yield database
    database.close()


@pytest.fixture
def dispatcher(database_url: str, events: txqueue.Events) -> Iterator[txqueue.Dispatcher]:
    with txqueue.Dispatcher(database_url, concurrency=4, attempt_timeout=5 * SECOND) as running:
        yield running


def pipeline(
    events: txqueue.Events,
    receiver: Receiver,
    name: str,
    path: str,
    cel_match: str = "true",
    **retry: object,
) -> None:
    """A pipeline to ``path`` on the receiver, enrolled on bus orders with ``cel_match``."""
    policy = txqueue.RetryPolicy(**retry) if retry else None
    events.create_pipeline(name, receiver.url(path), retry=policy, allow_private=True)
    events.create_enrollment(f"{name}-all", bus="orders", pipeline=name, cel_match=cel_match)


def order(event_id: str, event_type: str = PAID, source: str = "//shop") -> CloudEvent:
    return CloudEvent({"type": event_type, "source": source, "id": event_id}, {"order": event_id})


def final_attempts(
    events: txqueue.Events, uid: str, count: int = 1
) -> list[txqueue.DeliveryAttempt]:
    """The attempt log of ``uid`` once ``count`` pipelines have a final (not retrying) row."""

    def done() -> list[txqueue.DeliveryAttempt]:
        rows = events.attempts(uid)
        finished = [r for r in rows if r.state in ("delivered", "failed")]
        return rows if len(finished) >= count else []

    result: list[txqueue.DeliveryAttempt] = wait_until(done)
    return result


def test_503_twice_then_200_is_retried_after_1_s_then_2_s(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    receiver.script("/flaky", 503, 503, 200)
    pipeline(events, receiver, "notify-shipping", "/flaky", min_retry_delay=SECOND)

    uid = events.publish("orders", order("order-17"))

    first, second, third = receiver.wait_for("/flaky", 3)
    gaps = (second.arrived - first.arrived, third.arrived - second.arrived)
    assert 0.95 <= gaps[0] <= 2.5, gaps  # min_retry_delay
    assert 1.95 <= gaps[1] <= 3.5, gaps  # doubled
    for request in (first, second, third):
        assert request.headers["ce-id"] == "order-17"
        assert request.headers["ce-source"] == "//shop"
        assert request.headers["ce-messageuid"] == uid
        assert request.headers["ce-type"] == PAID
        assert request.body == b'{"order": "order-17"}'
    rows = final_attempts(events, uid)
    assert [(r.attempt, r.state, r.status) for r in rows] == [
        (1, "retrying", 503),
        (2, "retrying", 503),
        (3, "delivered", 200),
    ]
    assert [r.retry_delay for r in rows] == [SECOND, 2 * SECOND, None]
    assert events.undelivered() == []


def test_400_is_tried_once_and_listed_as_undelivered(
    db: txqueue.Database, events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    receiver.script("/bad", 400)
    pipeline(events, receiver, "strict", "/bad")

    uid = events.publish("orders", order("order-18"))

    [row] = final_attempts(events, uid)
    assert (row.attempt, row.state, row.outcome, row.status) == (1, "failed", "permanent", 400)
    assert db.queue_info(DELIVERIES).scheduled + db.queue_info(DELIVERIES).ready == 0
    assert len(receiver.received("/bad")) == 1
    [missed] = events.undelivered()
    assert (missed.message_uid, missed.pipeline, missed.status) == (uid, "strict", 400)
    assert missed.event.get_id() == "order-18"


# Statuses sent end to end; every status 100-599 is classified in tests/unit/events.
SUCCESS = [200, 201, 202, 204, 299]
TRANSIENT = [408, 409, 429, 500, 502, 503, 504]
PERMANENT = [301, 302, 304, 400, 401, 403, 404, 410, 422, 501, 505, 599]


def test_status_codes_are_retried_or_not_as_seed_004_says(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    uids = {}
    for status in SUCCESS + TRANSIENT + PERMANENT:
        path = f"/status-{status}"
        receiver.script(path, status, headers={"location": receiver.url("/moved")})
        policy = {"max_attempts": 2, "min_retry_delay": SECOND, "max_retry_delay": SECOND}
        pipeline(events, receiver, f"p{status}", path, f'message.type == "t{status}"', **policy)
        uids[status] = events.publish("orders", order(f"e{status}", f"t{status}"))

    for status, uid in uids.items():
        rows = final_attempts(events, uid)
        summary = [(r.state, r.outcome, r.status) for r in rows]
        if status in SUCCESS:
            assert summary == [("delivered", "success", status)]
        elif status in TRANSIENT:
            assert summary == [("retrying", "transient", status), ("failed", "transient", status)]
            assert "gave up after 2 attempt(s)" in (rows[-1].error or "")
        else:
            assert summary == [("failed", "permanent", status)]
        assert len(receiver.received(f"/status-{status}")) == len(rows)
    assert receiver.received("/moved") == []  # redirects are not followed
    failed = {m.pipeline for m in events.undelivered()}
    assert failed == {f"p{s}" for s in TRANSIENT + PERMANENT}


def test_cel_routes_each_event_to_the_matching_pipelines(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    pipeline(events, receiver, "paid", "/paid", f'message.type == "{PAID}"')
    pipeline(events, receiver, "shop", "/shop", 'message.source.startsWith("//shop")')

    both = events.publish("orders", order("both"))
    events.publish("orders", order("shop-only", "com.shop.order.created"))
    events.publish("orders", order("paid-only", source="//market"))
    nowhere = events.publish("orders", order("nowhere", "x", "//elsewhere"))

    assert {r.headers["ce-id"] for r in receiver.wait_for("/paid", 2)} == {"both", "paid-only"}
    assert {r.headers["ce-id"] for r in receiver.wait_for("/shop", 2)} == {"both", "shop-only"}
    assert {r.headers["ce-messageuid"] for r in receiver.received("/paid")} >= {both}
    [unrouted] = events.undelivered(pipeline="")
    assert unrouted.message_uid == nowhere  # failure before routing: permanent, kept
    wait_until(lambda: len(events.attempts(pipeline="paid")) == 2)
    assert len(receiver.received("/paid")) == 2 and len(receiver.received("/shop")) == 2


def test_a_rolled_back_transaction_publishes_nothing(
    db: txqueue.Database, events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    if db.dialect is txqueue.Dialect.POSTGRESQL:
        db.update_ddl("CREATE TABLE orders (orderid varchar(64) NOT NULL, PRIMARY KEY (orderid))")
    else:
        db.update_ddl("CREATE TABLE Orders (OrderId STRING(64) NOT NULL) PRIMARY KEY (OrderId)")
    pipeline(events, receiver, "notify", "/orders")

    def checkout(txn: txqueue.Transaction, order_id: str, fail: bool) -> str:
        txn.insert("Orders", ("OrderId",), [(order_id,)])
        uid = events.publish("orders", order(order_id), txn=txn)
        if fail:
            raise RuntimeError("payment declined")
        return uid

    with pytest.raises(RuntimeError):
        db.run_in_transaction(checkout, "order-1", True)
    uid = db.run_in_transaction(checkout, "order-2", False)

    [request] = receiver.wait_for("/orders", 1)
    assert request.headers["ce-id"] == "order-2"
    assert [m.message_uid for m in events.messages()] == [uid]
    final_attempts(events, uid)
    assert len(receiver.received("/orders")) == 1
    with db.snapshot() as snapshot:
        assert list(snapshot.execute_sql("SELECT OrderId FROM Orders")) == [("order-2",)]


def test_each_publish_of_the_same_event_gets_its_own_message_uid(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    pipeline(events, receiver, "notify", "/twice")
    event = order("order-3")
    uids = [events.publish("orders", event), events.publish("orders", event)]
    requests = receiver.wait_for("/twice", 2)
    assert uids[0] != uids[1]
    assert sorted(r.headers["ce-messageuid"] for r in requests) == sorted(uids)
    assert {(r.headers["ce-source"], r.headers["ce-id"]) for r in requests} == {
        ("//shop", "order-3")
    }


def test_replay_reaches_the_endpoint_once_it_recovers(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    receiver.script("/down", 503)
    pipeline(events, receiver, "notify", "/down", max_attempts=1)
    uid = events.publish("orders", order("order-4"))
    [row] = final_attempts(events, uid)
    assert (row.state, row.status) == ("failed", 503)
    [missed] = events.undelivered(pipeline="notify")

    receiver.script("/down", 200)
    [new_uid] = events.replay(pipeline="notify")

    requests = receiver.wait_for("/down", 2)
    assert requests[1].headers["ce-messageuid"] == new_uid != uid
    assert requests[1].headers["ce-id"] == "order-4"
    assert requests[1].body == requests[0].body
    assert [r.state for r in final_attempts(events, new_uid)] == ["delivered"]
    assert events.undelivered() == []
    assert events.replay() == []  # replayed once only
    assert [r.state for r in events.attempts(missed.message_uid)] == ["failed", "replayed"]
    [copy] = [m for m in events.messages() if m.message_uid == new_uid]
    assert copy.replay_of == uid


def test_retry_after_is_honoured_up_to_the_maximum_delay(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    receiver.script("/busy", 429, 200, headers={"retry-after": "3600"})
    policy = {"min_retry_delay": SECOND, "max_retry_delay": 2 * SECOND}
    pipeline(events, receiver, "notify", "/busy", **policy)
    uid = events.publish("orders", order("order-5"))
    first, second = receiver.wait_for("/busy", 2)
    assert 1.95 <= second.arrived - first.arrived <= 4.0
    assert final_attempts(events, uid)[0].retry_delay == 2 * SECOND


def test_pipeline_updates_apply_without_restarting_the_dispatcher(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    pipeline(events, receiver, "notify", "/old")
    events.publish("orders", order("before"))
    receiver.wait_for("/old", 1)

    events.update_pipeline("notify", destination=receiver.url("/new"), allow_private=True)
    probes = iter(range(1000))

    def arrived_at_new() -> bool:
        events.publish("orders", order(f"after-{next(probes)}"))
        return bool(receiver.received("/new"))

    wait_until(arrived_at_new, timeout=10, interval=0.25)  # config is re-read every second


def test_archive_and_attempt_log_are_purged_after_the_bus_retention(
    database_url: str, events: txqueue.Events
) -> None:
    events.create_bus("audit", retention=None)  # kept until purged by hand
    events.create_pipeline("nowhere", "https://example.com/hook", allow_private=True)
    events.create_enrollment("all", bus="orders", pipeline="nowhere", cel_match="true")
    events.publish("orders", order("old"))
    events.publish("audit", order("kept"))  # no enrollment: archived, logged as unrouted
    assert len(events.messages()) == 2 and len(events.attempts()) == 1

    later = datetime.now(timezone.utc) + timedelta(days=31)
    with txqueue.connect(database_url, clock=lambda: later) as future:
        assert txqueue.Events(future).purge() == (1, 0)  # orders: 30 days
        assert [m.bus for m in events.messages()] == ["audit"]
        assert txqueue.Events(future).purge(older_than=timedelta(days=1)) == (1, 1)
    assert events.messages() == [] and events.attempts() == []
