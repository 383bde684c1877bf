"""Turns at SQLite's write lock between processes, taken without SQLite's busy handler.

SQLite admits one writer. A connection that meets the write lock taken waits in SQLite's
busy handler, which sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms between tries
(sqlite3.c, ``sqliteDefaultBusyCallback``): behind a commit of 2 ms, a writer of another
process may sleep 8 ms, and under steady contention its tries fall 25-100 ms apart. Inside
one process the driver's writer lock already queues write transactions; between processes,
this module's ``flock`` on a small file does: a writer waits for its turn here, in steps of
at most 1 ms, and so reaches SQLite's lock as it is released.

The file is the database's, per user: beside its wake-up directory (``wakeup.py``), with
the same rule that it is used only when it is ours (a regular file of this user, mode 0600,
never a symlink). Without it (another user's name, an unwritable directory), writers wait
in the busy handler as before. A turn is advisory: SQLite's own lock still decides who
writes, so a writer outside txqueue, or another user's process, is merely waited for the
old way. A process's turn ends when it closes the file or exits, killed or not.
"""

from __future__ import annotations

import fcntl
import os
import stat

__all__ = ["STEPS", "WriterTurns"]

#: Sleeps between looks while another process has the turn, then the last one repeated.
STEPS = (0.0001, 0.0002, 0.0005, 0.001)


class WriterTurns:
    """One process's turns at writing to one database (held by one thread at a time: the
    caller holds the driver's in-process writer lock)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._descriptor: int | None = None
        self._pid = -1  # the process the descriptor was opened in (a fork's copy is shared)
        self._held = False
        self._usable = True

    def take_now(self) -> bool:
        """Take the turn if no other process has it; True also when turns are unusable.

        The driver looks again after each of `STEPS` until its timeout (on its event loop, or
        its thread, so that giving up needs no thread to stop)."""
        while True:
            descriptor = self._open()
            if descriptor is None:
                return True
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            except OSError:
                self._give_up()
                return True
            if self._still_named_by(descriptor):
                self._held = True
                return True
            # A closing process removed the file after this one opened it: the lock of that
            # file is no one's turn. Take the turn at the file the name gives now.
            self.close()

    def _still_named_by(self, descriptor: int) -> bool:
        """Whether the file's name still gives the file ``descriptor`` is open on."""
        try:
            named = os.lstat(self._path)
        except OSError:
            return False
        held = os.fstat(descriptor)
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def give(self) -> None:
        """End the turn (nothing to do when none is held)."""
        if not self._held:
            return
        self._held = False
        if self._descriptor is not None and self._pid == os.getpid():
            try:
                fcntl.flock(self._descriptor, fcntl.LOCK_UN)
            except OSError:
                self._give_up()

    def close(self) -> None:
        """Close the file; remove it when no other process is using it for a turn (removed
        while held, no process takes it after: `take_now` checks the name still gives it)."""
        descriptor, self._descriptor = self._descriptor, None
        self._held = False
        if descriptor is None or self._pid != os.getpid():
            return
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if self._still_named_by(descriptor):
                os.unlink(self._path)
        except OSError:
            pass  # in use by another process (or already gone): it stays
        finally:
            os.close(descriptor)

    def _open(self) -> int | None:
        if not self._usable:
            return None
        if self._descriptor is not None and self._pid == os.getpid():
            return self._descriptor
        if self._descriptor is not None:  # a forked child's copy: it shares the parent's lock
            os.close(self._descriptor)  # (and would keep it after the parent's death)
        self._descriptor, self._held = None, False
        try:  # O_NOFOLLOW: a symlink there fails instead of being followed
            descriptor = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            self._usable = False
            return None
        status = os.fstat(descriptor)
        if not (
            stat.S_ISREG(status.st_mode)
            and status.st_uid == os.geteuid()
            and stat.S_IMODE(status.st_mode) == 0o600
        ):
            os.close(descriptor)
            self._usable = False
            return None
        self._descriptor, self._pid = descriptor, os.getpid()
        return descriptor

    def _give_up(self) -> None:
        """The lock failed in a way no retry mends: wait in the busy handler from now on."""
        self.close()
        self._usable = False
