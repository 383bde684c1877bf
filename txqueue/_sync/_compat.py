"""What differs between the faces beyond async/await: threads, sleeping, waiting on sockets.

Hand-written in both ``_async`` and ``_sync``; the code generator leaves these files alone.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Lock", "acquire", "monotonic", "run_blocking", "sleep", "wait_readable"]

T = TypeVar("T")
Lock = threading.Lock
monotonic = time.monotonic


def run_blocking(function: Callable[..., T], *args: Any) -> T:
    """Run blocking driver work; the sync face simply calls it."""
    return function(*args)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Wait until ``sock`` is readable or ``timeout`` passes; True when readable."""
    readable, _, _ = select.select([sock], [], [], max(timeout, 0.0))
    return bool(readable)


def acquire(lock: threading.Lock, timeout: float) -> bool:
    """Take ``lock`` within ``timeout`` seconds; False when it could not."""
    return lock.acquire(timeout=timeout)
