"""Every attribute txqueue puts on a span or a span event is one the OpenTelemetry semantic
conventions register (and do not deprecate), or txqueue's own under ``messaging.txqueue.``
(issue #40, item 5). The registry is read from ``opentelemetry-semantic-conventions``; the
spans come from the worker (send, receive, process, settle, renew), a publish and an HTTP
delivery, on SQLite and PostgreSQL."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import opentelemetry.semconv._incubating.attributes as incubating
import opentelemetry.semconv.attributes as stable
import pytest
from events_receiver import Receiver
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import txqueue
from txqueue import telemetry
from txqueue.testing import FakeClock, drain

OWN = "messaging.txqueue."
#: Set by the OpenTelemetry SDK's own ``record_exception`` (deprecated, but not txqueue's).
SDK_OWN = {"exception.escaped"}
QUEUE = {
    "googlesql": "CREATE QUEUE Tasks (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (Id)",
    "postgresql": "CREATE QUEUE tasks (id bigint NOT NULL, payload bytea NOT NULL,"
    " PRIMARY KEY (id))",
}


def registered() -> frozenset[str]:
    """Attribute names the semantic conventions define, less the deprecated ones (their
    docstring says "Deprecated")."""
    names: set[str] = set()
    for package in (stable, incubating):
        for module in pkgutil.iter_modules(package.__path__):
            source = Path(importlib.import_module(f"{package.__name__}.{module.name}").__file__)
            body = ast.parse(source.read_text()).body
            for statement, following in zip(body, [*body[1:], None]):
                if not isinstance(statement, ast.AnnAssign) or not isinstance(
                    statement.value, ast.Constant
                ):
                    continue
                value = statement.value.value
                note = (
                    following.value.value
                    if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                    else ""
                )
                if isinstance(value, str) and not str(note).lstrip().startswith("Deprecated"):
                    names.add(value)
    return frozenset(names)


REGISTERED = registered()


def test_the_registry_is_read() -> None:
    assert {"messaging.message.id", "cloudevents.event_id", "url.full"} <= REGISTERED
    assert "messaging.message.delivery_count" not in REGISTERED
    assert "messaging.operation" not in REGISTERED  # deprecated for messaging.operation.type


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(found))
    telemetry.configure(provider, None)
    try:
        yield found
    finally:
        telemetry.configure(None, None)
        provider.shutdown()


def _unregistered(spans: list[ReadableSpan]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for span in spans:
        names = set(span.attributes or {})
        names |= {name for event in span.events for name in (event.attributes or {})}
        wrong = {n for n in names - SDK_OWN if n not in REGISTERED and not n.startswith(OWN)}
        if wrong:
            found.setdefault(span.name, set()).update(wrong)
    return found


def handler(message: txqueue.Message) -> None:
    if message.key[0] == 2:
        raise RuntimeError("card declined")


def test_worker_publish_and_delivery_spans_use_registered_names(
    database_url: str, exporter: InMemorySpanExporter, receiver: Receiver
) -> None:
    clock = FakeClock()
    with txqueue.connect(database_url, clock=clock) as db:
        db.update_ddl([QUEUE[str(getattr(db.dialect, "value", db.dialect))]])
        with db.batch() as batch:
            batch.send("Tasks", (1,), b"{}")
            batch.send("Tasks", (2,), b"{}")
        drain(db, "Tasks", handler, retry=txqueue.RetryPolicy(max_attempts=2), clock=clock)
        tracer = telemetry.tracer()
        assert tracer is not None
        span = tracer.start_span("renewing")  # what the worker's lease keeper records
        telemetry.lease_renewed(span, "Tasks", datetime.now(timezone.utc))
        span.end()

    with txqueue.connect(database_url) as db:  # the dispatcher's clock, not the fake one
        events = txqueue.Events(db)
        events.create_bus("orders")
        events.create_pipeline("notify", receiver.url("/hook"), allow_private=True)
        events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
        events.publish(
            "orders",
            {"type": "com.shop.order.paid", "source": "//shop", "id": "order-1",
             "subject": "orders/1"},
        )  # fmt: skip
        with txqueue.Dispatcher(database_url, attempt_timeout=timedelta(seconds=5)):
            receiver.wait_for("/hook", 1)
            deadline = time.monotonic() + 10
            while not [s for s in exporter.get_finished_spans() if s.name == "POST"]:
                assert time.monotonic() < deadline, "no delivery span"
                time.sleep(0.01)

    spans = list(exporter.get_finished_spans())
    names = {span.name.lower() for span in spans}
    assert {"send tasks", "receive tasks", "process tasks", "publish orders", "post"} <= names
    assert _unregistered(spans) == {}

    [publish] = [s for s in spans if s.name == "publish orders"]
    assert publish.attributes is not None
    assert publish.attributes["cloudevents.event_id"] == "order-1"
    assert publish.attributes["cloudevents.event_source"] == "//shop"
    assert publish.attributes["cloudevents.event_type"] == "com.shop.order.paid"
    assert publish.attributes["cloudevents.event_subject"] == "orders/1"
    assert publish.attributes["cloudevents.event_spec_version"] == "1.0"
    messaging = [s for s in spans if s.attributes and "messaging.system" in s.attributes]
    assert messaging and all("db.system.name" not in (s.attributes or {}) for s in messaging)
    processes = [s for s in spans if s.name.lower() == "process tasks"]
    assert sorted((s.attributes or {})[OWN + "message.delivery_count"] for s in processes) == [
        1,
        1,
        2,
    ]
