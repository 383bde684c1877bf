"""The destination guard's httpx transport and httpcore network backend (asyncio face).

``txqueue.events.guarded`` describes the guard and checks the addresses; these open the
connections to checked addresses only.

The sync twin ``txqueue/events/_sync_guarded.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

import ssl

import httpcore
import httpx

from txqueue.events._async_compat import network_backend, run_blocking
from txqueue.events.destinations import Resolver
from txqueue.events.guarded import DEFAULT_LIMITS, SocketOptions, checked_addresses

__all__ = ["AsyncGuardedBackend", "AsyncGuardedTransport"]


class AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """A network backend (asyncio face) that connects only to checked addresses."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver
        self.backend = network_backend() if backend is None else backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: SocketOptions = None,
    ) -> httpcore.AsyncNetworkStream:
        if self.allow_private:
            return await self.backend.connect_tcp(
                host, port, timeout, local_address, socket_options
            )
        # The lookup blocks on DNS: run_blocking keeps it off the event loop, if there is one.
        addresses = await run_blocking(checked_addresses, host, port, self.resolver)
        failure: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in addresses:
            try:
                return await self.backend.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error  # try the next address, as socket.create_connection does
        assert failure is not None  # checked_addresses returns at least one address
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


class AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` whose connections are opened by the guarded backend
    (`AsyncGuardedBackend`)."""

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
