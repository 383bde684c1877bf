"""HTTP delivery against a real HTTP server on 127.0.0.1 (stdlib, in a thread), sync and async."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import FrozenInstanceError
from datetime import datetime, timedelta, timezone
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from txqueue.errors import InvalidArgument
from txqueue.events.cloudevent import make_event, to_binary_http
from txqueue.events.delivery import AsyncHttpDeliverer, Attempt, HttpDeliverer
from txqueue.events.outcomes import AttemptKind
from txqueue.events.signing import sign, verify

SHORT = 0.3  # seconds: the timeout used against the sleeping endpoint
TOGETHER = 24  # requests /together holds until all arrive: more than httpx keeps alive (20)


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.received: list[dict[str, Any]] = []
        self.release = threading.Event()  # wakes sleeping handlers at teardown
        self.together = threading.Barrier(TOGETHER)  # /together answers a full round at once

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout test) is expected, not a failure


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse can be observed
    server: Receiver

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.received.append(
            {
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
                "port": self.client_address[1],
            }
        )
        if self.path == "/ok":
            self.reply(200, b"")
        elif self.path == "/accepted":
            self.reply(202, b"queued")
        elif self.path == "/unavailable":
            self.reply(503, b"down for maintenance", {"Retry-After": "7"})
        elif self.path == "/throttled":
            self.reply(429, b"", {"Retry-After": formatdate(time.time() + 3600, usegmt=True)})
        elif self.path == "/bad":
            self.reply(400, b"missing field 'order'")
        elif self.path == "/cookie":
            self.reply(200, b"", {"Set-Cookie": "session=secret; Path=/"})
        elif self.path == "/redirect":
            self.reply(302, b"", {"Location": "/ok"})
        elif self.path == "/together":
            self.server.together.wait(10)
            self.reply(200, b"")
        elif self.path == "/broken":  # promises 100 bytes, sends 12 and hangs up
            self.send_response(500)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"partial body")
            self.wfile.flush()
            self.close_connection = True
        elif self.path == "/slow":
            self.server.release.wait(10)
            self.reply(200, b"too late")
        else:
            self.reply(404, b"no such hook")

    def reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def deliverer() -> Iterator[HttpDeliverer]:
    with HttpDeliverer(timeout=5, allow_private=True) as d:
        yield d


@pytest.fixture
async def async_deliverer() -> Any:
    async with AsyncHttpDeliverer(timeout=5, allow_private=True) as d:
        yield d


def check_common(attempt: Attempt, status: int | None, outcome: AttemptKind) -> None:
    assert attempt.status == status
    assert attempt.outcome is outcome
    assert timedelta(0) < attempt.latency < timedelta(seconds=5)


# --- expectations shared by the sync and async tests ----------------------------------------


def expect_ok(attempt: Attempt) -> None:
    check_common(attempt, 200, AttemptKind.SUCCESS)
    assert attempt.error is None and attempt.retry_after is None


def expect_unavailable(attempt: Attempt) -> None:
    check_common(attempt, 503, AttemptKind.TRANSIENT)
    assert attempt.retry_after == timedelta(seconds=7)
    assert attempt.error == "HTTP 503 Service Unavailable: down for maintenance"


def expect_bad(attempt: Attempt) -> None:
    check_common(attempt, 400, AttemptKind.PERMANENT)
    assert attempt.error == "HTTP 400 Bad Request: missing field 'order'"
    assert attempt.retry_after is None


def expect_redirect(attempt: Attempt, receiver: Receiver) -> None:
    check_common(attempt, 302, AttemptKind.PERMANENT)
    assert attempt.error is not None and "redirect to /ok not followed" in attempt.error
    assert [r["path"] for r in receiver.received] == ["/redirect"]


def expect_timeout(attempt: Attempt) -> None:
    assert attempt.status is None
    assert attempt.outcome is AttemptKind.TRANSIENT
    assert attempt.error is not None and "timeout" in attempt.error.lower()
    assert timedelta(seconds=SHORT * 0.9) <= attempt.latency < timedelta(seconds=3)


def expect_refused(attempt: Attempt) -> None:
    assert attempt.status is None
    assert attempt.outcome is AttemptKind.TRANSIENT
    assert attempt.error is not None and attempt.error.startswith("connection error: ConnectError")


@pytest.fixture(autouse=True)
def _fresh_log(receiver: Receiver) -> None:
    receiver.received.clear()


# --- sync ----------------------------------------------------------------------------------


def test_sync_200(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    expect_ok(deliverer.deliver(f"{receiver.base}/ok", {}, b"{}"))


def test_sync_202_is_success(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    attempt = deliverer.deliver(f"{receiver.base}/accepted", {}, b"{}")
    check_common(attempt, 202, AttemptKind.SUCCESS)


def test_sync_503_with_retry_after(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    expect_unavailable(deliverer.deliver(f"{receiver.base}/unavailable", {}, b"{}"))


def test_sync_429_with_http_date(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    attempt = deliverer.deliver(f"{receiver.base}/throttled", {}, b"{}")
    check_common(attempt, 429, AttemptKind.TRANSIENT)
    assert attempt.retry_after is not None
    assert timedelta(minutes=59) < attempt.retry_after <= timedelta(hours=1)


def test_sync_400(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    expect_bad(deliverer.deliver(f"{receiver.base}/bad", {}, b"{}"))


def test_sync_404_is_permanent(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    attempt = deliverer.deliver(f"{receiver.base}/nowhere", {}, b"{}")
    check_common(attempt, 404, AttemptKind.PERMANENT)


def test_sync_302_is_not_followed(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    expect_redirect(deliverer.deliver(f"{receiver.base}/redirect", {}, b"{}"), receiver)


def test_sync_broken_body_is_quoted_as_far_as_it_came(
    deliverer: HttpDeliverer, receiver: Receiver
) -> None:
    attempt = deliverer.deliver(receiver.base + "/broken", {}, b"{}")
    assert attempt.status == 500
    assert attempt.error == "HTTP 500 Internal Server Error: partial body"


def test_sync_timeout(receiver: Receiver) -> None:
    with HttpDeliverer(timeout=SHORT, allow_private=True) as deliverer:
        expect_timeout(deliverer.deliver(f"{receiver.base}/slow", {}, b"{}"))


def test_sync_connection_refused(deliverer: HttpDeliverer, closed_port: int) -> None:
    expect_refused(deliverer.deliver(f"http://127.0.0.1:{closed_port}/", {}, b"{}"))


def test_sync_unsendable_requests_are_permanent(
    deliverer: HttpDeliverer, receiver: Receiver
) -> None:
    attempt = deliverer.deliver("ftp://127.0.0.1/x", {}, b"")
    assert (attempt.status, attempt.outcome) == (None, AttemptKind.PERMANENT)
    attempt = deliverer.deliver(f"{receiver.base}/ok", {"x-bad": "a\r\nb"}, b"")
    assert (attempt.status, attempt.outcome) == (None, AttemptKind.PERMANENT)
    assert attempt.error is not None and attempt.error.startswith("request cannot be sent")


def test_sync_connection_is_reused(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    for _ in range(3):
        expect_ok(deliverer.deliver(f"{receiver.base}/ok", {}, b"{}"))
    deliverer.deliver(f"{receiver.base}/bad", {}, b"{}")
    expect_ok(deliverer.deliver(f"{receiver.base}/ok", {}, b"{}"))
    assert len({r["port"] for r in receiver.received}) == 1


def test_sync_cookies_a_destination_sets_are_not_sent_back(
    deliverer: HttpDeliverer, receiver: Receiver
) -> None:
    """A pipeline's destination must not plant a cookie that later deliveries (to it, or to
    another pipeline's destination on the same host) would carry."""
    expect_ok(deliverer.deliver(f"{receiver.base}/cookie", {}, b"{}"))
    expect_ok(deliverer.deliver(f"{receiver.base}/ok", {}, b"{}"))
    expect_ok(deliverer.deliver(f"{receiver.base}/cookie", {}, b"{}"))
    assert [r["path"] for r in receiver.received] == ["/cookie", "/ok", "/cookie"]
    assert all("cookie" not in r["headers"] for r in receiver.received)


def test_sync_pool_keeps_a_connection_per_thread_alive(receiver: Receiver) -> None:
    """With ``limits`` sized to the threads, a second round of concurrent requests reuses the
    first round's connections (httpx's default pool keeps 20 alive and reconnects the rest)."""
    limits = httpx.Limits(max_connections=TOGETHER, max_keepalive_connections=TOGETHER)
    url = f"{receiver.base}/together"
    with (
        HttpDeliverer(timeout=15, allow_private=True, limits=limits) as deliverer,
        ThreadPoolExecutor(TOGETHER) as threads,
    ):
        for _ in range(2):
            attempts = list(
                threads.map(lambda _: deliverer.deliver(url, {}, b"{}"), range(TOGETHER))
            )
            assert {a.outcome for a in attempts} == {AttemptKind.SUCCESS}
    assert len(receiver.received) == 2 * TOGETHER
    assert len({r["port"] for r in receiver.received}) == TOGETHER


def test_dispatcher_pool_is_sized_to_its_concurrency() -> None:
    from txqueue.events.sender import pool_limits

    assert pool_limits(32).max_keepalive_connections == 32
    assert pool_limits(32).max_connections == 100
    assert pool_limits(4).max_keepalive_connections == 20  # never below httpx's default


def test_sync_cloudevent_signed_end_to_end(deliverer: HttpDeliverer, receiver: Receiver) -> None:
    event = make_event(
        {
            "id": "evt-1",
            "source": "//shop",
            "type": "com.example.order.created",
            "specversion": "1.0",
            "region": "eu",
        },
        {"order": 42},
    )
    headers, body = to_binary_http(event, "uid-1")
    headers |= sign(b"secret-key", "uid-1", 1_714_979_289, body)
    expect_ok(deliverer.deliver(f"{receiver.base}/ok", headers, body))
    (request,) = receiver.received
    assert request["body"] == b'{"order": 42}'
    got = request["headers"]
    assert (got["ce-id"], got["ce-messageuid"], got["ce-region"]) == ("evt-1", "uid-1", "eu")
    assert got["content-type"] == "application/json"
    assert got["user-agent"].startswith("txqueue")
    verify(
        b"secret-key", got, request["body"], now=datetime.fromtimestamp(1_714_979_289, timezone.utc)
    )


@pytest.mark.parametrize("timeout", [0, -1, timedelta(0), "30"])
def test_bad_timeouts_are_refused(timeout: Any) -> None:
    with pytest.raises(InvalidArgument, match="timeout must be a positive number of seconds"):
        HttpDeliverer(timeout=timeout)


def test_timeout_may_be_a_timedelta() -> None:
    with HttpDeliverer(timeout=timedelta(seconds=2)) as deliverer:
        assert deliverer.timeout == 2.0
    assert HttpDeliverer.__init__.__defaults__ == (30.0,)


def test_attempt_is_frozen() -> None:
    attempt = Attempt(200, AttemptKind.SUCCESS, None, timedelta(0), None)
    with pytest.raises(FrozenInstanceError):
        attempt.status = 500  # type: ignore[misc]


# --- async ---------------------------------------------------------------------------------


async def test_async_cookies_a_destination_sets_are_not_sent_back(
    async_deliverer: AsyncHttpDeliverer, receiver: Receiver
) -> None:
    expect_ok(await async_deliverer.deliver(f"{receiver.base}/cookie", {}, b"{}"))
    expect_ok(await async_deliverer.deliver(f"{receiver.base}/ok", {}, b"{}"))
    assert [r["path"] for r in receiver.received] == ["/cookie", "/ok"]
    assert all("cookie" not in r["headers"] for r in receiver.received)


async def test_async_200(async_deliverer: AsyncHttpDeliverer, receiver: Receiver) -> None:
    expect_ok(await async_deliverer.deliver(f"{receiver.base}/ok", {}, b"{}"))


async def test_async_503_with_retry_after(
    async_deliverer: AsyncHttpDeliverer, receiver: Receiver
) -> None:
    expect_unavailable(await async_deliverer.deliver(f"{receiver.base}/unavailable", {}, b"{}"))


async def test_async_400(async_deliverer: AsyncHttpDeliverer, receiver: Receiver) -> None:
    expect_bad(await async_deliverer.deliver(f"{receiver.base}/bad", {}, b"{}"))


async def test_async_302_is_not_followed(
    async_deliverer: AsyncHttpDeliverer, receiver: Receiver
) -> None:
    attempt = await async_deliverer.deliver(f"{receiver.base}/redirect", {}, b"{}")
    expect_redirect(attempt, receiver)


async def test_async_broken_body_is_quoted_as_far_as_it_came(
    async_deliverer: AsyncHttpDeliverer, receiver: Receiver
) -> None:
    attempt = await async_deliverer.deliver(receiver.base + "/broken", {}, b"{}")
    assert attempt.status == 500
    assert attempt.error == "HTTP 500 Internal Server Error: partial body"


async def test_async_deliverer_takes_limits(receiver: Receiver) -> None:
    limits = httpx.Limits(max_connections=3, max_keepalive_connections=2)
    async with AsyncHttpDeliverer(timeout=5, allow_private=True, limits=limits) as deliverer:
        attempt = await deliverer.deliver(receiver.base + "/ok", {}, b"{}")
        assert attempt.status == 200


async def test_async_timeout(receiver: Receiver) -> None:
    async with AsyncHttpDeliverer(timeout=SHORT, allow_private=True) as deliverer:
        expect_timeout(await deliverer.deliver(f"{receiver.base}/slow", {}, b"{}"))


async def test_async_connection_refused(
    async_deliverer: AsyncHttpDeliverer, closed_port: int
) -> None:
    expect_refused(await async_deliverer.deliver(f"http://127.0.0.1:{closed_port}/", {}, b"{}"))


async def test_async_connection_is_reused(
    async_deliverer: AsyncHttpDeliverer, receiver: Receiver
) -> None:
    for path in ("/ok", "/bad", "/ok", "/unavailable", "/ok"):
        await async_deliverer.deliver(f"{receiver.base}{path}", {}, b"{}")
    assert len({r["port"] for r in receiver.received}) == 1


async def test_async_unsendable_request_is_permanent(
    async_deliverer: AsyncHttpDeliverer,
) -> None:
    attempt = await async_deliverer.deliver("ftp://127.0.0.1/x", {}, b"")
    assert (attempt.status, attempt.outcome) == (None, AttemptKind.PERMANENT)
