"""Destination URL checks: a pipeline may only call public http(s) endpoints unless told otherwise.

A webhook destination is chosen by whoever configures a pipeline, and the worker that calls it
usually sits inside a private network; refusing private, loopback, link-local and similar
addresses keeps a pipeline from being turned against internal services (SSRF). Development and
tests against local servers opt out with ``allow_private=True`` or the environment variable
``TXQUEUE_ALLOW_PRIVATE_DESTINATIONS=1``; a pipeline records that choice when it is created
or updated, and its deliveries follow the recorded choice.

`check_destination` runs when a destination is configured, with one DNS lookup, and returns the
URL with its scheme and host in lower case. Deliveries check again at every new connection
(`txqueue.events.guarded`): a name that later resolves elsewhere (DNS rebinding) is refused
there. `address_problem` is the one rule both use.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from txqueue.errors import InvalidArgument

__all__ = [
    "ALLOW_PRIVATE_ENV",
    "DestinationRefused",
    "Resolver",
    "address_problem",
    "check_destination",
    "private_allowed",
    "refusal",
    "resolve",
]

ALLOW_PRIVATE_ENV = "TXQUEUE_ALLOW_PRIVATE_DESTINATIONS"
_SCHEMES = {"http": 80, "https": 443}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``socket.getaddrinfo`` or a stand-in with its signature and result shape.
Resolver = Callable[..., Sequence[tuple[Any, ...]]]


class DestinationRefused(InvalidArgument):
    """A destination host resolved to an address the pipeline may not deliver to."""


def private_allowed(allow_private: bool) -> bool:
    """``allow_private``, or True when the environment variable allows private destinations."""
    return allow_private or os.environ.get(ALLOW_PRIVATE_ENV) == "1"


def check_destination(url: str, allow_private: bool = False, *, environment: bool = True) -> str:
    """``url`` with its scheme and host in lower case, if it is an acceptable http(s)
    destination; raise InvalidArgument if not. Without ``environment`` the environment
    variable does not count: only ``allow_private`` allows a private host."""
    if not isinstance(url, str) or not url:
        raise InvalidArgument("destination URL must be a non-empty string")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise InvalidArgument("destination URL must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise InvalidArgument(f"destination URL {url!r} is malformed: {error}") from error
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise InvalidArgument(
            f"destination URL scheme must be http or https, got {parts.scheme or 'none'!r}"
        )
    if "@" in parts.netloc:
        raise InvalidArgument(
            "destination URL must not contain credentials (user:password@); "
            "authenticate with headers or signing instead"
        )
    host = parts.hostname
    if not host:
        raise InvalidArgument(f"destination URL {url!r} has no host")
    # urlsplit found "scheme://netloc" at the start; the rest is kept byte for byte.
    rest = url[len(parts.scheme) + 3 + len(parts.netloc) :]
    normalized = f"{scheme}://{parts.netloc.lower()}{rest}"
    if allow_private or (environment and private_allowed(False)):
        return normalized
    try:
        addresses = resolve(host, port or _SCHEMES[scheme])
    except OSError as error:
        raise InvalidArgument(
            f"destination host {host!r} does not resolve ({error}); "
            "its addresses must be checked before it can be used"
        ) from error
    for address in addresses:
        reason = address_problem(address)
        if reason is not None:
            shown = host if str(address) == host else f"{host} ({address})"
            way = f" or set {ALLOW_PRIVATE_ENV}=1" if environment else ""
            raise InvalidArgument(
                f"destination host {shown} is {_article(reason)} {reason} address; pass "
                f"allow_private=True{way} to deliver to it"
            )
    return normalized


def resolve(host: str, port: int, resolver: Resolver | None = None) -> list[IPAddress]:
    """The host itself if it is an IP literal, else every address ``resolver`` gives for it.

    ``resolver`` defaults to ``socket.getaddrinfo`` as it is when called. Raises OSError when
    the name does not resolve or resolves to nothing.
    """
    literal = _literal(host)
    if literal is not None:
        return [literal]
    lookup = socket.getaddrinfo if resolver is None else resolver
    try:
        infos = lookup(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except UnicodeError as error:
        raise OSError(f"invalid host name: {error}") from error
    addresses: list[IPAddress] = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        address = ipaddress.ip_address(text)
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise OSError(f"{host!r} resolves to no address")
    return addresses


def refusal(host: str, address: IPAddress) -> DestinationRefused | None:
    """The error for delivering to ``address`` (resolved from ``host``), or None if public."""
    reason = address_problem(address)
    if reason is None:
        return None
    if _literal(host) == address:
        where = f"destination host {host} is"
    else:
        where = f"destination host {host} resolved to {address},"
    return DestinationRefused(
        f"{where} {_article(reason)} {reason} address; the pipeline does not allow private "
        "destinations (update it with allow_private=True to deliver there)"
    )


def address_problem(address: IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address, or None if it is one.

    An IPv4-mapped IPv6 address is judged as the IPv4 address it is; 6to4 and Teredo addresses
    are refused when the IPv4 address they embed is, and are otherwise judged as IPv6.
    """
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            reason = address_problem(address.ipv4_mapped)
            return None if reason is None else f"{reason} (embedded in IPv6)"
        embedded = address.sixtofour
        if embedded is None and address.teredo is not None:
            embedded = address.teredo[1]
        if embedded is not None:
            reason = address_problem(embedded)
            if reason is not None:
                return f"{reason} (embedded in IPv6)"
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("site-local", site_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("non-global", not address.is_global),
    )
    return next((name for name, hit in checks if hit), None)


def _literal(host: str) -> IPAddress | None:
    """``host`` as an IP address if it is an IP literal (zone id dropped), else None."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"
