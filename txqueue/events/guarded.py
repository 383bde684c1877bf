"""The destination guard at connect time: httpx transports whose connections go only to
addresses that passed `destinations.address_problem`.

Each new connection resolves the URL's host once, checks every address it resolves to, and
connects to a checked address (the first that accepts). A name that resolved to a public
address when the pipeline was configured and resolves to 127.0.0.1 now (DNS rebinding) is
refused with `DestinationRefused`, which the deliverer records as a permanent failure. Only
the TCP connection is made to the IP: httpcore takes the Host header and the TLS server name
(SNI and the certificate's host name check) from the URL, so both keep the name. Kept-alive
connections are reused without a new lookup: a connection is checked when it is opened.

With ``allow_private`` the backend connects to the name directly, as httpx would. Lookups go
through ``resolver`` (``socket.getaddrinfo`` as it is at call time by default), so tests can
answer chosen addresses. httpx does not expose httpcore's network backend, so the transports
are httpx's own with their connection pool rebuilt around the guarded backend.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable

import anyio.to_thread
import httpcore
import httpx

from txqueue.events.destinations import Resolver, refusal, resolve

__all__ = [
    "AsyncGuardedBackend",
    "AsyncGuardedTransport",
    "GuardedBackend",
    "GuardedTransport",
    "checked_addresses",
]

#: httpx's own defaults (``httpx.Client(limits=...)`` does not reach a given transport).
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
_SocketOptions = Iterable[httpcore.SOCKET_OPTION] | None


def checked_addresses(host: str, port: int, resolver: Resolver | None = None) -> list[str]:
    """Every address ``host`` resolves to, once each of them passed the check.

    Raises `DestinationRefused` if any is not public, and ``httpcore.ConnectError`` (a
    transient connection failure) if the name does not resolve.
    """
    try:
        addresses = resolve(host, port, resolver)
    except OSError as error:
        raise httpcore.ConnectError(f"destination host {host} does not resolve: {error}") from error
    for address in addresses:
        refused = refusal(host, address)
        if refused is not None:
            raise refused
    return [str(address) for address in addresses]


class GuardedBackend(httpcore.NetworkBackend):
    """A synchronous network backend that connects only to checked addresses."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        backend: httpcore.NetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver
        self.backend = httpcore.SyncBackend() if backend is None else backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: _SocketOptions = None,
    ) -> httpcore.NetworkStream:
        if self.allow_private:
            return self.backend.connect_tcp(host, port, timeout, local_address, socket_options)
        failure: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in checked_addresses(host, port, self.resolver):
            try:
                return self.backend.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error  # try the next address, as socket.create_connection does
        assert failure is not None  # checked_addresses returns at least one address
        raise failure

    def sleep(self, seconds: float) -> None:
        self.backend.sleep(seconds)


class AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """An asynchronous network backend that connects only to checked addresses."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver
        self.backend = httpcore.AnyIOBackend() if backend is None else backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: _SocketOptions = None,
    ) -> httpcore.AsyncNetworkStream:
        if self.allow_private:
            return await self.backend.connect_tcp(
                host, port, timeout, local_address, socket_options
            )
        addresses = await anyio.to_thread.run_sync(
            checked_addresses, host, port, self.resolver
        )  # the lookup blocks: off the event loop
        failure: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in addresses:
            try:
                return await self.backend.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


class GuardedTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` whose connections are opened by a `GuardedBackend`."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        backend: httpcore.NetworkBackend | None = None,
        verify: ssl.SSLContext | bool = True,
        trust_env: bool = False,
        limits: httpx.Limits = DEFAULT_LIMITS,
    ) -> None:
        context = httpx.create_ssl_context(verify=verify, trust_env=trust_env)
        super().__init__(verify=context, limits=limits)
        self._pool = httpcore.ConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(
                allow_private=allow_private, resolver=resolver, backend=backend
            ),
        )


class AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` whose connections are opened by an `AsyncGuardedBackend`."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        backend: httpcore.AsyncNetworkBackend | None = None,
        verify: ssl.SSLContext | bool = True,
        trust_env: bool = False,
        limits: httpx.Limits = DEFAULT_LIMITS,
    ) -> None:
        context = httpx.create_ssl_context(verify=verify, trust_env=trust_env)
        super().__init__(verify=context, limits=limits)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncGuardedBackend(
                allow_private=allow_private, resolver=resolver, backend=backend
            ),
        )
