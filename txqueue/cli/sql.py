"""``txqueue sql``: run SQL in the database's dialect, like ``gcloud spanner databases execute-sql``.

``txqueue sql "SELECT ..."`` runs one statement (or several separated by ``;``) and prints
the result; without a statement it reads a script from stdin, or opens an interactive shell
(history, statements over several lines until ``;``). Queries run in a snapshot, DML in its
own transaction (the row count is printed), DDL through ``update_ddl``. A ``RECEIVE_`` query
prints rows as messages arrive.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import decimal
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

import txqueue
from txqueue.cli import text as display
from txqueue.cli.common import database_option, open_database
from txqueue.core.text import printable
from txqueue.errors import TxqueueError
from txqueue.sql import StreamingResultSet, is_complete, split_script, statement_kind

__all__ = ["sql"]

HISTORY = Path(os.environ.get("TXQUEUE_SQL_HISTORY", "~/.txqueue_sql_history")).expanduser()


@click.command("sql")
@click.argument("statement", required=False)
@database_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row instead of a table.")
@click.option(
    "-p",
    "--param",
    "raw_params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A query parameter (@NAME, or $N as N=...); VALUE is read as JSON, else as a string.",
)
def sql(statement: str | None, database: str, as_json: bool, raw_params: Sequence[str]) -> None:
    """Run SQL in the database's dialect (GoogleSQL or PostgreSQL).

    With STATEMENT: run it (several may be separated by ';'). Without: read statements from
    stdin, or open an interactive shell when stdin is a terminal.
    """
    params = _params(raw_params)
    with open_database(database) as db:
        runner = _Runner(db, display.console(), as_json, params)
        if statement is not None:
            ok = runner.script(statement)
        elif sys.stdin.isatty():
            ok = runner.shell(database)
        else:
            ok = runner.script(sys.stdin.read())
    if not ok:
        sys.exit(1)


def _params(raw: Sequence[str]) -> dict[str, Any] | None:
    if not raw:
        return None
    params: dict[str, Any] = {}
    for item in raw:
        name, separator, text = item.partition("=")
        if not separator or not name.strip():
            raise click.BadParameter(f"{item!r}: write NAME=VALUE", param_hint="--param")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        params[name.strip().lstrip("@$")] = value
    return params


class _Runner:
    """Runs statements against one database and prints their results."""

    def __init__(self, db: txqueue.Database, console: Console, as_json: bool, params: Any) -> None:
        self.db = db
        self.console = console
        self.as_json = as_json
        self.params = params
        self.dialect = db.dialect

    def script(self, text: str) -> bool:
        """Run every statement of ``text``; stop at the first error (False)."""
        try:
            pieces = split_script(text, self.dialect)
        except TxqueueError as error:
            self.error(error)
            return False
        return all(self.run(piece) for piece in pieces)

    def run(self, text: str) -> bool:
        """Run one statement and print its outcome; False when it failed."""
        try:
            kind = statement_kind(text, self.dialect)
            if kind == "ddl":
                self.db.update_ddl([text])
                self.note("DDL applied")
            elif kind == "dml":
                count = self.db.run_in_transaction(
                    lambda txn: txn.execute_update(text, self.params)
                )
                self.note(f"Statement modified {count} row{'' if count == 1 else 's'}")
            else:
                self.query(text)
        except TxqueueError as error:
            self.error(error)
            return False
        except KeyboardInterrupt:
            self.note("interrupted")
        return True

    def query(self, text: str) -> None:
        with self.db.snapshot() as snapshot:
            result = snapshot.execute_sql(text, self.params)
            if isinstance(result, StreamingResultSet):
                with result:
                    self.stream(result.fields, result)
                return
            rows = list(result)
        if self.as_json:
            for row in rows:
                click.echo(json.dumps(dict(zip(result.fields, map(_json_value, row)))))
            return
        table = self.table(result.fields)
        for row in rows:
            display.add_row(table, map(_cell, row))
        self.console.print(table if rows else "(no rows)")

    def stream(self, fields: list[str], rows: Iterable[tuple[Any, ...]]) -> None:
        """Print rows as they arrive (a growing table on a terminal)."""
        if self.as_json or not display.on_terminal(self.console):
            if not self.as_json:
                click.echo("\t".join(map(printable, fields)))
            for row in rows:
                if self.as_json:
                    click.echo(json.dumps(dict(zip(fields, map(_json_value, row)))))
                else:
                    click.echo("\t".join(printable(_cell(v)) for v in row))
                sys.stdout.flush()
            return
        table = self.table(fields, "waiting for messages (Ctrl-C stops)")
        count = 0
        with Live(table, console=self.console, auto_refresh=False) as live:
            try:
                for row in rows:
                    display.add_row(table, map(_cell, row))
                    count += 1
                    live.refresh()
            finally:
                table.caption = f"{count} message{'' if count == 1 else 's'} received"
                live.refresh()

    def note(self, text: str) -> None:
        if not self.as_json:
            self.console.print(text)

    def error(self, error: TxqueueError) -> None:
        message = Text.assemble((type(error).__name__, "red"), ": ", display.text(error))
        display.console(stderr=True).print(message)

    def table(self, fields: Sequence[str], caption: str | None = None) -> Table:
        """A result table whose cells wrap rather than cut on a terminal (lease tokens must
        stay whole); elsewhere every value is printed whole on its row's line."""
        columns = [Column(name, overflow="fold") for name in fields]
        return display.table(self.console, columns, caption=caption)

    # ---- the interactive shell ------------------------------------------------------------

    def shell(self, database: str) -> bool:
        """Read statements until ``;`` at the end of a line; ``\\q``, ``exit`` or Ctrl-D leave."""
        readline = _readline()
        self.console.print(
            f"txqueue sql on [cyan]{escape(printable(database))}[/] ({self.dialect.value} on "
            f"{self.db.engine}). End statements with ';', leave with \\q or Ctrl-D."
        )
        lines: list[str] = []
        while True:
            try:
                line = input("txqueue> " if not lines else "     ...> ")
            except EOFError:
                self.console.print()
                break
            except KeyboardInterrupt:
                self.console.print()
                lines = []
                continue
            if not lines and line.strip().lower() in ("\\q", "exit", "quit", "exit;", "quit;"):
                break
            lines.append(line)
            text = "\n".join(lines)
            if is_complete(text, self.dialect):
                lines = []
                self.script(text)
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(str(HISTORY))
        return True


def _readline() -> Any:
    try:
        import readline
    except ImportError:  # pragma: no cover - e.g. Windows without pyreadline
        return None
    with contextlib.suppress(OSError):
        readline.read_history_file(str(HISTORY))
    readline.set_history_length(1000)
    return readline


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return repr(value)
    if isinstance(value, _dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=_json_value)
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, _dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, (_dt.date, decimal.Decimal)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value
