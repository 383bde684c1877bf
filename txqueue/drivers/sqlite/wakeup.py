"""Cross-process wake-ups for SQLite receivers, without polling.

SQLite has no LISTEN/NOTIFY. Each waiting receiver binds a Unix datagram socket in a
directory derived from the database file's real path; a committed send writes one datagram
(the queue name) to every socket there. A receiver whose socket reads its queue's name tries
to receive at once. Stale sockets of dead processes are removed by the first sender that
meets them. A sender lists the directory again only when its timestamp changed (a ``stat``
per commit instead of a listing). Commits made outside txqueue (the application's own ``sqlite3`` connection)
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
import time
from collections.abc import Iterable

__all__ = ["WakeupSocket", "notify", "wakeup_directory"]

_counter = itertools.count()


def wakeup_directory(database_path: str) -> str:
    """A short, per-database directory for sockets (Unix socket paths are limited to ~100 bytes)."""
    digest = hashlib.sha1(os.path.realpath(database_path).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"txqueue-{os.getuid()}-{digest}")


#: A listing is reused only when the directory last changed this long before it was taken:
#: a later change then gets a newer timestamp even on a file system that keeps whole seconds
#: (the "racily clean" rule of Git's index), so an unchanged timestamp means unchanged entries.
SETTLED_NS = 2_000_000_000


class _Listing:
    """The sockets found in one directory, and the directory's timestamp when listed."""

    __slots__ = ("changed", "names", "settled")

    def __init__(self, changed: int, names: list[str], settled: bool) -> None:
        self.changed = changed
        self.names = names
        self.settled = settled


_listings: dict[str, _Listing] = {}
_sender: socket.socket | None = None


def _receivers(directory: str) -> list[str]:
    """The sockets in ``directory``: one ``stat`` while it has not changed, else a listing."""
    changed = os.stat(directory).st_mtime_ns
    known = _listings.get(directory)
    if known is not None and known.settled and known.changed == changed:
        return known.names
    names = os.listdir(directory)
    _listings[directory] = _Listing(changed, names, time.time_ns() - changed > SETTLED_NS)
    return names


def notify(directory: str, queues: Iterable[str]) -> None:
    """Tell every receiver waiting on this database that ``queues`` got messages."""
    global _sender
    try:
        names = _receivers(directory)
    except FileNotFoundError:
        return
    if not names:
        return
    if _sender is None:  # one per process: creating one per commit cost ~3 µs
        _sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        _sender.setblocking(False)
    payload = "\n".join(queues).encode()
    for name in names:
        path = os.path.join(directory, name)
        try:
            _sender.sendto(payload, path)
        except OSError as error:
            _forget_if_dead(directory, path, error)
            # EAGAIN: the receiver has unread wake-ups already; one more adds nothing.


#: What sending to (or connecting to) a socket no receiver holds any more raises.
_DEAD = (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK)


def _forget_if_dead(directory: str, path: str, error: OSError) -> None:
    """Remove ``path`` when ``error`` says no receiver holds it (its process was killed)."""
    if error.errno in _DEAD:
        with contextlib.suppress(OSError):
            os.unlink(path)
        _listings.pop(directory, None)


#: How often a receiver tries to bind when the directory vanishes between creating it and
#: binding (the last receiver of another process removed it, empty, in between).
_BIND_ATTEMPTS = 5


class WakeupSocket:
    """A receiver's socket; readable when a send commits (``drain`` filters by queue).

    The last receiver to close removes the directory, so that databases come and go (test
    suites, short-lived files) without leaving one behind in the temp dir each.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"{os.getpid()}-{next(_counter)}.sock")
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.setblocking(False)
        for attempt in range(_BIND_ATTEMPTS):
            os.makedirs(directory, mode=0o700, exist_ok=True)
            try:
                self.socket.bind(self.path)
                return
            except FileNotFoundError:
                if attempt == _BIND_ATTEMPTS - 1:
                    self.socket.close()
                    raise

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
        try:
            os.rmdir(self.directory)
        except OSError:  # not empty: other receivers, or sockets of killed ones
            _remove_dead_sockets(self.directory)
            with contextlib.suppress(OSError):  # another receiver still waits there
                os.rmdir(self.directory)


def _remove_dead_sockets(directory: str) -> None:
    """Remove the sockets no receiver holds any more (their process was killed): connecting
    to one is refused. Connecting sends nothing, so live receivers are not woken."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect(path)
            except OSError as error:  # a live one (another user's, say) is left alone
                _forget_if_dead(directory, path, error)
