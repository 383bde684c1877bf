"""What a delivery message carries: the event already encoded as its HTTP request at publish
(once for every route), sent as is by the dispatcher; payloads written before that form
existed still deliver. Both engines."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from events_receiver import Receiver

import txqueue
from txqueue.events.cloudevent import coerce_event, to_binary_http
from txqueue.events.records import DELIVERIES, Delivery

SECOND = timedelta(seconds=1)
EVENT = {
    "type": "com.shop.order.paid",
    "source": "//shop",
    "id": "order-1",
    "subject": "orders/1",
    "time": "2026-01-02T03:04:05.678901Z",
    "region": "eu",
    "data": {"order": 1, "note": "é"},
}


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        yield database


@pytest.fixture
def events(db: txqueue.Database, receiver: Receiver) -> txqueue.Events:
    events = txqueue.Events(db)
    events.create_bus("orders")
    for name in ("first", "second"):
        events.create_pipeline(name, receiver.url(f"/{name}"), allow_private=True)
        events.create_enrollment(name, bus="orders", pipeline=name, cel_match="true")
    return events


def test_publish_encodes_the_request_once_and_the_dispatcher_sends_it(
    database_url: str, db: txqueue.Database, events: txqueue.Events, receiver: Receiver
) -> None:
    uid = events.publish("orders", EVENT)

    held = db.receive_now(DELIVERIES, max_batch_size=10)
    assert sorted(m.key for m in held) == [("first", uid), ("second", uid)]
    expected = to_binary_http(coerce_event(EVENT), uid)
    for message in held:
        assert Delivery.decode(message.payload).http == expected
    db.release_lease(DELIVERIES, [m.lease_token for m in held])

    with txqueue.Dispatcher(database_url, concurrency=2, attempt_timeout=5 * SECOND):
        requests = [receiver.wait_for(f"/{name}", 1)[0] for name in ("first", "second")]
    headers, body = expected
    for request in requests:
        assert request.body == body
        sent = {name.lower(): value for name, value in request.headers.items()}
        assert {name.lower(): value for name, value in headers.items()}.items() <= sent.items()
        assert sent["ce-messageuid"] == uid and sent["ce-region"] == "eu"


def test_a_payload_without_the_encoded_request_still_delivers(
    database_url: str, db: txqueue.Database, events: txqueue.Events, receiver: Receiver
) -> None:
    """Deliveries queued before publish encoded the request carry the event only."""
    document = {**EVENT, "specversion": "1.0"}
    payload = Delivery("orders", document).encode()
    assert "headers" not in payload

    def queue(transaction: txqueue.Transaction) -> None:
        transaction.send(DELIVERIES, ("first", "uid-from-before"), payload)

    db.run_in_transaction(queue)
    with txqueue.Dispatcher(database_url, concurrency=2, attempt_timeout=5 * SECOND):
        [request] = receiver.wait_for("/first", 1)
    sent = {name.lower(): value for name, value in request.headers.items()}
    assert (sent["ce-id"], sent["ce-messageuid"]) == ("order-1", "uid-from-before")
    assert request.body == to_binary_http(coerce_event(EVENT), "uid-from-before")[1]
