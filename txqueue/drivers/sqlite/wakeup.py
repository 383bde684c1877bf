"""Cross-process wake-ups for SQLite receivers, without polling.

SQLite has no LISTEN/NOTIFY. Each waiting receiver binds a Unix datagram socket in a
directory derived from the database file's real path; a committed send writes one datagram
(the queue name) to every socket there. A receiver whose socket reads its queue's name tries
to receive at once. Stale sockets of dead processes are removed by the first sender that
meets them. Commits made outside txqueue (the application's own ``sqlite3`` connection)
send no datagram; receivers notice those through ``PRAGMA data_version`` on a slow fallback
tick instead.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import socket
import tempfile
from collections.abc import Iterable

__all__ = ["WakeupSocket", "notify", "wakeup_directory"]

_counter = itertools.count()


def wakeup_directory(database_path: str) -> str:
    """A short, per-database directory for sockets (Unix socket paths are limited to ~100 bytes)."""
    digest = hashlib.sha1(os.path.realpath(database_path).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"txqueue-{os.getuid()}-{digest}")


def notify(directory: str, queues: Iterable[str]) -> None:
    """Tell every receiver waiting on this database that ``queues`` got messages."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    if not names:
        return
    payload = "\n".join(queues).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for name in names:
            path = os.path.join(directory, name)
            try:
                sender.sendto(payload, path)
            except OSError as error:
                if error.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK):
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                # EAGAIN: the receiver has unread wake-ups already; one more adds nothing.


class WakeupSocket:
    """A receiver's socket; readable when a send commits (``matches`` filters by queue)."""

    def __init__(self, directory: str) -> None:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self.path = os.path.join(directory, f"{os.getpid()}-{next(_counter)}.sock")
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.setblocking(False)
        self.socket.bind(self.path)

    def drain(self, queue: str) -> bool:
        """Read every pending datagram; True when one named ``queue``."""
        matched = False
        while True:
            try:
                data = self.socket.recv(65536)
            except (BlockingIOError, InterruptedError):
                return matched
            if queue.encode() in data.split(b"\n"):
                matched = True

    def close(self) -> None:
        self.socket.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
