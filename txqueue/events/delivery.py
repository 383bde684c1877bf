"""HTTP delivery: one POST per attempt, reported as an `Attempt`, never as an exception.

Each deliverer owns one ``httpx`` client, so connections to a destination are reused across
attempts. Redirects are not followed (a 3xx is a permanent failure, as it is not a receipt),
and proxies and ``.netrc`` credentials from the environment are ignored unless
``trust_env=True`` (a webhook sender must not hand a user's credentials to arbitrary hosts).

Connections are opened by the destination guard (`txqueue.events.guarded`): each new one
resolves the host again and is refused unless every address is public, or the call allows
private destinations (``allow_private``, per call or per deliverer). A refusal is PERMANENT.
With ``trust_env=True`` and a proxy in the environment the proxy connects instead, unguarded.

``timeout`` (default 30 s) bounds an attempt. The async deliverer enforces it as a hard total
deadline. httpx has no total timeout for sync calls, so the sync deliverer bounds each phase
(connect, send, wait for each read) by ``timeout`` and stops reading the body at the total
deadline. Once the status line and headers have arrived, the status decides the outcome. The
body is then read only to free the connection for reuse and to quote it in the error, within
the time left and at most 64 KiB; at most 1 KiB of it is quoted, cut with a marker, every
control character shown as an escape (`txqueue.core.text.printable`), so the attempt log holds
one short printable line whatever the receiver sent. Timeouts and connection failures are
TRANSIENT with no status. A request httpx cannot send (unsupported scheme, invalid URL or
header) is PERMANENT.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http import HTTPStatus
from typing import Any

import httpx

from txqueue.core.text import printable
from txqueue.errors import InvalidArgument
from txqueue.events.destinations import DestinationRefused, Resolver
from txqueue.events.guarded import DEFAULT_LIMITS, AsyncGuardedTransport, GuardedTransport
from txqueue.events.outcomes import AttemptKind, classify_status, parse_retry_after

__all__ = ["AsyncHttpDeliverer", "Attempt", "HttpDeliverer"]

# httpcore tries ``import sniffio`` on every async request; when sniffio is not installed
# (anyio 4 no longer needs it) each failed import searches sys.path again, which costs more
# than the request itself. Recording the absence once makes that import fail at once.
if importlib.util.find_spec("sniffio") is None:
    sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]

_USER_AGENT = "txqueue-events/0.1"
_EXCERPT = 1024  # bytes of a failing response's body kept in Attempt.error
_DRAIN = 64 * 1024  # bytes read to free a connection for reuse; past that it is dropped


@dataclass(frozen=True)
class Attempt:
    """The result of one delivery attempt, as logged for the pipeline."""

    status: int | None
    outcome: AttemptKind
    error: str | None
    latency: timedelta
    retry_after: timedelta | None


def _seconds(timeout: float | timedelta) -> float:
    value = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(value)


def _client_options(
    timeout: float, trust_env: bool, transport: httpx.BaseTransport | httpx.AsyncBaseTransport
) -> dict[str, Any]:
    return {
        "transport": transport,
        "timeout": httpx.Timeout(timeout),
        "follow_redirects": False,
        "trust_env": trust_env,
        "headers": {"user-agent": _USER_AGENT},
    }


def _elapsed(started: float) -> timedelta:
    return timedelta(seconds=time.monotonic() - started)


def _from_response(response: httpx.Response, excerpt: bytes, started: float) -> Attempt:
    outcome = classify_status(response.status_code)
    error = None
    if outcome is not AttemptKind.SUCCESS:
        try:
            phrase = HTTPStatus(response.status_code).phrase
        except ValueError:
            phrase = ""
        error = f"HTTP {response.status_code} {phrase}".rstrip()
        if outcome is AttemptKind.PERMANENT and 300 <= response.status_code < 400:
            location = _quote(response.headers.get("location", "?").encode("utf-8", "replace"))
            error += f" (redirect to {location} not followed)"
        text = _quote(excerpt)
        if text:
            error += f": {text}"
    retry_after = parse_retry_after(response.headers.get("retry-after"), datetime.now(timezone.utc))
    return Attempt(response.status_code, outcome, error, _elapsed(started), retry_after)


def _quote(data: bytes) -> str:
    """At most `_EXCERPT` bytes of ``data`` as one printable line, marked when cut."""
    text = printable(data[:_EXCERPT].decode("utf-8", "replace")).strip()
    if len(data) > _EXCERPT:
        text += f" [cut at {_EXCERPT} bytes]"
    return text


def _from_error(error: BaseException, started: float, timeout: float) -> Attempt:
    if isinstance(error, DestinationRefused):
        return Attempt(None, AttemptKind.PERMANENT, str(error), _elapsed(started), None)
    if isinstance(error, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError)):
        text = f"timeout after {timeout:g} s: {type(error).__name__} {error}".rstrip()
        outcome = AttemptKind.TRANSIENT
    elif isinstance(error, (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)):
        text = f"request cannot be sent: {type(error).__name__}: {error}"
        outcome = AttemptKind.PERMANENT
    else:
        text = f"connection error: {type(error).__name__}: {error}".rstrip(": ")
        outcome = AttemptKind.TRANSIENT
    return Attempt(None, outcome, printable(text), _elapsed(started), None)


# Errors that end an attempt without a response; anything else is a bug and propagates.
_FAILURES = (
    httpx.TransportError,
    httpx.InvalidURL,
    TimeoutError,
    asyncio.TimeoutError,
    DestinationRefused,
)


class HttpDeliverer:
    """Synchronous deliverer around reused httpx clients; call `close` when done.

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
        self.timeout = _seconds(timeout)
        self.allow_private = allow_private
        self._clients = {  # one pool each, so a connection opened unchecked is never reused
            private: httpx.Client(
                **_client_options(
                    self.timeout,
                    trust_env,
                    GuardedTransport(
                        allow_private=private,
                        resolver=resolver,
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
        try:
            request = client.build_request("POST", url, headers=headers, content=body)
            response = client.send(request, stream=True)
        except _FAILURES as error:
            return _from_error(error, started, self.timeout)
        excerpt = b""
        try:
            success = classify_status(response.status_code) is AttemptKind.SUCCESS
            read = 0
            for chunk in response.iter_raw():
                if not success and len(excerpt) <= _EXCERPT:
                    excerpt += chunk
                read += len(chunk)
                if read > _DRAIN or time.monotonic() > deadline:
                    break  # the status is known; an endless body must not hold the worker
        except httpx.TransportError:
            pass  # the status is known; a broken body does not change the outcome
        finally:
            response.close()
        return _from_response(response, excerpt, started)

    def close(self) -> None:
        """Close the pooled connections."""
        for client in self._clients.values():
            client.close()

    def __enter__(self) -> HttpDeliverer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncHttpDeliverer:
    """Asynchronous deliverer around reused httpx clients; await `close` when done.

    ``allow_private`` and ``resolver`` as for `HttpDeliverer`.
    """

    def __init__(
        self,
        timeout: float | timedelta = 30.0,
        *,
        trust_env: bool = False,
        allow_private: bool = False,
        resolver: Resolver | None = None,
    ) -> None:
        self.timeout = _seconds(timeout)
        self.allow_private = allow_private
        self._clients = {
            private: httpx.AsyncClient(
                **_client_options(
                    self.timeout,
                    trust_env,
                    AsyncGuardedTransport(
                        allow_private=private, resolver=resolver, trust_env=trust_env
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
        try:
            request = client.build_request("POST", url, headers=headers, content=body)
            response = await asyncio.wait_for(
                client.send(request, stream=True), timeout=self.timeout
            )
        except _FAILURES as error:
            return _from_error(error, started, self.timeout)
        excerpt = b""
        try:
            success = classify_status(response.status_code) is AttemptKind.SUCCESS
            excerpt = await asyncio.wait_for(
                _read_excerpt(response, collect=not success),
                timeout=max(deadline - time.monotonic(), 0.0),
            )
        except (httpx.TransportError, TimeoutError, asyncio.TimeoutError):
            pass  # the status is known; a slow or broken body does not change the outcome
        finally:
            await response.aclose()
        return _from_response(response, excerpt, started)

    async def close(self) -> None:
        """Close the pooled connections."""
        for client in self._clients.values():
            await client.aclose()

    async def __aenter__(self) -> AsyncHttpDeliverer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _read_excerpt(response: httpx.Response, *, collect: bool) -> bytes:
    """Drain the body so the connection can be reused, keeping its start if ``collect``."""
    excerpt = b""
    read = 0
    async for chunk in response.aiter_raw():
        if collect and len(excerpt) <= _EXCERPT:
            excerpt += chunk
        read += len(chunk)
        if read > _DRAIN:
            break
    return excerpt
