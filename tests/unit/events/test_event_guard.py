"""The destination guard at connect time (txqueue.events.guarded), against real servers on
127.0.0.1, plain and TLS, sync and async.

Resolution is injected (the ``resolver`` seam); where a name must resolve to a public address,
an inner backend stands in for the network and connects to the local server instead,
recording the address it was asked for. No test connects anywhere but 127.0.0.1.
"""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from txqueue.events._async_guarded import AsyncGuardedTransport
from txqueue.events._sync_guarded import GuardedBackend, GuardedTransport
from txqueue.events.delivery import AsyncHttpDeliverer, HttpDeliverer
from txqueue.events.destinations import DestinationRefused
from txqueue.events.guarded import checked_addresses
from txqueue.events.outcomes import AttemptKind

PUBLIC = "93.184.216.34"
NOISE = (
    b"\x1b[2J\x1b[31mred\x1b[0m \x07bell \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\\r\n"
)
BIG_BODY = (NOISE * (100 * 1024 // len(NOISE) + 1))[: 100 * 1024]


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.port = int(self.server_address[1])
        self.requests: list[tuple[str, str, int]] = []  # path, Host header, client port
        if context is not None:
            self.socket = context.wrap_socket(self.socket, server_side=True)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        host = self.headers.get("host", "")
        self.server.requests.append((self.path, host, self.client_address[1]))
        body = BIG_BODY if self.path == "/noisy" else b""
        self.send_response(500 if self.path == "/noisy" else 200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(server: Server) -> Iterator[Server]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve(Server())


class Dns:
    """A resolver answering ``answers`` by name, counting lookups; unknown names fail."""

    def __init__(self, **answers: list[str]) -> None:
        self.answers = {name.replace("_", "."): list(found) for name, found in answers.items()}
        self.asked: list[str] = []

    def __call__(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        self.asked.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in self.answers[host]
        ]


class Loopback(httpcore.SyncBackend):
    """Connects to the local server whatever address it is asked for; records the addresses."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.asked: list[str] = []

    def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        self.asked.append(host)
        return super().connect_tcp("127.0.0.1", self.port, *args, **kwargs)


class AsyncLoopback(httpcore.AnyIOBackend):
    def __init__(self, port: int) -> None:
        self.port = port
        self.asked: list[str] = []

    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        self.asked.append(host)
        return await super().connect_tcp("127.0.0.1", self.port, *args, **kwargs)


def test_every_address_is_checked_before_any_connection() -> None:
    backend = Loopback(9)
    guard = GuardedBackend(resolver=Dns(hooks_example=[PUBLIC, "10.0.0.5"]), backend=backend)
    with pytest.raises(DestinationRefused) as refused:
        guard.connect_tcp("hooks.example", 443)
    assert str(refused.value).startswith(
        "destination host hooks.example resolved to 10.0.0.5, a private address"
    )
    assert backend.asked == []


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("fec0::1", "is a site-local address"),
        ("FEC0:0::1", "is a site-local address"),
        ("127.0.0.1", "is a loopback address"),
        ("::ffff:169.254.169.254", "is a link-local (embedded in IPv6) address"),
    ],
)
def test_ip_literals_are_judged_without_a_lookup(host: str, reason: str) -> None:
    dns = Dns()
    with pytest.raises(
        DestinationRefused, match=f"destination host {re.escape(host)} {re.escape(reason)}"
    ):
        checked_addresses(host, 80, dns)
    assert dns.asked == []


def test_a_name_that_does_not_resolve_is_a_connection_error() -> None:
    with pytest.raises(httpcore.ConnectError, match=r"nowhere\.example does not resolve"):
        checked_addresses("nowhere.example", 80, Dns())


def test_the_connection_goes_to_the_checked_address_and_is_kept_alive(server: Server) -> None:
    dns, backend = Dns(hooks_example=[PUBLIC]), Loopback(server.port)
    transport = GuardedTransport(resolver=dns, backend=backend)
    with httpx.Client(transport=transport) as client:
        for _ in range(3):
            assert client.post(f"http://hooks.example:{server.port}/x").status_code == 200
    assert dns.asked == ["hooks.example"]  # checked when opened, not per request
    assert backend.asked == [PUBLIC]
    hosts = {(host, client_port) for _, host, client_port in server.requests}
    assert len(server.requests) == 3 and len(hosts) == 1
    assert hosts.pop()[0] == f"hooks.example:{server.port}"


async def test_async_the_connection_goes_to_the_checked_address(server: Server) -> None:
    dns, backend = Dns(hooks_example=[PUBLIC]), AsyncLoopback(server.port)
    transport = AsyncGuardedTransport(resolver=dns, backend=backend)
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(2):
            response = await client.post(f"http://hooks.example:{server.port}/x")
            assert response.status_code == 200
    assert dns.asked == ["hooks.example"] and backend.asked == [PUBLIC]
    assert len({client_port for _, _, client_port in server.requests}) == 1


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for hooks.example only (not for 127.0.0.1)."""
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
            ),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2"),
            *("-subj", "/CN=hooks.example", "-addext", "subjectAltName=DNS:hooks.example"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_keeps_the_name_for_sni_and_the_certificate_check(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda _socket, name, _context: names.append(name)  # type: ignore[assignment,return-value]
    trusted = ssl.create_default_context(cafile=str(cert))
    for running in serve(Server(context)):
        dns, backend = Dns(hooks_example=[PUBLIC]), Loopback(running.port)
        transport = GuardedTransport(resolver=dns, backend=backend, verify=trusted)
        with httpx.Client(transport=transport) as client:
            response = client.post(f"https://hooks.example:{running.port}/tls")
        assert response.status_code == 200
        assert backend.asked == [PUBLIC]
        assert names == ["hooks.example"]
        assert running.requests[0][:2] == ("/tls", f"hooks.example:{running.port}")
        # Connecting by IP would have failed the certificate's host name check:
        with httpx.Client(verify=trusted) as plain, pytest.raises(httpx.ConnectError):
            plain.post(f"https://127.0.0.1:{running.port}/tls")


def test_the_deliverer_refuses_a_rebound_name_permanently(server: Server) -> None:
    dns = Dns(hooks_example=["127.0.0.1"])
    with HttpDeliverer(timeout=5, resolver=dns) as deliverer:
        attempt = deliverer.deliver(f"http://hooks.example:{server.port}/x", {}, b"{}")
        allowed = deliverer.deliver(
            f"http://127.0.0.1:{server.port}/y", {}, b"{}", allow_private=True
        )
    assert (attempt.status, attempt.outcome) == (None, AttemptKind.PERMANENT)
    assert (attempt.error or "").startswith(
        "destination host hooks.example resolved to 127.0.0.1, a loopback address"
    )
    assert allowed.outcome is AttemptKind.SUCCESS
    assert [path for path, _, _ in server.requests] == ["/y"]


async def test_async_deliverer_refuses_a_rebound_name_permanently(server: Server) -> None:
    dns = Dns(hooks_example=["::1"])
    async with AsyncHttpDeliverer(timeout=5, resolver=dns) as deliverer:
        attempt = await deliverer.deliver(f"http://hooks.example:{server.port}/x", {}, b"{}")
    assert (attempt.status, attempt.outcome) == (None, AttemptKind.PERMANENT)
    assert "hooks.example resolved to ::1, a loopback address" in (attempt.error or "")
    assert server.requests == []


def check_noisy(error: str | None) -> None:
    assert error is not None
    assert error.startswith("HTTP 500 Internal Server Error: \\x1b[2J\\x1b[31mred\\x1b[0m \\x07")
    assert "\\x1b]8;;http://evil.example\\x1b\\link\\x1b]8;;\\x1b\\\\r\\n" in error
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in error)
    assert error.endswith(" [cut at 1024 bytes]")
    assert len(error) < 1024 * 4 + 100


def test_a_response_body_is_capped_and_printable(server: Server) -> None:
    with HttpDeliverer(timeout=5, allow_private=True) as deliverer:
        attempt = deliverer.deliver(f"http://127.0.0.1:{server.port}/noisy", {}, b"{}")
        again = deliverer.deliver(f"http://127.0.0.1:{server.port}/ok", {}, b"{}")
    assert (attempt.status, attempt.outcome) == (500, AttemptKind.TRANSIENT)
    check_noisy(attempt.error)
    assert again.outcome is AttemptKind.SUCCESS


async def test_async_a_response_body_is_capped_and_printable(server: Server) -> None:
    async with AsyncHttpDeliverer(timeout=5, allow_private=True) as deliverer:
        attempt = await deliverer.deliver(f"http://127.0.0.1:{server.port}/noisy", {}, b"{}")
    check_noisy(attempt.error)
