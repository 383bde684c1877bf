"""On the Cloud Spanner emulator, txqueue's read-write transactions of one process take turns.

The emulator runs one read-write transaction at a time: the first to read or write holds it
until it ends, and any other that reads or writes meanwhile, in any database of the emulator,
is aborted. A process's concurrent transactions (a worker's handlers, receivers and acks)
would then abort each other and retry with backoff, mostly for nothing: measured with 16
threads in each of two processes, 160 one-read-one-insert transactions took 11 s, 2.3
attempts each and up to 10 s apiece; taking turns, 3.3 s, one attempt each. So on the
emulator each read-write transaction of txqueue's (its own, and a ``batch`` or
``run_in_transaction`` on a connection of its own) waits for its turn, first come first
served, and holds it until it commits or rolls back. A wait is bounded (``WAIT``): past it the
transaction goes ahead, and may be aborted and retried as before. One nested in another of the
same thread or task does not wait for its own holder. Other processes still conflict, and
their aborts are retried. Cloud Spanner runs transactions concurrently: no turns there.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable

__all__ = ["TURNS", "AsyncTurn", "Turn", "Turns"]

#: The longest a transaction waits for its turn before it goes ahead anyway.
WAIT = 5.0


def _owner() -> object:
    """Who asks: the running asyncio task, else the thread."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop in this thread
        task = None
    return task if task is not None else threading.current_thread()


class Turns:
    """Whose turn it is: one holder, then the waiters in the order they asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: object | None = None
        self._held = False
        self._waiting: deque[tuple[object, Callable[[], None]]] = deque()

    def request(self, owner: object, wake: Callable[[], None]) -> str:
        """ "taken" (the turn is the caller's now), "nested" (its own holder asked again: go
        ahead without it) or "queued" (``wake`` is called when the turn is given to it)."""
        with self._lock:
            if not self._held:
                self._held, self._holder = True, owner
                return "taken"
            if self._holder is owner:
                return "nested"
            self._waiting.append((owner, wake))
            return "queued"

    def withdraw(self, wake: Callable[[], None]) -> bool:
        """Leave the queue; False when the turn was given to ``wake`` meanwhile."""
        with self._lock:
            for entry in self._waiting:
                if entry[1] is wake:
                    self._waiting.remove(entry)
                    return True
            return False

    def release(self) -> None:
        """End the holder's turn: the first waiter's begins."""
        with self._lock:
            if not self._waiting:
                self._held, self._holder = False, None
                return
            self._holder, wake = self._waiting.popleft()
        wake()


#: Every handle of this process on the emulator takes turns here (the emulator's one
#: transaction at a time is across all its databases).
TURNS = Turns()


class Turn:
    """One transaction's turn, waited for by blocking."""

    def __init__(self, turns: Turns | None) -> None:
        self._turns = turns
        self.held = False

    def take(self, wait: float = WAIT) -> None:
        """Wait up to ``wait`` seconds for the turn (no turns: at once)."""
        if self._turns is None:
            return
        given = threading.Event()
        wake = given.set
        state = self._turns.request(_owner(), wake)
        if state == "nested":
            return
        if state == "queued" and not given.wait(wait) and self._turns.withdraw(wake):
            return  # waited long enough: go ahead without it
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            assert self._turns is not None
            self._turns.release()


class AsyncTurn:
    """One transaction's turn, waited for without blocking the event loop."""

    def __init__(self, turns: Turns | None) -> None:
        self._turns = turns
        self.held = False

    async def take(self, wait: float = WAIT) -> None:
        """Wait up to ``wait`` seconds for the turn (no turns: at once)."""
        turns = self._turns
        if turns is None:
            return
        loop = asyncio.get_running_loop()
        given: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not given.done():
                given.set_result(None)

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop is closed: nobody will use the turn
                turns.release()

        state = turns.request(_owner(), wake)
        if state == "nested":
            return
        if state == "queued":
            try:
                await asyncio.wait_for(asyncio.shield(given), wait)
            except asyncio.TimeoutError:
                if turns.withdraw(wake):
                    return  # waited long enough: go ahead without it
            except BaseException:  # cancelled: leave the queue, or pass on a turn just given
                if not turns.withdraw(wake):
                    turns.release()
                raise
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            assert self._turns is not None
            self._turns.release()


def turns_for(emulated: bool) -> Turns | None:
    """The process's turns on the emulator; None on Cloud Spanner."""
    return TURNS if emulated else None
