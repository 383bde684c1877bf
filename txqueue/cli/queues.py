"""``txqueue queues``: every queue with its ready / leased / scheduled / dead-letter counts
and whether it is paused; ``txqueue queues pause|resume NAME`` pauses and resumes one."""

from __future__ import annotations

import click
from click.core import ParameterSource

from txqueue.cli.common import database_option, open_database, run_command
from txqueue.cli.listing import emit, format_option
from txqueue.cli.text import Column, print_table, text
from txqueue.core.url import redact_url
from txqueue.models import QueueInfo

__all__ = ["queues"]


@click.group(invoke_without_command=True)
@database_option
@format_option
@click.pass_context
def queues(context: click.Context, database: str, output_format: str) -> None:
    """List queues with ready, leased, scheduled and dead-letter counts, the oldest age and
    whether each is paused; pause or resume one."""
    if context.invoked_subcommand is not None:
        return
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
            "paused": info.paused,
        }
        for info in infos
    ]
    fields = [
        "name",
        "ready",
        "leased",
        "scheduled",
        "dead_letters",
        "oldest_ready_age_seconds",
        "paused",
    ]
    emit(output_format, records, lambda: _table(database, infos), fields)


def _table(database: str, infos: list[QueueInfo]) -> None:
    headings = ("ready", "leased", "scheduled", "dead letters", "oldest ready")
    columns = [
        Column("queue"),
        *(Column(heading, justify="right") for heading in headings),
        Column("state"),
    ]
    rows = [
        (
            info.name,
            info.ready,
            info.leased,
            info.scheduled,
            text(info.dead_letters, style="red") if info.dead_letters else 0,
            "-" if info.oldest_ready_age_seconds is None else _age(info.oldest_ready_age_seconds),
            text("paused", style="yellow") if info.paused else "running",
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


@queues.command("pause")
@click.argument("name")
@database_option
@click.pass_context
def pause(context: click.Context, name: str, database: str) -> None:
    """Pause queue NAME: it still accepts sends; no worker or receive leases from it."""
    with open_database(_database(context, database)) as db:
        run_command(lambda: db.pause_queue(name))
    click.echo(f"paused {name}")


@queues.command("resume")
@click.argument("name")
@database_option
@click.pass_context
def resume(context: click.Context, name: str, database: str) -> None:
    """Resume queue NAME: receives lease from it again."""
    with open_database(_database(context, database)) as db:
        run_command(lambda: db.resume_queue(name))
    click.echo(f"resumed {name}")


def _database(context: click.Context, database: str) -> str:
    """The subcommand's --database, else the one given before it (``queues --database URL
    pause NAME``)."""
    parent = context.parent
    if (
        parent is not None
        and context.get_parameter_source("database") is ParameterSource.DEFAULT
        and parent.get_parameter_source("database") is not ParameterSource.DEFAULT
    ):
        return str(parent.params["database"])
    return database
