"""``txqueue dashboard``: serve the web dashboard and its HTTP API with uvicorn.

A thin shell over `txqueue.web.create_app`. It binds 127.0.0.1 unless told otherwise, and
refuses any other host without a token (exit 2) before binding anything: the dashboard can
replay, purge and reconfigure, so it is never open to a network by accident.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from pathlib import Path

import click

from txqueue.cli.common import database_option, open_database

__all__ = ["dashboard"]

INSTALL_HINT = "pip install 'txqueue[dashboard]'"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1 or localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token_file(path: Path) -> str:
    """The token: the file's first line, trimmed. A file that others may read is used, with a
    warning (containers often mount secrets world-readable); an empty one is refused."""
    try:
        mode = path.stat().st_mode
        with path.open(encoding="utf-8") as handle:
            first = handle.readline()
    except (OSError, UnicodeDecodeError) as error:
        raise click.BadParameter(
            f"cannot read {path}: {error}", param_hint="--token-file"
        ) from None
    if os.name == "posix" and mode & (stat.S_IRGRP | stat.S_IROTH):
        click.echo(f"txqueue: warning: {path} can be read by other users; chmod 600 it", err=True)
    token = first.strip()
    if not token:
        raise click.BadParameter(
            f"{path} has no token on its first line", param_hint="--token-file"
        )
    return token


@click.command("dashboard")
@database_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="TCP port."
)
@click.option(
    "--token",
    default=None,
    help="Access token: API calls send 'Authorization: Bearer TOKEN', browsers log in with it. "
    "Needed for any host other than loopback. Prefer --token-file (a command line is visible "
    "to other users).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the access token from the first line of this file.",
)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing (403).")
@click.option(
    "--base-path", default="", help="Serve under this path prefix, e.g. /txq (behind a proxy)."
)
def dashboard(
    database: str,
    host: str,
    port: int,
    token: str | None,
    token_file: Path | None,
    read_only: bool,
    base_path: str,
) -> None:
    """Serve the web dashboard and the HTTP API (/api/v1) until SIGINT/SIGTERM."""
    if token is not None and token_file is not None:
        raise click.UsageError("give --token or --token-file, not both")
    if token_file is not None:
        token = read_token_file(token_file)
    if token is not None and not token.strip():
        raise click.BadParameter("the token must not be empty", param_hint="--token")
    if not is_loopback(host) and token is None:
        raise click.UsageError(
            f"--host {host} would open the dashboard to the network without a token: "
            "pass --token or --token-file (or keep the default --host 127.0.0.1)"
        )
    try:
        import uvicorn

        from txqueue.web import create_app
    except ImportError as error:
        message = str(error) if INSTALL_HINT in str(error) else f"{error}: {INSTALL_HINT}"
        raise click.ClickException(message) from None
    from txqueue.errors import InvalidArgument

    opened = open_database(database)
    try:
        # Without a token only loopback is bound: serve only loopback names too, so a page
        # whose DNS name is rebound to 127.0.0.1 cannot drive the dashboard.
        hosts = None if token is not None else ["127.0.0.1", "localhost", "::1", host.strip("[]")]
        app = create_app(
            opened, token=token, read_only=read_only, base_path=base_path, allowed_hosts=hosts
        )
    except InvalidArgument as error:
        opened.close()
        raise click.UsageError(str(error)) from None
    shown = "[" + host + "]" if ":" in host else host
    click.echo(
        f"txqueue: dashboard on http://{shown}:{port}{app.state.txqueue.base_path}/"
        + (" (read-only)" if read_only else "")
        + (" (token required)" if token is not None else ""),
        err=True,
    )
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
    finally:
        opened.close()
