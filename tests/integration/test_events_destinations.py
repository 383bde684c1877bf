"""Pipeline destinations other than plain HTTP, payload formats, signing and safety checks,
on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta

import pytest
from events_receiver import Receiver, wait_until

import txqueue
from txqueue.errors import FailedPrecondition, InvalidArgument, NotFound

SECOND = timedelta(seconds=1)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    database = txqueue.connect(database_url)
    yield database
    database.close()


@pytest.fixture
def dispatcher(database_url: str, events: txqueue.Events) -> Iterator[txqueue.Dispatcher]:
    with txqueue.Dispatcher(database_url, attempt_timeout=5 * SECOND) as running:
        yield running


def event(event_id: str, data: object = None) -> dict[str, object]:
    return {"type": "com.shop.order.paid", "source": "//shop", "id": event_id, "data": data}


def final(events: txqueue.Events, uid: str) -> txqueue.DeliveryAttempt:
    rows = wait_until(
        lambda: [r for r in events.attempts(uid) if r.state in ("delivered", "failed")]
    )
    return rows[-1]


def test_a_queue_destination_gets_the_event_keyed_by_message_uid(
    db: txqueue.Database, events: txqueue.Events, dispatcher: txqueue.Dispatcher
) -> None:
    if db.dialect is txqueue.Dialect.POSTGRESQL:
        db.update_ddl(
            "CREATE QUEUE inbox (messageid varchar(64) NOT NULL, payload jsonb NOT NULL,"
            " PRIMARY KEY (messageid))"
        )
    else:
        db.update_ddl(
            "CREATE QUEUE Inbox (MessageId STRING(64) NOT NULL, Payload JSON NOT NULL)"
            " PRIMARY KEY (MessageId)"
        )
    events.create_pipeline("to-inbox", "queue:Inbox")
    events.create_enrollment("all", bus="orders", pipeline="to-inbox", cel_match="true")

    uid = events.publish("orders", event("order-1", {"total": 12}))

    assert final(events, uid).state == "delivered"
    with closing(db.receive("Inbox", max_duration=5 * SECOND)) as stream:
        message = next(iter(stream))
    payload = message.payload if isinstance(message.payload, dict) else json.loads(message.payload)
    assert message.key == (uid,)
    assert payload["id"] == "order-1" and payload["messageuid"] == uid
    assert payload["data"] == {"total": 12}


def test_a_queue_destination_needs_one_string_key(
    db: txqueue.Database, events: txqueue.Events
) -> None:
    if db.dialect is txqueue.Dialect.POSTGRESQL:
        db.update_ddl(
            "CREATE QUEUE jobs (a bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (a))"
        )
    else:
        db.update_ddl(
            "CREATE QUEUE Jobs (A INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (A)"
        )
    with pytest.raises(InvalidArgument, match="exactly one STRING key column"):
        events.create_pipeline("to-jobs", "queue:Jobs")
    with pytest.raises(NotFound):
        events.create_pipeline("to-nowhere", "queue:Nowhere")


def test_a_bus_destination_republishes_under_a_new_uid(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    events.create_bus("audit")
    events.create_pipeline("forward", "bus:audit")
    events.create_pipeline("auditor", receiver.url("/audit"), allow_private=True)
    events.create_enrollment("all-orders", bus="orders", pipeline="forward", cel_match="true")
    events.create_enrollment("all-audit", bus="audit", pipeline="auditor", cel_match="true")

    uid = events.publish("orders", event("order-2"))

    [request] = receiver.wait_for("/audit", 1)
    assert request.headers["ce-id"] == "order-2"
    assert request.headers["ce-messageuid"] != uid
    assert {m.bus for m in events.messages()} == {"orders", "audit"}
    with pytest.raises(FailedPrecondition, match="pipeline 'forward'"):
        events.delete_bus("audit")


def test_a_pipeline_loop_between_buses_ends(
    events: txqueue.Events, dispatcher: txqueue.Dispatcher
) -> None:
    events.create_pipeline("loop", "bus:orders")
    events.create_enrollment("again", bus="orders", pipeline="loop", cel_match="true")
    events.publish("orders", event("order-3"))
    failed = wait_until(lambda: [r for r in events.attempts() if r.state == "failed"])
    assert "routing loop" in (failed[0].error or "")
    assert len(events.messages()) == 9  # the publish and eight forwards


def test_an_event_not_matching_the_json_schema_fails_before_delivery(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    schema = {"type": "object", "required": ["order"], "properties": {"order": {"type": "integer"}}}
    events.create_pipeline("typed", receiver.url("/typed"), json_schema=schema, allow_private=True)
    events.create_enrollment("all", bus="orders", pipeline="typed", cel_match="true")

    bad = events.publish("orders", event("bad", {"order": "seventeen"}))
    text = events.publish(
        "orders", {**event("text"), "data": "plain", "datacontenttype": "text/plain"}
    )
    good = events.publish("orders", event("good", {"order": 17}))

    row = final(events, bad)
    assert (row.state, row.outcome, row.status) == ("failed", "permanent", None)
    assert "JSON schema at order" in (row.error or "")
    assert "datacontenttype" in (final(events, text).error or "")
    assert final(events, good).state == "delivered"
    assert [r.headers["ce-id"] for r in receiver.received("/typed")] == ["good"]
    assert {m.pipeline for m in events.undelivered()} == {"typed"}


def test_signed_deliveries_verify_with_the_secret(
    events: txqueue.Events, receiver: Receiver, dispatcher: txqueue.Dispatcher
) -> None:
    url = receiver.url("/signed")
    events.create_pipeline("signed", url, signing_secret=SECRET, allow_private=True)
    events.create_enrollment("all", bus="orders", pipeline="signed", cel_match="true")
    uid = events.publish("orders", event("order-4", {"total": 1}))
    [request] = receiver.wait_for("/signed", 1)
    txqueue.verify_signature(SECRET, request.headers, request.body)
    assert request.headers["webhook-id"] == uid
    with pytest.raises(InvalidArgument, match="no signature matches"):
        txqueue.verify_signature(SECRET, request.headers, request.body + b" ")
    assert "signing_secret" not in repr(events.get_pipeline("signed"))


def test_deliveries_of_a_deleted_pipeline_fail_permanently(
    db: txqueue.Database, events: txqueue.Events, database_url: str
) -> None:
    events.create_pipeline("gone", "https://example.com/hook", allow_private=True)
    events.create_enrollment("all", bus="orders", pipeline="gone", cel_match="true")
    uid = events.publish("orders", event("order-5"))
    with pytest.raises(FailedPrecondition, match="enrollment 'all'"):
        events.delete_pipeline("gone")
    events.delete_enrollment("all")
    events.delete_pipeline("gone")
    with txqueue.Dispatcher(database_url):
        row = final(events, uid)
    assert "does not exist" in (row.error or "")
    [missed] = events.undelivered()
    assert missed.pipeline == "gone"


@pytest.mark.parametrize(
    ("destination", "message"),
    [
        ("ftp://example.com/x", "use an http(s) URL"),
        ("https://user:pw@example.com/x", "credentials"),
        ("http://127.0.0.1/x", "loopback"),
        ("http://10.1.2.3/x", "private"),
        ("http://169.254.169.254/latest", "link-local"),
        ("carrier-pigeon", "http(s) URL, 'bus:NAME' or 'queue:NAME'"),
    ],
)
def test_unsafe_destinations_are_refused(
    events: txqueue.Events, destination: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TXQUEUE_ALLOW_PRIVATE_DESTINATIONS", raising=False)
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        events.create_pipeline("unsafe", destination)
    assert events.list_pipelines() == []


def test_private_destinations_are_allowed_by_the_environment(
    events: txqueue.Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TXQUEUE_ALLOW_PRIVATE_DESTINATIONS", "1")
    assert events.create_pipeline("local", "http://127.0.0.1:9/x").destination.target.endswith("/x")


def test_an_unreadable_delivery_is_dead_lettered_not_retried_forever(
    db: txqueue.Database, events: txqueue.Events, database_url: str
) -> None:
    with db.batch() as batch:  # as if written by something other than txqueue
        batch.send("txqueue_event_deliveries", ("notify", "not-a-uid"), "not json")
    with txqueue.Dispatcher(database_url):
        [letter] = wait_until(lambda: db.dead_letters("txqueue_event_deliveries"))
    assert letter.key == ("notify", "not-a-uid")
    assert "unreadable delivery payload" in letter.last_error
