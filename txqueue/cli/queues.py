"""``txqueue queues``: every queue with its ready / leased / scheduled / dead-letter counts."""

from __future__ import annotations

import click

from txqueue.cli.common import database_option, open_database, run_command
from txqueue.cli.listing import emit, format_option
from txqueue.cli.text import Column, print_table, text
from txqueue.core.url import redact_url
from txqueue.models import QueueInfo

__all__ = ["queues"]


@click.command()
@database_option
@format_option
def queues(database: str, output_format: str) -> None:
    """List queues with ready, leased, scheduled and dead-letter counts and the oldest age."""
    with open_database(database) as db:
        infos: list[QueueInfo] = run_command(
            lambda: [db.queue_info(table.name) for table in db.queues()]
        )
    records = [
        {
            "name": info.name,
            "ready": info.ready,
            "leased": info.leased,
            "scheduled": info.scheduled,
            "dead_letters": info.dead_letters,
            "oldest_ready_age_seconds": info.oldest_ready_age_seconds,
        }
        for info in infos
    ]
    fields = ["name", "ready", "leased", "scheduled", "dead_letters", "oldest_ready_age_seconds"]
    emit(output_format, records, lambda: _table(database, infos), fields)


def _table(database: str, infos: list[QueueInfo]) -> None:
    headings = ("ready", "leased", "scheduled", "dead letters", "oldest ready")
    columns = [Column("queue"), *(Column(heading, justify="right") for heading in headings)]
    rows = [
        (
            info.name,
            info.ready,
            info.leased,
            info.scheduled,
            text(info.dead_letters, style="red") if info.dead_letters else 0,
            "-" if info.oldest_ready_age_seconds is None else _age(info.oldest_ready_age_seconds),
        )
        for info in infos
    ]
    print_table(columns, rows, title=f"queues in {redact_url(database)}", empty="no queues")


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
