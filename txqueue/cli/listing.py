"""How every listing is printed: ``--format table|json|csv`` (``--json`` the same as
``--format json``), from one list of records.

A command builds its records once, as plain JSON values; `emit` prints them as JSON Lines (one
object per line), as CSV (Python's csv module: a header row, then one row per record, nested
values as JSON text) or, for ``table``, through the command's own table (`txqueue.cli.text`).
Bytes are shown one way everywhere (`encoded`): the text when they are valid UTF-8, else
base64, with a ``<name>_encoding`` field saying which.
"""

from __future__ import annotations

import base64
import csv
import functools
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import click

from txqueue.cli.text import console, on_terminal
from txqueue.core.text import printable

__all__ = ["FORMATS", "emit", "emit_each", "encoded", "format_option", "formats", "shown_bytes"]

F = TypeVar("F", bound=Callable[..., Any])
FORMATS = ("table", "json", "csv")


def format_option(function: F) -> F:
    """``--format table|json|csv`` (default table) and ``--json``, its alias; the command
    gets ``output_format``."""
    return formats(default="table")(function)


def formats(default: str) -> Callable[[F], F]:
    """`format_option` with another default format."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, output_format: str | None, as_json: bool, **kwargs: Any) -> Any:
            if as_json and output_format not in (None, "json"):
                raise click.UsageError(f"--json and --format {output_format}: give one of them")
            chosen = "json" if as_json else output_format or default
            return command(*args, output_format=chosen, **kwargs)

        wrapped = click.option(
            "--json", "as_json", is_flag=True, help="The same as --format json."
        )(wrapper)
        wrapped = click.option(
            "--format",
            "output_format",
            type=click.Choice(FORMATS),
            default=None,
            help="table, json (one object per line) or csv (a header row, then a row each) "
            f"[default: {default}].",
        )(wrapped)
        return wrapped  # type: ignore[return-value]

    return decorate


def encoded(name: str, value: bytes) -> dict[str, str]:
    """``{name: text, name_encoding: "text"}`` when ``value`` is UTF-8, else base64."""
    try:
        return {name: value.decode("utf-8"), f"{name}_encoding": "text"}
    except UnicodeDecodeError:
        return {name: base64.b64encode(value).decode(), f"{name}_encoding": "base64"}


def shown_bytes(value: bytes) -> str:
    """Bytes in a table cell: the text when UTF-8, else ``base64:`` and the base64."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode()


def emit(
    output_format: str,
    records: Iterable[Mapping[str, Any]],
    table: Callable[[], None],
    fields: Sequence[str] | None = None,
) -> None:
    """Print ``records`` as ``output_format``; ``table`` prints the table form. ``fields``
    name the CSV columns (default: every key, in first-seen order)."""
    if output_format == "table":
        table()
        return
    if output_format == "json":
        for record in records:
            click.echo(json.dumps(record, default=str))
        return
    rows = list(records)
    names = list(fields) if fields is not None else _keys(rows)
    if not names:
        return
    readable = on_terminal(console())
    out = sys.stdout
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([printable(name) if readable else name for name in names])
    for row in rows:
        cells = (_csv_cell(row.get(name)) for name in names)
        writer.writerow([printable(cell) if readable else cell for cell in cells])
    out.flush()


def emit_each(output_format: str, records: Iterable[Mapping[str, Any]]) -> None:
    """Print records as they come (json or csv; the CSV header from the first one), each
    flushed at once: rows a ``RECEIVE_`` query streams."""
    writer = csv.writer(sys.stdout, lineterminator="\n")
    names: list[str] | None = None
    for record in records:
        if output_format == "json":
            click.echo(json.dumps(record, default=str))
        else:
            if names is None:
                names = list(record)
                writer.writerow(names)
            writer.writerow([_csv_cell(record.get(name)) for name in names])
        sys.stdout.flush()


def _keys(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    return str(value)
