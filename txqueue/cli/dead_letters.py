"""``txqueue dead-letters list|show|replay|purge QUEUE``: inspect and act on dead letters.

Keys are written as JSON lists in primary-key order, e.g. ``'[124, "welcome-email"]'``.
"""

from __future__ import annotations

import json
from typing import Any

import click

from txqueue.cli.common import database_option, open_database, run_command
from txqueue.cli.listing import emit, encoded, format_option
from txqueue.cli.text import Column, console, print_table, text
from txqueue.models import DeadLetter, Failure

__all__ = ["dead_letters"]


def _key(text: str) -> tuple[Any, ...]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise click.BadParameter(f"{text!r} is not JSON: {error}", param_hint="KEY") from None
    if not isinstance(value, list):
        raise click.BadParameter(
            f"a key is a JSON list, e.g. '[124, \"x\"]', got {text!r}", param_hint="KEY"
        )
    return tuple(value)


def _payload(payload: Any) -> dict[str, Any]:
    """The payload as listings show it: text when UTF-8, else base64; a JSON value as itself."""
    if isinstance(payload, bytes):
        return encoded("payload", payload)
    if isinstance(payload, str):
        return {"payload": payload, "payload_encoding": "text"}
    return {"payload": payload, "payload_encoding": "json"}


@click.group("dead-letters")
def dead_letters() -> None:
    """Dead letters: messages that failed for good (list, show, replay, purge)."""


@dead_letters.command("list")
@click.argument("queue")
@database_option
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1))
@format_option
def list_command(queue: str, database: str, limit: int, output_format: str) -> None:
    """List the dead letters of QUEUE, oldest failure first (payloads in json and csv)."""
    with open_database(database) as db:
        letters: list[DeadLetter] = run_command(lambda: db.dead_letters(queue, limit=limit))
    emit(output_format, [_record(letter) for letter in letters], lambda: _table(queue, letters))


def _table(queue: str, letters: list[DeadLetter]) -> None:
    columns = [
        Column("key", overflow="fold"),
        Column("attempts", justify="right", no_wrap=True),
        Column("last error", max_width=60),  # wrapped within 60 columns on a terminal
        Column("first failure", no_wrap=True),
        Column("last failure", no_wrap=True),
    ]
    rows = [
        (
            json.dumps(list(letter.key), default=str),
            letter.attempts,
            letter.last_error,
            letter.first_failure.isoformat(timespec="seconds"),
            letter.last_failure.isoformat(timespec="seconds"),
        )
        for letter in letters
    ]
    print_table(
        columns, rows, title=f"dead letters of {queue}", empty=f"no dead letters in {queue}"
    )


@dead_letters.command("show")
@click.argument("queue")
@click.argument("key")
@database_option
@format_option
def show_command(queue: str, key: str, database: str, output_format: str) -> None:
    """Show one dead letter of QUEUE in full, with its failure history (each failed attempt:
    number, time, error type, message and traceback); KEY is a JSON list."""
    wanted = _key(key)
    with open_database(database) as db:
        letters: list[DeadLetter] = run_command(lambda: db.dead_letters(queue, limit=1_000_000))
    found = [letter for letter in letters if _same(letter.key, wanted)]
    if not found:
        raise click.ClickException(f"no dead letter with key {key} in {queue}")
    letter = found[0]
    record = {**_record(letter), "failures": [_failure(f) for f in letter.failures]}
    emit(output_format, [record], lambda: _show(key, letter))


def _show(key: str, letter: DeadLetter) -> None:
    rows = [
        (name, value if isinstance(value, str) else json.dumps(value, default=str))
        for name, value in _record(letter).items()
    ]
    columns = [Column(style="bold"), Column()]
    title = f"dead letter {key} of {letter.queue}"
    print_table(columns, rows, title=title, empty="", show_header=False)
    history = [
        (f.attempt, f.failed_at.isoformat(timespec="seconds"), f.error_type, f.message)
        for f in letter.failures
    ]
    failure_columns = [
        Column("attempt", justify="right", no_wrap=True),
        Column("failed at", no_wrap=True),
        Column("type"),
        Column("message", max_width=60),
    ]
    print_table(failure_columns, history, title="failures, oldest first", empty="no failures")
    output = console()
    for failure in letter.failures:
        if failure.traceback:
            output.print(text(f"traceback of attempt {failure.attempt}:", style="bold"))
            for line in failure.traceback.splitlines():  # each line escaped, none cut
                output.print(text(line), overflow="ignore", crop=False, soft_wrap=True)


def _failure(failure: Failure) -> dict[str, Any]:
    return {
        "attempt": failure.attempt,
        "failed_at": failure.failed_at.isoformat(),
        "error_type": failure.error_type,
        "message": failure.message,
        "traceback": failure.traceback,
    }


@dead_letters.command("replay")
@click.argument("queue")
@click.argument("keys", nargs=-1)
@database_option
@click.option("--all", "everything", is_flag=True, help="Replay every dead letter of QUEUE.")
def replay_command(queue: str, keys: tuple[str, ...], database: str, everything: bool) -> None:
    """Send dead letters (KEYS as JSON lists, or --all) back to QUEUE as new messages."""
    selected = _selection(keys, everything)
    with open_database(database) as db:
        count = run_command(lambda: db.replay_dead_letters(queue, selected))
    click.echo(f"replayed {count} dead letter(s) to {queue}")


@dead_letters.command("purge")
@click.argument("queue")
@click.argument("keys", nargs=-1)
@database_option
@click.option("--all", "everything", is_flag=True, help="Delete every dead letter of QUEUE.")
def purge_command(queue: str, keys: tuple[str, ...], database: str, everything: bool) -> None:
    """Delete dead letters (KEYS as JSON lists, or --all) of QUEUE for good."""
    selected = _selection(keys, everything)
    with open_database(database) as db:
        count = run_command(lambda: db.purge_dead_letters(queue, selected))
    click.echo(f"purged {count} dead letter(s) of {queue}")


def _selection(keys: tuple[str, ...], everything: bool) -> list[tuple[Any, ...]] | None:
    if everything and keys:
        raise click.UsageError("give KEYS or --all, not both")
    if not everything and not keys:
        raise click.UsageError("give the KEYS to act on (JSON lists), or --all")
    return None if everything else [_key(text) for text in keys]


def _same(key: tuple[Any, ...], wanted: tuple[Any, ...]) -> bool:
    return json.dumps(list(key), default=str) == json.dumps(list(wanted), default=str)


def _record(letter: DeadLetter) -> dict[str, Any]:
    return {
        "queue": letter.queue,
        "key": list(letter.key),
        "attempts": letter.attempts,
        "last_error": letter.last_error,
        "first_failure": letter.first_failure.isoformat(),
        "last_failure": letter.last_failure.isoformat(),
        **_payload(letter.payload),
    }
