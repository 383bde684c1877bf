"""A real HTTP endpoint on 127.0.0.1 for the event-layer tests: scripted statuses, recorded requests.

Each path answers from its own script (a list of statuses, the last one repeating; default
200), so "503 twice then 200" is ``receiver.script("/flaky", 503, 503, 200)``. Every request is
recorded with its arrival time (server-side ``time.monotonic()``), headers and body, and tests
wait for requests with `wait_for`, which blocks on a condition with a deadline (no sleeps).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    path: str
    arrived: float
    headers: dict[str, str]
    body: bytes


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[Request] = []
        self.changed = threading.Condition()
        self._scripts: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self.hold = threading.Event()  # set: requests to /hold block until released
        self.release = threading.Event()
        self.gate_width = 0  # requests to /gate wait until this many are in it at once
        self.gate_opened = threading.Event()
        self._in_gate = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def script(self, path: str, *statuses: int, headers: dict[str, str] | None = None) -> None:
        """Answer the next requests to ``path`` with ``statuses`` in turn, the last repeating."""
        with self.changed:
            self._scripts[path] = [(status, dict(headers or {})) for status in statuses]

    def next_reply(self, path: str) -> tuple[int, dict[str, str]]:
        with self.changed:
            script = self._scripts.get(path) or [(200, {})]
            return script.pop(0) if len(script) > 1 else script[0]

    def record(self, request: Request) -> None:
        with self.changed:
            self.requests.append(request)
            self.changed.notify_all()

    def received(self, path: str) -> list[Request]:
        with self.changed:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 20.0) -> list[Request]:
        """The first ``count`` requests to ``path``, waiting up to ``timeout`` for them."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                found = [r for r in self.requests if r.path == path]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{path}: {len(found)} of {count} request(s) within {timeout} s"
                    )
                self.changed.wait(left)

    def pass_gate(self) -> None:
        """Wait until `gate_width` requests are in the gate at once (30 s at most); the gate
        then stays open. More requests at once than one client sends shows several clients."""
        with self.changed:
            self._in_gate += 1
            if self._in_gate >= self.gate_width:
                self.gate_opened.set()
        try:
            self.gate_opened.wait(30)
        finally:
            with self.changed:
                self._in_gate -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a dispatcher that was killed mid-request is expected


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Receiver

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.record(Request(self.path, time.monotonic(), headers, body))
        if self.path == "/hold" and self.server.hold.is_set():
            self.server.release.wait(30)
        if self.path == "/gate":
            self.server.pass_gate()
        status, extra = self.server.next_reply(self.path)
        self.send_response(status)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("content-length", "0")
        self.end_headers()


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.gate_opened.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def wait_until(condition: Any, timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll ``condition()`` until it returns a truthy value or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        time.sleep(interval)
