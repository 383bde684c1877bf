"""The event benchmark's HTTP endpoint: a minimal HTTP/1.1 receiver in its own process.

It answers every POST with ``204`` over keep-alive and notes, per path, when each CloudEvent
id (the ``ce-id`` header) arrived; ``GET /stats/<path>`` returns those notes as JSON. It
parses no more than the request line, the headers and ``content-length``, on one asyncio
loop, so that it is not what limits a benchmark's rate: `ceiling` measures its own rate
with a bare httpx keep-alive POST loop, to be reported beside the figures.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["Arrivals", "Endpoint", "ceiling"]

_NO_CONTENT = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"


@dataclass
class Arrivals:
    """What one path received: requests in all, and each event id's first arrival time."""

    received: int = 0
    first: float | None = None
    last: float | None = None
    events: dict[str, float] = field(default_factory=dict)

    @property
    def duplicates(self) -> int:
        return self.received - len(self.events)

    def rate(self) -> float:
        """Requests per second between the first arrival and the last."""
        if self.first is None or self.last is None or self.last <= self.first:
            return 0.0
        return (self.received - 1) / (self.last - self.first)


class _Receiver(asyncio.Protocol):
    def __init__(self, paths: dict[str, Arrivals]) -> None:
        self.paths = paths
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buffer) < end + 4 + length:
                return
            del self.buffer[: end + 4 + length]
            method, path = lines[0].split(" ")[:2]
            assert self.transport is not None
            if method == "GET" and path.startswith("/stats/"):
                arrivals = self.paths.get(path[len("/stats") :], Arrivals())
                body = json.dumps(arrivals.__dict__).encode()
                head = f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                self.transport.write(head + body)
                continue
            self._note(path, headers.get("ce-id", ""))
            self.transport.write(_NO_CONTENT)

    def _note(self, path: str, event_id: str) -> None:
        now = time.time()
        arrivals = self.paths.get(path)
        if arrivals is None:
            arrivals = self.paths[path] = Arrivals()
        arrivals.received += 1
        arrivals.events.setdefault(event_id, now)
        if arrivals.first is None:
            arrivals.first = now
        arrivals.last = now


def _serve(port: Any) -> None:
    async def main() -> None:
        paths: dict[str, Arrivals] = {}
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Receiver(paths), "127.0.0.1", 0, backlog=512)
        port.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


class Endpoint:
    """The receiver running in a spawned process; `close` stops it."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        receiving, sending = context.Pipe(duplex=False)
        self._process = context.Process(target=_serve, args=(sending,), daemon=True)
        self._process.start()
        if not receiving.poll(30):
            self._process.kill()
            raise RuntimeError("the benchmark's HTTP endpoint did not start")
        self.port: int = receiving.recv()
        self._client = httpx.Client(trust_env=False)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def arrivals(self, path: str) -> Arrivals:
        """What ``path`` received so far."""
        response = self._client.get(self.url(f"/stats{path}"))
        return Arrivals(**response.json())

    def wait(self, path: str, count: int, timeout: float) -> Arrivals:
        """The arrivals at ``path`` once ``count`` distinct events arrived, or at ``timeout``."""
        deadline = time.monotonic() + timeout
        arrivals = self.arrivals(path)
        while len(arrivals.events) < count and time.monotonic() < deadline:
            time.sleep(0.05)
            arrivals = self.arrivals(path)
        return arrivals

    def close(self) -> None:
        self._client.close()
        self._process.kill()
        self._process.join(10)

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def ceiling(endpoint: Endpoint, requests: int, concurrency: int) -> float:
    """The endpoint's own rate: a bare httpx keep-alive POST loop of ``concurrency`` threads
    (sized pool) posting ~100-byte bodies with CloudEvent headers; requests per second."""
    path = f"/ceiling-{time.monotonic_ns()}"
    url = endpoint.url(path)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    body = json.dumps({"order": 0, "total": 42.5, "pad": "x" * 60}).encode()
    with httpx.Client(trust_env=False, limits=limits) as client:

        def post(number: int) -> int:
            headers = {"ce-id": str(number), "content-type": "application/json"}
            return client.post(url, headers=headers, content=body).status_code

        with ThreadPoolExecutor(concurrency) as threads:
            list(threads.map(post, range(requests)))
    return endpoint.arrivals(path).rate()
