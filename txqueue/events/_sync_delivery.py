# Generated from txqueue/events/_async_delivery.py by tools/async_to_sync.py; do not edit.
"""The HTTP deliverer of the sync face (``txqueue.events.delivery`` describes both).

Generated from ``txqueue/events/_async_delivery.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from datetime import timedelta
from typing import Any

import httpcore
import httpx

from txqueue.events._sync_compat import network_backend, within
from txqueue.events._sync_guarded import GuardedTransport
from txqueue.events.attempts import (
    DRAIN,
    EXCERPT,
    FAILURES,
    Attempt,
    WithoutCookies,
    attempt_deadline,
    client_options,
    destination_url,
    from_error,
    from_response,
    time_left,
    timeout_seconds,
)
from txqueue.events.destinations import Resolver
from txqueue.events.guarded import DEFAULT_LIMITS, SocketOptions
from txqueue.events.outcomes import AttemptKind, classify_status

__all__ = ["HttpDeliverer"]


class CookielessClient(WithoutCookies, httpx.Client):
    """httpx's client, keeping no cookies (`WithoutCookies`)."""


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read, write and TLS handshake ends by the attempt's deadline
    (`time_left`): a peer that trickles bytes cannot hold the attempt past it."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self.stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.stream.read(max_bytes, time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.stream.write(buffer, time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = time_left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self.stream.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self.stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend, its connections bounded by the attempt's deadline."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self.backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: SocketOptions = None,
    ) -> httpcore.NetworkStream:
        left = time_left(timeout, httpcore.ConnectTimeout)
        stream = self.backend.connect_tcp(host, port, left, local_address, socket_options)
        return DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: SocketOptions = None
    ) -> httpcore.NetworkStream:
        left = time_left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self.backend.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:
        self.backend.sleep(seconds)


class HttpDeliverer:
    """A deliverer around reused httpx clients (sync face); close it when done.

    ``allow_private`` is the default of `deliver`'s; ``resolver`` replaces
    ``socket.getaddrinfo`` for the destination guard's lookups; ``limits`` sizes each
    client's connection pool (httpx's defaults: 100 connections, 20 kept alive).
    """

    def __init__(
        self,
        timeout: float | timedelta = 30.0,
        *,
        trust_env: bool = False,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        limits: httpx.Limits = DEFAULT_LIMITS,
    ) -> None:
        self.timeout = timeout_seconds(timeout)
        self.allow_private = allow_private
        self._clients = {  # one pool each, so a connection opened unchecked is never reused
            private: CookielessClient(
                **client_options(
                    self.timeout,
                    trust_env,
                    GuardedTransport(
                        allow_private=private,
                        resolver=resolver,
                        backend=DeadlineBackend(network_backend()),
                        trust_env=trust_env,
                        limits=limits,
                    ),
                )
            )
            for private in (False, True)
        }

    def deliver(
        self, url: str, headers: dict[str, str], body: bytes, allow_private: bool | None = None
    ) -> Attempt:
        """POST ``body`` with ``headers`` to ``url`` and report how it went; private
        destinations are refused unless ``allow_private`` (default: the deliverer's)."""
        started = time.monotonic()
        deadline = started + self.timeout
        client = self._clients[self.allow_private if allow_private is None else allow_private]
        with attempt_deadline(deadline):  # every read and write of the attempt ends by then
            try:
                target = destination_url(url)
                request = client.build_request("POST", target, headers=headers, content=body)
                response = within(client.send(request, stream=True), self.timeout)
            except FAILURES as error:
                return from_error(error, started, self.timeout)
            excerpt = b""
            try:
                success = classify_status(response.status_code) is AttemptKind.SUCCESS
                excerpt = within(
                    _read_excerpt(response, not success, deadline),
                    max(deadline - time.monotonic(), 0.0),
                )
            except (TimeoutError, asyncio.TimeoutError):
                pass  # the status is known; a slow body does not change the outcome
            finally:
                response.close()
        return from_response(response, excerpt, started)

    def close(self) -> None:
        """Close the pooled connections."""
        for client in self._clients.values():
            client.close()

    def __enter__(self) -> HttpDeliverer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _read_excerpt(response: httpx.Response, collect: bool, deadline: float) -> bytes:
    """Drain the body so the connection can be reused, keeping its start if ``collect``.

    Stops after ``DRAIN`` bytes or at ``deadline`` (the status is known: an endless body must
    not hold the deliverer; a read blocked at the deadline fails with a timeout), and at a
    broken body, which does not change the outcome either.
    """
    excerpt = b""
    read = 0
    try:
        for chunk in response.iter_raw():
            if collect and len(excerpt) <= EXCERPT:
                excerpt += chunk
            read += len(chunk)
            if read > DRAIN or time.monotonic() > deadline:
                break
    except httpx.TransportError:
        pass
    return excerpt
