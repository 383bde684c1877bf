"""Cross-process wake-ups for SQLite receivers, without polling.

SQLite has no LISTEN/NOTIFY. Each waiting receiver binds a Unix datagram socket in a
directory derived from the database file's real path; a committed send writes one datagram
(the queue name) to every socket there. A receiver whose socket reads its queue's name tries
to receive at once. Stale sockets of dead processes are removed by the first sender that
meets them. A sender lists the directory again only when its timestamp changed (one ``lstat``
per commit instead of a listing). Commits made outside txqueue (the application's own ``sqlite3`` connection)
send no datagram; receivers notice those through ``PRAGMA data_version`` on a slow fallback
tick instead.

The directory lives in ``$XDG_RUNTIME_DIR`` when that is the user's own (owned by them, no
access for group or others), else in the temp dir, where another user may create the name
first. A directory is used only when it is ours: a real directory (never a symlink) owned by
this user with mode exactly 0700; sockets are 0600. When the name is taken, the next of a few
deterministic names (``-1``, ``-2`` …) is used, by senders and receivers alike; when all are
taken, the database gets no wake-ups (a warning is logged) and receivers rely on their
fallback tick, which also sees txqueue's own commits.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import itertools
import logging
import os
import socket
import stat
import tempfile
import time
from collections.abc import Iterable

__all__ = ["WakeupSocket", "candidate_directories", "notify", "wakeup_directory"]

_counter = itertools.count()
_log = logging.getLogger("txqueue.sqlite")

#: Longest ``$XDG_RUNTIME_DIR`` used: a socket path adds ~60 bytes and must fit in 107.
_RUNTIME_MAX = 44
#: How many names a database's directory may take (the first one not another user's).
CANDIDATES = 4


def wakeup_directory(database_path: str) -> str:
    """A short, per-database directory for sockets (Unix socket paths are limited to ~100 bytes).

    This is the first candidate name; ``candidate_directories`` gives the others.
    """
    digest = hashlib.sha1(os.path.realpath(database_path).encode()).hexdigest()[:16]
    return os.path.join(_base(), f"txqueue-{os.geteuid()}-{digest}")


def candidate_directories(directory: str) -> list[str]:
    """The names tried in order, by senders and receivers alike, for ``wakeup_directory``."""
    return [directory, *(f"{directory}-{n}" for n in range(1, CANDIDATES))]


def _base() -> str:
    """``$XDG_RUNTIME_DIR`` when it is usable and the user's own, else the temp dir."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime) and len(runtime) <= _RUNTIME_MAX:
        try:
            status = os.lstat(runtime)
        except OSError:
            return tempfile.gettempdir()
        if (
            stat.S_ISDIR(status.st_mode)
            and status.st_uid == os.geteuid()
            and not status.st_mode & 0o077
            and os.access(runtime, os.W_OK | os.X_OK)
        ):
            return runtime
    return tempfile.gettempdir()


def _ours(status: os.stat_result) -> bool:
    """A real directory of this user that no one else may enter (mode exactly 0700)."""
    return (
        stat.S_ISDIR(status.st_mode)
        and status.st_uid == os.geteuid()
        and stat.S_IMODE(status.st_mode) == 0o700
    )


def _existing(directory: str) -> tuple[str, int] | None:
    """Where receivers of this database wait, and its timestamp; None when nowhere (yet).

    Receivers take the first candidate that is not another user's, so a sender stops at the
    first that is absent.
    """
    for candidate in candidate_directories(directory):
        try:
            status = os.lstat(candidate)
        except OSError:
            return None
        if _ours(status):
            return candidate, status.st_mtime_ns
    return None


def _take(candidate: str) -> os.stat_result | None:
    """Create ``candidate`` (0700 whatever the umask) or find it ours; None when it is not.

    FileNotFoundError: it vanished between the two steps (another process's last receiver
    removed it); the caller tries again.
    """
    created = True
    try:
        os.mkdir(candidate, 0o700)
    except FileExistsError:
        created = False
    try:  # O_NOFOLLOW: a symlink there fails (ELOOP) instead of being followed
        descriptor = os.open(candidate, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError:
        return None
    try:
        status = os.fstat(descriptor)
        if created and status.st_uid == os.geteuid() and stat.S_IMODE(status.st_mode) != 0o700:
            os.fchmod(descriptor, 0o700)  # the umask took bits mkdir asked for
            status = os.fstat(descriptor)
    finally:
        os.close(descriptor)
    return status if _ours(status) else None


def _claim(directory: str) -> tuple[str, os.stat_result] | None:
    """The first candidate that is ours (created when absent); None when all are others'."""
    for candidate in candidate_directories(directory):
        status = _take(candidate)
        if status is not None:
            return candidate, status
    return None


_warned: set[str] = set()


def _warn_once(directory: str, reason: str) -> None:
    """Say once per directory that its database's receivers poll instead of being woken."""
    if directory not in _warned:
        _warned.add(directory)
        _log.warning(
            "no usable wake-up directory at %s (or its %d alternatives): %s; receivers of "
            "this database poll instead",
            directory,
            CANDIDATES - 1,
            reason,
        )


def _new_socket() -> socket.socket:
    made = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    made.setblocking(False)
    return made


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


def _receivers(directory: str, changed: int) -> list[str]:
    """The sockets in ``directory``, last changed at ``changed``: the known listing while
    that is unchanged, else a new one."""
    known = _listings.get(directory)
    if known is not None and known.settled and known.changed == changed:
        return known.names
    names = os.listdir(directory)
    _listings[directory] = _Listing(changed, names, time.time_ns() - changed > SETTLED_NS)
    return names


def notify(directory: str, queues: Iterable[str]) -> None:
    """Tell every receiver waiting on this database that ``queues`` got messages.

    ``directory`` is the database's ``wakeup_directory``; nothing is sent into a directory
    that is not ours.
    """
    global _sender
    found = _existing(directory)
    if found is None:
        return
    directory, changed = found
    try:
        names = _receivers(directory, changed)
    except FileNotFoundError:
        return
    if not names:
        return
    if _sender is None:  # one per process: creating one per commit cost ~3 µs
        _sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        _sender.setblocking(False)
        atexit.register(_sender.close)  # not left to the finalizer (a ResourceWarning)
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
#: binding (the last receiver of another process removed it, empty, in between); then it
#: polls instead.
_BIND_ATTEMPTS = 5


class WakeupSocket:
    """A receiver's socket; readable when a send commits (``drain`` filters by queue).

    Given the database's ``wakeup_directory``, it binds in the first candidate that is ours;
    when there is none it stays unbound (never readable: the receiver polls) and
    ``directory`` and ``path`` are None. The last receiver to close removes the directory, so
    that databases come and go (test suites, short-lived files) without leaving one behind
    in the temp dir each.
    """

    def __init__(self, directory: str) -> None:
        self.directory: str | None = None
        self.path: str | None = None
        self.socket = _new_socket()
        name = f"{os.getpid()}-{next(_counter)}.sock"
        for _ in range(_BIND_ATTEMPTS):
            try:
                claimed = _claim(directory)
                if claimed is None:
                    _warn_once(directory, "another user took its names")
                    return
                chosen, status = claimed
                path = os.path.join(chosen, name)
                self.socket.bind(path)
            except FileNotFoundError:  # removed by another process's last receiver: again
                continue
            except OSError as error:
                _warn_once(directory, str(error))
                return
            if not _same_directory(chosen, status):  # replaced between the check and bind
                with contextlib.suppress(OSError):
                    os.unlink(path)
                self.socket.close()
                self.socket = _new_socket()
                continue
            os.chmod(path, 0o600)  # in our 0700 directory: no one else can swap it
            self.directory, self.path = chosen, path
            return
        _warn_once(directory, "it kept vanishing before a socket could be bound in it")

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
        if self.directory is None or self.path is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        try:
            os.rmdir(self.directory)
        except OSError:  # not empty: other receivers, or sockets of killed ones
            _remove_dead_sockets(self.directory)
            with contextlib.suppress(OSError):  # another receiver still waits there
                os.rmdir(self.directory)


def _same_directory(directory: str, status: os.stat_result) -> bool:
    """True when ``directory`` is still the one ``status`` describes."""
    try:
        now = os.lstat(directory)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (status.st_dev, status.st_ino) and _ours(now)


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
