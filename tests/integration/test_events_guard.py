"""The destination guard at delivery time, on SQLite and PostgreSQL: every connection resolves
the destination's host again and refuses non-public addresses unless the pipeline recorded
``allow_private``; URLs are normalized at creation; response bodies in the attempt log are
capped and made printable.

DNS cannot be changed for real, so ``socket.getaddrinfo`` (the resolver both the creation check
and the dispatcher's connections use) answers chosen addresses for a few made-up names. Every
connection these tests make goes to the local server on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from events_receiver import wait_until

import txqueue
from txqueue.events.records import CONFIG
from txqueue.events.resources import encode_resource

SECOND = timedelta(seconds=1)
ENVIRONMENT = "TXQUEUE_ALLOW_PRIVATE_DESTINATIONS"
PUBLIC = "93.184.216.34"  # answered at creation only: never connected to
NOISE = (b"\x1b[31mred\x1b[0m \x07bell \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\\r\n") * 2
BIG_BODY = (NOISE * (100 * 1024 // len(NOISE) + 1))[: 100 * 1024]


class Server(ThreadingHTTPServer):
    """Records each request (path, Host header); ``/noisy`` answers 500 with 100 KiB of noise."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, str]] = []
        self.port = int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.requests.append((self.path, self.headers.get("host", "")))
        body = BIG_BODY if self.path == "/noisy" else b""
        self.send_response(500 if self.path == "/noisy" else 200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    thread = threading.Thread(target=running.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()
        thread.join(5)


class Dns:
    """``socket.getaddrinfo`` answering ``answers`` for their names; other names resolve for real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: dict[str, str] = {}
        real = socket.getaddrinfo

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            name = host.decode() if isinstance(host, bytes) else host
            address = self.answers.get(str(name).lower())
            if address is None:
                return real(host, port, *args, **kwargs)
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Dns:
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    return Dns(monkeypatch)


@pytest.fixture
def events(database_url: str) -> Iterator[txqueue.Events]:
    database = txqueue.connect(database_url)
    events = txqueue.Events(database)
    events.create_bus("orders")
    yield events
    database.close()


def deliver_one(
    events: txqueue.Events, database_url: str, pipeline: str
) -> txqueue.DeliveryAttempt:
    """Route one event to ``pipeline``, run a dispatcher until it is delivered or failed."""
    events.create_enrollment("all", bus="orders", pipeline=pipeline, cel_match="true")
    uid = events.publish("orders", {"type": "t", "source": "//shop", "id": "order-1"})
    with txqueue.Dispatcher(database_url, attempt_timeout=5 * SECOND):
        rows = wait_until(
            lambda: [r for r in events.attempts(uid) if r.state in ("delivered", "failed")]
        )
    assert len(events.attempts(uid)) == 1  # a refusal is not retried
    return rows[-1]


def test_a_host_rebound_to_loopback_after_creation_is_refused_at_connect(
    events: txqueue.Events,
    database_url: str,
    server: Server,
    dns: Dns,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dns.answers["hooks.example"] = PUBLIC
    events.create_pipeline("rebound", f"http://hooks.example:{server.port}/rebound")
    assert events.get_pipeline("rebound").allow_private is False
    dns.answers["hooks.example"] = "127.0.0.1"
    monkeypatch.setenv(ENVIRONMENT, "1")  # the dispatcher's environment does not decide

    row = deliver_one(events, database_url, "rebound")

    assert (row.state, row.outcome, row.status) == ("failed", "permanent", None), row.error
    assert "destination host hooks.example resolved to 127.0.0.1, a loopback address" in (
        row.error or ""
    )
    assert server.requests == []


def test_the_environment_switch_at_creation_is_recorded_and_honoured_at_delivery(
    events: txqueue.Events,
    database_url: str,
    server: Server,
    dns: Dns,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dns.answers["internal.example"] = "127.0.0.1"
    monkeypatch.setenv(ENVIRONMENT, "1")
    created = events.create_pipeline("local", f"http://internal.example:{server.port}/local")
    monkeypatch.delenv(ENVIRONMENT)
    assert created.allow_private is True
    assert events.get_pipeline("local").allow_private is True

    row = deliver_one(events, database_url, "local")

    assert row.state == "delivered", row.error
    assert server.requests == [("/local", f"internal.example:{server.port}")]


def test_scheme_and_host_are_normalized_and_delivered(
    events: txqueue.Events, database_url: str, server: Server, dns: Dns
) -> None:
    dns.answers["example.com"] = "127.0.0.1"
    url = f"HTTP://Example.COM:{server.port}/X?Q=1"
    pipeline = events.create_pipeline("shouting", url, allow_private=True)

    row = deliver_one(events, database_url, "shouting")

    assert row.state == "delivered", row.error
    assert pipeline.destination.target == f"http://example.com:{server.port}/X?Q=1"
    assert server.requests == [("/X?Q=1", f"example.com:{server.port}")]


def test_an_upper_case_scheme_stored_by_an_older_version_is_delivered_over_http(
    events: txqueue.Events, database_url: str, server: Server, dns: Dns
) -> None:
    events.create_pipeline("old", f"http://127.0.0.1:{server.port}/old", allow_private=True)
    _, config = encode_resource(events.get_pipeline("old"))
    stored = json.loads(config)
    stored["destination"] = f"HTTP://127.0.0.1:{server.port}/old"
    with events.database.batch() as batch:
        batch.update(CONFIG, ("kind", "name", "config"), [("pipeline", "old", json.dumps(stored))])

    row = deliver_one(events, database_url, "old")

    assert row.state == "delivered", row.error
    assert [path for path, _ in server.requests] == ["/old"]


def test_a_response_body_in_the_attempt_log_is_capped_and_printable(
    events: txqueue.Events, database_url: str, server: Server, dns: Dns
) -> None:
    retry = txqueue.RetryPolicy(max_attempts=1)
    url = f"http://127.0.0.1:{server.port}/noisy"
    events.create_pipeline("noisy", url, retry=retry, allow_private=True)

    row = deliver_one(events, database_url, "noisy")

    error = row.error or ""
    assert (row.state, row.status) == ("failed", 500)
    assert error.startswith("HTTP 500 Internal Server Error: \\x1b[31mred\\x1b[0m \\x07bell")
    assert "\\x1b]8;;http://evil.example\\x1b\\link" in error
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in error)
    assert "cut at 1024 bytes" in error
    assert len(error) < 1024 * 4 + 200  # every kept byte at most four characters once escaped
