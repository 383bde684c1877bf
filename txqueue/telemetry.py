"""OpenTelemetry traces, metrics and log correlation, when ``opentelemetry-api`` is installed.

One module the faces, the worker and the event layer call: they never import OpenTelemetry
themselves. Without the API (``pip install 'txqueue[otel]'``), or with it but no SDK
TracerProvider configured, every entry point returns None after one cheap check and nothing
is created per message: no span, no attribute dict, no context. The API is not even imported
until the application has imported it (setting up an SDK does).

Spans follow OpenTelemetry's messaging conventions (``messaging.system`` = ``"txqueue"``):
``send`` (PRODUCER) where a message is sent, ``process`` (CONSUMER) around each handler run,
a child of the sender's context, which the message carries in a hidden column; settling (ack,
retry, dead letter) and lease renewals are events of the process span. The event layer adds
``publish`` (PRODUCER) and one CLIENT span per HTTP delivery attempt, whose context travels
to the receiver as ``ce-traceparent``. docs/observability.md lists every span and metric.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from time import monotonic, time_ns
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["TraceIds", "configure", "tracer"]

#: Instrumentation scope of every span and metric.
SCOPE = "txqueue"
#: Received trace contexts not yet taken by a handler run, by lease token (bounded: a
#: message received outside the worker is never taken).
_KEEP = 10_000

_api: Any = None  # the imported opentelemetry namespace; False when not installed
_tracer: Any = None
_meter: Any = None
_instruments: _Instruments | None = None
_tracer_provider: Any = None  # set by configure(): used instead of the global provider
_meter_provider: Any = None
_received: OrderedDict[str, str] = OrderedDict()
#: A stored trace context that the sends of the current block carry instead of a new span.
_resending: ContextVar[str | None] = ContextVar("txqueue_resending", default=None)
#: Seconds between looks at the global tracer provider while none is configured.
RECHECK = 1.0
_next_check = 0.0  # monotonic time of the next look


class _Api:
    """The parts of opentelemetry-api txqueue uses, imported once."""

    def __init__(self) -> None:
        from opentelemetry import context, metrics, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.context = context
        self.metrics = metrics
        self.trace = trace
        self.propagator = TraceContextTextMapPropagator()
        self.no_tracer = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)

    def records_metrics(self, provider: Any) -> bool:
        """False for the API's own providers (no SDK configured): they record nothing."""
        if isinstance(provider, self.metrics.NoOpMeterProvider):
            return False
        return type(provider).__name__ != "_ProxyMeterProvider"


def _may_have_set(signal: str, variable: str) -> bool:
    """Whether the application may have set a global provider of ``signal`` (``trace`` or
    ``metrics``): setting one imports ``opentelemetry.<signal>``, and the environment
    ``variable`` names one the API makes on first use. Otherwise txqueue does not import the
    API itself: that import took a process's first receive or send ~15 ms of CPU, for
    nothing to record."""
    return f"opentelemetry.{signal}" in sys.modules or variable in os.environ


def _load() -> Any:
    global _api
    if _api is None:
        try:
            _api = _Api()
        except ImportError:
            _api = False
    return _api


def configure(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Use these providers instead of OpenTelemetry's global ones (None: the global ones).

    For tests, or an application that keeps several providers; most set the global
    providers with the SDK and never call this.
    """
    global _tracer, _meter, _instruments, _tracer_provider, _meter_provider, _next_check
    _tracer_provider, _meter_provider = tracer_provider, meter_provider
    _tracer = _meter = _instruments = None
    _next_check = 0.0


def tracer() -> Any:
    """The txqueue tracer when an SDK TracerProvider is configured, else None (cheaply).

    Without one, the global provider is looked at again at most every ``RECHECK`` seconds
    (reading it costs more than the rest of the check), so a provider set after txqueue's
    first message is used from then on.
    """
    if _tracer is not None:
        return _tracer
    if monotonic() < _next_check:
        return None
    return _new_tracer()


def _new_tracer() -> Any:
    global _tracer, _next_check
    if _tracer_provider is None and not _may_have_set("trace", "OTEL_PYTHON_TRACER_PROVIDER"):
        _next_check = monotonic() + RECHECK
        return None
    api = _load()
    if not api:
        _next_check = float("inf")  # not installed: nothing to look at again
        return None
    provider = _tracer_provider or api.trace.get_tracer_provider()
    if isinstance(provider, api.no_tracer):
        _next_check = monotonic() + RECHECK
        return None
    _tracer = provider.get_tracer(SCOPE)
    return _tracer


def meter() -> Any:
    """The txqueue meter when an SDK MeterProvider is configured, else None."""
    global _meter
    if _meter is not None:
        return _meter
    if _meter_provider is None and not _may_have_set("metrics", "OTEL_PYTHON_METER_PROVIDER"):
        return None
    api = _load()
    if not api:
        return None
    provider = _meter_provider or api.metrics.get_meter_provider()
    if not api.records_metrics(provider):
        return None
    _meter = provider.get_meter(SCOPE)
    return _meter


# ---- trace context carried by messages -----------------------------------------------------


def remember(token: str, context: str) -> None:
    """A driver received a message whose row carries ``context``: keep it for its handler."""
    _received[token] = context
    if len(_received) > _KEEP:
        _received.popitem(last=False)


def _take(token: str) -> str | None:
    return _received.pop(token, None) if _received else None


def carried(message: Any) -> str | None:
    """The trace context a received ``message`` carries (its sender's), without taking it."""
    return _received.get(message.lease_token) if _received else None


def renewed(old_token: str, new_token: str) -> None:
    """A lease was renewed to ``new_token``: the message keeps the context it carried."""
    context = _received.pop(old_token, None) if _received else None
    if context is not None:
        remember(new_token, context)


@contextlib.contextmanager
def resending(context: str | None) -> Iterator[None]:
    """Sends in the block store ``context`` with their message instead of starting a send
    span: a message sent again (an event delivery's retry) stays where its first send put
    it, so every attempt is a child of that one send."""
    if context is None:
        yield
        return
    token = _resending.set(context)
    try:
        yield
    finally:
        _resending.reset(token)


def _carrier(span: Any) -> str | None:
    """The W3C trace context of ``span`` as stored with a message: traceparent, and the
    tracestate after a newline when there is one; None when the span records nothing."""
    if not span.is_recording():
        return None
    api = _api
    carrier: dict[str, str] = {}
    api.propagator.inject(carrier, context=api.trace.set_span_in_context(span))
    parent = carrier.get("traceparent")
    if parent is None:
        return None
    state = carrier.get("tracestate")
    return f"{parent}\n{state}" if state else parent


def _extract(stored: str | None) -> Any:
    """The OpenTelemetry context a stored trace context names (None: none)."""
    if not stored:
        return None
    parent, _, state = stored.partition("\n")
    carrier = {"traceparent": parent}
    if state:
        carrier["tracestate"] = state
    return _api.propagator.extract(carrier)


#: Where txqueue's own span attributes go: the semantic conventions keep attributes of one
#: messaging system under ``messaging.<system>.``.
OWN = "messaging.txqueue."


def _attributes(operation: str, name: str, queue: str, db_system: str | None) -> dict[str, Any]:
    attributes = {
        "messaging.system": SCOPE,
        "messaging.destination.name": queue,
        "messaging.operation.type": operation,
        "messaging.operation.name": name,
    }
    if db_system is not None:  # the engine's traits give OpenTelemetry's name for it
        # (db.system.name belongs to database client spans: this is a messaging span)
        attributes[f"{OWN}database.system"] = db_system
    return attributes


def _message_id(key: Any) -> str:
    return ",".join(map(str, key)) if isinstance(key, tuple) else str(key)


# ---- send ----------------------------------------------------------------------------------


def start_send(queue: str, key: Any, database: Any) -> Any:
    """A ``send`` PRODUCER span in the sender's context, or None when nothing records.

    ``database`` (either face) gives the engine's name only when a span is made: this runs
    once per message sent."""
    found = tracer()
    if found is None:
        return None
    carrying = _resending.get()
    if carrying is not None:  # no span of its own: the message keeps the context it had
        return _api.trace.get_current_span(_extract(carrying))
    attributes = _attributes("send", "send", queue, database.traits.db_system)
    attributes["messaging.message.id"] = _message_id(key)
    return found.start_span(
        f"send {queue}", kind=_api.trace.SpanKind.PRODUCER, attributes=attributes
    )


def sent_context(span: Any) -> str | None:
    """What a send stores with its message: the send span's trace context, if it records
    (inside `resending`, the context carried over)."""
    return _resending.get() or _carrier(span)


@contextlib.contextmanager
def ending(span: Any) -> Iterator[None]:
    """Make ``span`` current for the block, record an exception escaping it, then end it."""
    with _api.trace.use_span(span, end_on_exit=True, record_exception=True):
        yield


# ---- receive -------------------------------------------------------------------------------


def receive_started() -> int | None:
    """The time a receive starts (ns), when tracing; else None and nothing more is done."""
    return None if tracer() is None else time_ns()


def received(queue: str, messages: Any, db_system: str, started: int) -> None:
    """A ``receive`` span for one leased batch, linked to each message's send context: the
    conventions' links for an operation that covers several messages."""
    links = []
    for message in messages:
        parent = _extract(_received.get(message.lease_token))
        if parent is not None:
            links.append(_api.trace.Link(_api.trace.get_current_span(parent).get_span_context()))
    attributes = _attributes("receive", "receive", queue, db_system)
    attributes["messaging.batch.message_count"] = len(messages)
    span = tracer().start_span(
        f"receive {queue}",
        kind=_api.trace.SpanKind.CLIENT,
        attributes=attributes,
        links=links,
        start_time=started,
    )
    span.end()


# ---- process and settle --------------------------------------------------------------------


def start_process(message: Any, store: Any) -> Any:
    """The ``process`` CONSUMER span of one handler run (None when nothing records).

    It is a child of the sender's context carried by the message (not a link): one span
    handles exactly one message, and the worker's receive has no span of its own, so the
    sender's trace shows the handling directly.
    """
    found = tracer()
    if found is None:
        _take(message.lease_token)
        return None
    traits = getattr(getattr(store, "database", None), "traits", None)
    db_system = None if traits is None else traits.db_system
    attributes = _attributes("process", "process", message.queue, db_system)
    attributes["messaging.message.id"] = _message_id(message.key)
    attributes[f"{OWN}message.delivery_count"] = message.delivery_count
    parent = _extract(_take(message.lease_token))
    return found.start_span(
        f"process {message.queue}",
        context=parent,
        kind=_api.trace.SpanKind.CONSUMER,
        attributes=attributes,
    )


#: What `current` gives for no span: one shared context manager that does nothing (the worker
#: asks for every message, so no generator-based context manager is built then).
_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()


def current(span: Any) -> contextlib.AbstractContextManager[Any]:
    """Make ``span`` (which may be None) the current span for the block; it stays open."""
    if span is None:
        return _NO_SPAN
    return _api.trace.use_span(span, end_on_exit=False, record_exception=False)  # type: ignore[no-any-return]


#: Settling events by outcome: name, and whether the run failed.
_SETTLED = {
    "acked": ("ack", False),
    "retried": ("retry", True),
    "dead_lettered": ("dead_letter", True),
    "lease_lost": ("lease_lost", True),
    "discarded": ("discard", True),
    "released": ("release", False),
}


def settled(span: Any, outcome: Any) -> None:
    """End a process span with its ``settle`` event: ack, retry or dead letter, and why."""
    name, failed = _SETTLED.get(outcome.kind.value, (outcome.kind.value, True))
    attributes: dict[str, Any] = {
        "messaging.operation.type": "settle",
        "messaging.operation.name": name,
    }
    if outcome.delay is not None:
        attributes[f"{OWN}retry.delay_seconds"] = outcome.delay.total_seconds()
    if outcome.error is not None:
        attributes["exception.message"] = outcome.error
    span.add_event(name, attributes)
    if failed:
        span.set_status(_api.trace.Status(_api.trace.StatusCode.ERROR, outcome.error or name))
    span.end()


def abandoned(span: Any, error: BaseException) -> None:
    """End a process span whose run did not finish (shutdown, or a failure of txqueue)."""
    span.record_exception(error)
    span.set_status(_api.trace.Status(_api.trace.StatusCode.ERROR, type(error).__name__))
    span.end()


def handler_failed(error: BaseException) -> None:
    """Record a handler's exception on the current process span (an ``exception`` event)."""
    if tracer() is None:
        return
    span = _api.trace.get_current_span()
    if span.is_recording():
        span.record_exception(error)


def lease_renewed(span: Any, queue: str, expiration: Any = None) -> None:
    """A lease was renewed: an event of its process span, and the renewal counter."""
    if span is not None:
        attributes = {"messaging.operation.name": "renew"}
        if expiration is not None:
            attributes[f"{OWN}lease.expiration"] = expiration.isoformat()
        span.add_event("renew", attributes)
    instruments = _metrics()
    if instruments is not None:
        instruments.renewals.add(1, {"queue": queue})


# ---- events --------------------------------------------------------------------------------


def start_publish(bus: str, event: Any) -> Any:
    """A ``publish`` PRODUCER span for one CloudEvent published to ``bus`` (or None)."""
    found = tracer()
    if found is None:
        return None
    attributes = _attributes("send", "publish", bus, None)
    with contextlib.suppress(Exception):  # an unchecked event: the publish itself refuses it
        attributes["messaging.message.id"] = str(event.get_id())
        attributes["cloudevents.event_id"] = str(event.get_id())
        attributes["cloudevents.event_spec_version"] = str(event.get_specversion())
        attributes["cloudevents.event_type"] = str(event.get_type())
        attributes["cloudevents.event_source"] = str(event.get_source())
        subject = event.get_subject()
        if subject is not None:
            attributes["cloudevents.event_subject"] = str(subject)
    return found.start_span(
        f"publish {bus}", kind=_api.trace.SpanKind.PRODUCER, attributes=attributes
    )


@contextlib.contextmanager
def consuming(message: Any) -> Iterator[None]:
    """Make the sender's context carried by ``message`` current for the block (no span)."""
    if tracer() is None:
        _take(message.lease_token)
        yield
        return
    parent = _extract(_take(message.lease_token))
    if parent is None:
        yield
        return
    token = _api.context.attach(parent)
    try:
        yield
    finally:
        _api.context.detach(token)


def start_delivery(pipeline: str, url: str, headers: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """A CLIENT span for one HTTP delivery attempt, and the headers carrying its context.

    The context travels as the CloudEvents distributed-tracing extension (``ce-traceparent``,
    ``ce-tracestate``; an event that has its own keeps it) and as W3C ``traceparent``, so a
    receiver instrumented either way joins the trace.
    """
    found = tracer()
    if found is None:
        return None, headers
    parts = urlsplit(url)
    attributes: dict[str, Any] = {
        "http.request.method": "POST",
        "url.full": _without_credentials(url),
        "server.address": parts.hostname or "",
        f"{OWN}pipeline": pipeline,
    }
    port = parts.port or (443 if parts.scheme == "https" else 80)
    attributes["server.port"] = port
    span = found.start_span("POST", kind=_api.trace.SpanKind.CLIENT, attributes=attributes)
    carrier: dict[str, str] = {}
    _api.propagator.inject(carrier, context=_api.trace.set_span_in_context(span))
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
    instruments = _metrics()
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
        span.set_status(_api.trace.Status(_api.trace.StatusCode.ERROR, description))
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


# ---- metrics -------------------------------------------------------------------------------


class _Instruments:
    """The OpenTelemetry twins of the worker's Prometheus metrics, same names (``.`` for the
    prefix's ``_``: exported to Prometheus they read the same)."""

    def __init__(self, found: Any) -> None:
        self.send = found.create_counter(
            "txqueue.message_send_count", description="Messages sent by the worker."
        )
        self.ack = found.create_counter(
            "txqueue.message_ack_count", description="Messages acked by the worker."
        )
        self.ready = found.create_gauge(
            "txqueue.buffered_ready_messages", description="Messages ready to be received."
        )
        self.oldest = found.create_gauge(
            "txqueue.oldest_unacked_message_age",
            unit="s",
            description="Age of the oldest ready message (0 when none).",
        )
        self.leased = found.create_gauge(
            "txqueue.leased_messages", description="Messages under a lease."
        )
        self.dead = found.create_gauge(
            "txqueue.dead_letter_messages", description="Dead letters of the queue."
        )
        self.expired = found.create_counter(
            "txqueue.lease_expiration_count", description="Leases the worker lost."
        )
        self.latency = found.create_histogram(
            "txqueue.handler_latency", unit="s", description="Handler run time, ack included."
        )
        self.outcomes = found.create_counter(
            "txqueue.handler_outcome_count",
            description="Deliveries by outcome (acked, retried, dead_lettered, ...).",
        )
        self.renewals = found.create_counter(
            "txqueue.lease_renewal_count", description="Leases the worker renewed."
        )
        self.deliveries = found.create_counter(
            "txqueue.event_delivery_attempt_count",
            description="HTTP delivery attempts of the event layer, by pipeline and outcome.",
        )


def _metrics() -> _Instruments | None:
    global _instruments
    if _instruments is None:
        found = meter()
        if found is None:
            return None
        _instruments = _Instruments(found)
    return _instruments


def worker_metrics() -> WorkerMetrics | None:
    """The worker's OpenTelemetry metrics, when an SDK MeterProvider is configured."""
    instruments = _metrics()
    return None if instruments is None else WorkerMetrics(instruments)


class WorkerMetrics:
    """What ``observe.Stats`` reports, through the OpenTelemetry metrics API."""

    def __init__(self, instruments: _Instruments) -> None:
        self._instruments = instruments

    def sent(self, queue: str, count: int) -> None:
        self._instruments.send.add(count, {"queue": queue})

    def lease_lost(self, queue: str) -> None:
        self._instruments.expired.add(1, {"queue": queue})

    def outcome(self, queue: str, kind: str, duration: float) -> None:
        instruments = self._instruments
        instruments.outcomes.add(1, {"queue": queue, "outcome": kind})
        instruments.latency.record(duration, {"queue": queue})
        if kind == "acked":
            instruments.ack.add(1, {"queue": queue})

    def queue_info(self, info: Any) -> None:
        instruments, labels = self._instruments, {"queue": info.name}
        instruments.ready.set(info.ready, labels)
        instruments.leased.set(info.leased, labels)
        instruments.dead.set(info.dead_letters, labels)
        instruments.oldest.set(info.oldest_ready_age_seconds or 0.0, labels)


# ---- logs ----------------------------------------------------------------------------------


class TraceIds(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` (hex) to a log record made while a span is active."""

    def filter(self, record: logging.LogRecord) -> bool:
        if tracer() is None:
            return True
        context = _api.trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True


def headers_context(headers: Mapping[str, str]) -> Any:
    """The OpenTelemetry context named by ``ce-traceparent`` (or ``traceparent``) headers:
    what a receiver of txqueue's deliveries starts its span from."""
    api = _load()
    if not api:
        return None
    lowered = {name.lower(): value for name, value in headers.items()}
    carrier = {}
    for name in ("traceparent", "tracestate"):
        value = lowered.get(f"ce-{name}") or lowered.get(name)
        if value:
            carrier[name] = value
    return api.propagator.extract(carrier)
