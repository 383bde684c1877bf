"""What differs between the faces beyond async/await: threads, sleeping, waiting on sockets.

Written by hand in both ``_async_compat`` and ``_sync_compat`` (the code generator maps one
name to the other and leaves both files alone). They sit in ``txqueue.drivers``, below both
faces, because the drivers need them and no driver imports a face.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "CancelledError",
    "Lock",
    "acquire",
    "finish",
    "monotonic",
    "run_blocking",
    "sleep",
    "wait_readable",
]

T = TypeVar("T")
Lock = threading.Lock


class CancelledError(BaseException):
    """Never raised: the sync face has no task cancellation (the async face's twin)."""


monotonic = time.monotonic


def run_blocking(function: Callable[..., T], *args: Any) -> T:
    """Run blocking driver work; the sync face simply calls it."""
    return function(*args)


def finish(result: T) -> tuple[T, bool]:
    """The sync face's call has already run to its end: never cancelled."""
    return result, False


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Wait until ``sock`` is readable or ``timeout`` passes; True when readable."""
    readable, _, _ = select.select([sock], [], [], max(timeout, 0.0))
    return bool(readable)


def acquire(lock: threading.Lock, timeout: float) -> bool:
    """Take ``lock`` within ``timeout`` seconds; False when it could not."""
    return lock.acquire(timeout=timeout)
