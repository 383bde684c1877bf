"""Trace context carried by messages, and on log records.

A driver that receives a message whose row carries its sender's context hands it over here
(`remember`), keyed by lease token, until the handler run (or the event delivery) takes it.
The helpers that store, read and name contexts and spans' common attributes live here too.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from txqueue.telemetry import _providers as providers

__all__ = [
    "OWN",
    "TraceIds",
    "attributes",
    "carried",
    "carrier",
    "extract",
    "message_id",
    "received_contexts",
    "remember",
    "renewed",
    "resending",
    "resending_context",
    "take",
]

#: Received trace contexts not yet taken by a handler run, by lease token (bounded: a
#: message received outside the worker is never taken).
_KEEP = 10_000
received_contexts: OrderedDict[str, str] = OrderedDict()
#: A stored trace context that the sends of the current block carry instead of a new span.
resending_context: ContextVar[str | None] = ContextVar("txqueue_resending", default=None)

#: Where txqueue's own span attributes go: the semantic conventions keep attributes of one
#: messaging system under ``messaging.<system>.``.
OWN = "messaging.txqueue."


def remember(token: str, context: str) -> None:
    """A driver received a message whose row carries ``context``: keep it for its handler."""
    received_contexts[token] = context
    if len(received_contexts) > _KEEP:
        received_contexts.popitem(last=False)


def take(token: str) -> str | None:
    """The context kept for lease ``token``, no longer kept (None: none)."""
    return received_contexts.pop(token, None) if received_contexts else None


def carried(message: Any) -> str | None:
    """The trace context a received ``message`` carries (its sender's), without taking it."""
    return received_contexts.get(message.lease_token) if received_contexts else None


def renewed(old_token: str, new_token: str) -> None:
    """A lease was renewed to ``new_token``: the message keeps the context it carried."""
    context = received_contexts.pop(old_token, None) if received_contexts else None
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
    token = resending_context.set(context)
    try:
        yield
    finally:
        resending_context.reset(token)


def carrier(span: Any) -> str | None:
    """The W3C trace context of ``span`` as stored with a message: traceparent, and the
    tracestate after a newline when there is one; None when the span records nothing."""
    if not span.is_recording():
        return None
    api = providers.api
    headers: dict[str, str] = {}
    api.propagator.inject(headers, context=api.trace.set_span_in_context(span))
    parent = headers.get("traceparent")
    if parent is None:
        return None
    state = headers.get("tracestate")
    return f"{parent}\n{state}" if state else parent


def extract(stored: str | None) -> Any:
    """The OpenTelemetry context a stored trace context names (None: none)."""
    if not stored:
        return None
    parent, _, state = stored.partition("\n")
    headers = {"traceparent": parent}
    if state:
        headers["tracestate"] = state
    return providers.api.propagator.extract(headers)


def attributes(operation: str, name: str, queue: str, db_system: str | None) -> dict[str, Any]:
    """The messaging attributes every span of ``operation`` on ``queue`` has."""
    found = {
        "messaging.system": providers.SCOPE,
        "messaging.destination.name": queue,
        "messaging.operation.type": operation,
        "messaging.operation.name": name,
    }
    if db_system is not None:  # the engine's traits give OpenTelemetry's name for it
        # (db.system.name belongs to database client spans: this is a messaging span)
        found[f"{OWN}database.system"] = db_system
    return found


def message_id(key: Any) -> str:
    """A message's key as ``messaging.message.id``: its parts joined by commas."""
    return ",".join(map(str, key)) if isinstance(key, tuple) else str(key)


class TraceIds(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` (hex) to a log record made while a span is active."""

    def filter(self, record: logging.LogRecord) -> bool:
        if providers.tracer() is None:
            return True
        context = providers.api.trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True
