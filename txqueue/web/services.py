"""What the dashboard's pages and its HTTP API read and change, as plain functions.

Both faces call these, so a page and the API show the same numbers and validate the same way:
every input goes through the library (which raises InvalidArgument naming the field) before
anything is written. Each function takes the sync `txqueue.Database` (or `txqueue.Events`)
and returns plain dataclasses.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import txqueue
from txqueue.core.keys import (
    key_from_json,
    key_to_json,
    load_json,
    parse_key,
    rfc3339,
    whole_key,
)
from txqueue.core.schema import ColumnType, Table
from txqueue.errors import InvalidArgument
from txqueue.models import DeadLetter

if TYPE_CHECKING:
    from txqueue.events._sync.events import Events
    from txqueue.events.records import DeliveryAttempt, UndeliveredMessage
    from txqueue.events.resources import Bus, Enrollment, Pipeline
    from txqueue.events.unmatched import UnmatchedMessage
    from txqueue.models import StoredMessage
    from txqueue.worker.registry import WorkerInfo

__all__ = [
    "MESSAGE_STATES",
    "MessagePage",
    "PayloadViews",
    "PipelineRow",
    "ThroughputSeries",
    "UndeliveredRow",
    "dead_letters",
    "encode_payload",
    "key_from_json",
    "key_to_json",
    "load_json",
    "message",
    "overview",
    "parse_key",
    "parse_prefix",
    "payload_views",
    "pipeline_row",
    "pipelines",
    "private_choice",
    "purge_dead_letters",
    "queue_page",
    "replay_dead_letters",
    "replay_undelivered",
    "rfc3339",
    "throughput",
    "undelivered",
    "unmatched",
    "unmatched_counts",
    "update_pipeline",
    "whole_key",
    "workers",
]

MESSAGE_STATES = ("ready", "leased", "scheduled")
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


# ---- keys ------------------------------------------------------------------------------------


def parse_prefix(table: Table, text: str | None) -> tuple[Any, ...] | None:
    """The filter's key prefix: a JSON array of leading parts, or plain text matched as the
    start of the first key column (when it is a STRING)."""
    if text is None or not text.strip():
        return None
    stripped = text.strip()
    if stripped.startswith("["):
        return key_from_json(table, _json(stripped, "prefix"), "prefix")
    first = table.key_columns[0]
    if first.type is ColumnType.STRING:
        return (text,)
    try:
        value = load_json(stripped, "prefix") if first.type is not ColumnType.BYTES else stripped
    except ValueError as error:
        raise InvalidArgument(
            f"prefix must be a JSON array of leading key parts, or a value of the first key "
            f"column ({first.name}, {first.type.value}), got {text!r}"
        ) from error
    return key_from_json(table, [value], "prefix")


def _json(text: str, field: str) -> Any:
    try:
        return load_json(text, field)
    except ValueError as error:
        raise InvalidArgument(f"{field} is not JSON: {text!r}") from error


# ---- payloads --------------------------------------------------------------------------------


def encode_payload(payload: Any) -> dict[str, Any]:
    """A payload for JSON: bytes as base64, a STRING as text, a JSON column's value as itself."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return {"encoding": "base64", "value": base64.b64encode(bytes(payload)).decode("ascii")}
    if isinstance(payload, str):
        return {"encoding": "text", "value": payload}
    return {"encoding": "json", "value": payload}


@dataclass(frozen=True, slots=True)
class PayloadViews:
    """A payload three ways; ``json`` is None when it is not JSON."""

    json: str | None
    text: str
    hex: str


def payload_views(payload: Any) -> PayloadViews:
    """The payload as pretty JSON (when it parses), as text (UTF-8, undecodable bytes
    replaced) and as hex bytes."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        raw = bytes(payload)
        text = raw.decode("utf-8", errors="replace")
    elif isinstance(payload, str):
        raw, text = payload.encode("utf-8", errors="surrogatepass"), payload
    else:
        text = json.dumps(payload, ensure_ascii=False)
        raw = text.encode("utf-8")
    pretty: str | None
    try:
        pretty = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = None
    return PayloadViews(pretty, text, raw.hex(" "))


# ---- queues ----------------------------------------------------------------------------------


def overview(database: txqueue.Database) -> list[txqueue.QueueInfo]:
    """Every queue with its counts (estimated where counting would scan millions of rows)."""
    return [_queue_info(database, table.name) for table in database.queues()]


def _queue_info(database: txqueue.Database, name: str) -> txqueue.QueueInfo:
    return database.queue_info(name, estimate=True)


@dataclass(frozen=True, slots=True)
class ThroughputSeries:
    """Messages handled per minute (all queues, or one), oldest minute first, gaps as 0."""

    minutes: list[datetime]
    handled: list[int]
    failed: list[int]
    dead_lettered: list[int]


def throughput(
    database: txqueue.Database, *, since: timedelta = timedelta(hours=1), queue: str | None = None
) -> ThroughputSeries:
    """The worker registry's per-minute counts over ``since``, one point per minute."""
    from txqueue.worker import registry

    samples = registry.throughput(database, since=since, queue=queue)
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    count = max(1, int(since.total_seconds() // 60))
    minutes = [now - timedelta(minutes=count - 1 - index) for index in range(count)]
    slot = {minute: index for index, minute in enumerate(minutes)}
    handled, failed, dead = [0] * count, [0] * count, [0] * count
    for sample in samples:
        minute = sample.minute.astimezone(timezone.utc).replace(second=0, microsecond=0)
        index = slot.get(minute)
        if index is None:
            continue
        handled[index] += sample.handled
        failed[index] += sample.failed
        dead[index] += sample.dead_lettered
    return ThroughputSeries(minutes, handled, failed, dead)


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of a queue's messages in key order; ``next_after`` is None on the last."""

    queue: str
    table: Table
    messages: list[StoredMessage]
    next_after: tuple[Any, ...] | None


def queue_page(
    database: txqueue.Database,
    name: str,
    prefix: tuple[Any, ...] | None = None,
    state: str | None = None,
    after: tuple[Any, ...] | None = None,
    limit: int = DEFAULT_PAGE_SIZE,
) -> MessagePage:
    """A page of messages after the key ``after`` (keyset paging, never OFFSET)."""
    table = database.queue(name)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidArgument(f"limit must be an integer from 1 to {MAX_PAGE_SIZE}, got {limit!r}")
    if state is not None and state not in MESSAGE_STATES:
        raise InvalidArgument(f"state must be one of {', '.join(MESSAGE_STATES)}, got {state!r}")
    fetch = min(limit + 1, MAX_PAGE_SIZE)  # one more tells whether a next page exists
    found = database.list_messages(
        table.name, state=state, key_prefix=prefix, after=after, limit=fetch
    )
    more = len(found) > limit or (fetch == limit and len(found) == limit)
    shown = found[:limit]
    return MessagePage(table.name, table, shown, shown[-1].key if more and shown else None)


def message(database: txqueue.Database, name: str, key: tuple[Any, ...]) -> StoredMessage:
    """One message by key; NotFound when it is not (or no longer) there."""
    return database.get_message(name, key)


def dead_letters(
    database: txqueue.Database, name: str, limit: int = MAX_PAGE_SIZE
) -> list[DeadLetter]:
    """A queue's dead letters, oldest failure first."""
    return database.dead_letters(name, limit=limit)


def replay_dead_letters(
    database: txqueue.Database, name: str, keys: list[tuple[Any, ...]] | None
) -> int:
    """Send dead letters (those with ``keys``, or all) back to the queue; how many went."""
    if keys is not None and not keys:
        raise InvalidArgument("keys must name at least one dead letter (or leave it out: all)")
    return database.replay_dead_letters(name, keys)


def purge_dead_letters(
    database: txqueue.Database, name: str, keys: list[tuple[Any, ...]] | None
) -> int:
    """Delete dead letters (those with ``keys``, or all) for good; how many were deleted."""
    if keys is not None and not keys:
        raise InvalidArgument("keys must name at least one dead letter (or leave it out: all)")
    return database.purge_dead_letters(name, keys)


def workers(database: txqueue.Database) -> list[WorkerInfo]:
    """The live workers, as the worker registry knows them."""
    from txqueue.worker import registry

    return list(registry.workers(database))


# ---- events ----------------------------------------------------------------------------------


def buses(events: Events) -> list[Bus]:
    """Every bus."""
    return events.list_buses()


def enrollments(events: Events, bus: str | None = None) -> list[Enrollment]:
    """Every enrollment (of ``bus``)."""
    return events.list_enrollments(bus)


@dataclass(frozen=True, slots=True)
class PipelineRow:
    """A pipeline as shown: its signing secret only as whether one is set."""

    name: str
    destination: str
    max_attempts: int
    min_retry_delay: timedelta
    max_retry_delay: timedelta
    input_payload_format: str | None
    has_json_schema: bool
    secret_set: bool
    allow_private: bool
    create_time: datetime | None
    update_time: datetime | None


def pipeline_row(pipeline: Pipeline) -> PipelineRow:
    """A pipeline without its secret."""
    return PipelineRow(
        pipeline.name,
        str(pipeline.destination),
        pipeline.retry.max_attempts,
        pipeline.retry.min_retry_delay,
        pipeline.retry.max_retry_delay,
        pipeline.input_payload_format,
        pipeline.json_schema is not None,
        pipeline.signing_secret is not None,
        pipeline.allow_private,
        pipeline.create_time,
        pipeline.update_time,
    )


def pipelines(events: Events) -> list[PipelineRow]:
    """Every pipeline, secrets hidden."""
    return [pipeline_row(pipeline) for pipeline in events.list_pipelines()]


def seconds(value: Any, field: str) -> timedelta | None:
    """A duration given in seconds (number or numeric text; empty or None: unchanged)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise InvalidArgument(f"{field} must be a number of seconds, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"{field} must be a number of seconds, got {value!r}") from error
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidArgument(f"{field} must be a finite number of seconds, got {value!r}")
    if number <= 0:
        raise InvalidArgument(f"{field} must be more than 0 seconds, got {value!r}")
    try:
        return timedelta(seconds=number)
    except OverflowError as error:
        raise InvalidArgument(f"{field} is too large: {value!r}") from error


def whole_number(value: Any, field: str) -> int | None:
    """An integer given as a number or text (empty or None: unchanged)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise InvalidArgument(f"{field} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError as error:
            raise InvalidArgument(f"{field} must be an integer, got {value!r}") from error
    raise InvalidArgument(f"{field} must be an integer, got {value!r}")


#: Why a dashboard request may not set allow_private without the operator's switch.
PRIVATE_SWITCH_NEEDED = (
    "allow_private: true is refused: only the operator can allow private destinations, by "
    "starting the dashboard with --allow-private-destinations "
    "(create_app(..., allow_private_destinations=True))"
)


def private_choice(
    events: Events,
    name: str | None,
    destination: str | None,
    requested: bool | None,
    switch: bool,
) -> bool | None:
    """The ``allow_private`` a dashboard request creating (``name`` None) or changing the
    pipeline ``name`` passes on (None: keep the stored one).

    Only the operator's ``switch`` lets a request ask for true. A new destination without
    ``allow_private: true`` is checked as a public one and recorded so: an allowance the
    operator gave one destination never carries over to another a client chose."""
    if requested and not switch:
        raise InvalidArgument(PRIVATE_SWITCH_NEEDED)
    if requested is not None or name is None:
        return bool(requested)
    if destination is None or destination == str(events.get_pipeline(name).destination):
        return None
    return False


def update_pipeline(
    events: Events,
    name: str,
    *,
    destination: str | None = None,
    max_attempts: Any = None,
    min_retry_delay: Any = None,
    max_retry_delay: Any = None,
) -> PipelineRow:
    """Change a pipeline's destination and retry policy (the pipeline page's form); every
    field is checked before anything is saved, and a new destination is checked as a public
    one (`private_choice`)."""
    if destination is not None and not isinstance(destination, str):
        raise InvalidArgument(f"destination must be a string, got {destination!r}")
    given = destination.strip() if destination and destination.strip() else None
    changed = events.update_pipeline(
        name,
        destination=given,
        max_attempts=whole_number(max_attempts, "max_attempts"),
        min_retry_delay=seconds(min_retry_delay, "min_retry_delay"),
        max_retry_delay=seconds(max_retry_delay, "max_retry_delay"),
        allow_private=private_choice(events, name, given, None, False),
    )
    return pipeline_row(changed)


@dataclass(frozen=True, slots=True)
class UndeliveredRow:
    """A message a pipeline gave up on, with that pipeline's attempt log for it."""

    message: UndeliveredMessage
    attempts: list[DeliveryAttempt]


def undelivered(
    events: Events,
    *,
    bus: str | None = None,
    pipeline: str | None = None,
    limit: int = MAX_PAGE_SIZE,
) -> list[UndeliveredRow]:
    """Undelivered messages, oldest first, each with its attempts."""
    rows = []
    for item in events.undelivered(bus=bus, pipeline=pipeline, limit=limit):
        log = events.attempts(item.message_uid, pipeline=item.pipeline or None)
        rows.append(UndeliveredRow(item, log))
    return rows


def unmatched(
    events: Events, *, bus: str | None = None, limit: int = MAX_PAGE_SIZE
) -> list[UnmatchedMessage]:
    """Messages no enrollment matched when they were published, oldest first (not failures)."""
    return events.unmatched(bus=bus, limit=limit)


def unmatched_counts(events: Events, *, limit: int = MAX_PAGE_SIZE) -> dict[str, int]:
    """How many unmatched messages each bus has (of the oldest ``limit``)."""
    counts: dict[str, int] = {}
    for item in events.unmatched(limit=limit):
        counts[item.bus] = counts.get(item.bus, 0) + 1
    return counts


def replay_undelivered(
    events: Events,
    message_uids: list[str] | None,
    *,
    bus: str | None = None,
    pipeline: str | None = None,
) -> list[str]:
    """Republish undelivered messages (those with ``message_uids``, or all); the new uids."""
    if message_uids is not None:
        if not message_uids:
            raise InvalidArgument("message_uids must name at least one message (or leave it out)")
        for index, uid in enumerate(message_uids):
            if not isinstance(uid, str) or not uid:
                raise InvalidArgument(f"message_uids[{index}] must be a non-empty string")
    return events.replay(bus=bus, pipeline=pipeline, message_uids=message_uids)


# ---- pages (added by the pages' author) --------------------------------------------------------


def throughput_totals(
    database: txqueue.Database, *, since: timedelta = timedelta(hours=1)
) -> dict[str, tuple[int, int]]:
    """Each queue's messages handled and failed over ``since`` (one registry read for all)."""
    from txqueue.worker import registry

    totals: dict[str, tuple[int, int]] = {}
    for sample in registry.throughput(database, since=since):
        handled, failed = totals.get(sample.queue, (0, 0))
        totals[sample.queue] = (handled + sample.handled, failed + sample.failed)
    return totals
