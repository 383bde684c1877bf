"""Throw-away PostgreSQL servers for the test suite.

Stdlib only, plus psycopg (imported lazily, so that importing this module never
fails on a machine that only runs the SQLite tests).

``PostgresServer.start()`` runs ``initdb`` into a fresh temporary directory and
starts a server on a free TCP port of 127.0.0.1, tuned for tests (no fsync).
PostgreSQL refuses to run as root: when this process is root, every server
binary is run as the OS user ``postgres`` through ``runuser`` (or ``su`` when
``runuser`` is missing), and the temporary directory is handed to that user.

``find_or_start()`` is what the fixtures call: it prefers an external server
named by ``$TXQUEUE_TEST_POSTGRES_URL`` and otherwise starts one when ``initdb``
is on PATH.

Run ``python tests/pgserver.py`` to get a server for manual poking; Ctrl-C
stops it and removes its files.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

ENV_URL = "TXQUEUE_TEST_POSTGRES_URL"
PG_OS_USER = "postgres"
SUPERUSER = "postgres"

# Server settings for a disposable test cluster. fsync=off loses data only on an
# OS crash; a killed server (restart(mode="immediate")) still recovers every
# committed transaction because synchronous_commit stays on.
DEFAULT_SETTINGS: dict[str, str] = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "on",
    "full_page_writes": "off",
    "max_connections": "200",
}

_START_TIMEOUT_S = 60
_STOP_TIMEOUT_S = 60
_PORT_ATTEMPTS = 3
_LOG_TAIL_LINES = 40
_live_servers: set[PostgresServer] = set()


class PostgresServerError(RuntimeError):
    """initdb or pg_ctl failed; the message carries the command output and log tail."""


# -- helpers ---------------------------------------------------------------


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"(no log at {path}: {e})"
    return "\n".join(text.splitlines()[-lines:])


def _run_as_prefix() -> list[str]:
    """argv prefix running a command as the PostgreSQL OS user (empty when not root)."""
    if not _is_root():
        return []
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", PG_OS_USER, "--"]
    su = shutil.which("su")
    if su:
        # su takes one shell string; _run() joins the command into it.
        return [su, PG_OS_USER, "-s", "/bin/sh", "-c"]
    raise PostgresServerError(
        "running as root, but neither runuser nor su is available to switch to "
        f"the {PG_OS_USER!r} OS user (PostgreSQL refuses to run as root)"
    )


def _as_pg_user(cmd: Sequence[str]) -> list[str]:
    prefix = _run_as_prefix()
    if prefix and prefix[-1] == "-c":  # su: one shell string
        return [*prefix, shlex.join(cmd)]
    return [*prefix, *cmd]


def _pg_user_ids() -> tuple[int, int]:
    import pwd  # POSIX only; we only get here as root

    try:
        entry = pwd.getpwnam(PG_OS_USER)
    except KeyError:
        raise PostgresServerError(
            f"running as root, but there is no {PG_OS_USER!r} OS user to run PostgreSQL as "
            f"(create one, run the tests as a normal user, or set ${ENV_URL})"
        ) from None
    return entry.pw_uid, entry.pw_gid


def _world_traversable(path: Path) -> bool:
    """True when every ancestor of ``path`` can be entered by any user."""
    for p in [path, *path.parents]:
        try:
            if not os.stat(p).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _make_base_dir() -> Path:
    parent = Path(tempfile.gettempdir()).resolve()
    if _is_root() and not _world_traversable(parent):
        # e.g. TMPDIR=/root/tmp: the postgres user could not reach the data dir.
        parent = Path("/tmp")
    base = Path(tempfile.mkdtemp(prefix="txqueue-pg-", dir=parent))
    if _is_root():
        uid, gid = _pg_user_ids()
        os.chown(base, uid, gid)
    return base


def _run(cmd: Sequence[str], *, cwd: Path, what: str, log: Path | None = None) -> str:
    argv = _as_pg_user(cmd)
    env = {k: v for k, v in os.environ.items() if k not in ("PGDATA", "PGPORT", "PGHOST")}
    env["LC_ALL"] = "C"  # stable, untranslated messages for the error reports
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,  # the postgres user may not be able to enter our cwd
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=_START_TIMEOUT_S + 30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PostgresServerError(f"{what} failed: {shlex.join(argv)}: {e}") from e
    if proc.returncode != 0:
        msg = f"{what} failed (exit {proc.returncode}): {shlex.join(argv)}\n{proc.stdout.strip()}"
        if log is not None:
            msg += f"\n--- last lines of {log} ---\n{_tail(log)}"
        raise PostgresServerError(msg)
    return proc.stdout


def with_database(url: str, dbname: str) -> str:
    """``url`` pointing at database ``dbname`` instead (user, host, query kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


def create_database(url: str, name: str) -> str:
    """(Re)create database ``name`` on the server of ``url``; return its URL."""
    import psycopg
    from psycopg import sql

    ident = sql.Identifier(name)
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))
    return with_database(url, name)


def drop_database(url: str, name: str) -> None:
    """Drop database ``name`` on the server of ``url``, disconnecting its sessions."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


# -- the server ------------------------------------------------------------


class PostgresServer:
    """A private PostgreSQL cluster in a temporary directory."""

    def __init__(self, base_dir: Path, port: int, settings: dict[str, str]) -> None:
        self.base_dir = base_dir
        self.data_dir = base_dir / "data"
        self.socket_dir = base_dir / "sock"
        self.log_path = base_dir / "postgres.log"
        self.port = port
        self.settings = settings
        self.running = False
        self.start_seconds = 0.0  # wall time of the last initdb + start (or start alone)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<PostgresServer {self.url} {state} {self.base_dir}>"

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    # lifecycle

    @classmethod
    def start(cls, settings: dict[str, str] | None = None) -> PostgresServer:
        """initdb a fresh cluster in a temp dir and start it on a free port."""
        for tool in ("initdb", "pg_ctl"):
            if shutil.which(tool) is None:
                raise PostgresServerError(f"{tool} not found on PATH")
        t0 = time.monotonic()
        base = _make_base_dir()
        server = cls(base, 0, {**DEFAULT_SETTINGS, **(settings or {})})
        _live_servers.add(server)
        try:
            server.socket_dir.mkdir()
            if _is_root():
                uid, gid = _pg_user_ids()
                os.chown(server.socket_dir, uid, gid)
            server._initdb()
            for attempt in range(1, _PORT_ATTEMPTS + 1):
                server.port = _free_port()
                try:
                    server._pg_ctl_start()
                    break
                except PostgresServerError:
                    # Another process may have grabbed the port between probe and bind.
                    if attempt == _PORT_ATTEMPTS or not server._port_clash():
                        raise
        except BaseException:
            server.cleanup()
            raise
        server.start_seconds = time.monotonic() - t0
        return server

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``mode``: smart, fast or immediate). No-op when stopped."""
        if not self.running:
            return
        try:
            self._pg_ctl("stop", "-m", mode)
        except PostgresServerError:
            if self._postmaster_alive():
                raise
            # Already dead (e.g. killed by a fault test), maybe with a stale pid file.
        self.running = False

    def restart(self, mode: str = "immediate") -> None:
        """Stop with ``mode`` (immediate = crash), then start on the same port and data."""
        self.stop(mode)
        t0 = time.monotonic()
        self._pg_ctl_start()
        self.start_seconds = time.monotonic() - t0

    def cleanup(self) -> None:
        """Stop the server (fast, falling back to immediate) and delete its files."""
        try:
            self.stop("fast")
        except PostgresServerError:
            with contextlib.suppress(PostgresServerError):
                self.stop("immediate")
        shutil.rmtree(self.base_dir, ignore_errors=True)
        _live_servers.discard(self)

    def create_database(self, name: str) -> str:
        """Drop ``name`` if it exists, create it, return its URL."""
        return create_database(self.url, name)

    def drop_database(self, name: str) -> None:
        drop_database(self.url, name)

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return _tail(self.log_path, lines)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    # internals

    def _initdb(self) -> None:
        out = _run(
            [
                "initdb",
                "-D",
                str(self.data_dir),
                "-A",
                "trust",
                "-U",
                SUPERUSER,
                "--no-sync",
                "--encoding=UTF8",
                "--locale=C",
            ],
            cwd=self.base_dir,
            what="initdb",
        )
        (self.base_dir / "initdb.log").write_text(out)

    def _postgres_options(self) -> str:
        # pg_ctl hands this string to /bin/sh, hence the quoting.
        opts = ["-p", str(self.port), "-k", str(self.socket_dir)]
        for key, value in self.settings.items():
            opts += ["-c", f"{key}={value}"]
        return shlex.join(opts)

    def _pg_ctl_start(self) -> None:
        self.running = True  # pessimistic: a half-started server still gets stopped
        try:
            self._pg_ctl("start", "-l", str(self.log_path), "-o", self._postgres_options())
        except PostgresServerError:
            if not self._postmaster_alive():
                self.running = False
            raise

    def _pg_ctl(self, action: str, *args: str) -> None:
        timeout = _START_TIMEOUT_S if action == "start" else _STOP_TIMEOUT_S
        _run(
            ["pg_ctl", action, "-D", str(self.data_dir), "-w", "-t", str(timeout), *args],
            cwd=self.base_dir,
            what=f"pg_ctl {action} ({self.data_dir})",
            log=self.log_path,
        )

    def _postmaster_alive(self) -> bool:
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:  # Linux: a killed postmaster whose parent does not reap it is a zombie
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        return state != "Z"

    def _port_clash(self) -> bool:
        return re.search(r"could not bind|Address already in use", self.log_tail(200)) is not None


def find_or_start(
    settings: dict[str, str] | None = None,
) -> tuple[str | None, PostgresServer | None, str]:
    """Find a PostgreSQL server for the tests: ``(url, server, reason)``.

    * ``$TXQUEUE_TEST_POSTGRES_URL`` set: ``(that url, None, reason)``; nothing started.
    * else ``initdb`` on PATH: start a server, ``(server.url, server, reason)``. A
      failing start raises ``PostgresServerError``: installed but broken is a bug
      to see, not a reason to skip.
    * else ``(None, None, reason)`` explaining what is missing.
    """
    url = os.environ.get(ENV_URL, "").strip()
    if url:
        return url, None, f"using external PostgreSQL from ${ENV_URL}"
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        return (
            None,
            None,
            f"PostgreSQL not available: initdb/pg_ctl not on PATH and ${ENV_URL} not set",
        )
    server = PostgresServer.start(settings)
    return server.url, server, f"started PostgreSQL in {server.start_seconds:.2f}s: {server}"


@atexit.register
def _cleanup_leftovers() -> None:
    # Last resort when a caller forgot cleanup() (or pytest died before teardown).
    for server in list(_live_servers):
        server.cleanup()


if __name__ == "__main__":
    with PostgresServer.start() as srv:
        print(f"{srv.url}  (started in {srv.start_seconds:.2f}s, log {srv.log_path})")
        print("Ctrl-C to stop and delete it.")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
