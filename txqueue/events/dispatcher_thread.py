"""A dispatcher on a thread of its own, for synchronous programs (``txqueue.Dispatcher``).

``AsyncDispatcher`` (``txqueue.events.dispatcher``) does the delivering; this runs one on a
background thread with its own event loop and database connections, started and stopped
from the calling thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import txqueue
from txqueue.drivers.engines import with_pool_size
from txqueue.events.dispatcher import AsyncDispatcher, DispatcherStats

__all__ = ["Dispatcher"]


class Dispatcher:
    """An `AsyncDispatcher` on its own thread and event loop, for synchronous programs.

    ``with Dispatcher(url, concurrency=4): ...`` delivers while the block runs. The
    dispatcher opens its own connections (a PostgreSQL pool of concurrency + 2 unless the
    URL sets ``pool_size``).
    """

    def __init__(self, url: str, **options: Any) -> None:
        self.url = url
        self.options = options
        self.stats = DispatcherStats()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dispatcher: AsyncDispatcher | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self, timeout: float = 30.0) -> Dispatcher:
        """Start delivering on a background thread; return once the dispatcher runs."""
        self._thread = threading.Thread(target=self._run, name="txqueue-dispatcher", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) and self._error is None:
            raise TimeoutError("the dispatcher did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def run(self) -> None:
        """Deliver in this thread until `stop` is called from another one."""
        asyncio.run(self._main())

    def _run(self) -> None:
        try:
            self.run()
        except BaseException as error:  # handed to the thread calling start() or stop()
            self._error = error
            self._ready.set()

    async def _main(self) -> None:
        size = self.options.get("concurrency", 8) + 2
        database = await txqueue.connect_async(with_pool_size(self.url, size))
        try:
            self._dispatcher = AsyncDispatcher(database, **self.options)
            self.stats = self._dispatcher.stats
            await self._dispatcher.events.ensure_tables()
            self._loop = asyncio.get_running_loop()
            self._ready.set()
            await self._dispatcher.run()
        finally:
            await database.close()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop delivering (attempts in flight finish) and wait for the thread to end."""
        if self._loop is not None and self._dispatcher is not None:
            self._loop.call_soon_threadsafe(self._dispatcher.stop)
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            raise self._error

    def __enter__(self) -> Dispatcher:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
