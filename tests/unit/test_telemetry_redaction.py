"""url.full of a delivery span holds no credential: neither the user part nor the values of
the query string (a destination's ``?token=`` or ``?sig=``), as OpenTelemetry's semantic
conventions ask. Read through an in-memory exporter, as a collector would get it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from txqueue import telemetry


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(found))
    telemetry.configure(provider)
    try:
        yield found
    finally:
        telemetry.configure()
        provider.shutdown()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://hooks.example.com/in?token=s3cret-token&sig=abc%3D&flag",
            "https://hooks.example.com/in?token=REDACTED&sig=REDACTED&flag",
        ),
        (
            "https://ann:pw@hooks.example.com:8443/in?api_key=k",
            "https://REDACTED:REDACTED@hooks.example.com:8443/in?api_key=REDACTED",
        ),
        ("https://hooks.example.com/in", "https://hooks.example.com/in"),
    ],
)
def test_url_full_keeps_no_secret(exporter: InMemorySpanExporter, url: str, shown: str) -> None:
    span, _ = telemetry.start_delivery("notify", url, {})
    telemetry.end_delivery(span, "notify", None)
    [finished] = exporter.get_finished_spans()
    assert finished.attributes is not None
    assert finished.attributes["url.full"] == shown
