"""The dashboard's ASGI application: one Starlette app holding the pages and the HTTP API.

``create_app(database, *, token=..., read_only=False, base_path="")`` builds it; without a
token it must be told ``insecure_no_token=True``. What the routes share lives in one
`WebState`, reached from a request as ``request.app.state.txqueue`` (or `web_state(request)`):

- ``database``: the sync `txqueue.Database` (Starlette runs sync endpoints in its threadpool);
- ``events``: the `txqueue.Events` over it (created on first use);
- ``read_only``: every change is refused (403) when true; pages hide or disable the buttons;
- ``token``: the access token, or None when the dashboard is open (``insecure_no_token``);
- ``sessions``: the browsers' login sessions (`txqueue.web.sessions.Sessions`);
- ``templates``: the `starlette.templating.Jinja2Templates` (autoescape on, templates in
  ``txqueue/web/templates``); every template gets ``csrf_token``, ``base_path`` and
  ``read_only`` in its context.

The base path is where the app is served: given to `create_app` when it serves at a prefix on
its own (``txqueue dashboard --base-path /txq``), or taken from the mount point (the ASGI
``root_path``) when it is mounted inside another Starlette or FastAPI application, in which
case ``base_path`` stays empty.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

import txqueue
from txqueue.errors import InvalidArgument
from txqueue.web import api, display, limits, pages, security
from txqueue.web.sessions import Sessions

if TYPE_CHECKING:
    from txqueue.events._sync.events import Events

__all__ = ["WebState", "base_path_of", "create_app", "web_state"]

HERE = Path(__file__).parent


@dataclass
class WebState:
    """What every route of one dashboard shares."""

    database: txqueue.Database
    read_only: bool
    token: str | None
    templates: Jinja2Templates
    owns_database: bool = False
    base_path: str = ""  # the prefix given to create_app ("" when mounted by another app)
    allowed_hosts: frozenset[str] | None = None  # Host header names served (None: any)
    allow_private_destinations: bool = False  # the operator's switch: clients may allow_private
    sessions: Sessions = field(default_factory=Sessions)
    _events: Events | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def events(self) -> Events:
        """The event layer over the database (created once, on first use)."""
        with self._lock:
            if self._events is None:
                from txqueue.events._sync.events import Events

                # Only the operator's switch lets a request allow private destinations,
                # never this process's TXQUEUE_ALLOW_PRIVATE_DESTINATIONS (web/api_events.py).
                self._events = Events(self.database, private_from_environment=False)
            return self._events


def web_state(request: Request) -> WebState:
    """The `WebState` of the dashboard serving ``request``."""
    state: WebState = request.app.state.txqueue
    return state


def base_path_of(request: Request) -> str:
    """Where the dashboard is served ("" at the root, else "/prefix", no trailing slash)."""
    return security.base_path(request.scope)


def _template_context(request: Request) -> dict[str, Any]:
    return {
        "csrf_token": security.csrf_token_of(request),
        "base_path": base_path_of(request),
        "read_only": web_state(request).read_only,
    }


def _templates() -> Jinja2Templates:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # everything: payloads, keys, errors and CEL are text, never markup
        finalize=display.finalize,  # control and bidi characters shown as escapes
    )
    return Jinja2Templates(env=environment, context_processors=[_template_context])


def _normal_base_path(base_path: str) -> str:
    if not isinstance(base_path, str):
        raise InvalidArgument("base_path must be a string")
    trimmed = base_path.strip().rstrip("/")
    if trimmed and not trimmed.startswith("/"):
        raise InvalidArgument(f"base_path must start with '/', got {base_path!r}")
    if any(character in trimmed for character in "?#\\ \t\n\r"):
        raise InvalidArgument(f"base_path must be a plain path, got {base_path!r}")
    return trimmed


def create_app(
    database: str | txqueue.Database,
    *,
    token: str | None = None,
    read_only: bool = False,
    base_path: str = "",
    allowed_hosts: Sequence[str] | None = None,
    insecure_no_token: bool = False,
    allow_private_destinations: bool = False,
) -> Starlette:
    """The dashboard and its HTTP API (``/api/v1``) as one ASGI application.

    ``database`` is a URL (opened here, closed when the app shuts down) or an open sync
    `txqueue.Database`. With ``token`` every page asks to log in and every API call needs
    ``Authorization: Bearer <token>``. Without one the app must be told
    ``insecure_no_token=True``: then whoever reaches it reads and changes everything.
    ``read_only`` refuses every change. With ``allowed_hosts``, a request whose ``Host`` header
    names another host is refused (400): `txqueue dashboard` passes the loopback names when it
    chose the token itself, so a web page whose DNS name is rebound to 127.0.0.1 cannot drive
    the dashboard from the user's browser. Only with ``allow_private_destinations`` (the
    operator's switch) may an API client set a pipeline's ``allow_private``.
    """
    prefix = _normal_base_path(base_path)
    if token is not None:
        security.check_token(token)
        if insecure_no_token:
            raise InvalidArgument("give token= or insecure_no_token=True, not both")
    elif not insecure_no_token:
        raise InvalidArgument(
            "create_app needs token='<a long random token>' (pages ask to log in, API calls "
            "send 'Authorization: Bearer <token>'), or insecure_no_token=True to serve without "
            "one, open to whoever can reach it"
        )
    owns = isinstance(database, str)
    opened = txqueue.connect(database) if isinstance(database, str) else database
    if not isinstance(opened, txqueue.Database):
        raise InvalidArgument(
            "database must be a URL or a txqueue.Database (the sync face), "
            f"got {type(database).__name__}"
        )
    hosts = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
    state = WebState(opened, bool(read_only), token, _templates(), owns, prefix, hosts)
    state.allow_private_destinations = bool(allow_private_destinations)

    routes: list[BaseRoute] = [
        Mount("/api/v1", routes=api.routes()),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        *security.routes(),
        *pages.routes(),
    ]
    inner = Starlette(
        routes=routes,
        middleware=[limits.middleware(), *security.middleware()],
        exception_handlers=api.exception_handlers(),
        lifespan=_lifespan(state),
    )
    inner.state.txqueue = state
    if not prefix:
        return inner
    outer = Starlette(routes=[Mount(prefix, app=inner)], lifespan=_lifespan(state))
    outer.state.txqueue = state
    return outer


def _lifespan(state: WebState) -> Any:
    """Close the database at shutdown when the app opened it from a URL."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        try:
            yield
        finally:
            if state.owns_database:
                state.database.close()

    return lifespan
