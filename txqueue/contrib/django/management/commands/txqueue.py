"""``python manage.py txqueue worker|dispatcher|dashboard ...``: the txqueue command on the
database that ``settings.TXQUEUE`` names.

Everything after the subcommand goes to ``txqueue <subcommand>`` as written, with
``--database`` taken from the settings unless given (``manage.py txqueue worker --help``).
The worker's handlers can use the ORM: Django is set up before the app is imported.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from txqueue.contrib.django.settings import database_url

SUBCOMMANDS = ("worker", "dispatcher", "dashboard")


class Command(BaseCommand):  # type: ignore[misc]
    help = "Run txqueue's worker, event dispatcher or dashboard on Django's database."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("subcommand", choices=SUBCOMMANDS)
        parser.add_argument("arguments", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        from txqueue.cli.main import main

        subcommand: str = options["subcommand"]
        arguments: list[str] = list(options["arguments"])
        given = any(a == "--database" or a.startswith("--database=") for a in arguments)
        database = [] if given else ["--database", database_url()]
        try:
            main.main(
                args=[subcommand, *database, *arguments],
                prog_name="manage.py txqueue",
                standalone_mode=True,
            )
        except SystemExit as exit:
            if exit.code not in (0, None):
                raise
