"""``txqueue worker module:app``: run an App's handlers until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click

from txqueue.cli.common import database_option, duration_value, failure
from txqueue.core.text import printable
from txqueue.errors import TxqueueError
from txqueue.worker import App, Metrics, Stats, Worker, configure_logging
from txqueue.worker.observe import StatusLine

__all__ = ["load_app", "worker"]


def load_app(reference: str) -> App:
    """Import ``module:attribute`` from the current directory and check it is an App.

    The directory is searched after the installed packages, never before them: a module
    another user planted there under an installed name (``prometheus_client.py``) is not
    imported in its place. A directory others may write to gets a warning on stderr.
    """
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise click.BadParameter(
            "write the app as module:attribute, e.g. myapp:app", param_hint="APP"
        )
    directory = os.getcwd()
    _search_last(directory)
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as error:
        raise click.BadParameter(
            f"cannot import {module_name!r}: {error}", param_hint="APP"
        ) from error
    except TxqueueError as error:  # e.g. a handler whose signature App.handler refuses
        raise failure(error) from error
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise click.BadParameter(
                f"{module_name!r} has no attribute {attribute!r}", param_hint="APP"
            ) from None
    if not isinstance(found, App):
        raise click.BadParameter(
            f"{reference} is a {type(found).__name__}, not a txqueue.App", param_hint="APP"
        )
    origin = getattr(sys.modules.get(module_name), "__file__", None)
    if origin is not None and os.path.abspath(origin).startswith(directory + os.sep):
        _warn_if_shared(directory)
    return found


def _search_last(directory: str) -> None:
    """Put ``directory`` on ``sys.path`` after the installed packages: Python itself puts it
    first under ``python -m`` (as ``''`` or its path); that entry is moved to the end."""
    kept = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != directory]
    sys.path[:] = [*kept, directory]


def _warn_if_shared(directory: str) -> None:
    """Warn when users other than the owner may create files in ``directory``: a module
    planted there under a name the app imports would run as this worker (a sticky bit does
    not stop them creating new files)."""
    try:
        mode = os.stat(directory).st_mode
    except OSError:
        return
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        click.echo(
            f"warning: the app's directory {printable(directory)} is writable by other users "
            f"(mode {stat.S_IMODE(mode):04o}): a module planted there could run as this "
            "worker; run it from a directory only its owner can write to",
            err=True,
        )


@click.command()
@click.argument("app_reference", metavar="APP")
@database_option
@click.option(
    "--concurrency",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    help="Handlers running at once, over all queues.",
)
@click.option(
    "--prefetch",
    default=None,
    type=click.IntRange(min=0),
    help="Messages a queue may receive ahead of its free places, waiting under kept-alive "
    "leases [default: while its handlers are quick (under 25 ms on average, none running "
    "longer), what they finish within 25 ms, up to a full receive with the running ones; "
    "else none; 0: only what can start at once].",
)
@click.option(
    "--grace",
    default="30s",
    show_default=True,
    help="On SIGINT/SIGTERM, how long running handlers may finish before their leases are released.",
)
@click.option("--queue", "queues", multiple=True, help="Serve only this queue (repeatable).")
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="Serve Prometheus metrics on this port (needs prometheus-client).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="The address the metrics port listens on (0.0.0.0: every interface).",
)
@click.option(
    "--status/--no-status",
    default=None,
    help="Live status line (default: on when stdout is a terminal).",
)
@click.pass_context
def worker(
    context: click.Context,
    app_reference: str,
    database: str,
    concurrency: int,
    prefetch: int | None,
    grace: str,
    queues: tuple[str, ...],
    log_format: str,
    log_level: str,
    metrics_port: int | None,
    metrics_host: str,
    status: bool | None,
) -> None:
    """Run the handlers of APP (module:attribute, a txqueue.App) until SIGINT/SIGTERM.

    The database is --database when given, else the App's URL, else $TXQUEUE_DATABASE_URL.
    Exits 0 after a graceful shutdown.
    """
    wait = duration_value(grace, "--grace")
    with _stop_during_start_up():
        app = load_app(app_reference)
        source = context.get_parameter_source("database")
        url = (
            app.database
            if source is click.core.ParameterSource.DEFAULT and app.database
            else database
        )
        stats = Stats(Metrics() if metrics_port is not None else None)
        if metrics_port is not None and stats.metrics is not None:
            try:
                stats.metrics.serve(metrics_port, metrics_host)
            except OSError as error:
                raise click.BadParameter(
                    f"cannot listen on {metrics_host}:{metrics_port}: {error.strerror or error}",
                    param_hint="--metrics-host/--metrics-port",
                ) from error
        line = StatusLine(stats) if (sys.stdout.isatty() if status is None else status) else None
        if line is not None:
            line.start()
        configure_logging(log_format, log_level)
        try:
            runner = Worker(
                app,
                database=url,
                concurrency=concurrency,
                prefetch=prefetch,
                grace=wait,
                queues=list(queues) or None,
                stats=stats,
            )
            asyncio.run(runner.run())
        except TxqueueError as error:
            raise failure(error) from error
        finally:
            if line is not None:
                line.stop()


@contextmanager
def _stop_during_start_up() -> Iterator[None]:
    """Until the worker's loop takes SIGINT/SIGTERM over, either one ends the start-up: nothing
    has been received yet, so there is nothing to drain and the exit is a clean 0."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    except KeyboardInterrupt:
        return
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt(number: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
