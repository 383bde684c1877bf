"""The HTTP deliverer of the asyncio face (``txqueue.events.delivery`` describes both).

The sync twin ``txqueue/events/_sync_delivery.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from datetime import timedelta
from typing import Any

import httpcore
import httpx

from txqueue.events._async_compat import network_backend, within
from txqueue.events._async_guarded import AsyncGuardedTransport
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

__all__ = ["AsyncHttpDeliverer"]


class AsyncCookielessClient(WithoutCookies, httpx.AsyncClient):
    """httpx's client, keeping no cookies (`WithoutCookies`)."""


class AsyncDeadlineStream(httpcore.AsyncNetworkStream):
    """A connection whose every read, write and TLS handshake ends by the attempt's deadline
    (`time_left`): a peer that trickles bytes cannot hold the attempt past it."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self.stream = stream

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.stream.read(max_bytes, time_left(timeout, httpcore.ReadTimeout))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.stream.write(buffer, time_left(timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        left = time_left(timeout, httpcore.ConnectTimeout)
        return AsyncDeadlineStream(await self.stream.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self.stream.get_extra_info(info)


class AsyncDeadlineBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, its connections bounded by the attempt's deadline."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self.backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: SocketOptions = None,
    ) -> httpcore.AsyncNetworkStream:
        left = time_left(timeout, httpcore.ConnectTimeout)
        stream = await self.backend.connect_tcp(host, port, left, local_address, socket_options)
        return AsyncDeadlineStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: SocketOptions = None
    ) -> httpcore.AsyncNetworkStream:
        left = time_left(timeout, httpcore.ConnectTimeout)
        return AsyncDeadlineStream(
            await self.backend.connect_unix_socket(path, left, socket_options)
        )

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


class AsyncHttpDeliverer:
    """A deliverer around reused httpx clients (asyncio face); close it when done.

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
            private: AsyncCookielessClient(
                **client_options(
                    self.timeout,
                    trust_env,
                    AsyncGuardedTransport(
                        allow_private=private,
                        resolver=resolver,
                        backend=AsyncDeadlineBackend(network_backend()),
                        trust_env=trust_env,
                        limits=limits,
                    ),
                )
            )
            for private in (False, True)
        }

    async def deliver(
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
                response = await within(client.send(request, stream=True), self.timeout)
            except FAILURES as error:
                return from_error(error, started, self.timeout)
            excerpt = b""
            try:
                success = classify_status(response.status_code) is AttemptKind.SUCCESS
                excerpt = await within(
                    _read_excerpt(response, not success, deadline),
                    max(deadline - time.monotonic(), 0.0),
                )
            except (TimeoutError, asyncio.TimeoutError):
                pass  # the status is known; a slow body does not change the outcome
            finally:
                await response.aclose()
        return from_response(response, excerpt, started)

    async def close(self) -> None:
        """Close the pooled connections."""
        for client in self._clients.values():
            await client.aclose()

    async def __aenter__(self) -> AsyncHttpDeliverer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _read_excerpt(response: httpx.Response, collect: bool, deadline: float) -> bytes:
    """Drain the body so the connection can be reused, keeping its start if ``collect``.

    Stops after ``DRAIN`` bytes or at ``deadline`` (the status is known: an endless body must
    not hold the deliverer; a read blocked at the deadline fails with a timeout), and at a
    broken body, which does not change the outcome either.
    """
    excerpt = b""
    read = 0
    try:
        async for chunk in response.aiter_raw():
            if collect and len(excerpt) <= EXCERPT:
                excerpt += chunk
            read += len(chunk)
            if read > DRAIN or time.monotonic() > deadline:
                break
    except httpx.TransportError:
        pass
    return excerpt
