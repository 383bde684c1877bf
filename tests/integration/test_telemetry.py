"""OpenTelemetry on both engines and both faces, with the SDK's in-memory exporters: a send in
the user's span, the handler's process span in the same trace with its settle events, the
worker's metrics, the trace context kept by queues made before it existed, and publish →
HTTP delivery → a receiver that starts its span from ``ce-traceparent``."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from events_receiver import Receiver
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import txqueue
from txqueue import telemetry
from txqueue.testing import FakeClock, drain, drain_async
from txqueue.worker import OutcomeKind, Stats, Worker

GOOGLESQL = [
    "CREATE QUEUE Tasks (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
]
POSTGRESQL = [
    "CREATE QUEUE tasks (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
]
RETRY = txqueue.RetryPolicy(max_attempts=2)


class Otel:
    """An SDK tracer and meter provider with in-memory exporters, used by txqueue alone."""

    def __init__(self) -> None:
        self.spans_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans_exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("tests")

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.spans_exporter.get_finished_spans())
        return [s for s in found if name is None or s.name.lower() == name.lower()]

    def metrics(self) -> dict[str, list[Any]]:
        """Data points by metric name."""
        data = self.reader.get_metrics_data()
        points: dict[str, list[Any]] = {}
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
        return points


@pytest.fixture
def otel() -> Iterator[Otel]:
    found = Otel()
    telemetry.configure(found.tracer_provider, found.meter_provider)
    try:
        yield found
    finally:
        telemetry.configure(None, None)
        found.tracer_provider.shutdown()
        found.meter_provider.shutdown()


def _ddl(dialect: Any) -> list[str]:
    return POSTGRESQL if dialect == "postgresql" else GOOGLESQL


def handler(message: txqueue.Message) -> None:
    """Key 1 is handled; key 2 always fails (a retry, then a dead letter)."""
    if message.key[0] == 2:
        raise RuntimeError("card declined")


def _check_trace(otel: Otel, user: Any, engine: str) -> None:
    """send spans in the user's span, process spans their children, settle as events."""
    sends = otel.spans("send tasks")
    assert len(sends) == 2
    for send in sends:
        assert send.kind is SpanKind.PRODUCER
        assert send.parent is not None and send.parent.span_id == user.span_id
        assert send.attributes is not None
        assert send.attributes["messaging.system"] == "txqueue"
        assert send.attributes["messaging.operation.type"] == "send"
        assert send.attributes["messaging.txqueue.database.system"] == engine
    by_key = {s.attributes["messaging.message.id"]: s for s in sends if s.attributes}
    processes = otel.spans("process tasks")
    assert len(processes) == 3, [p.name for p in processes]
    for process in processes:
        assert process.kind is SpanKind.CONSUMER
        assert process.context.trace_id == user.trace_id, "the handling is in the sender's trace"
        assert process.attributes is not None
        send = by_key[process.attributes["messaging.message.id"]]
        assert process.parent is not None and process.parent.span_id == send.context.span_id
        assert process.attributes["messaging.operation.type"] == "process"
    count = "messaging.txqueue.message.delivery_count"
    events = {
        (p.attributes["messaging.message.id"], p.attributes[count]): [e.name for e in p.events]
        for p in processes
        if p.attributes
    }
    assert events == {
        ("1", 1): ["ack"],
        ("2", 1): ["exception", "retry"],
        ("2", 2): ["exception", "dead_letter"],
    }
    receives = otel.spans("receive tasks")  # one per leased batch, linked to the sends
    assert receives and all(r.kind is SpanKind.CLIENT for r in receives)
    assert {link.context.span_id for r in receives for link in r.links} == {
        s.context.span_id for s in sends
    }
    assert sum(r.attributes["messaging.batch.message_count"] for r in receives if r.attributes) == 3
    [dead] = [p for p in processes if p.events and p.events[-1].name == "dead_letter"]
    assert dead.events[0].attributes is not None
    assert dead.events[0].attributes["exception.type"] == "RuntimeError"
    assert dead.events[-1].attributes is not None
    assert dead.events[-1].attributes["messaging.operation.type"] == "settle"


def test_sync_face_send_process_settle(database_url: str, otel: Otel) -> None:
    clock = FakeClock()
    db = txqueue.connect(database_url, clock=clock)
    try:
        db.update_ddl(_ddl(db.dialect))
        with otel.tracer.start_as_current_span("checkout") as user, db.batch() as batch:
            batch.send("Tasks", (1,), b"{}")
            batch.send("Tasks", (2,), b"{}")
        outcomes = drain(db, "Tasks", handler, retry=RETRY, clock=clock)
        assert sorted(o.kind.value for o in outcomes) == ["acked", "dead_lettered", "retried"]
        _check_trace(otel, user.get_span_context(), db.engine.replace("postgres", "postgresql"))
    finally:
        db.close()


async def test_async_face_send_process_settle(database_url: str, otel: Otel) -> None:
    clock = FakeClock()
    db = await txqueue.connect_async(database_url, clock=clock)
    try:
        await db.update_ddl(_ddl(db.dialect))

        async def checkout(txn: txqueue.AsyncTransaction) -> None:
            await txn.send("Tasks", (1,), b"{}")
            await txn.send("Tasks", (2,), b"{}")

        with otel.tracer.start_as_current_span("checkout") as user:
            await db.run_in_transaction(checkout)
        outcomes = await drain_async(db, "Tasks", handler, retry=RETRY, clock=clock)
        assert sorted(o.kind.value for o in outcomes) == ["acked", "dead_lettered", "retried"]
        _check_trace(otel, user.get_span_context(), db.engine.replace("postgres", "postgresql"))
    finally:
        await db.close()


def test_plain_sql_insert_carries_no_context_and_old_queues_gain_the_column(
    database_url: str, otel: Otel
) -> None:
    db = txqueue.connect(database_url)
    try:
        db.update_ddl(_ddl(db.dialect))
        # A queue made before the trace context was kept: the same table without its column.
        db.run_in_transaction(
            lambda txn: txn.execute_engine_update(
                "ALTER TABLE tasks DROP COLUMN _txq_trace_context"
            )
        )
    finally:
        db.close()
    db = txqueue.connect(database_url)  # connecting adds it back (NULL: no context)
    try:
        with otel.tracer.start_as_current_span("request") as user:
            db.run_in_transaction(
                lambda txn: txn.execute_engine_update(
                    "INSERT INTO tasks (id, payload) VALUES (7, %s)"
                    if db.engine == "postgres"
                    else "INSERT INTO tasks (id, payload) VALUES (7, ?)",
                    [b"x"],
                )
            )
            with db.batch() as batch:
                batch.send("Tasks", (8,), b"{}")
        with db.snapshot() as snapshot:
            stored = dict(
                snapshot.execute_engine_sql("SELECT id, _txq_trace_context FROM tasks").rows
            )
        assert stored[7] is None, "plain SQL carries none"
        assert str(stored[8]).startswith("00-" + format(user.get_span_context().trace_id, "032x"))
        outcomes = drain(db, "Tasks", handler)
        assert [o.kind for o in outcomes] == [OutcomeKind.ACKED] * 2
        traces = {
            s.attributes["messaging.message.id"]: s.context.trace_id
            for s in otel.spans("process tasks")
            if s.attributes
        }
        assert traces["8"] == user.get_span_context().trace_id
        assert traces["7"] != user.get_span_context().trace_id, "a trace of its own"
    finally:
        db.close()


def test_no_sdk_no_span_and_no_context(database_url: str) -> None:
    telemetry.configure(None, None)
    assert telemetry.tracer() is None, "the API alone records nothing"
    db = txqueue.connect(database_url)
    try:
        db.update_ddl(_ddl(db.dialect))
        with db.batch() as batch:
            batch.send("Tasks", (1,), b"{}")
        with db.snapshot() as snapshot:
            rows = snapshot.execute_engine_sql("SELECT _txq_trace_context FROM tasks").rows
        assert rows == [(None,)]
    finally:
        db.close()


_UNTOUCHED_API = """
import sys
import txqueue
from txqueue.telemetry import _providers
from txqueue.testing import drain

_providers.RECHECK = 0.0  # look for a provider at every message: the last part needs it
db = txqueue.connect(sys.argv[1])
db.update_ddl(sys.argv[2:])
with db.batch() as batch:
    for key in (1, 2, 3):
        batch.send("Tasks", (key,), b"{}")
for message in db.receive_now("Tasks", max_batch_size=2):
    db.run_in_transaction(
        lambda transaction, m=message: transaction.ack("Tasks", m.key, lease_token=m.lease_token)
    )
drain(db, "Tasks", lambda message: None)
assert "opentelemetry" not in sys.modules, sorted(m for m in sys.modules if "opentelemetry" in m)

# The application sets up an SDK only now: txqueue's next send is traced.
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
db.run_in_transaction(lambda transaction: transaction.send("Tasks", (4,), b"{}"))
names = [span.name.lower() for span in exporter.get_finished_spans()]
assert names == ["send tasks"], names
db.close()
"""


def test_an_application_that_never_imports_opentelemetry_never_loads_it(
    database_url: str,
) -> None:
    """Sends, receives, acks and handler runs leave the API unimported until the application
    imports it to set up an SDK (loading it took a process's first receive ~15 ms of CPU);
    a provider set up after txqueue's first messages is still used."""
    ddl = POSTGRESQL if database_url.startswith("postgresql") else GOOGLESQL
    finished = subprocess.run(
        [sys.executable, "-c", _UNTOUCHED_API, database_url, *ddl],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr


async def test_worker_spans_metrics_and_log_ids(
    database_url: str, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    db = await txqueue.connect_async(database_url)
    await db.update_ddl(_ddl(db.dialect))
    app = txqueue.App(database_url)

    @app.handler("Tasks", retry=txqueue.RetryPolicy(max_attempts=1), lease_duration="1s")
    def slow_then_handler(message: txqueue.Message) -> None:
        deadline = time.monotonic() + 10
        while message.key[0] == 1 and not otel.metrics().get("txqueue.lease_renewal_count"):
            assert time.monotonic() < deadline, "no renewal"  # runs until its lease is renewed
            time.sleep(0.05)
        handler(message)

    with otel.tracer.start_as_current_span("checkout") as user:
        async with db.batch() as batch:
            batch.send("Tasks", (1,), b"{}")
            batch.send("Tasks", (2,), b"{}")
    stats = Stats()
    worker = Worker(app, stats=stats)
    logger, ids = logging.getLogger("txqueue.worker"), telemetry.TraceIds()
    logger.addFilter(ids)
    try:
        with caplog.at_level(logging.DEBUG, logger="txqueue.worker"):
            running = asyncio.create_task(worker.run())
            deadline = asyncio.get_running_loop().time() + 20
            while stats.total(OutcomeKind.ACKED) + stats.total(OutcomeKind.DEAD_LETTERED) < 2:
                assert asyncio.get_running_loop().time() < deadline, "two outcomes"
                await asyncio.sleep(0.01)
            worker.stop()
            await running
    finally:
        logger.removeFilter(ids)
        await db.close()
    processes = otel.spans("process tasks")
    assert {p.context.trace_id for p in processes} == {user.get_span_context().trace_id}
    [acked] = [p for p in processes if p.events and p.events[-1].name == "ack"]
    assert "renew" in [e.name for e in acked.events], "the lease renewal is an event"
    points = otel.metrics()
    assert sum(p.value for p in points["txqueue.lease_renewal_count"]) >= 1
    assert sum(p.value for p in points["txqueue.message_ack_count"]) == 1
    outcomes = {p.attributes["outcome"]: p.value for p in points["txqueue.handler_outcome_count"]}
    assert outcomes == {"acked": 1, "dead_lettered": 1}
    assert sum(p.count for p in points["txqueue.handler_latency"]) == 2
    assert "txqueue.buffered_ready_messages" in points
    trace_id = format(user.get_span_context().trace_id, "032x")
    logged = [r for r in caplog.records if getattr(r, "outcome", None) == "dead_lettered"]
    assert logged and logged[0].trace_id == trace_id  # type: ignore[attr-defined]


def _receiver_span(otel: Otel, request: Any) -> Any:
    """What an instrumented receiver does: start its span from the delivery's headers."""
    context = telemetry.headers_context(request.headers)
    with otel.tracer.start_as_current_span("receive webhook", context=context) as span:
        return span.get_span_context()


def _check_delivery(otel: Otel, user: Any, request: Any, url: str) -> None:
    assert request.headers["ce-traceparent"].split("-")[1] == format(user.trace_id, "032x")
    received = _receiver_span(otel, request)
    assert received.trace_id == user.trace_id, "the receiver's span joins the publisher's trace"
    [publish] = otel.spans("publish orders")
    assert publish.kind is SpanKind.PRODUCER and publish.parent is not None
    assert publish.parent.span_id == user.span_id
    [post] = otel.spans("POST")
    assert post.kind is SpanKind.CLIENT and post.context.trace_id == user.trace_id
    assert post.attributes is not None
    assert post.attributes["http.request.method"] == "POST"
    assert post.attributes["url.full"] == url
    assert post.attributes["http.response.status_code"] == 200
    assert request.headers["ce-traceparent"].split("-")[2] == format(post.context.span_id, "016x")
    points = otel.metrics()["txqueue.event_delivery_attempt_count"]
    assert [(p.attributes["outcome"], p.value) for p in points] == [("success", 1)]


async def test_async_publish_to_http_delivery_in_one_trace(
    database_url: str, otel: Otel, receiver: Receiver
) -> None:
    db = await txqueue.connect_async(database_url)
    try:
        events = txqueue.AsyncEvents(db)
        await events.create_bus("orders")
        await events.create_pipeline("notify", receiver.url("/hook"), allow_private=True)
        await events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
        event = {"type": "com.shop.order.paid", "source": "//shop", "id": "order-1"}
        with otel.tracer.start_as_current_span("checkout") as user:
            await events.publish("orders", event)
        dispatcher = txqueue.AsyncDispatcher(db, attempt_timeout=timedelta(seconds=5))
        running = asyncio.create_task(dispatcher.run())
        try:
            [request] = await asyncio.to_thread(receiver.wait_for, "/hook", 1)
            deadline = asyncio.get_running_loop().time() + 10
            while not otel.spans("POST"):  # ended once the attempt returns
                assert asyncio.get_running_loop().time() < deadline, "no delivery span"
                await asyncio.sleep(0.01)
        finally:
            dispatcher.stop()
            await running
        _check_delivery(otel, user.get_span_context(), request, receiver.url("/hook"))
    finally:
        await db.close()


def test_sync_publish_to_http_delivery_in_one_trace(
    database_url: str, otel: Otel, receiver: Receiver
) -> None:
    db = txqueue.connect(database_url)
    try:
        events = txqueue.Events(db)
        events.create_bus("orders")
        events.create_pipeline("notify", receiver.url("/hook"), allow_private=True)
        events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
        event = {"type": "com.shop.order.paid", "source": "//shop", "id": "order-1"}
        with otel.tracer.start_as_current_span("checkout") as user:
            db.run_in_transaction(lambda txn: events.publish("orders", event, txn=txn))
        with txqueue.Dispatcher(database_url, attempt_timeout=timedelta(seconds=5)):
            [request] = receiver.wait_for("/hook", 1)
            deadline = time.monotonic() + 10
            while not otel.spans("POST"):  # ended once the attempt returns
                assert time.monotonic() < deadline, "no delivery span"
                time.sleep(0.01)
        _check_delivery(otel, user.get_span_context(), request, receiver.url("/hook"))
    finally:
        db.close()


#: Two retries a second apart: the receiver answers 503, 503, then 200.
FAST_RETRY = txqueue.RetryPolicy(
    max_attempts=5, min_retry_delay=timedelta(seconds=1), max_retry_delay=timedelta(seconds=1)
)


def _check_one_trace_per_delivery(otel: Otel, user: Any, requests: list[Any]) -> None:
    """Every attempt of one delivery is a child of the delivery's one send span, which is a
    child of the publish: one trace, however many retries."""
    [publish] = otel.spans("publish orders")
    [delivery] = otel.spans("send txqueue_event_deliveries")  # the retries start no new send
    assert delivery.parent is not None and delivery.parent.span_id == publish.context.span_id
    posts = sorted(otel.spans("POST"), key=lambda span: span.start_time or 0)
    assert [p.attributes["http.response.status_code"] for p in posts if p.attributes] == [
        503,
        503,
        200,
    ]
    assert {p.context.trace_id for p in posts} == {user.trace_id}
    assert all(p.parent is not None and p.parent.span_id == delivery.context.span_id for p in posts)
    traces = {request.headers["ce-traceparent"].split("-")[1] for request in requests}
    assert traces == {format(user.trace_id, "032x")}


async def test_async_delivery_retries_stay_in_one_trace(
    database_url: str, otel: Otel, receiver: Receiver
) -> None:
    receiver.script("/hook", 503, 503, 200)
    db = await txqueue.connect_async(database_url)
    try:
        events = txqueue.AsyncEvents(db)
        await events.create_bus("orders")
        await events.create_pipeline(
            "notify", receiver.url("/hook"), retry=FAST_RETRY, allow_private=True
        )
        await events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
        event = {"type": "com.shop.order.paid", "source": "//shop", "id": "order-1"}
        with otel.tracer.start_as_current_span("checkout") as user:
            await events.publish("orders", event)
        dispatcher = txqueue.AsyncDispatcher(db, attempt_timeout=timedelta(seconds=5))
        running = asyncio.create_task(dispatcher.run())
        try:
            requests = await asyncio.to_thread(receiver.wait_for, "/hook", 3)
            deadline = asyncio.get_running_loop().time() + 10
            while len(otel.spans("POST")) < 3:  # ended once the attempt returns
                assert asyncio.get_running_loop().time() < deadline, "three delivery spans"
                await asyncio.sleep(0.01)
        finally:
            dispatcher.stop()
            await running
        _check_one_trace_per_delivery(otel, user.get_span_context(), requests)
    finally:
        await db.close()


def test_sync_delivery_retries_stay_in_one_trace(
    database_url: str, otel: Otel, receiver: Receiver
) -> None:
    receiver.script("/hook", 503, 503, 200)
    db = txqueue.connect(database_url)
    try:
        events = txqueue.Events(db)
        events.create_bus("orders")
        events.create_pipeline(
            "notify", receiver.url("/hook"), retry=FAST_RETRY, allow_private=True
        )
        events.create_enrollment("all", bus="orders", pipeline="notify", cel_match="true")
        event = {"type": "com.shop.order.paid", "source": "//shop", "id": "order-1"}
        with otel.tracer.start_as_current_span("checkout") as user:
            db.run_in_transaction(lambda txn: events.publish("orders", event, txn=txn))
        with txqueue.Dispatcher(database_url, attempt_timeout=timedelta(seconds=5)):
            requests = receiver.wait_for("/hook", 3)
            deadline = time.monotonic() + 10
            while len(otel.spans("POST")) < 3:  # ended once the attempt returns
                assert time.monotonic() < deadline, "three delivery spans"
                time.sleep(0.01)
        _check_one_trace_per_delivery(otel, user.get_span_context(), requests)
    finally:
        db.close()
