"""Spans of messages: ``send`` (PRODUCER) where a message is sent, ``receive`` (CLIENT) for a
leased batch, ``process`` (CONSUMER) around each handler run, and its settling and lease
renewals as events of the process span."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from time import time_ns
from typing import Any

from txqueue.telemetry import _providers as providers
from txqueue.telemetry._context import (
    OWN,
    attributes,
    carrier,
    extract,
    message_id,
    received_contexts,
    resending_context,
    take,
)
from txqueue.telemetry._metrics import metrics

__all__ = [
    "abandoned",
    "current",
    "ending",
    "handler_failed",
    "lease_renewed",
    "receive_started",
    "received",
    "sent_context",
    "settled",
    "start_process",
    "start_send",
]

# ---- send ----------------------------------------------------------------------------------


def start_send(queue: str, key: Any, database: Any) -> Any:
    """A ``send`` PRODUCER span in the sender's context, or None when nothing records.

    ``database`` (either face) gives the engine's name only when a span is made: this runs
    once per message sent."""
    found = providers.tracer()
    if found is None:
        return None
    api = providers.api
    carrying = resending_context.get()
    if carrying is not None:  # no span of its own: the message keeps the context it had
        return api.trace.get_current_span(extract(carrying))
    described = attributes("send", "send", queue, database.traits.db_system)
    described["messaging.message.id"] = message_id(key)
    return found.start_span(f"send {queue}", kind=api.trace.SpanKind.PRODUCER, attributes=described)


def sent_context(span: Any) -> str | None:
    """What a send stores with its message: the send span's trace context, if it records
    (inside `resending`, the context carried over)."""
    return resending_context.get() or carrier(span)


@contextlib.contextmanager
def ending(span: Any) -> Iterator[None]:
    """Make ``span`` current for the block, record an exception escaping it, then end it."""
    with providers.api.trace.use_span(span, end_on_exit=True, record_exception=True):
        yield


# ---- receive -------------------------------------------------------------------------------


def receive_started() -> int | None:
    """The time a receive starts (ns), when tracing; else None and nothing more is done."""
    return None if providers.tracer() is None else time_ns()


def received(queue: str, messages: Any, db_system: str, started: int) -> None:
    """A ``receive`` span for one leased batch, linked to each message's send context: the
    conventions' links for an operation that covers several messages."""
    api = providers.api
    links = []
    for message in messages:
        parent = extract(received_contexts.get(message.lease_token))
        if parent is not None:
            links.append(api.trace.Link(api.trace.get_current_span(parent).get_span_context()))
    described = attributes("receive", "receive", queue, db_system)
    described["messaging.batch.message_count"] = len(messages)
    span = providers.tracer().start_span(
        f"receive {queue}",
        kind=api.trace.SpanKind.CLIENT,
        attributes=described,
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
    found = providers.tracer()
    if found is None:
        take(message.lease_token)
        return None
    traits = getattr(getattr(store, "database", None), "traits", None)
    db_system = None if traits is None else traits.db_system
    described = attributes("process", "process", message.queue, db_system)
    described["messaging.message.id"] = message_id(message.key)
    described[f"{OWN}message.delivery_count"] = message.delivery_count
    parent = extract(take(message.lease_token))
    return found.start_span(
        f"process {message.queue}",
        context=parent,
        kind=providers.api.trace.SpanKind.CONSUMER,
        attributes=described,
    )


#: What `current` gives for no span: one shared context manager that does nothing (the worker
#: asks for every message, so no generator-based context manager is built then).
_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()


def current(span: Any) -> contextlib.AbstractContextManager[Any]:
    """Make ``span`` (which may be None) the current span for the block; it stays open."""
    if span is None:
        return _NO_SPAN
    return providers.api.trace.use_span(span, end_on_exit=False, record_exception=False)  # type: ignore[no-any-return]


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
    described: dict[str, Any] = {
        "messaging.operation.type": "settle",
        "messaging.operation.name": name,
    }
    if outcome.delay is not None:
        described[f"{OWN}retry.delay_seconds"] = outcome.delay.total_seconds()
    if outcome.error is not None:
        described["exception.message"] = outcome.error
    span.add_event(name, described)
    if failed:
        trace = providers.api.trace
        span.set_status(trace.Status(trace.StatusCode.ERROR, outcome.error or name))
    span.end()


def abandoned(span: Any, error: BaseException) -> None:
    """End a process span whose run did not finish (shutdown, or a failure of txqueue)."""
    trace = providers.api.trace
    span.record_exception(error)
    span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
    span.end()


def handler_failed(error: BaseException) -> None:
    """Record a handler's exception on the current process span (an ``exception`` event)."""
    if providers.tracer() is None:
        return
    span = providers.api.trace.get_current_span()
    if span.is_recording():
        span.record_exception(error)


def lease_renewed(span: Any, queue: str, expiration: Any = None) -> None:
    """A lease was renewed: an event of its process span, and the renewal counter."""
    if span is not None:
        described = {"messaging.operation.name": "renew"}
        if expiration is not None:
            described[f"{OWN}lease.expiration"] = expiration.isoformat()
        span.add_event("renew", described)
    instruments = metrics()
    if instruments is not None:
        instruments.renewals.add(1, {"queue": queue})
