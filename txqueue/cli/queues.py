"""``txqueue queues``: every queue with its ready / leased / scheduled / dead-letter counts."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from txqueue.cli.common import database_option, open_database, run_command
from txqueue.models import QueueInfo

__all__ = ["queues"]


@click.command()
@database_option
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per queue instead of a table."
)
def queues(database: str, as_json: bool) -> None:
    """List queues with ready, leased, scheduled and dead-letter counts and the oldest age."""
    with open_database(database) as db:
        infos: list[QueueInfo] = run_command(
            lambda: [db.queue_info(table.name) for table in db.queues()]
        )
    if as_json:
        for info in infos:
            click.echo(
                json.dumps(
                    {
                        "name": info.name,
                        "ready": info.ready,
                        "leased": info.leased,
                        "scheduled": info.scheduled,
                        "dead_letters": info.dead_letters,
                        "oldest_ready_age_seconds": info.oldest_ready_age_seconds,
                    }
                )
            )
        return
    table = Table(title=f"queues in {database}")
    for heading in ("queue", "ready", "leased", "scheduled", "dead letters", "oldest ready"):
        table.add_column(heading, justify="left" if heading == "queue" else "right")
    for info in infos:
        age = info.oldest_ready_age_seconds
        table.add_row(
            info.name,
            str(info.ready),
            str(info.leased),
            str(info.scheduled),
            f"[red]{info.dead_letters}[/]" if info.dead_letters else "0",
            "-" if age is None else _age(age),
        )
    Console().print(table if infos else "no queues")


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
