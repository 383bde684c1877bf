"""The event layer's tables and the rows it reads back.

Four internal tables (created with ``ensure_internal_tables``, names reserved to txqueue):

- ``txqueue_event_config``: one row per bus, pipeline and enrollment (config as JSON);
- ``txqueue_event_deliveries``: a queue, one message per (pipeline, message_uid) to deliver;
- ``txqueue_event_messages``: the archive, one row per published message;
- ``txqueue_event_attempts``: the attempt log, one row per delivery attempt.

Writes go through mutations. Reads (and the archive's purge) are GoogleSQL with ``@name``
parameters, run through the faces' ``execute_internal_sql`` / ``execute_internal_update``,
which translate them for every engine (TIMESTAMP values included).

An attempt-log row of a failed attempt keeps what it failed with: ``error`` (the text, as
before), ``error_type`` and ``traceback`` (columns added later: `ensure_internal_tables`
adds them to a table made before). `HTTP_ERROR` and `REFUSED` say what an error type names.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from txqueue.core.schema import Column, ColumnType, Table
from txqueue.events.cloudevent import CloudEvent, from_json
from txqueue.events.matching import prepare
from txqueue.events.resources import (
    BUS,
    ENROLLMENT,
    PIPELINE,
    Bus,
    Enrollment,
    Pipeline,
    Resource,
    decode_resource,
)

__all__ = [
    "ATTEMPTS",
    "CONFIG",
    "DELIVERIES",
    "HTTP_ERROR",
    "MESSAGES",
    "REFUSED",
    "TABLES",
    "ArchivedMessage",
    "Catalog",
    "Delivery",
    "DeliveryAttempt",
    "UndeliveredMessage",
    "read_time",
]

CONFIG = "txqueue_event_config"
DELIVERIES = "txqueue_event_deliveries"
MESSAGES = "txqueue_event_messages"
ATTEMPTS = "txqueue_event_attempts"

#: ``error_type`` of an attempt the receiver answered with a failing status (``http.503``):
#: no traceback; ``error`` holds the status line and the start of the body. An attempt that
#: raised (connection refused, timeout, a failed write to a bus or queue) has the exception's
#: qualified type instead (``httpx.ConnectError``) and its traceback.
HTTP_ERROR = "http.{status}"
#: ``error_type`` of a delivery refused before it was sent, by a check that raised nothing
#: (pipeline deleted, routing loop, payload not matching the pipeline's format or schema,
#: an enrollment's condition not evaluated): ``error`` says which.
REFUSED = "refused"

_S, _T, _I, _F = ColumnType.STRING, ColumnType.TIMESTAMP, ColumnType.INT64, ColumnType.FLOAT64


def _columns(*spec: tuple[str, ColumnType, bool]) -> tuple[Column, ...]:
    return tuple(Column(name, kind, nullable) for name, kind, nullable in spec)


TABLES = (
    Table(
        CONFIG,
        _columns(
            ("kind", _S, False),
            ("name", _S, False),
            ("config", _S, False),
            ("create_time", _T, False),
            ("update_time", _T, False),
        ),
        ("kind", "name"),
    ),
    Table(
        DELIVERIES,
        _columns(("pipeline", _S, False), ("message_uid", _S, False), ("payload", _S, False)),
        ("pipeline", "message_uid"),
        is_queue=True,
    ),
    Table(
        MESSAGES,
        _columns(
            ("message_uid", _S, False),
            ("bus", _S, False),
            ("event_id", _S, False),
            ("event_source", _S, False),
            ("event_type", _S, False),
            ("event", _S, False),
            ("publish_time", _T, False),
            ("replay_of", _S, True),
        ),
        ("message_uid",),
    ),
    Table(
        ATTEMPTS,
        _columns(
            ("message_uid", _S, False),
            ("pipeline", _S, False),
            ("attempt", _I, False),
            ("bus", _S, False),
            ("attempt_time", _T, False),
            ("state", _S, False),
            ("outcome", _S, True),
            ("status", _I, True),
            ("error", _S, True),
            ("latency_seconds", _F, True),
            ("retry_delay_seconds", _F, True),
            ("error_type", _S, True),
            ("traceback", _S, True),
        ),
        ("message_uid", "pipeline", "attempt"),
    ),
)

#: Columns of an attempt-log row, in the order `DeliveryAttempt.row` gives them.
ATTEMPT_COLUMNS = tuple(c.name for c in TABLES[3].columns)
MESSAGE_COLUMNS = tuple(c.name for c in TABLES[2].columns)


def read_time(value: datetime) -> datetime:
    """A TIMESTAMP as read back through the faces, in UTC."""
    return value.astimezone(timezone.utc)


@dataclass(frozen=True)
class Delivery:
    """The payload of one delivery message: the event, its bus, and attempts made so far.

    ``hops`` counts bus-to-bus forwards, so a pipeline loop ends instead of running forever.
    ``http`` is the event already in HTTP binary mode (headers, body), made once at publish
    for every route, so an attempt to an HTTP destination neither parses the event nor
    encodes it again; None in payloads written before it existed.
    """

    bus: str
    event: dict[str, Any]
    attempts: int = 0
    hops: int = 0
    http: tuple[dict[str, str], bytes] | None = None

    def encode(self) -> str:
        data: dict[str, Any] = {
            "bus": self.bus,
            "event": self.event,
            "attempts": self.attempts,
            "hops": self.hops,
        }
        if self.http is not None:
            headers, body = self.http
            data["headers"] = headers
            try:
                data["body"] = body.decode()
            except UnicodeDecodeError:
                data["body_base64"] = base64.b64encode(body).decode()
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def decode(cls, payload: str) -> Delivery:
        data = json.loads(payload)
        http = None
        headers = data.get("headers")
        if isinstance(headers, dict):
            if "body" in data:
                http = (headers, data["body"].encode())
            else:
                http = (headers, base64.b64decode(data["body_base64"]))
        attempts, hops = int(data["attempts"]), int(data.get("hops", 0))
        return cls(data["bus"], data["event"], attempts, hops, http)


@dataclass(frozen=True)
class DeliveryAttempt:
    """One row of the attempt log.

    ``state`` is what the attempt left behind: ``delivered``, ``retrying`` (another attempt
    follows after ``retry_delay``), ``failed`` (for good) or ``replayed`` (a marker written
    when an undelivered message is republished). ``pipeline`` is empty for a message that no
    enrollment matched. ``outcome`` is ``success``, ``transient`` or ``permanent``.
    A failed attempt's ``error_type`` names what it failed with (see `HTTP_ERROR`) and
    ``traceback`` is the exception's (its end, within 8 KiB), when one was raised; both are
    None in rows written before they were kept, and ``traceback`` in attempts older than the
    newest ten of a delivery.
    """

    message_uid: str
    pipeline: str
    attempt: int
    bus: str
    time: datetime
    state: str
    outcome: str | None
    status: int | None
    error: str | None
    latency: timedelta | None
    retry_delay: timedelta | None = None
    error_type: str | None = None
    traceback: str | None = None

    def row(self) -> tuple[Any, ...]:
        return (
            self.message_uid,
            self.pipeline,
            self.attempt,
            self.bus,
            self.time,
            self.state,
            self.outcome,
            self.status,
            self.error,
            None if self.latency is None else self.latency.total_seconds(),
            None if self.retry_delay is None else self.retry_delay.total_seconds(),
            self.error_type,
            self.traceback,
        )

    @classmethod
    def from_row(cls, row: Any) -> DeliveryAttempt:
        """From a row of ``SELECT`` `ATTEMPT_COLUMNS` (read through the faces)."""
        latency, delay = row[9], row[10]
        return cls(
            row[0],
            row[1],
            int(row[2]),
            row[3],
            read_time(row[4]),
            row[5],
            row[6],
            None if row[7] is None else int(row[7]),
            row[8],
            None if latency is None else timedelta(seconds=latency),
            None if delay is None else timedelta(seconds=delay),
            row[11],
            row[12],
        )


@dataclass(frozen=True)
class ArchivedMessage:
    """One archived message: what a bus received, under the uid of that publish."""

    message_uid: str
    bus: str
    event: CloudEvent
    publish_time: datetime
    replay_of: str | None

    @classmethod
    def from_row(cls, row: Any) -> ArchivedMessage:
        # row: message_uid, bus, event_id, event_source, event_type, event, publish_time, ...
        return cls(row[0], row[1], from_json(json.loads(row[5])), read_time(row[6]), row[7])


@dataclass(frozen=True)
class UndeliveredMessage:
    """An archived message whose delivery to ``pipeline`` failed for good, with the last failure.

    ``pipeline`` is empty when no enrollment matched the message (a failure before routing).
    ``error_type`` and ``traceback`` are the last failure's (see `DeliveryAttempt`).
    """

    message_uid: str
    bus: str
    pipeline: str
    event: CloudEvent
    publish_time: datetime
    attempts: int
    status: int | None
    error: str | None
    failure_time: datetime
    error_type: str | None = None
    traceback: str | None = None


class Catalog:
    """Every bus, pipeline and enrollment at one moment, indexed for routing."""

    def __init__(self, resources: list[Resource]) -> None:
        self.buses: dict[str, Bus] = {}
        self.pipelines: dict[str, Pipeline] = {}
        self.enrollments: dict[str, Enrollment] = {}
        for resource in resources:
            if isinstance(resource, Bus):
                self.buses[resource.name] = resource
            elif isinstance(resource, Pipeline):
                self.pipelines[resource.name] = resource
            else:
                self.enrollments[resource.name] = resource

    @classmethod
    def from_rows(cls, rows: Any) -> Catalog:
        """From rows of `CONFIG_QUERY` (read through the faces)."""
        return cls(
            [
                decode_resource(kind, name, config, read_time(made), read_time(changed))
                for kind, name, config, made, changed in rows
                if kind in (BUS, PIPELINE, ENROLLMENT)
            ]
        )

    def of(self, kind: str) -> dict[str, Any]:
        """The resources of one kind, by name."""
        tables: dict[str, dict[str, Any]] = {
            BUS: self.buses,
            PIPELINE: self.pipelines,
            ENROLLMENT: self.enrollments,
        }
        return tables[kind]

    def routes(self, bus: str, attributes: dict[str, Any]) -> list[str]:
        """The pipelines that the enrollments of ``bus`` route an event with ``attributes`` to."""
        return self.routing(bus, attributes)[0]

    def routing(
        self, bus: str, attributes: dict[str, Any]
    ) -> tuple[list[str], list[tuple[Enrollment, str]]]:
        """`routes`, and the enrollments whose condition was not evaluated for this event
        (over its cost budget, or refused when loaded), each with the reason."""
        enrollments = [e for e in self.enrollments.values() if e.bus == bus]
        if not enrollments:
            return [], []
        prepared = prepare(attributes)
        routes, refused = set(), []
        for enrollment in enrollments:
            reason = enrollment.condition.refusal(prepared)
            if reason is not None:
                refused.append((enrollment, reason))
            elif enrollment.condition.matches(prepared):
                routes.add(enrollment.pipeline)
        return sorted(routes), sorted(refused, key=lambda item: item[0].name)


CONFIG_QUERY = f"SELECT kind, name, config, create_time, update_time FROM {CONFIG}"
