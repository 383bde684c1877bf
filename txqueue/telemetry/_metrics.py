"""The worker's and the event layer's metrics through the OpenTelemetry metrics API, when an
SDK MeterProvider is configured."""

from __future__ import annotations

from typing import Any

from txqueue.telemetry import _providers as providers

__all__ = ["WorkerMetrics", "metrics", "worker_metrics"]


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


def metrics() -> _Instruments | None:
    """The instruments, made on first use; None when no meter records."""
    return providers.instruments(_Instruments)


def worker_metrics() -> WorkerMetrics | None:
    """The worker's OpenTelemetry metrics, when an SDK MeterProvider is configured."""
    instruments = metrics()
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
