"""Buses, pipelines, enrollments and the event layer's records, without a database."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from cloudevents.core.v1.event import CloudEvent
from cloudevents.v1.http import CloudEvent as LegacyCloudEvent
from hypothesis import given
from hypothesis import strategies as st

from txqueue.core.retry import RetryPolicy
from txqueue.errors import InvalidArgument
from txqueue.events.cloudevent import coerce_event, make_event
from txqueue.events.outcomes import next_delay
from txqueue.events.payloads import payload_problem
from txqueue.events.records import ATTEMPT_COLUMNS, Catalog, Delivery, DeliveryAttempt
from txqueue.events.resources import (
    Bus,
    Destination,
    Enrollment,
    Pipeline,
    check_resource_name,
    decode_resource,
    encode_resource,
    parse_destination,
)

NOW = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NAMES = st.from_regex(r"[a-z]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)


@pytest.mark.parametrize("name", ["orders", "notify-shipping", "a", "p2", "a" * 63])
def test_valid_names(name: str) -> None:
    assert check_resource_name(name, "bus") == name


@pytest.mark.parametrize(
    "name", ["", "Orders", "2fast", "-x", "x-", "with_underscore", "a b", "a" * 64, "ü", None, 7]
)
def test_invalid_names_are_refused_with_the_rule(name: object) -> None:
    with pytest.raises(InvalidArgument, match="bus name"):
        check_resource_name(name, "bus")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://example.com/hook", Destination("http", "https://example.com/hook")),
        ("HTTP://Example.com/Hook", Destination("http", "http://example.com/Hook")),
        ("bus:audit", Destination("bus", "audit")),
        ("queue:Inbox", Destination("queue", "Inbox")),
    ],
)
def test_destinations(text: str, expected: Destination) -> None:
    parsed = parse_destination(text, allow_private=True)
    assert parsed == expected
    assert str(parsed) == (expected.target if expected.kind == "http" else text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "non-empty"),
        ("bus:", "use an http"),
        ("bus:Audit", "destination bus name"),
        ("queue:", "use an http"),
        ("pubsub:topic", "use an http"),
        ("http://127.0.0.1/x", "loopback"),
        ("https://u:p@example.com/", "credentials"),
    ],
)
def test_bad_destinations(text: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TXQUEUE_ALLOW_PRIVATE_DESTINATIONS", raising=False)
    with pytest.raises(InvalidArgument, match=message):
        parse_destination(text)


def test_retry_policy_ranges_name_the_field() -> None:
    url = Destination("http", "https://example.com/")
    with pytest.raises(InvalidArgument, match=r"min_retry_delay must be between 1 s and 600 s"):
        Pipeline("p", url, RetryPolicy(min_retry_delay=timedelta(seconds=0.5)))
    with pytest.raises(InvalidArgument, match=r"max_retry_delay must be between 1 s and 600 s"):
        Pipeline("p", url, RetryPolicy(max_retry_delay=timedelta(seconds=601)))
    with pytest.raises(InvalidArgument, match="max_attempts must be a positive integer"):
        Pipeline("p", url, RetryPolicy(max_attempts=0))


def test_seed_004_delays() -> None:
    default = RetryPolicy()
    assert [next_delay(default, k, None).total_seconds() for k in range(1, 5)] == [1, 2, 4, 8]
    linear = RetryPolicy(5, timedelta(seconds=4), timedelta(seconds=4))  # the gcloud example
    assert {next_delay(linear, k, None).total_seconds() for k in range(1, 5)} == {4}
    capped = RetryPolicy(10, timedelta(seconds=1), timedelta(seconds=20))
    assert next_delay(capped, 9, None) == timedelta(seconds=20)
    assert next_delay(capped, 1, timedelta(hours=1)) == timedelta(seconds=20)  # Retry-After


def test_pipeline_checks() -> None:
    url = Destination("http", "https://example.com/")
    with pytest.raises(InvalidArgument, match="not a valid JSON Schema"):
        Pipeline("p", url, json_schema={"type": "no-such-type"})
    with pytest.raises(InvalidArgument, match="input_payload_format must be one of json"):
        Pipeline("p", url, input_payload_format="avro")
    with pytest.raises(InvalidArgument, match="secret"):
        Pipeline("p", url, signing_secret="whsec_***")
    assert Pipeline("p", url, json_schema={"type": "object"}).input_payload_format == "json"
    assert SECRET not in repr(Pipeline("p", url, signing_secret=SECRET))


def test_enrollment_conditions_are_checked() -> None:
    with pytest.raises(InvalidArgument, match="not valid CEL"):
        Enrollment("e", "orders", "p", "message.type ==")
    with pytest.raises(InvalidArgument, match=r"message\.data"):
        Enrollment("e", "orders", "p", "message.data.total > 3")


@given(NAMES, st.booleans(), st.none() | st.integers(1, 10**7))
def test_buses_round_trip(name: str, archive: bool, seconds: int | None) -> None:
    bus = Bus(name, archive, None if seconds is None else timedelta(seconds=seconds))
    kind, config = encode_resource(bus)
    assert decode_resource(kind, name, config, NOW, NOW) == bus


def test_pipelines_and_enrollments_round_trip() -> None:
    pipeline = Pipeline(
        "notify-shipping",
        Destination("http", "https://example.com/hook"),
        RetryPolicy(7, timedelta(seconds=4), timedelta(seconds=4)),
        json_schema={"type": "object", "required": ["order"]},
        signing_secret=SECRET,
        allow_private=True,
    )
    enrollment = Enrollment("paid", "orders", "notify-shipping", 'message.type == "x"')
    for resource in (pipeline, enrollment, Pipeline("b", Destination("bus", "audit"))):
        kind, config = encode_resource(resource)
        decoded = decode_resource(kind, resource.name, config, NOW, NOW)
        assert decoded == resource
        assert decoded.update_time == NOW


def test_routing_matches_each_enrollment_of_the_bus_once_per_pipeline() -> None:
    catalog = Catalog(
        [
            Bus("orders"),
            Bus("other"),
            Enrollment("a", "orders", "paid", 'message.type == "paid"'),
            Enrollment("b", "orders", "paid", 'message.source == "//shop"'),
            Enrollment("c", "orders", "all", "true"),
            Enrollment("d", "other", "elsewhere", "true"),
        ]
    )
    paid = {"type": "paid", "source": "//shop", "id": "1"}
    assert catalog.routes("orders", paid) == ["all", "paid"]
    assert catalog.routes("orders", {**paid, "type": "x", "source": "//y"}) == ["all"]
    assert catalog.routes("nowhere", paid) == []


def test_payload_formats() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    attrs = {"type": "t", "source": "//s", "id": "1", "specversion": "1.0"}
    good = make_event(attrs, {"n": 1})
    assert payload_problem(good, None, None) is None
    assert payload_problem(good, "json", schema) is None
    assert "at n: 'x' is not of type 'integer'" in str(
        payload_problem(make_event(attrs, {"n": "x"}), "json", schema)
    )
    assert "(root)" in str(payload_problem(make_event(attrs, {}), "json", schema))
    json_bytes = make_event({**attrs, "datacontenttype": "application/json"}, b'{"n": 2}')
    assert payload_problem(json_bytes, "json", schema) is None
    broken = make_event({**attrs, "datacontenttype": "application/json"}, b"{")
    assert "not valid JSON" in str(payload_problem(broken, "json", None))
    text = make_event({**attrs, "datacontenttype": "text/plain"}, "hi")
    assert "datacontenttype is 'text/plain'" in str(payload_problem(text, "json", None))
    assert "no data" in str(payload_problem(make_event(attrs), "json", None))


def test_events_are_accepted_from_either_sdk_api_or_a_mapping() -> None:
    attributes = {"type": "t", "source": "//s", "id": "1"}
    modern = coerce_event(CloudEvent({**attributes, "specversion": "1.0"}, {"a": 1}))
    legacy = coerce_event(LegacyCloudEvent(attributes, {"a": 1}))
    mapping = coerce_event({**attributes, "data": {"a": 1}})
    for event in (modern, legacy, mapping):
        assert (event.get_id(), event.get_source(), event.get_data()) == ("1", "//s", {"a": 1})
    with pytest.raises(InvalidArgument, match="must be a cloudevents CloudEvent or a mapping"):
        coerce_event("not an event")
    with pytest.raises(InvalidArgument, match="'messageuid' is reserved"):
        coerce_event({**attributes, "messageuid": "mine"})
    with pytest.raises(InvalidArgument, match="'type' is required"):
        coerce_event({"source": "//s", "id": "1"})


def test_delivery_payloads_and_attempt_rows_round_trip() -> None:
    delivery = Delivery("orders", {"id": "1", "data": {"a": [1, 2]}}, attempts=3, hops=1)
    assert Delivery.decode(delivery.encode()) == delivery
    row = DeliveryAttempt(
        "uid", "p", 2, "orders", NOW, "retrying", "transient", 503, "HTTP 503",
        timedelta(milliseconds=12), timedelta(seconds=2), "http.503", None,
    )  # fmt: skip
    assert DeliveryAttempt.from_row(row.row()) == row
    assert len(row.row()) == len(ATTEMPT_COLUMNS)
    raised = replace(row, error_type="httpx.ConnectError", traceback="Traceback …")
    assert DeliveryAttempt.from_row(raised.row()) == raised
