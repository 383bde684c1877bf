"""Options and helpers shared by every subcommand."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

import txqueue
from txqueue.core.text import printable
from txqueue.errors import TxqueueError

__all__ = ["DEFAULT_DATABASE", "database_option", "failure", "open_database", "run_command"]

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_DATABASE = "sqlite:///txqueue.db"


def database_option(function: F) -> F:
    """``--database URL``, default ``$TXQUEUE_DATABASE_URL``, else ``sqlite:///txqueue.db``."""
    return click.option(
        "--database",
        "database",
        default=lambda: os.environ.get("TXQUEUE_DATABASE_URL", DEFAULT_DATABASE),
        show_default="$TXQUEUE_DATABASE_URL or sqlite:///txqueue.db",
        help="Database URL (sqlite:///path or postgresql://...).",
    )(function)


def open_database(url: str, dialect: str | None = None) -> txqueue.Database:
    """Connect, turning txqueue errors into a clean CLI error."""
    try:
        return txqueue.connect(url, dialect=dialect)
    except TxqueueError as error:
        raise failure(error) from error


def run_command(function: Callable[[], Any]) -> Any:
    """Run ``function``; a txqueue error becomes a one-line message and exit status 1."""
    try:
        return function()
    except TxqueueError as error:
        raise failure(error) from error


def failure(error: TxqueueError) -> click.ClickException:
    """The one-line message for ``error``; stored text in it is shown with visible escapes."""
    return click.ClickException(f"{type(error).__name__}: {printable(error)}")
