"""Entry point of the ``txqueue`` command; each subcommand lives in its own module."""

from __future__ import annotations

import logging

import click

import txqueue

__all__ = ["main"]

INSTALL_HINT = "pip install 'txqueue[events]'"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(txqueue.__version__, prog_name="txqueue")
def main() -> None:
    """Transactional queues inside your own SQL database."""
    _print_connect_retries()


class _StderrLines(logging.Handler):
    """Each record as one ``txqueue: ...`` line on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"txqueue: {record.getMessage()}", err=True)


def _print_connect_retries() -> None:
    """A PostgreSQL server that does not answer is waited for: say so on stderr, a line per
    attempt (the API logs only the first, as a warning)."""
    logger = logging.getLogger("txqueue.postgres.connect")
    if not any(isinstance(handler, _StderrLines) for handler in logger.handlers):
        logger.addHandler(_StderrLines())
    logger.setLevel(logging.INFO)


def _register() -> None:
    from txqueue.cli import bench, dashboard, dead_letters, demo, messages, queues, sql, worker

    main.add_command(bench.bench)
    main.add_command(dashboard.dashboard)
    main.add_command(demo.demo)
    main.add_command(worker.worker)
    main.add_command(queues.queues)
    main.add_command(dead_letters.dead_letters)
    main.add_command(messages.messages)
    main.add_command(sql.sql)
    _register_events()


#: The event layer's commands and their one-line help, listed even without its extra.
EVENT_COMMANDS = {
    "buses": "Create, change, list, describe and delete buses.",
    "pipelines": "Create, change, list, describe and delete pipelines.",
    "enrollments": "Create, change, list, describe and delete enrollments.",
    "events": "Publish events; list archived and undelivered ones, replay them.",
    "dispatcher": "Deliver events for every pipeline until SIGINT/SIGTERM.",
}


def _register_events() -> None:
    """The event layer's commands; without its extra (cloudevents, httpx, CEL, jsonschema)
    each is still listed, and running it says how to install the extra."""
    try:
        from txqueue.cli import event_delivery, events
    except ImportError as error:
        for name, summary in EVENT_COMMANDS.items():
            main.add_command(_needs_extra(name, summary, error))
        return
    for command in (events.buses, events.pipelines, events.enrollments):
        main.add_command(command)
    main.add_command(event_delivery.events)
    main.add_command(event_delivery.dispatcher)


def _needs_extra(name: str, summary: str, error: ImportError) -> click.Command:
    """A stand-in for an event command: its arguments are accepted, and it fails with the
    install command (exit 1) instead of vanishing from ``txqueue --help``."""
    message = str(error) if "txqueue[events]" in str(error) else f"{error}: {INSTALL_HINT}"

    def refuse() -> None:
        raise click.ClickException(message)

    return click.Command(
        name,
        callback=refuse,
        help=f"{summary}\n\nNeeds the events extra: {INSTALL_HINT}",
        short_help=f"{summary.rstrip('.')} (needs {INSTALL_HINT})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )


_register()
if __name__ == "__main__":
    main()
