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
    from txqueue.cli import demo

    main.add_command(demo.demo)


_register()
if __name__ == "__main__":
    main()
