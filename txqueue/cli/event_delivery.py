"""``txqueue events ...`` and ``txqueue dispatcher``: publish, inspect, replay, deliver.

Shaped after ``gcloud eventarc message-buses publish`` (``--event-type``, ``--json-message``);
thin over `txqueue.Events` and `txqueue.AsyncDispatcher`.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import click

import txqueue
from txqueue.cli.common import database_option, duration_value, run_command, seconds_value
from txqueue.cli.events import call, json_option
from txqueue.cli.events import since as parse_since
from txqueue.cli.listing import emit, format_option, formats
from txqueue.cli.text import Column, print_table
from txqueue.core.text import printable
from txqueue.core.url import redact_url
from txqueue.events.cloudevent import to_json
from txqueue.worker import configure_logging

__all__ = ["dispatcher", "events"]


# ---- events --------------------------------------------------------------------------------


@click.group()
def events() -> None:
    """Publish events; list archived and undelivered ones, replay and purge them."""


@events.command("publish")
@click.argument("bus")
@database_option
@click.option("--event-id", help="The event id (default: a new UUID).")
@click.option("--event-type", help="The event type, e.g. com.shop.order.paid.")
@click.option("--event-source", help="The event source, e.g. //shop.")
@click.option("--event-data", help="JSON data (an object, or any JSON value).")
@click.option(
    "--event-attributes", multiple=True, help="Extension attribute NAME=VALUE (repeatable)."
)
@click.option("--json-message", help="The whole event in CloudEvents JSON form (inline or @file).")
def publish(bus: str, database: str, json_message: str | None, **fields: Any) -> None:
    """Publish one event to BUS and print its message_uid."""
    if json_message is not None:
        document = json_option(json_message, "--json-message")
    else:
        if not fields["event_type"] or not fields["event_source"]:
            raise click.UsageError("give --event-type and --event-source, or --json-message")
        document = {
            "id": fields["event_id"] or str(uuid.uuid4()),
            "type": fields["event_type"],
            "source": fields["event_source"],
        }
        for item in fields["event_attributes"]:
            key, sep, value = item.partition("=")
            if not sep:
                raise click.BadParameter(
                    f"{item!r} is not NAME=VALUE", param_hint="--event-attributes"
                )
            document[key] = value
        if fields["event_data"] is not None:
            document["data"] = json_option(fields["event_data"], "--event-data")
    click.echo(call(database, lambda e: e.publish(bus, document)))


_filters = [
    click.option("--bus", help="Only messages of this bus."),
    click.option("--pipeline", help='Only this pipeline ("" for messages no enrollment matched).'),
    click.option("--since", help="Published at or after: ISO 8601 time or a duration back (2h)."),
    click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True),
]


def _filtered(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_filters):
        function = option(function)
    return function


@events.command("undelivered")
@database_option
@_filtered
@format_option
def undelivered(
    database: str,
    bus: str | None,
    pipeline: str | None,
    since: str | None,
    limit: int,
    output_format: str,
) -> None:
    """Messages whose delivery failed for good: the archive joined with the attempt log.

    Messages that no enrollment matched are not listed (see `events unmatched`) unless
    --pipeline "" asks for them. The last failure's error type is shown; --format json
    gives its traceback too.
    """
    found = call(
        database,
        lambda e: e.undelivered(bus=bus, pipeline=pipeline, since=parse_since(since), limit=limit),
    )
    records = []
    for item in found:
        row = {k: v for k, v in vars(item).items() if k != "event"}
        row.update(
            event=to_json(item.event),
            publish_time=item.publish_time.isoformat(),
            failure_time=item.failure_time.isoformat(),
        )
        records.append(row)
    emit(output_format, records, lambda: _undelivered_table(found))


@events.command("unmatched")
@database_option
@click.option("--bus", help="Only messages of this bus.")
@click.option("--since", help="Published at or after: ISO 8601 time or a duration back (2h).")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True)
@format_option
def unmatched(
    database: str, bus: str | None, since: str | None, limit: int, output_format: str
) -> None:
    """Messages no enrollment matched when they were published (archived buses; not failures)."""
    found = call(database, lambda e: e.unmatched(bus=bus, since=parse_since(since), limit=limit))
    records = [
        {
            "message_uid": item.message_uid,
            "bus": item.bus,
            "event": to_json(item.event),
            "publish_time": item.publish_time.isoformat(),
        }
        for item in found
    ]
    columns = [
        Column("message_uid", no_wrap=True),
        *map(Column, ("bus", "type", "id", "published")),
    ]
    rows = [
        (
            item.message_uid,
            item.bus,
            item.event.get_type(),
            item.event.get_id(),
            item.publish_time.isoformat(),
        )
        for item in found
    ]
    emit(
        output_format,
        records,
        lambda: print_table(
            columns, rows, title="unmatched messages", empty="no unmatched messages"
        ),
    )


def _undelivered_table(found: list[Any]) -> None:
    headings = ("bus", "pipeline", "type", "id", "attempts", "status", "error type")
    columns = [
        Column("message_uid", no_wrap=True),
        *map(Column, headings),
        Column("error", max_width=80),  # wrapped within 80 columns on a terminal
    ]
    rows = [
        (
            item.message_uid,
            item.bus,
            item.pipeline or "(no enrollment)",
            item.event.get_type(),
            item.event.get_id(),
            item.attempts,
            item.status or "-",
            item.error_type or "-",
            item.error or "",
        )
        for item in found
    ]
    print_table(columns, rows, title="undelivered messages", empty="no undelivered messages")


@events.command("archived")
@database_option
@click.option("--bus", help="Only messages of this bus.")
@click.option("--since", help="Published at or after: ISO 8601 time or a duration back (2h).")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True)
@format_option
def archived(
    database: str, bus: str | None, since: str | None, limit: int, output_format: str
) -> None:
    """Archived messages (what buses received), oldest first."""
    found = call(database, lambda e: e.messages(bus=bus, since=parse_since(since), limit=limit))
    records = [
        {
            "message_uid": item.message_uid,
            "bus": item.bus,
            "publish_time": item.publish_time.isoformat(),
            "replay_of": item.replay_of,
            "event": to_json(item.event),
        }
        for item in found
    ]
    columns = [Column("message_uid", no_wrap=True), *map(Column, ("bus", "type", "id"))]
    columns += [Column("published", no_wrap=True), Column("replay of", no_wrap=True)]
    rows = [
        (
            item.message_uid,
            item.bus,
            item.event.get_type(),
            item.event.get_id(),
            item.publish_time.isoformat(timespec="seconds"),
            item.replay_of or "-",
        )
        for item in found
    ]
    emit(
        output_format,
        records,
        lambda: print_table(columns, rows, title="archived messages", empty="no archived messages"),
    )


@events.command("replay")
@database_option
@_filtered
@click.option(
    "--message-uid", "message_uids", multiple=True, help="Only these messages (repeatable)."
)
def replay(
    database: str,
    bus: str | None,
    pipeline: str | None,
    since: str | None,
    limit: int,
    message_uids: tuple[str, ...],
) -> None:
    """Republish undelivered messages, each under a new message_uid, to the failed pipelines."""
    uids = list(message_uids) or None
    new = call(
        database,
        lambda e: e.replay(
            bus=bus, pipeline=pipeline, since=parse_since(since), message_uids=uids, limit=limit
        ),
    )
    for uid in new:
        click.echo(uid)
    click.echo(f"replayed {len(new)} message(s)", err=True)


@events.command("attempts")
@click.argument("message_uid", required=False)
@database_option
@click.option("--pipeline", help="Only attempts of this pipeline.")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True)
@formats(default="json")
def attempts(
    message_uid: str | None, database: str, pipeline: str | None, limit: int, output_format: str
) -> None:
    """The attempt log (of one message), oldest first.

    A failed attempt has its error type (``http.503``, or the exception's type) and, when it
    raised, its traceback (JSON formats; a table leaves it out).
    """
    records = []
    for row in call(database, lambda e: e.attempts(message_uid, pipeline=pipeline, limit=limit)):
        data = {k: v for k, v in vars(row).items()}
        data["time"] = row.time.isoformat()
        for key in ("latency", "retry_delay"):
            data[key] = None if data[key] is None else data[key].total_seconds()
        records.append(data)
    fields = [field for field in records[0] if field != "traceback"] if records else []
    emit(
        output_format,
        records,
        lambda: print_table(
            fields,
            ([record[field] for field in fields] for record in records),
            title="delivery attempts",
            empty="no delivery attempts",
        ),
    )


@events.command("purge")
@database_option
@click.option(
    "--older-than", help="Delete everything older (e.g. 7d); default: each bus's retention."
)
def purge(database: str, older_than: str | None) -> None:
    """Delete archived messages and attempt-log rows past their retention."""
    age = None if older_than is None else duration_value(older_than, "--older-than")
    messages, logged = call(database, lambda e: e.purge(older_than=age))
    click.echo(f"purged {messages} archived message(s) and {logged} attempt-log row(s)")


# ---- dispatcher ----------------------------------------------------------------------------


@click.command()
@database_option
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Attempts in flight.",
)
@click.option(
    "--attempt-timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds one HTTP attempt may take in all; deliveries are leased for twice it plus 5 s.",
)
@click.option(
    "--purge-interval",
    default="10m",
    show_default=True,
    help="How often to purge past retention ('never' to skip).",
)
def dispatcher(
    database: str, concurrency: int, attempt_timeout: float, purge_interval: str
) -> None:
    """Deliver events for every pipeline until SIGINT/SIGTERM (run as many as you like)."""
    interval = (
        None if purge_interval == "never" else duration_value(purge_interval, "--purge-interval")
    )
    timeout = seconds_value(attempt_timeout, "--attempt-timeout")
    # Warnings and errors (failed deliveries, outages) to stderr, each line made printable.
    configure_logging("text", "WARNING")
    stats = run_command(lambda: asyncio.run(_dispatch(database, concurrency, timeout, interval)))
    click.echo(
        f"dispatcher stopped: {stats.attempts} attempt(s), {stats.delivered} delivered, "
        f"{stats.retried} to retry, {stats.failed} failed",
        err=True,
    )


async def _dispatch(
    url: str, concurrency: int, timeout: timedelta, interval: timedelta | None
) -> Any:
    from txqueue.drivers.engines import with_pool_size

    db = await txqueue.connect_async(with_pool_size(url, concurrency + 2))
    try:
        worker = txqueue.AsyncDispatcher(
            db,
            concurrency=concurrency,
            attempt_timeout=timeout,
            purge_interval=interval,
        )
        loop = asyncio.get_running_loop()
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(number, worker.stop)
        await worker.events.ensure_tables()
        print(
            f"dispatcher delivering for {printable(redact_url(url))} (concurrency {concurrency})",
            file=sys.stderr,
            flush=True,
        )
        await worker.run()
        return worker.stats
    finally:
        await db.close()
