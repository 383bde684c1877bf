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
are httpx's own with their connection pool rebuilt around the guarded backend: the asyncio
face's in ``_async_guarded`` (``AsyncGuardedTransport``), the sync face's generated from it
in ``_sync_guarded`` (``GuardedTransport``). This module holds what both share.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpcore
import httpx

from txqueue.events.destinations import Resolver, refusal, resolve

__all__ = ["DEFAULT_LIMITS", "SocketOptions", "checked_addresses"]

#: httpx's own defaults (``httpx.Client(limits=...)`` does not reach a given transport).
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
#: The socket options httpcore hands a network backend.
SocketOptions = Iterable[httpcore.SOCKET_OPTION] | None


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
