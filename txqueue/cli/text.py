"""How every command prints stored and remote text: literally, and whole when piped.

Keys, reasons, payloads, response bodies and configuration come from outside. `text` makes any
of them display text: a `rich.text.Text`, which rich never parses as markup (``[/x]`` or
``[link=...]`` print as written), with control characters shown as escapes (`printable`).
`table` is the one builder of every listing: on a terminal long values may be cut with "…";
when stdout is not a terminal no value is ever cut or wrapped, so pipes and files get them whole.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace

from rich.console import Console
from rich.style import StyleType
from rich.table import Column, Table
from rich.text import Text

from txqueue.core.text import printable

__all__ = ["Column", "add_row", "console", "on_terminal", "print_table", "table", "text"]


def text(value: object, style: StyleType = "") -> Text:
    """Any value as display text: never read as markup, control characters as escapes."""
    if isinstance(value, Text):
        return value
    return Text(printable(value), style=style)


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr); when that is not a terminal, one so wide that no line is
    ever wrapped or cut."""
    stream = sys.stderr if stderr else sys.stdout
    if _isatty(stream):
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=sys.maxsize)


def on_terminal(output: Console) -> bool:
    """Whether ``output`` writes to a terminal (not whether colours are forced)."""
    return _isatty(output.file)


def table(
    output: Console,
    columns: Sequence[str | Column],
    *,
    title: object = None,
    caption: object = None,
    show_header: bool = True,
) -> Table:
    """A listing for ``output``: headings, title and caption as literal text. A `Column`'s
    ``max_width``, ``overflow`` and wrapping apply on a terminal only; otherwise every cell is
    printed whole on one line."""
    listing = Table(
        title=None if title is None else text(title),
        caption=None if caption is None else text(caption),
        show_header=show_header,
    )
    whole = not on_terminal(output)
    for column in columns:
        spec = column if isinstance(column, Column) else Column(column)
        if whole:
            spec = replace(spec, no_wrap=True, overflow="ignore", max_width=None)
        listing.add_column(
            text(spec.header),
            justify=spec.justify,
            style=spec.style,
            no_wrap=spec.no_wrap,
            overflow=spec.overflow,
            min_width=spec.min_width,
            max_width=spec.max_width,
        )
    return listing


def add_row(listing: Table, values: Iterable[object]) -> None:
    """Add one row, each value as `text`."""
    listing.add_row(*(text(value) for value in values))


def print_table(
    columns: Sequence[str | Column],
    rows: Iterable[Iterable[object]],
    *,
    title: object = None,
    empty: str,
    show_header: bool = True,
) -> None:
    """Print ``rows`` as a `table` on stdout, or ``empty`` when there are none."""
    output = console()
    listing = table(output, columns, title=title, show_header=show_header)
    for row in rows:
        add_row(listing, row)
    output.print(listing if listing.row_count else text(empty))


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        return False
