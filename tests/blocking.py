"""A blocking view of asyncio objects, so one test body drives both faces of txqueue.

The conformance suite and the driver suite are written once, in blocking calls. On the
asyncio face each call goes through ``Blocking``: a coroutine it returns is run to completion
on one event loop that lives in its own thread, an ``async with`` becomes a ``with``, an
``async for`` a ``for``. Nothing is re-implemented: the asyncio object does the work on a
real event loop, the view only carries calls and results across (as psycopg tests both its
faces from one source, here without generating a second copy of every test).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

#: Methods whose first argument is a function the face awaits: a blocking function given
#: there runs in a worker thread and sees the objects it is handed through a Blocking view.
CALLBACK_METHODS = frozenset({"run_in_transaction"})


class EventLoopThread:
    """One event loop running forever in a daemon thread; ``run`` blocks until a coroutine ends."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="blocking-event-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking call on the event loop's own thread would deadlock")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


_shared: EventLoopThread | None = None
_shared_lock = threading.Lock()


def shared_loop() -> EventLoopThread:
    """The process's one event-loop thread, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = EventLoopThread()
        return _shared


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def is_asyncio_object(value: Any) -> bool:
    """Whether ``value`` needs a Blocking view: an asyncio-face object, a stream, a context."""
    if value is None or isinstance(value, (str, bytes, int, float, bool, list, tuple, dict)):
        return False
    kind = type(value)
    return (
        inspect.isasyncgen(value)
        or hasattr(kind, "__aenter__")
        or (hasattr(kind, "__anext__") and not hasattr(kind, "__next__"))
        or kind.__name__.startswith("Async")
    )


class Blocking:
    """A blocking view of one asyncio object (a database, transaction, driver, stream...)."""

    __slots__ = ("_loop", "target")

    def __init__(self, target: Any, loop: EventLoopThread | None = None) -> None:
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "_loop", loop or shared_loop())

    # ---- attributes and calls --------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.target, name)
        if isinstance(value, type):
            return value
        if not callable(value):
            return Blocking(value, self._loop) if is_asyncio_object(value) else value
        return self._method(name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.target, name, value)

    def __repr__(self) -> str:
        return f"Blocking({self.target!r})"

    def _method(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            args = tuple(unwrap(arg) for arg in args)
            kwargs = {key: unwrap(value) for key, value in kwargs.items()}
            if name in CALLBACK_METHODS and args and callable(args[0]):
                args = (self._awaitable_function(args[0]), *args[1:])
            return self.adapt(method(*args, **kwargs))

        call.__name__ = name
        return call

    def _awaitable_function(self, function: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        """``function`` made awaitable: it runs in a worker thread, the loop stays free."""
        loop = self._loop

        async def in_worker_thread(*args: Any, **kwargs: Any) -> Any:
            views = [Blocking(arg, loop) if is_asyncio_object(arg) else arg for arg in args]
            return await asyncio.to_thread(function, *views, **kwargs)

        return in_worker_thread

    def adapt(self, value: Any) -> Any:
        """Run what must be awaited; give asyncio objects a Blocking view; the rest as it is."""
        if inspect.isawaitable(value):
            value = self._loop.run(_await(value))
        if is_asyncio_object(value):
            return Blocking(value, self._loop)
        return value

    # ---- async with / async for / close ----------------------------------------------------

    def __enter__(self) -> Any:
        return self.adapt(self.target.__aenter__())

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return self._loop.run(_await(self.target.__aexit__(kind, error, traceback)))

    def __iter__(self) -> Iterator[Any]:
        if not hasattr(self.target, "__anext__"):
            object.__setattr__(self, "target", self.target.__aiter__())
        return self

    def __next__(self) -> Any:
        try:
            return self.adapt(self._loop.run(_await(self.target.__anext__())))
        except StopAsyncIteration:
            raise StopIteration from None

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        return len(self.target)

    def __getitem__(self, index: Any) -> Any:
        return self.target[index]

    def close(self) -> Any:
        """``aclose`` for a stream, ``close`` (awaited when it must be) for anything else."""
        aclose = getattr(self.target, "aclose", None)
        if aclose is not None:
            return self._loop.run(_await(aclose()))
        return self.adapt(self.target.close())


def unwrap(value: Any) -> Any:
    """The asyncio object behind a Blocking view (an argument going back to the face)."""
    return value.target if isinstance(value, Blocking) else value
