"""Observability of the worker: counters, Prometheus metrics, structured logs, a status line.

Metric names follow Spanner's queue metrics (``message_send_count``, ``message_ack_count``,
``buffered_ready_messages``, ``oldest_unacked_message_age``, ``lease_expiration_count``) with a
``txqueue_`` prefix; prometheus-client is optional (``pip install 'txqueue[metrics]'``).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

from txqueue import telemetry
from txqueue.core.text import printable
from txqueue.errors import InvalidArgument
from txqueue.models import QueueInfo
from txqueue.worker.outcomes import Outcome, OutcomeKind

__all__ = ["JsonFormatter", "Metrics", "Stats", "StatusLine", "TextFormatter", "configure_logging"]


class Metrics:
    """Prometheus metrics in their own registry (several workers may share a process)."""

    def __init__(self) -> None:
        try:
            import prometheus_client as prometheus
        except ImportError as error:  # pragma: no cover - depends on the installed extras
            raise InvalidArgument(
                "metrics need prometheus-client: pip install 'txqueue[metrics]'"
            ) from error
        self.registry = registry = prometheus.CollectorRegistry()
        queue = ["queue"]
        self.send = prometheus.Counter(
            "txqueue_message_send_count",
            "Messages sent by the worker (periodic runs, resend copies).",
            queue,
            registry=registry,
        )
        self.ack = prometheus.Counter(
            "txqueue_message_ack_count", "Messages acked by the worker.", queue, registry=registry
        )
        self.ready = prometheus.Gauge(
            "txqueue_buffered_ready_messages",
            "Messages ready to be received.",
            queue,
            registry=registry,
        )
        self.oldest = prometheus.Gauge(
            "txqueue_oldest_unacked_message_age",
            "Age in seconds of the oldest ready message (0 when none).",
            queue,
            registry=registry,
        )
        self.leased = prometheus.Gauge(
            "txqueue_leased_messages", "Messages under a lease.", queue, registry=registry
        )
        self.dead = prometheus.Gauge(
            "txqueue_dead_letter_messages", "Dead letters of the queue.", queue, registry=registry
        )
        self.expired = prometheus.Counter(
            "txqueue_lease_expiration_count",
            "Leases this worker lost (renewal refused or too late).",
            queue,
            registry=registry,
        )
        self.latency = prometheus.Histogram(
            "txqueue_handler_latency_seconds",
            "Handler run time, ack included.",
            queue,
            registry=registry,
        )
        self.outcomes = prometheus.Counter(
            "txqueue_handler_outcome_count",
            "Deliveries by outcome (acked, retried, dead_lettered, lease_lost, ...).",
            ["queue", "outcome"],
            registry=registry,
        )

    def serve(self, port: int, address: str = "127.0.0.1") -> None:
        """Expose ``/metrics`` over HTTP on ``address:port`` (a daemon thread); only this
        host reaches it unless ``address`` says otherwise (``0.0.0.0``: every interface)."""
        import prometheus_client as prometheus

        prometheus.start_http_server(port, addr=address, registry=self.registry)

    def text(self) -> str:
        """The metrics in Prometheus' text format (tests, debugging)."""
        import prometheus_client as prometheus

        return prometheus.generate_latest(self.registry).decode()


@dataclass
class QueueStats:
    """Counts for one queue since the worker started, and its last polled ``QueueInfo``."""

    received: int = 0
    running: int = 0
    sent: int = 0
    lease_lost: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    info: QueueInfo | None = None


class Stats:
    """Everything the worker reports, fanned out to the status line and to ``Metrics``."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics
        self.otel = telemetry.worker_metrics()  # None unless an OpenTelemetry SDK is set up
        self.queues: dict[str, QueueStats] = {}
        self.concurrency = 0
        self.since = time.monotonic()

    def _queue(self, name: str) -> QueueStats:
        found = self.queues.get(name)
        if found is None:
            found = self.queues[name] = QueueStats()
        return found

    def started(self, queues: list[str], concurrency: int) -> None:
        self.concurrency = concurrency
        for name in queues:
            self._queue(name)

    def received(self, queue: str, count: int) -> None:
        self._queue(queue).received += count

    def running(self, queue: str, delta: int) -> None:
        self._queue(queue).running += delta

    def sent(self, queue: str, count: int = 1) -> None:
        self._queue(queue).sent += count
        if self.otel:
            self.otel.sent(queue, count)
        if self.metrics:
            self.metrics.send.labels(queue).inc(count)

    def lease_lost(self, queue: str) -> None:
        self._queue(queue).lease_lost += 1
        if self.otel:
            self.otel.lease_lost(queue)
        if self.metrics:
            self.metrics.expired.labels(queue).inc()

    def outcome(self, outcome: Outcome) -> None:
        self._queue(outcome.queue).outcomes[outcome.kind.value] += 1
        if self.otel:
            self.otel.outcome(outcome.queue, outcome.kind.value, outcome.duration)
        if self.metrics:
            self.metrics.outcomes.labels(outcome.queue, outcome.kind.value).inc()
            self.metrics.latency.labels(outcome.queue).observe(outcome.duration)
            if outcome.kind is OutcomeKind.ACKED:
                self.metrics.ack.labels(outcome.queue).inc()

    def queue_info(self, info: QueueInfo) -> None:
        self._queue(info.name).info = info
        if self.otel:
            self.otel.queue_info(info)
        if self.metrics:
            self.metrics.ready.labels(info.name).set(info.ready)
            self.metrics.leased.labels(info.name).set(info.leased)
            self.metrics.dead.labels(info.name).set(info.dead_letters)
            self.metrics.oldest.labels(info.name).set(info.oldest_ready_age_seconds or 0.0)

    def total(self, kind: OutcomeKind) -> int:
        """How many deliveries ended with ``kind``, over every queue."""
        return sum(q.outcomes[kind.value] for q in self.queues.values())


class StatusLine:
    """A live status line (rich) on a terminal: running handlers, outcomes, queue counts."""

    def __init__(self, stats: Stats, file: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.stats = stats
        console = Console(file=file or sys.stdout)
        self._live = Live(
            get_renderable=self._render,
            console=console,
            refresh_per_second=2,
            transient=True,
            redirect_stderr=True,
        )

    def start(self) -> None:
        self._live.start()

    def stop(self) -> None:
        self._live.stop()

    def _render(self) -> Any:
        from rich.table import Table

        stats = self.stats
        running = sum(q.running for q in stats.queues.values())
        table = Table(
            box=None,
            padding=(0, 1),
            title_justify="left",
            title=f"[bold green]●[/] txqueue worker · {running}/{stats.concurrency} running"
            f" · up {int(time.monotonic() - stats.since)} s",
        )
        headings = ["queue", "running", "acked", "retried", "dead", "lost"]
        headings += ["ready", "leased", "scheduled", "dead letters", "oldest"]
        for heading in headings:
            table.add_column(heading, justify="left" if heading == "queue" else "right")
        for name, queue in sorted(stats.queues.items()):
            counts, info = queue.outcomes, queue.info
            cells = [name, str(queue.running), str(counts["acked"]), str(counts["retried"])]
            cells += [str(counts["dead_lettered"]), str(counts["lease_lost"] + queue.lease_lost)]
            if info is None:
                cells += ["-"] * 5
            else:
                age = info.oldest_ready_age_seconds
                cells += [str(info.ready), str(info.leased), str(info.scheduled)]
                cells += [str(info.dead_letters), "-" if age is None else f"{age:.1f} s"]
            table.add_row(*cells)
        return table


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **_extras(record),
        }
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...`` with the record's extra fields, then the
    traceback if any. Keys, errors and response bodies come from outside: every control
    character in the line (a newline too) and in the traceback is shown as an escape."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        extras = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        lines = [printable(f"{line} {extras}" if extras else line)]
        if record.exc_info:
            lines += map(printable, self.formatException(record.exc_info).splitlines())
        elif record.exc_text:
            lines += map(printable, record.exc_text.splitlines())
        if record.stack_info:
            lines += map(printable, self.formatStack(record.stack_info).splitlines())
        return "\n".join(lines)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is now (the status line redirects it)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def configure_logging(format: str = "text", level: str | int = "INFO") -> None:
    """Send ``txqueue`` logs to stderr, as text or one JSON object per line."""
    if format not in ("text", "json"):
        raise InvalidArgument(f"log format must be 'text' or 'json', got {format!r}")
    handler = _StderrHandler()
    handler.addFilter(telemetry.TraceIds())  # trace_id and span_id while a span is active
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    logger = logging.getLogger("txqueue")
    for old in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    logger.propagate = False
