"""Spans of the event layer: ``publish`` (PRODUCER) for each CloudEvent published, one CLIENT
span per HTTP delivery attempt whose context travels to the receiver as ``ce-traceparent``,
and the context a receiver starts its own span from (`headers_context`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from txqueue.telemetry import _providers as providers
from txqueue.telemetry._context import OWN, attributes, extract, take
from txqueue.telemetry._metrics import metrics

__all__ = ["consuming", "end_delivery", "headers_context", "start_delivery", "start_publish"]


def start_publish(bus: str, event: Any) -> Any:
    """A ``publish`` PRODUCER span for one CloudEvent published to ``bus`` (or None)."""
    found = providers.tracer()
    if found is None:
        return None
    described = attributes("send", "publish", bus, None)
    with contextlib.suppress(Exception):  # an unchecked event: the publish itself refuses it
        described["messaging.message.id"] = str(event.get_id())
        described["cloudevents.event_id"] = str(event.get_id())
        described["cloudevents.event_spec_version"] = str(event.get_specversion())
        described["cloudevents.event_type"] = str(event.get_type())
        described["cloudevents.event_source"] = str(event.get_source())
        subject = event.get_subject()
        if subject is not None:
            described["cloudevents.event_subject"] = str(subject)
    return found.start_span(
        f"publish {bus}", kind=providers.api.trace.SpanKind.PRODUCER, attributes=described
    )


@contextlib.contextmanager
def consuming(message: Any) -> Iterator[None]:
    """Make the sender's context carried by ``message`` current for the block (no span)."""
    if providers.tracer() is None:
        take(message.lease_token)
        yield
        return
    parent = extract(take(message.lease_token))
    if parent is None:
        yield
        return
    context = providers.api.context
    token = context.attach(parent)
    try:
        yield
    finally:
        context.detach(token)


def start_delivery(pipeline: str, url: str, headers: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """A CLIENT span for one HTTP delivery attempt, and the headers carrying its context.

    The context travels as the CloudEvents distributed-tracing extension (``ce-traceparent``,
    ``ce-tracestate``; an event that has its own keeps it) and as W3C ``traceparent``, so a
    receiver instrumented either way joins the trace.
    """
    found = providers.tracer()
    if found is None:
        return None, headers
    api = providers.api
    parts = urlsplit(url)
    described: dict[str, Any] = {
        "http.request.method": "POST",
        "url.full": _without_credentials(url),
        "server.address": parts.hostname or "",
        f"{OWN}pipeline": pipeline,
    }
    port = parts.port or (443 if parts.scheme == "https" else 80)
    described["server.port"] = port
    span = found.start_span("POST", kind=api.trace.SpanKind.CLIENT, attributes=described)
    carrier: dict[str, str] = {}
    api.propagator.inject(carrier, context=api.trace.set_span_in_context(span))
    headers = dict(headers)
    present = {name.lower() for name in headers}
    for name, value in carrier.items():
        headers[name] = value
        if "ce-traceparent" not in present:
            headers[f"ce-{name}"] = value
    return span, headers


def end_delivery(span: Any, pipeline: str, attempt: Any) -> None:
    """End a delivery span with the attempt's status; count the attempt."""
    outcome = "error" if attempt is None else attempt.outcome.value
    instruments = metrics()
    if instruments is not None:
        instruments.deliveries.add(1, {"pipeline": pipeline, "outcome": outcome})
    if span is None:
        return
    status = None if attempt is None else attempt.status
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    failed = attempt is None or outcome != "success"
    if failed:
        if status is not None and status >= 400:
            error_type = str(status)
        elif attempt is not None and attempt.error and attempt.error.startswith("timeout"):
            error_type = "timeout"
        else:
            error_type = "_OTHER"
        span.set_attribute("error.type", error_type)
        description = None if attempt is None else attempt.error
        trace = providers.api.trace
        span.set_status(trace.Status(trace.StatusCode.ERROR, description))
    span.end()


def _without_credentials(url: str) -> str:
    """``url`` with a user name and password replaced by REDACTED (url.full's rule), and
    every query value too: a destination's ``?token=`` or signature is as much a secret."""
    parts = urlsplit(url)
    if parts.query:
        pieces = (piece.partition("=") for piece in parts.query.split("&"))
        query = "&".join(name + ("=REDACTED" if sign else "") for name, sign, _ in pieces)
        parts = parts._replace(query=query)
    if parts.username is None and parts.password is None:
        return urlunsplit(parts)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"REDACTED:REDACTED@{host}"))


def headers_context(headers: Mapping[str, str]) -> Any:
    """The OpenTelemetry context named by ``ce-traceparent`` (or ``traceparent``) headers:
    what a receiver of txqueue's deliveries starts its span from."""
    api = providers.load()
    if not api:
        return None
    lowered = {name.lower(): value for name, value in headers.items()}
    carrier = {}
    for name in ("traceparent", "tracestate"):
        value = lowered.get(f"ce-{name}") or lowered.get(name)
        if value:
            carrier[name] = value
    return api.propagator.extract(carrier)
