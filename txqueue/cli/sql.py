"""``txqueue sql``: run SQL in the database's dialect, like ``gcloud spanner databases execute-sql``.

``txqueue sql "SELECT ..."`` runs one statement (or several separated by ``;``) and prints
the result; without a statement it reads a script from stdin, or opens an interactive shell
(history, statements over several lines until ``;``). Queries run in a snapshot, DML in its
own transaction (the row count is printed), DDL through ``update_ddl``. A ``RECEIVE_`` query
prints rows as messages arrive.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import decimal
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import click
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

import txqueue
from txqueue.cli import describe
from txqueue.cli import text as display
from txqueue.cli.common import database_option, open_database
from txqueue.cli.listing import emit, emit_each, encoded, format_option, shown_bytes
from txqueue.core.text import printable
from txqueue.core.url import redact_url
from txqueue.core.values import check_value
from txqueue.errors import InvalidArgument, TxqueueError
from txqueue.sql import StreamingResultSet, is_complete, split_script, statement_kind
from txqueue.sql.params import value_type

__all__ = ["sql"]

HISTORY = Path(os.environ.get("TXQUEUE_SQL_HISTORY", "~/.txqueue_sql_history")).expanduser()


@click.command("sql")
@click.argument("statement", required=False)
@database_option
@format_option
@click.option(
    "-p",
    "--param",
    "raw_params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A query parameter (@NAME, or $N as N=...); VALUE is read as JSON, else as a string.",
)
@click.option(
    "-f",
    "--file",
    "script_file",
    type=click.File("r"),
    help="Run the statements of this file ('-': stdin).",
)
@click.option(
    "--transaction",
    is_flag=True,
    help="Run every statement (queries and DML, no DDL) in one read-write transaction: all "
    "or nothing. Without it each statement runs on its own and the script stops at the first "
    "error, what ran before it staying applied.",
)
def sql(
    statement: str | None,
    database: str,
    output_format: str,
    raw_params: Sequence[str],
    script_file: IO[str] | None,
    transaction: bool,
) -> None:
    """Run SQL in the database's dialect (GoogleSQL or PostgreSQL).

    With STATEMENT or --file: run it (several statements are separated by ';'). Without: read
    statements from stdin, or open an interactive shell when stdin is a terminal ('help'
    lists its commands; \\d lists tables and queues, \\d NAME describes one).

    As gcloud's execute-sql does, each statement of a script runs on its own: a query in a
    snapshot, DML in its own transaction, DDL through update_ddl; the script stops at the
    first error. With --transaction the statements run in one transaction instead.
    """
    if statement is not None and script_file is not None:
        raise click.UsageError("give STATEMENT or --file, not both")
    params = _params(raw_params)
    if script_file is not None:
        text: str | None = script_file.read()
    elif statement is not None:
        text = statement
    else:
        text = None if sys.stdin.isatty() else sys.stdin.read()
    with open_database(database, create=_creates(text, transaction)) as db:
        runner = _Runner(db, display.console(), output_format, params)
        if text is None:
            ok = runner.shell(database)
        elif transaction:
            ok = runner.transaction(text)
        else:
            ok = runner.script(text)
    if not ok:
        sys.exit(1)


def _creates(text: str | None, transaction: bool) -> bool:
    """Whether the statements may create the database: a script that starts with DDL does (a
    query, DML or the shell on a database that does not exist is a mistake)."""
    if text is None or transaction or _meta(text):
        return False
    try:
        pieces = split_script(text)
    except TxqueueError:
        return False
    return bool(pieces) and statement_kind(pieces[0], "googlesql") == "ddl"


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
        except RecursionError:
            raise click.BadParameter(
                f"{name.strip()}: the JSON value is nested too deeply", param_hint="--param"
            ) from None
        params[name.strip().lstrip("@$")] = _checked(name.strip(), value)
    return params


def _checked(name: str, value: Any) -> Any:
    """``value`` if a query parameter of its type may hold it (an int within INT64, text
    without lone surrogates, JSON as Spanner stores it); a usage error naming it otherwise."""
    column = value_type(value)
    if column is None:
        return value
    try:
        return check_value(column, value, name)
    except TxqueueError as error:
        raise click.BadParameter(printable(error), param_hint="--param") from error


class _Runner:
    """Runs statements against one database and prints their results."""

    def __init__(
        self, db: txqueue.Database, console: Console, output_format: str, params: Any
    ) -> None:
        self.db = db
        self.console = console
        self.output_format = output_format
        self.params = params
        self.dialect = db.dialect

    def script(self, text: str) -> bool:
        """Run every statement of ``text`` on its own; stop at the first error (False). A
        line holding a shell command (``\\d``, ``help``) between statements runs as one."""
        pending: list[str] = []
        for line in [*text.splitlines(), None]:
            if line is not None and not (_meta(line) and _blank("\n".join(pending))):
                pending.append(line)
                continue
            if pending and not self.statements("\n".join(pending)):
                return False
            pending = []
            if line is not None and not self.meta(line.strip()):
                return False
        return True

    def statements(self, text: str) -> bool:
        """Run the SQL statements of ``text`` one by one; False at the first error."""
        try:
            pieces = split_script(text, self.dialect)
        except TxqueueError as error:
            self.error(error)
            return False
        return all(self.run(piece) for piece in pieces)

    def transaction(self, text: str) -> bool:
        """Run every statement of ``text`` in one read-write transaction, then print what each
        gave; on an error nothing is applied (False)."""
        try:
            pieces = split_script(text, self.dialect)
            kinds = [statement_kind(piece, self.dialect) for piece in pieces]
        except TxqueueError as error:
            self.error(error)
            return False
        if "ddl" in kinds:
            self.error(InvalidArgument("--transaction runs queries and DML; run DDL without it"))
            return False

        def work(txn: txqueue.Transaction) -> list[Any]:
            outcomes: list[Any] = []
            for piece, kind in zip(pieces, kinds):
                if kind == "dml":
                    outcomes.append(txn.execute_update(piece, self.params))
                else:
                    result = txn.execute_sql(piece, self.params)
                    outcomes.append((list(result.fields), list(result)))
            return outcomes

        try:
            outcomes = self.db.run_in_transaction(work)
        except TxqueueError as error:
            self.error(error)
            self.note("nothing was applied")
            return False
        for outcome in outcomes:
            if isinstance(outcome, int):
                self.note(f"Statement modified {outcome} row{'' if outcome == 1 else 's'}")
            else:
                self.rows(*outcome)
        return True

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
        self.rows(result.fields, rows)

    def rows(self, fields: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        """Print a query's rows in the chosen format."""

        def table() -> None:
            listing = self.table(fields)
            for row in rows:
                display.add_row(listing, map(_cell, row))
            self.console.print(listing if rows else "(no rows)")

        records = [_record(fields, row) for row in rows]
        # CSV columns: the records' own (a BYTES column brings its _encoding), or the fields.
        emit(self.output_format, records, table, None if records else list(fields))

    def stream(self, fields: list[str], rows: Iterable[tuple[Any, ...]]) -> None:
        """Print rows as they arrive (a growing table on a terminal)."""
        if self.output_format != "table":
            emit_each(self.output_format, (_record(fields, row) for row in rows))
            return
        if not display.on_terminal(self.console):
            click.echo("\t".join(map(printable, fields)))
            for row in rows:
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
        if self.output_format == "table":
            self.console.print(text)

    def error(self, error: TxqueueError) -> None:
        message = Text.assemble((type(error).__name__, "red"), ": ", display.text(error))
        display.console(stderr=True).print(message)

    def table(self, fields: Sequence[str], caption: str | None = None) -> Table:
        """A result table whose cells wrap rather than cut on a terminal (lease tokens must
        stay whole); elsewhere every value is printed whole on its row's line."""
        columns = [Column(name, overflow="fold") for name in fields]
        return display.table(self.console, columns, caption=caption)

    # ---- meta commands: help, \d -----------------------------------------------------------

    def meta(self, text: str) -> bool:
        """``help``, ``\\d`` or ``\\d NAME``; False for an unknown command or name."""
        words = text.rstrip(";").split()
        if words[0].lower() == "help":
            shown = SHELL_HELP if self.db.dialect != "postgresql" else _POSTGRESQL_HELP
            for line in shown.splitlines():  # one by one: text() shows \n as an escape
                self.console.print(display.text(line))
            return True
        if words[0] == "\\d" and len(words) <= 2:
            try:
                if len(words) == 1:
                    describe.list_tables(self.db, self.output_format)
                else:
                    describe.describe(self.db, words[1], self.output_format)
            except TxqueueError as error:
                self.error(error)
                return False
            return True
        self.error(InvalidArgument(f"unknown command {words[0]!r}: type help"))
        return False

    # ---- the interactive shell ------------------------------------------------------------

    def shell(self, database: str) -> bool:
        """Read statements until ``;`` at the end of a line; ``\\q``, ``exit`` or Ctrl-D leave."""
        readline = _readline()
        self.console.print(
            f"txqueue sql on [cyan]{escape(printable(redact_url(database)))}[/] ({self.dialect.value} on "
            f"{self.db.engine}). End statements with ';'; help lists commands; leave with \\q or "
            "Ctrl-D."
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
            if not lines and _meta(line):
                self.meta(line.strip())
                continue
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


SHELL_HELP = """\
Statements end with ';' and may span lines; each runs on its own (a query in a snapshot, DML in
its own transaction, DDL through update_ddl).
  \\d              list tables and queues, the application's own tables too (marked)
  \\d NAME         describe a table or queue: columns, primary key, interleaving, indexes,
                  and for a queue its hidden lease and dead-letter columns; for a table
                  txqueue did not create, its columns with the engine's types
  SELECT * FROM INFORMATION_SCHEMA.TABLES;   (also COLUMNS, INDEXES, INDEX_COLUMNS)
  SELECT * FROM RECEIVE_Queue(max_duration => '5s');   receive messages as they arrive
  help            this text
  \\q, exit, quit  leave (or Ctrl-D)"""
#: The help in the PostgreSQL dialect: its spelling of the receive function.
_POSTGRESQL_HELP = SHELL_HELP.replace(
    "SELECT * FROM RECEIVE_Queue(max_duration => '5s');  ",
    "SELECT * FROM spanner.receive_queue(NULL, NULL, '5s');",
)


def _blank(text: str) -> bool:
    """Whether ``text`` holds no statement still to finish (only complete ones, or nothing)."""
    return not text.strip() or text.rstrip().endswith(";")


def _meta(text: str) -> bool:
    """Whether ``text`` is a shell command rather than SQL."""
    stripped = text.strip().rstrip(";").strip()
    return stripped.startswith("\\") or stripped.lower() == "help"


def _record(fields: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    """A row as JSON values; bytes as text or base64 with a ``<field>_encoding`` next to it."""
    record: dict[str, Any] = {}
    for name, value in zip(fields, row):
        if isinstance(value, bytes):
            record.update(encoded(name, value))
        else:
            record[name] = _json_value(value)
    return record


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return shown_bytes(value)
    if isinstance(value, _dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=_json_value)
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return encoded("value", value)["value"]
    if isinstance(value, _dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, (_dt.date, decimal.Decimal)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value
