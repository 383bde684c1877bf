"""Destination URL checks: a pipeline may only call public http(s) endpoints unless told otherwise.

A webhook destination is chosen by whoever configures a pipeline, and the worker that calls it
usually sits inside a private network; refusing private, loopback, link-local and similar
addresses keeps a pipeline from being turned against internal services (SSRF). Development and
tests against local servers opt out with ``allow_private=True`` or the environment variable
``TXQUEUE_ALLOW_PRIVATE_DESTINATIONS=1``.

The check runs when a destination is configured, with one DNS lookup; it makes no other network
connection. It cannot stop a name that later resolves elsewhere (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import urlsplit

from txqueue.errors import InvalidArgument

__all__ = ["ALLOW_PRIVATE_ENV", "check_destination"]

ALLOW_PRIVATE_ENV = "TXQUEUE_ALLOW_PRIVATE_DESTINATIONS"
_SCHEMES = {"http": 80, "https": 443}
_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def check_destination(url: str, allow_private: bool = False) -> str:
    """Return ``url`` if it is an acceptable http(s) destination; raise InvalidArgument if not."""
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
    if allow_private or os.environ.get(ALLOW_PRIVATE_ENV) == "1":
        return url
    for address in _addresses(host, port or _SCHEMES[scheme]):
        reason = _non_public_reason(address)
        if reason is not None:
            shown = host if str(address) == host else f"{host} ({address})"
            raise InvalidArgument(
                f"destination host {shown} is a {reason} address; pass allow_private=True "
                f"or set {ALLOW_PRIVATE_ENV}=1 to deliver to it"
            )
    return url


def _addresses(host: str, port: int) -> list[_IPAddress]:
    """The host itself if it is an IP literal, else every address DNS gives for it."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as error:
        raise InvalidArgument(
            f"destination host {host!r} does not resolve ({error}); "
            "its addresses must be checked before it can be used"
        ) from error
    addresses = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        addresses.append(ipaddress.ip_address(text))
    if not addresses:
        raise InvalidArgument(f"destination host {host!r} resolves to no address")
    return addresses


def _non_public_reason(address: _IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address, or None if it is one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped
        if embedded is None:
            embedded = address.sixtofour
        if embedded is None and address.teredo is not None:
            embedded = address.teredo[1]
        if embedded is not None:
            reason = _non_public_reason(embedded)
            return None if reason is None else f"{reason} (embedded in IPv6)"
    checks = (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("non-global", not address.is_global),
    )
    return next((name for name, hit in checks if hit), None)
