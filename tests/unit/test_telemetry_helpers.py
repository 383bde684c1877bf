"""txqueue.telemetry without a database: the no-SDK fast path, url.full without credentials,
the trace context a receiver reads from delivery headers, trace ids in the JSON log format."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from txqueue import telemetry
from txqueue.worker.observe import JsonFormatter


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    found = TracerProvider()
    telemetry.configure(found)
    try:
        yield found
    finally:
        telemetry.configure()


def test_without_a_configured_sdk_nothing_is_made() -> None:
    telemetry.configure()
    assert telemetry.tracer() is None
    assert telemetry.meter() is None
    assert telemetry.worker_metrics() is None
    assert telemetry.start_send("Tasks", (1,), "sqlite") is None
    headers = {"ce-id": "1"}
    assert telemetry.start_delivery("notify", "http://example.com/", headers) == (None, headers)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://user:secret@hooks.example.com/in?x=1",
            "https://REDACTED:REDACTED@hooks.example.com/in?x=REDACTED",
        ),
        ("http://token@[::1]:8080/in", "http://REDACTED:REDACTED@[::1]:8080/in"),
        ("https://hooks.example.com/in", "https://hooks.example.com/in"),
    ],
)
def test_url_full_never_shows_credentials(provider: TracerProvider, url: str, shown: str) -> None:
    span, headers = telemetry.start_delivery("notify", url, {})
    assert span.attributes["url.full"] == shown
    assert headers["ce-traceparent"] == headers["traceparent"]
    telemetry.end_delivery(span, "notify", None)


def test_an_events_own_traceparent_stays_in_ce_traceparent(provider: TracerProvider) -> None:
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    span, headers = telemetry.start_delivery("notify", "http://h/", {"ce-traceparent": own})
    assert headers["ce-traceparent"] == own
    assert headers["traceparent"] != own
    context = telemetry.headers_context(headers)
    assert format(_trace_id(context), "032x") == "0af7651916cd43dd8448eb211c80319c"
    telemetry.end_delivery(span, "notify", None)


def _trace_id(context: object) -> int:
    from opentelemetry import trace

    return int(trace.get_current_span(context).get_span_context().trace_id)  # type: ignore[arg-type]


def test_json_log_records_carry_trace_and_span_ids_while_a_span_is_active(
    provider: TracerProvider,
) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(telemetry.TraceIds())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("txqueue.test_telemetry")
    logger.addHandler(handler)
    try:
        logger.warning("outside")
        with provider.get_tracer("t").start_as_current_span("inside") as span:
            logger.warning("inside")
    finally:
        logger.removeHandler(handler)
    outside, inside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert "trace_id" not in outside
    assert inside["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert inside["span_id"] == format(span.get_span_context().span_id, "016x")
