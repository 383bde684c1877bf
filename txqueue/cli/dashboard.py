"""``txqueue dashboard``: serve the web dashboard and its HTTP API with uvicorn.

A thin shell over `txqueue.web.create_app`. The dashboard can read every payload, replay,
purge and reconfigure, so it is closed by default: without ``--token`` / ``--token-file`` it
makes a token itself, prints a login URL carrying it, and keeps it while it runs in a file
only this user can read (as Jupyter does). Only ``--insecure-no-token`` serves without one,
with a warning. It binds 127.0.0.1 unless told otherwise, and refuses any other host without
a token of the user's (exit 2) before binding anything.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import signal
import stat
import threading
from collections.abc import Mapping
from pathlib import Path

import click

from txqueue.cli.common import database_option, open_database

__all__ = ["dashboard", "remove_token_file", "write_token_file"]

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


def token_directories(environment: Mapping[str, str]) -> list[Path]:
    """Where a generated token may be kept, best first: ``$XDG_RUNTIME_DIR/txqueue`` when that
    directory is the user's own (no access for others), then ``~/.local/state/txqueue``."""
    found = []
    runtime = environment.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        try:
            status = os.lstat(runtime)
        except OSError:
            status = None
        if (
            status is not None
            and stat.S_ISDIR(status.st_mode)
            and status.st_uid == os.geteuid()
            and not status.st_mode & 0o077
        ):
            found.append(Path(runtime) / "txqueue")
    home = environment.get("HOME") or os.path.expanduser("~")
    if os.path.isabs(home):
        found.append(Path(home) / ".local" / "state" / "txqueue")
    return found


def _open_private_directory(directory: Path) -> int:
    """A descriptor of ``directory``, created 0700 if absent; it must be a real directory (a
    symlink is never followed) of this user, and is made 0700 if it was not."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        status = os.fstat(descriptor)
        if status.st_uid != os.geteuid():
            raise PermissionError(f"{directory} belongs to another user")
        if stat.S_IMODE(status.st_mode) != 0o700:
            os.fchmod(descriptor, 0o700)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def write_token_file(
    token: str, port: int, environment: Mapping[str, str] = os.environ
) -> Path | None:
    """Keep ``token`` in ``dashboard-PORT.token`` (mode 0600, in a 0700 directory of
    `token_directories`), created anew: a file or symlink left there by an earlier run is
    removed, never followed or written through. None when no directory can hold it."""
    name = f"dashboard-{port}.token"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for directory in token_directories(environment):
        try:
            descriptor = _open_private_directory(directory)
        except OSError:
            continue
        try:
            with contextlib.suppress(FileNotFoundError):  # a run killed with -9 left it
                os.unlink(name, dir_fd=descriptor)
            file = os.open(name, flags, 0o600, dir_fd=descriptor)
            with os.fdopen(file, "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), 0o600)
                handle.write(token + "\n")
            return directory / name
        except OSError:
            continue
        finally:
            os.close(descriptor)
    return None


def remove_token_file(path: Path) -> None:
    """Remove the token file at exit (a symlink there is removed, not followed)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class _Terminated(BaseException):
    """SIGTERM arrived: unwind (running every ``finally``), then end by the signal."""


def _raise_terminated(signal_number: int, frame: object) -> None:
    raise _Terminated


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
@click.option(
    "--insecure-no-token",
    is_flag=True,
    help="Serve without a token (loopback only): every local account can then read and "
    "change everything. Without this flag and without a token, one is generated.",
)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing (403).")
@click.option(
    "--allow-private-destinations",
    is_flag=True,
    help="Let API clients set a pipeline's allow_private: deliveries to private, loopback and "
    "link-local addresses this host can reach. Without it such requests are refused.",
)
@click.option(
    "--base-path", default="", help="Serve under this path prefix, e.g. /txq (behind a proxy)."
)
def dashboard(
    database: str,
    host: str,
    port: int,
    token: str | None,
    token_file: Path | None,
    insecure_no_token: bool,
    read_only: bool,
    allow_private_destinations: bool,
    base_path: str,
) -> None:
    """Serve the web dashboard and the HTTP API (/api/v1) until SIGINT/SIGTERM.

    Without --token or --token-file it generates a token and prints a URL that logs in."""
    if token is not None and token_file is not None:
        raise click.UsageError("give --token or --token-file, not both")
    if insecure_no_token and (token is not None or token_file is not None):
        raise click.UsageError("give a token or --insecure-no-token, not both")
    if token_file is not None:
        token = read_token_file(token_file)
    if token is not None and not token.strip():
        raise click.BadParameter("the token must not be empty", param_hint="--token")
    if not is_loopback(host) and token is None:
        raise click.UsageError(
            f"--host {host} would open the dashboard to the network without a token of "
            "yours: pass --token or --token-file (or keep the default --host 127.0.0.1)"
        )
    generated = token is None and not insecure_no_token
    if generated:
        token = secrets.token_urlsafe(32)
    try:
        import uvicorn

        from txqueue.web import create_app
        from txqueue.web.limits import uvicorn_options
    except ImportError as error:
        message = str(error) if INSTALL_HINT in str(error) else f"{error}: {INSTALL_HINT}"
        raise click.ClickException(message) from None
    from txqueue.errors import InvalidArgument

    opened = open_database(database)
    try:
        # Without a token of the user's only loopback is bound: serve only loopback names
        # too, so a page whose DNS name is rebound to 127.0.0.1 cannot drive the dashboard.
        hosts = (
            ["127.0.0.1", "localhost", "::1", host.strip("[]")]
            if generated or insecure_no_token
            else None
        )
        app = create_app(
            opened,
            token=token,
            read_only=read_only,
            base_path=base_path,
            allowed_hosts=hosts,
            insecure_no_token=insecure_no_token,
            allow_private_destinations=allow_private_destinations,
        )
    except InvalidArgument as error:
        opened.close()
        raise click.UsageError(str(error)) from None
    shown = "[" + host + "]" if ":" in host else host
    url = f"http://{shown}:{port}{app.state.txqueue.base_path}"
    click.echo(
        f"txqueue: dashboard on {url}/"
        + (" (read-only)" if read_only else "")
        + (" (token required)" if token is not None else ""),
        err=True,
    )
    kept = None
    if generated and token is not None:
        kept = write_token_file(token, port)
        click.echo(f"txqueue: log in at {url}/login?token={token}", err=True)
        click.echo(
            f"txqueue: the token is in {kept} (only you can read it; removed at exit)"
            if kept is not None
            else "txqueue: warning: no private directory could keep the token "
            "($XDG_RUNTIME_DIR/txqueue, ~/.local/state/txqueue)",
            err=True,
        )
    if insecure_no_token:
        click.echo(
            "txqueue: warning: --insecure-no-token: every local account on this machine can "
            "read every payload and change everything here (replay, purge, pipelines, "
            "destinations, secrets) without logging in",
            err=True,
        )
    # uvicorn stops gracefully on SIGTERM, then raises it again: to the handler set here, so
    # the token file is removed and the database closed before the process ends by it.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main_thread else None
    ending = False
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            server_header=False,
            **uvicorn_options(),  # concurrency, keep-alive, head size and head read time
        )
    except _Terminated:
        ending = True
    finally:
        if main_thread:
            restored = signal.SIG_DFL if ending or previous is None else previous
            signal.signal(signal.SIGTERM, restored)
        if kept is not None:
            remove_token_file(kept)
        opened.close()
    if ending:  # end as a SIGTERM ends a process, as it did before the handler
        signal.raise_signal(signal.SIGTERM)
