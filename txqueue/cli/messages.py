"""``txqueue messages list|show|send|delete|ready QUEUE``: look at and act on messages.

A key is written as a JSON list in primary-key order, the same way the dashboard and its HTTP
API write it (``'[124, "welcome-email"]'``; bytes as base64, timestamps as RFC 3339). A
selection is the keys given: ``delete`` and ``ready`` change all of them or none, and refuse a
message under a live lease (its worker is at it) unless ``--force``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

import txqueue
from txqueue.cli.common import database_option, duration_value, open_database, run_command
from txqueue.cli.listing import emit, encoded, format_option
from txqueue.cli.text import Column, print_table
from txqueue.core.keys import key_to_json, load_json, parse_key
from txqueue.core.schema import ColumnType, Table
from txqueue.errors import InvalidArgument
from txqueue.models import StoredMessage

__all__ = ["messages"]

#: The most messages one read of ``list`` asks for (the API's page limit).
PAGE = 1000
STATES = ("ready", "leased", "scheduled")


@click.group("messages")
def messages() -> None:
    """Messages of a queue: list, show, send, delete (cancel), make ready."""


@messages.command("list")
@click.argument("queue")
@database_option
@click.option("--state", type=click.Choice(STATES), default=None, help="Only messages in it.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1))
@format_option
def list_command(
    queue: str, database: str, state: str | None, limit: int, output_format: str
) -> None:
    """List the messages of QUEUE in key order, without leasing them."""
    with open_database(database) as db:
        table, found = run_command(lambda: _listed(db, queue, state, limit))
    records = [_record(table, message, payload=False) for message in found]
    fields = ["key", "state", "deliver_time", "delivery_count", "lease_expiration", "last_error"]
    emit(output_format, records, lambda: _table(queue, table, found), fields)


def _listed(
    db: txqueue.Database, queue: str, state: str | None, limit: int
) -> tuple[Table, list[StoredMessage]]:
    table = db.queue(queue)
    found: list[StoredMessage] = []
    after = None
    while len(found) < limit:
        wanted = min(PAGE, limit - len(found))
        page = db.list_messages(queue, state=state, after=after, limit=wanted)
        found += page
        if len(page) < wanted:
            break
        after = page[-1].key
    return table, found


def _table(queue: str, table: Table, found: list[StoredMessage]) -> None:
    columns = [
        Column("key", overflow="fold"),
        Column("state", no_wrap=True),
        Column("deliver time", no_wrap=True),
        Column("deliveries", justify="right", no_wrap=True),
        Column("last error", max_width=60),
    ]
    rows = [
        (
            _key_text(table, message.key),
            message.state,
            message.deliver_time.isoformat(timespec="seconds"),
            message.delivery_count,
            message.last_error or "",
        )
        for message in found
    ]
    print_table(columns, rows, title=f"messages of {queue}", empty=f"no messages in {queue}")


@messages.command("show")
@click.argument("queue")
@click.argument("keys", nargs=-1, required=True)
@database_option
@format_option
def show_command(queue: str, keys: tuple[str, ...], database: str, output_format: str) -> None:
    """Show messages of QUEUE in full (KEYS as JSON lists): payload, times, lease."""
    with open_database(database) as db:

        def read() -> tuple[Table, list[StoredMessage]]:
            table = db.queue(queue)
            return table, [db.get_message(queue, parse_key(table, text)) for text in keys]

        table, found = run_command(read)
    records = [_record(table, message) for message in found]

    def tables() -> None:
        for record in records:
            rows = [
                (name, value if isinstance(value, str) else json.dumps(value, default=str))
                for name, value in record.items()
            ]
            title = f"message {json.dumps(record['key'])} of {queue}"
            columns = [Column(style="bold"), Column()]
            print_table(columns, rows, title=title, empty="", show_header=False)

    emit(output_format, records, tables)


@messages.command("send")
@click.argument("queue")
@click.argument("keys", nargs=-1, required=True)
@database_option
@click.option("--payload", "payload_text", default=None, help="The payload, as text.")
@click.option(
    "--payload-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Read the payload from this file (bytes as they are).",
)
@click.option("--deliver-time", default=None, help="When it becomes ready (ISO 8601 with zone).")
@click.option("--delay", default=None, help="Ready after this long (5m, 2h, 1d).")
def send_command(
    queue: str,
    keys: tuple[str, ...],
    database: str,
    payload_text: str | None,
    payload_file: Path | None,
    deliver_time: str | None,
    delay: str | None,
) -> None:
    """Send one message per KEY (JSON lists) to QUEUE with the same payload, in one commit.

    The payload is read as the queue's payload column takes it: bytes, text, or JSON text
    for a JSON column.
    """
    if (payload_text is None) == (payload_file is None):
        raise click.UsageError("give --payload TEXT or --payload-file FILE (one of them)")
    raw = payload_file.read_bytes() if payload_file is not None else str(payload_text).encode()
    when = _when(deliver_time, delay)
    with open_database(database, create=True) as db:

        def send() -> int:
            table = db.queue(queue)
            chosen = [parse_key(table, text) for text in keys]
            payload = _payload(table, raw)
            with db.batch() as batch:
                for key in chosen:
                    batch.send(queue, key, payload, deliver_time=when)
            return len(chosen)

        count = run_command(send)
    click.echo(f"sent {count} message(s) to {queue}")


@messages.command("delete")
@click.argument("queue")
@click.argument("keys", nargs=-1, required=True)
@database_option
@click.option("--force", is_flag=True, help="Delete leased messages too (their ack then fails).")
def delete_command(queue: str, keys: tuple[str, ...], database: str, force: bool) -> None:
    """Delete (cancel) the messages of QUEUE with KEYS (JSON lists): all of them or none."""
    with open_database(database) as db:
        count = run_command(
            lambda: db.delete_messages(queue, _keys(db, queue, keys), force=force),
            {"force": "--force"},
        )
    click.echo(f"deleted {count} message(s) of {queue}")


@messages.command("ready")
@click.argument("queue")
@click.argument("keys", nargs=-1, required=True)
@database_option
@click.option("--deliver-time", default=None, help="Ready at this time instead (ISO 8601).")
@click.option("--delay", default=None, help="Ready after this long instead (5m, 2h, 1d).")
@click.option("--force", is_flag=True, help="End a live lease too (its ack then fails).")
def ready_command(
    queue: str,
    keys: tuple[str, ...],
    database: str,
    deliver_time: str | None,
    delay: str | None,
    force: bool,
) -> None:
    """Make the messages of QUEUE with KEYS (JSON lists) ready now, or at another time;
    scheduled and backed-off messages alike, all of them or none."""
    when = _when(deliver_time, delay)
    with open_database(database) as db:
        count = run_command(
            lambda: db.make_ready(queue, _keys(db, queue, keys), deliver_time=when, force=force),
            {"force": "--force"},
        )
    moment = "now" if when is None else f"at {when.isoformat()}"
    click.echo(f"{count} message(s) of {queue} ready {moment}")


def _keys(db: txqueue.Database, queue: str, texts: tuple[str, ...]) -> list[tuple[Any, ...]]:
    table = db.queue(queue)
    return [parse_key(table, text, f"KEY {text}") for text in texts]


def _when(deliver_time: str | None, delay: str | None) -> datetime | None:
    """``--deliver-time`` or ``--delay`` as a time (None: now)."""
    if deliver_time is not None and delay is not None:
        raise click.UsageError("give --deliver-time or --delay, not both")
    if delay is not None:
        return datetime.now(timezone.utc) + duration_value(delay, "--delay")
    if deliver_time is None:
        return None
    try:
        moment = datetime.fromisoformat(deliver_time.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise click.BadParameter(
            f"{deliver_time!r} is not an ISO 8601 time with a zone (e.g. 2026-12-24T18:00Z)",
            param_hint="--deliver-time",
        )
    return moment


def _payload(table: Table, raw: bytes) -> Any:
    """The payload as the queue's payload column takes it: bytes, text or a JSON value."""
    column = table.payload_column
    if column.type is ColumnType.BYTES:
        return raw
    try:
        text = raw.decode("utf-8")
        return load_json(text, "payload") if column.type is ColumnType.JSON else text
    except ValueError as error:  # not UTF-8, or not JSON
        kind = "JSON" if column.type is ColumnType.JSON else "UTF-8 text"
        raise InvalidArgument(f"payload of {table.name} must be {kind}: {error}") from None


def _key_text(table: Table, key: tuple[Any, ...]) -> str:
    return json.dumps(key_to_json(table, key), ensure_ascii=False)


def _record(table: Table, message: StoredMessage, payload: bool = True) -> dict[str, Any]:
    record: dict[str, Any] = {
        "queue": message.queue,
        "key": key_to_json(table, message.key),
        "state": message.state,
        "deliver_time": message.deliver_time.isoformat(),
        "delivery_count": message.delivery_count,
        "lease_expiration": None
        if message.lease_expiration is None
        else message.lease_expiration.isoformat(),
        "last_error": message.last_error,
    }
    if payload:
        record.update(_shown_payload(message.payload))
    return record


def _shown_payload(payload: Any) -> dict[str, Any]:
    """The payload as every listing shows it: text when UTF-8, else base64; JSON as itself."""
    if isinstance(payload, bytes):
        return encoded("payload", payload)
    if isinstance(payload, str):
        return {"payload": payload, "payload_encoding": "text"}
    return {"payload": payload, "payload_encoding": "json"}
