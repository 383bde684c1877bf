"""What one request may cost the dashboard: body size caps and no caching of answers (an ASGI
middleware), and the HTTP server's connection limits (`uvicorn_options`).

`LimitsMiddleware` sits outside every other middleware:

- a body over the path's cap is refused with 413 before it is read: a declared Content-Length
  at once, a streamed (chunked) body as soon as the bytes received pass the cap. The cap is
  `MAX_BODY_BYTES` (1 MiB) everywhere except publishing to a bus, which takes a CloudEvent up
  to Spanner's 10 MiB cell limit: `MAX_PUBLISH_BODY_BYTES` (10.5 MiB, room for the envelope);
- every answer but the static files says ``Cache-Control: no-store``: the API's answers and
  the pages show payloads, keys and errors, which no cache should keep;
- a txqueue error raised by the middleware below it (reading a malformed form, say) before an
  answer started becomes that error's answer (InvalidArgument: 400), never a 500.

uvicorn has no timeout for reading a request's head, so `txqueue dashboard` serves with
`header_timeout_protocol`, which closes a connection whose head does not arrive within
`HEADER_TIMEOUT`; `uvicorn_options` also bounds concurrency, keep-alive and head size.
"""

from __future__ import annotations

import asyncio
import functools
from datetime import timedelta
from typing import Any

from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, PlainTextResponse, Response

from txqueue.errors import TxqueueError
from txqueue.web.asgi import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "HEADER_TIMEOUT",
    "KEEP_ALIVE_TIMEOUT",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_HEADER_BYTES",
    "MAX_PUBLISH_BODY_BYTES",
    "LimitsMiddleware",
    "body_cap",
    "header_timeout_protocol",
    "middleware",
    "uvicorn_options",
]


MIB = 1024 * 1024
#: The largest request body of every path but publishing.
MAX_BODY_BYTES = 1 * MIB
#: The largest body of ``POST /api/v1/buses/{bus}/events``: a 10 MiB event and its envelope.
MAX_PUBLISH_BODY_BYTES = 10 * MIB + MIB // 2
#: How long a connection may take to send a request's line and headers.
HEADER_TIMEOUT = timedelta(seconds=10)
#: How long an idle connection is kept open between requests.
KEEP_ALIVE_TIMEOUT = timedelta(seconds=5)
#: Connections and requests served at once; the server answers 503 beyond.
MAX_CONNECTIONS = 100
#: The largest request head (request line and headers).
MAX_HEADER_BYTES = 64 * 1024


class _TooLarge(Exception):
    """The body passed its cap while the app was reading it."""


def _route_path(scope: Scope) -> str:
    """The request's path inside the dashboard (without the base path it is served at)."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "")).rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return path or "/"


def _is_api(path: str) -> bool:
    return path == "/api/v1" or path.startswith("/api/v1/")


def body_cap(method: str, path: str) -> int:
    """The most body bytes a request of ``method`` on the dashboard ``path`` may send."""
    parts = path.split("/")  # "", "api", "v1", "buses", BUS, "events"
    publishing = len(parts) == 6 and parts[1:4] == ["api", "v1", "buses"] and parts[5] == "events"
    if method == "POST" and publishing and parts[4]:
        return MAX_PUBLISH_BODY_BYTES
    return MAX_BODY_BYTES


def _size(cap: int) -> str:
    return f"{cap / MIB:g} MiB ({cap:,} bytes)"


def _too_large(path: str, cap: int) -> Response:
    message = f"the request body is over {_size(cap)}, the most this path accepts"
    headers = {"connection": "close"}  # the rest of the body is never read
    if _is_api(path):
        body = {"error": {"code": "ContentTooLarge", "message": message}}
        return JSONResponse(body, status_code=413, headers=headers)
    return PlainTextResponse(message, status_code=413, headers=headers)


def _error(path: str, error: TxqueueError) -> Response:
    from txqueue.web.api import error_response

    response = error_response(error)
    if _is_api(path):
        return response
    return PlainTextResponse(str(error), status_code=response.status_code)


def _declared_length(scope: Scope) -> int | None:
    text = Headers(scope=scope).get("content-length")
    if text is None or not text.strip().isdigit():
        return None  # absent or malformed: the bytes received are counted instead
    return int(text)


class LimitsMiddleware:
    """Body caps (413), ``Cache-Control: no-store``, and txqueue errors from middleware below
    as their answers; see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = _route_path(scope)
        cap = body_cap(str(scope["method"]).upper(), path)
        stored = not (path == "/static" or path.startswith("/static/"))
        started = False

        async def counted_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if stored:
                    headers = MutableHeaders(scope=message)
                    headers.setdefault("cache-control", "no-store")
            await send(message)

        declared = _declared_length(scope)
        if declared is not None and declared > cap:
            await _too_large(path, cap)(scope, receive, counted_send)
            return
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, counted_receive, counted_send)
        except _TooLarge:
            if started:
                raise
            await _too_large(path, cap)(scope, receive, counted_send)
        except TxqueueError as error:
            if started:
                raise
            await _error(path, error)(scope, receive, counted_send)


def middleware() -> Middleware:
    """The limits' entry in the app's middleware list (the first: outside the others)."""
    return Middleware(LimitsMiddleware)


def uvicorn_options() -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config`` that bound what clients can
    hold: concurrency, idle keep-alive, head size and the time to send a head."""
    return {
        "http": header_timeout_protocol(),
        "limit_concurrency": MAX_CONNECTIONS,
        "timeout_keep_alive": int(KEEP_ALIVE_TIMEOUT.total_seconds()),
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
    }


@functools.cache
def header_timeout_protocol() -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing (408) a connection whose request head has not arrived
    `HEADER_TIMEOUT` after it opened or after the head's first bytes: uvicorn's own
    timeouts start only once a response is sent, so a client that sends half a request
    line would hold a connection for ever. (Imports uvicorn: only the server needs it.)"""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    timeout = HEADER_TIMEOUT.total_seconds()

    class HeaderTimeoutProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._start_head_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            waiting = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
            if not waiting:
                self._stop_head_timer()
            elif self._head_timer is None:  # the first bytes of a next request's head
                self._start_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def _start_head_timer(self) -> None:
            self._head_timer = self.loop.call_later(timeout, self._head_timed_out)

        def _stop_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.write(
                    b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n"
                    b"connection: close\r\n\r\n"
                )
                self.transport.close()

    return HeaderTimeoutProtocol
