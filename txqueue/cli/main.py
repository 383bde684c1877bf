"""Entry point of the ``txqueue`` command; each subcommand lives in its own module."""

from __future__ import annotations

import click

import txqueue

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(txqueue.__version__, prog_name="txqueue")
def main() -> None:
    """Transactional queues inside your own SQL database."""


def _register() -> None:
    from txqueue.cli import bench, dead_letters, demo, queues, sql, worker

    main.add_command(bench.bench)
    main.add_command(demo.demo)
    main.add_command(worker.worker)
    main.add_command(queues.queues)
    main.add_command(dead_letters.dead_letters)
    main.add_command(sql.sql)
    _register_events()


def _register_events() -> None:
    """The event layer's commands, when its extra (cloudevents, httpx, cel) is installed."""
    try:
        from txqueue.cli import event_delivery, events
    except ImportError:  # pragma: no cover - depends on the installed extras
        return
    for command in (events.buses, events.pipelines, events.enrollments):
        main.add_command(command)
    main.add_command(event_delivery.events)
    main.add_command(event_delivery.dispatcher)


_register()
if __name__ == "__main__":
    main()
