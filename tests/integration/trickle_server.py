"""A hostile HTTP endpoint on 127.0.0.1: it answers a status line, then one header line every
``interval`` seconds, forever (until the client hangs up or the server stops).

httpx's timeouts are per read, and each read here returns within ``interval``, so only a total
deadline per attempt ends such a request. Every request is recorded with its arrival time;
tests wait for them with `wait_for` (a condition with a deadline, no sleeps).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class TrickleServer:
    """Accepts connections on a thread; each request gets a never-ending header trickle."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.arrivals: list[float] = []
        self.hung_up: list[float] = []  # when each client closed its connection
        self.changed = threading.Condition()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._threads: list[threading.Thread] = []

    def url(self, path: str = "/slow") -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}{path}"

    def serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._trickle, args=(connection,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _trickle(self, connection: socket.socket) -> None:
        with connection:
            if not self._read_request(connection):
                return
            with self.changed:
                self.arrivals.append(time.monotonic())
                self.changed.notify_all()
            try:
                connection.sendall(b"HTTP/1.1 200 OK\r\n")
                line = 0
                while not self._stop.wait(self.interval):
                    line += 1
                    connection.sendall(f"X-Trickle-{line}: still coming\r\n".encode())
            except OSError:  # the client gave up: what the deadline is for
                with self.changed:
                    self.hung_up.append(time.monotonic())
                    self.changed.notify_all()

    @staticmethod
    def _read_request(connection: socket.socket) -> bool:
        """Read one request (headers and a Content-Length body); False if the client left."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            body += chunk
        return True

    def wait_for(self, count: int, timeout: float = 10.0) -> list[float]:
        """The arrival times of the first ``count`` requests, waiting up to ``timeout``."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.arrivals) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.arrivals)} of {count} request(s) arrived")
                self.changed.wait(left)
            return list(self.arrivals)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(5)


@contextmanager
def trickling(interval: float = 0.5) -> Iterator[TrickleServer]:
    server = TrickleServer(interval)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.close()
        thread.join(5)
