"""The API's JSON shapes: snake_case keys, keys as arrays, RFC 3339 UTC times, seconds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from txqueue.core.schema import Table
from txqueue.events.unmatched import UnmatchedMessage
from txqueue.models import DeadLetter, Failure, QueueInfo
from txqueue.web.services import (
    PipelineRow,
    ThroughputSeries,
    UndeliveredRow,
    encode_payload,
    key_to_json,
    rfc3339,
)
from txqueue.worker.registry import WorkerInfo

__all__ = [
    "attempt_json",
    "bus_json",
    "dead_letter_json",
    "enrollment_json",
    "failure_json",
    "message_json",
    "pipeline_json",
    "queue_json",
    "throughput_json",
    "undelivered_json",
    "unmatched_json",
    "worker_json",
]


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def queue_json(row: QueueInfo) -> dict[str, Any]:
    return {
        "name": row.name,
        "ready": row.ready,
        "leased": row.leased,
        "scheduled": row.scheduled,
        "dead_letters": row.dead_letters,
        "oldest_ready_age_seconds": row.oldest_ready_age_seconds,
        "estimated": row.estimated,
        "paused": row.paused,
    }


def message_json(table: Table, message: Any) -> dict[str, Any]:
    """A ``txqueue.StoredMessage``."""
    return {
        "queue": message.queue,
        "key": key_to_json(table, message.key),
        "payload": encode_payload(message.payload),
        "deliver_time": rfc3339(message.deliver_time),
        "state": message.state,
        "lease_expiration": rfc3339(message.lease_expiration),
        "delivery_count": message.delivery_count,
        "last_error": message.last_error,
        "failures": [failure_json(f) for f in message.failures],
    }


def dead_letter_json(table: Table, letter: DeadLetter) -> dict[str, Any]:
    return {
        "queue": letter.queue,
        "key": key_to_json(table, letter.key),
        "payload": encode_payload(letter.payload),
        "attempts": letter.attempts,
        "last_error": letter.last_error,
        "first_failure": rfc3339(letter.first_failure),
        "last_failure": rfc3339(letter.last_failure),
        "failures": [failure_json(f) for f in letter.failures],
    }


def failure_json(failure: Failure) -> dict[str, Any]:
    """One failed attempt of a message (``txqueue.Failure``)."""
    return {
        "attempt": failure.attempt,
        "failed_at": rfc3339(failure.failed_at),
        "error_type": failure.error_type,
        "message": failure.message,
        "traceback": failure.traceback,
    }


def worker_json(worker: WorkerInfo) -> dict[str, Any]:
    return {
        "id": worker.id,
        "host": worker.host,
        "pid": worker.pid,
        "kind": worker.kind,
        "queues": list(worker.queues),
        "pipelines": list(worker.pipelines),
        "concurrency": worker.concurrency,
        "in_flight": worker.in_flight,
        "started": rfc3339(worker.started),
        "last_seen": rfc3339(worker.last_seen),
    }


def throughput_json(series: ThroughputSeries) -> dict[str, Any]:
    return {
        "minutes": [rfc3339(minute) for minute in series.minutes],
        "handled": series.handled,
        "failed": series.failed,
        "dead_lettered": series.dead_lettered,
    }


def bus_json(bus: Any) -> dict[str, Any]:
    """A ``txqueue.Bus``."""
    return {
        "name": bus.name,
        "archive": bus.archive,
        "retention": _seconds(bus.retention),
        "create_time": rfc3339(bus.create_time),
        "update_time": rfc3339(bus.update_time),
    }


def pipeline_json(row: PipelineRow) -> dict[str, Any]:
    """A pipeline; its signing secret only as whether one is set."""
    return {
        "name": row.name,
        "destination": row.destination,
        "max_attempts": row.max_attempts,
        "min_retry_delay": _seconds(row.min_retry_delay),
        "max_retry_delay": _seconds(row.max_retry_delay),
        "input_payload_format": row.input_payload_format,
        "has_json_schema": row.has_json_schema,
        "signing_secret_set": row.secret_set,
        "allow_private": row.allow_private,
        "create_time": rfc3339(row.create_time),
        "update_time": rfc3339(row.update_time),
    }


def enrollment_json(enrollment: Any) -> dict[str, Any]:
    """A ``txqueue.Enrollment``."""
    return {
        "name": enrollment.name,
        "bus": enrollment.bus,
        "pipeline": enrollment.pipeline,
        "cel_match": enrollment.cel_match,
        "create_time": rfc3339(enrollment.create_time),
        "update_time": rfc3339(enrollment.update_time),
    }


def attempt_json(attempt: Any) -> dict[str, Any]:
    """A ``txqueue.DeliveryAttempt``."""
    return {
        "message_uid": attempt.message_uid,
        "pipeline": attempt.pipeline,
        "attempt": attempt.attempt,
        "bus": attempt.bus,
        "time": rfc3339(attempt.time),
        "state": attempt.state,
        "outcome": attempt.outcome,
        "status": attempt.status,
        "error": attempt.error,
        "latency": _seconds(attempt.latency),
        "retry_delay": _seconds(attempt.retry_delay),
        "error_type": attempt.error_type,
        "traceback": attempt.traceback,
    }


def unmatched_json(item: UnmatchedMessage) -> dict[str, Any]:
    from txqueue.events.cloudevent import to_json

    return {
        "message_uid": item.message_uid,
        "bus": item.bus,
        "event": to_json(item.event),
        "publish_time": rfc3339(item.publish_time),
    }


def undelivered_json(row: UndeliveredRow) -> dict[str, Any]:
    from txqueue.events.cloudevent import to_json

    item = row.message
    return {
        "message_uid": item.message_uid,
        "bus": item.bus,
        "pipeline": item.pipeline,
        "event": to_json(item.event),
        "publish_time": rfc3339(item.publish_time),
        "attempt_count": item.attempts,
        "status": item.status,
        "error": item.error,
        "error_type": item.error_type,
        "traceback": item.traceback,
        "failure_time": rfc3339(item.failure_time),
        "attempts": [attempt_json(attempt) for attempt in row.attempts],
    }
