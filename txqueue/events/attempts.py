"""One HTTP delivery attempt and how it is reported (`Attempt`), shared by both deliverers.

The deliverers (`txqueue.events.delivery`) send; this module turns what came back — a
response and the start of its body, or an error — into an `Attempt`, never an exception.
It also holds the attempt's total deadline (`attempt_deadline`), which every network
operation of the attempt reads (`time_left`): httpx's timeouts bound each read alone, so a
peer that sends a byte now and then would otherwise hold an attempt for ever.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib.util
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http import HTTPStatus
from typing import Any

import httpcore
import httpx

from txqueue.core.failures import Raised
from txqueue.core.text import printable
from txqueue.errors import InvalidArgument
from txqueue.events.destinations import DestinationRefused
from txqueue.events.outcomes import AttemptKind, classify_status, parse_retry_after

__all__ = [
    "DRAIN",
    "EXCERPT",
    "FAILURES",
    "Attempt",
    "WithoutCookies",
    "attempt_deadline",
    "client_options",
    "destination_url",
    "from_error",
    "from_response",
    "time_left",
    "timeout_seconds",
]

# httpcore tries ``import sniffio`` on every async request; when sniffio is not installed
# (anyio 4 no longer needs it) each failed import searches sys.path again, which costs more
# than the request itself. Recording the absence once makes that import fail at once.
if importlib.util.find_spec("sniffio") is None:
    sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]

_USER_AGENT = "txqueue-events/0.1"
EXCERPT = 1024  # bytes of a failing response's body kept in Attempt.error
DRAIN = 64 * 1024  # bytes read to free a connection for reuse; past that it is dropped


#: When the attempt running in this context must end (``time.monotonic()``), or None.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "txqueue_attempt_deadline", default=None
)


@contextmanager
def attempt_deadline(deadline: float) -> Iterator[None]:
    """Within the block, network operations end by ``deadline`` (``time.monotonic()``)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def time_left(timeout: float | None, exceeded: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` cut to what is left of the attempt's deadline (unchanged outside one);
    raises ``exceeded`` once the deadline has passed, so no operation starts after it."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise exceeded("the attempt's deadline passed")
    return left if timeout is None else min(timeout, left)


@dataclass(frozen=True)
class Attempt:
    """The result of one delivery attempt, as logged for the pipeline.

    A failed attempt's ``error_type`` is ``http.<status>`` for a failing answer, or the
    qualified type of the exception it raised, whose capped ``traceback`` is kept too.
    """

    status: int | None
    outcome: AttemptKind
    error: str | None
    latency: timedelta
    retry_after: timedelta | None
    error_type: str | None = None
    traceback: str | None = None

    @classmethod
    def raised(
        cls, outcome: AttemptKind, error: BaseException, text: str, latency: timedelta
    ) -> Attempt:
        """A failed attempt that raised ``error`` (described by ``text``), with its traceback."""
        caught = Raised.of(error)
        return cls(None, outcome, text, latency, None, caught.error_type, caught.traceback)


class _NoCookies(httpx.Cookies):
    """A jar that stays empty: the cookies a response sets are dropped, not kept."""

    def extract_cookies(self, response: httpx.Response) -> None:
        """Keep nothing (httpx calls this with every response)."""


_NO_COOKIES = _NoCookies()


class WithoutCookies:
    """Mixed into the deliverers' httpx clients, before the client class: their jar is one
    that stays empty, so a destination's ``Set-Cookie`` is never sent back, to it or to
    another pipeline's destination on the same host, and no response is searched for cookies."""

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        """A jar given to the client is ignored: nothing is kept."""


@functools.lru_cache(maxsize=256)
def destination_url(url: str) -> httpx.URL:
    """``url`` parsed once: httpx parses a str URL again on every request, and a dispatcher
    sends every delivery of a pipeline to one URL. httpx.URL is immutable."""
    return httpx.URL(url)


def timeout_seconds(timeout: float | timedelta) -> float:
    value = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(value)


def client_options(
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


def from_response(response: httpx.Response, excerpt: bytes, started: float) -> Attempt:
    outcome = classify_status(response.status_code)
    error = error_type = None
    if outcome is not AttemptKind.SUCCESS:
        error_type = f"http.{response.status_code}"
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
    latency = _elapsed(started)
    return Attempt(response.status_code, outcome, error, latency, retry_after, error_type)


def _quote(data: bytes) -> str:
    """At most `EXCERPT` bytes of ``data`` as one printable line, marked when cut."""
    text = printable(data[:EXCERPT].decode("utf-8", "replace")).strip()
    if len(data) > EXCERPT:
        text += f" [cut at {EXCERPT} bytes]"
    return text


def from_error(error: BaseException, started: float, timeout: float) -> Attempt:
    if isinstance(error, DestinationRefused):
        return Attempt.raised(AttemptKind.PERMANENT, error, str(error), _elapsed(started))
    if isinstance(error, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError)):
        text = f"timeout after {timeout:g} s: {type(error).__name__} {error}".rstrip()
        outcome = AttemptKind.TRANSIENT
    elif isinstance(error, (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)):
        text = f"request cannot be sent: {type(error).__name__}: {error}"
        outcome = AttemptKind.PERMANENT
    else:
        text = f"connection error: {type(error).__name__}: {error}".rstrip(": ")
        outcome = AttemptKind.TRANSIENT
    return Attempt.raised(outcome, error, printable(text), _elapsed(started))


# Errors that end an attempt without a response; anything else is a bug and propagates.
FAILURES = (
    httpx.TransportError,
    httpx.InvalidURL,
    TimeoutError,
    asyncio.TimeoutError,
    DestinationRefused,
)
