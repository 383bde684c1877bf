"""Options and helpers shared by every subcommand."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

import click

import txqueue
from txqueue.core.durations import MAX_DURATION, parse_duration
from txqueue.core.text import printable
from txqueue.drivers.engines import parse_url, traits_named
from txqueue.errors import TxqueueError

__all__ = [
    "DEFAULT_DATABASE",
    "NoDatabase",
    "database_option",
    "duration_value",
    "failure",
    "open_database",
    "require_database",
    "run_command",
    "seconds_value",
]

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_DATABASE = "sqlite:///txqueue.db"


def database_option(function: F) -> F:
    """``--database URL``, default ``$TXQUEUE_DATABASE_URL``, else ``sqlite:///txqueue.db``."""
    return click.option(
        "--database",
        "database",
        default=lambda: os.environ.get("TXQUEUE_DATABASE_URL", DEFAULT_DATABASE),
        show_default="$TXQUEUE_DATABASE_URL or sqlite:///txqueue.db",
        help="Database URL (sqlite:///path or postgresql://...). A command that only reads "
        "never creates a SQLite file that does not exist.",
    )(function)


class NoDatabase(click.ClickException):
    """A read command pointed at no database: one line, exit status 2 (a usage error)."""

    exit_code = 2


def open_database(
    url: str, dialect: str | None = None, *, create: bool = False
) -> txqueue.Database:
    """Connect, turning txqueue errors into a clean CLI error. Unless ``create``, a SQLite
    file that does not exist is not created: a read command says how to point at a database."""
    if not create:
        require_database(url)
    try:
        return txqueue.connect(url, dialect=dialect)
    except TxqueueError as error:
        raise failure(error) from error


def require_database(url: str) -> None:
    """`NoDatabase` when ``url`` names a SQLite file that does not exist (connecting would
    create it); other URLs are left for connect to judge."""
    try:
        parsed = parse_url(url)
    except TxqueueError:
        return  # connect reports it
    if not traits_named(parsed.engine).file_target or os.path.exists(parsed.target):
        return
    where = "./txqueue.db" if url == DEFAULT_DATABASE else printable(parsed.target)
    raise NoDatabase(
        f"no database at {where}: give --database URL (sqlite:///path or postgresql://...) "
        "or set $TXQUEUE_DATABASE_URL; this command reads and never creates one"
    )


def run_command(function: Callable[[], Any], flags: Mapping[str, str] | None = None) -> Any:
    """Run ``function``; a txqueue error becomes a one-line message and exit status 1."""
    try:
        return function()
    except TxqueueError as error:
        raise failure(error, flags) from error


def failure(error: TxqueueError, flags: Mapping[str, str] | None = None) -> click.ClickException:
    """The one-line message for ``error``; stored text in it is shown with visible escapes.
    ``flags`` maps the Python argument names the API's messages use (``allow_private=True``)
    to the command's flags (``--allow-private``), so the message names what to type."""
    message = printable(error)
    if flags:
        pattern = "|".join(re.escape(name) for name in sorted(flags, key=len, reverse=True))
        message = re.sub(rf"(?<![\w-])({pattern})(?![\w=])", lambda m: flags[m[1]], message)
    return click.ClickException(f"{type(error).__name__}: {message}")


def duration_value(text: str, flag: str) -> timedelta:
    """``text`` given to ``flag`` (``20m``, ``7d``) as a timedelta; a usage error naming
    ``flag`` (exit 2) when it is no duration txqueue takes (``nan``, ``99999999999d``)."""
    try:
        return parse_duration(text, flag)
    except TxqueueError as error:
        raise click.BadParameter(printable(error), param_hint=flag) from error


def seconds_value(value: float, flag: str) -> timedelta:
    """A number of seconds given to ``flag`` as a timedelta; a usage error naming ``flag``
    (exit 2) when it is not finite or longer than any duration txqueue takes."""
    if not math.isfinite(value) or abs(value) > MAX_DURATION.total_seconds():
        raise click.BadParameter(
            f"{value} is not a number of seconds up to {MAX_DURATION.days} days",
            param_hint=flag,
        )
    return timedelta(seconds=value)
