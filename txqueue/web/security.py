"""Who may use the dashboard, and what a page in a browser may do.

- Token: with one set, API calls carry ``Authorization: Bearer <token>``, and browsers log in
  at ``/login`` (the form, or ``/login?token=...`` as the command prints it), which starts a
  session (`txqueue.web.sessions`): the cookie holds only its random id, HttpOnly,
  SameSite=Strict, named ``__Host-txq_session`` over HTTPS. Pages redirect to the login (303)
  without one; the API answers 401. Logging out ends the session on the server.
- Without a token (``insecure_no_token``) nobody logs in: every caller may do everything.
- Changes: every POST/PUT/PATCH/DELETE authenticated by the session cookie (or, without a
  token, sent by a browser) must come from the dashboard's own origin (``Sec-Fetch-Site``
  ``same-origin`` or ``none`` and ``Origin`` equal to the request's own, when sent) and carry
  the session's CSRF token in the form field ``csrf_token`` or the ``X-CSRF-Token`` header. A
  call with a valid Bearer header needs neither (a browser never adds that header itself).
- Read-only: every change is refused with 403.
- Headers: a strict Content-Security-Policy (no inline script), nosniff, no referrer to
  other sites.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs, quote, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from txqueue.errors import InvalidArgument
from txqueue.web.asgi import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "HOST_SESSION_COOKIE",
    "SESSION_COOKIE",
    "check_token",
    "csrf_token_of",
    "middleware",
    "routes",
    "same_origin",
]


CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    # Not no-referrer: with it browsers send "Origin: null" on the dashboard's own form posts,
    # which the origin check must refuse. Other sites still get no referrer.
    "referrer-policy": "same-origin",
}
#: The session cookie's name over plain HTTP (loopback), and over HTTPS.
SESSION_COOKIE = "txq_session"
HOST_SESSION_COOKIE = "__Host-txq_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The most a body may hold when the CSRF check has to read a form field from it.
MAX_FORM_BYTES = 1024 * 1024
_SCOPE_CSRF = "txqueue_csrf"
_SCOPE_SESSION = "txqueue_session"
_OPEN_CSRF = b"csrf of a dashboard without a token"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SCOPE_BASE = "txqueue_base_path"
_SCOPE_ROUTE = "txqueue_route_path"


def check_token(token: str) -> None:
    """A token must be a non-empty string of printable characters, without spaces."""
    if not isinstance(token, str):
        raise InvalidArgument(f"token must be a string, got {type(token).__name__}")
    if not token or any(character.isspace() or not character.isprintable() for character in token):
        raise InvalidArgument("token must be non-empty, printable, without spaces")


def session_cookie(scope: Scope) -> str:
    """The session cookie's name for this request: ``__Host-`` over HTTPS (the browser then
    takes it only with Secure and Path=/, from this very host)."""
    return HOST_SESSION_COOKIE if scope.get("scheme") == "https" else SESSION_COOKIE


def session_of(request: Request) -> str | None:
    """The id of the request's live session (None when it has none)."""
    value = request.scope.get("state", {}).get(_SCOPE_SESSION)
    return str(value) if value else None


def csrf_token_of(request: Request) -> str:
    """The CSRF token the request's forms carry ("" when it has no session to bind one to)."""
    return str(request.scope.get("state", {}).get(_SCOPE_CSRF, ""))


def base_path(scope: Scope) -> str:
    """The dashboard's base path for this request ("" at the root), as its middleware saw it
    (a route under a Mount sees that mount's root_path instead)."""
    shared = scope.get("state", {})
    if _SCOPE_BASE in shared:
        return str(shared[_SCOPE_BASE])
    return str(scope.get("root_path", "")).rstrip("/")


def dashboard_path(scope: Scope) -> str:
    """The request's path inside the dashboard (without the base path)."""
    shared = scope.get("state", {})
    if _SCOPE_ROUTE in shared:
        return str(shared[_SCOPE_ROUTE])
    return route_path(scope)


def _cookie_path(scope: Scope) -> str:
    return str(scope.get("root_path", "")).rstrip("/") or "/"


def route_path(scope: Scope) -> str:
    """The path inside the dashboard (without the base path)."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "")).rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return path or "/"


def _is_api(path: str) -> bool:
    return path == "/api/v1" or path.startswith("/api/v1/")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class SecurityMiddleware:
    """Authentication, the origin and CSRF checks, read-only and the security headers, around
    the whole app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from txqueue.web.app import WebState

        state: WebState = scope["app"].state.txqueue
        headers = Headers(scope=scope)
        if state.allowed_hosts is not None and _host_name(headers) not in state.allowed_hosts:
            refusal = _error(400, "InvalidArgument", "this dashboard does not serve that host")
            await refusal(scope, receive, send)
            return
        path = route_path(scope)
        method = str(scope["method"]).upper()
        wrapped_send = _with_headers(send)

        session = None
        if state.token is None:  # nobody logs in: one CSRF token for every page
            csrf = state.sessions.derived(_OPEN_CSRF)
        else:
            candidates = _cookie_values(headers, session_cookie(scope))
            session = next((value for value in candidates if state.sessions.touch(value)), None)
            csrf = state.sessions.csrf_token(session) if session is not None else ""
        shared = scope.setdefault("state", {})
        shared[_SCOPE_SESSION] = session
        shared[_SCOPE_CSRF] = csrf
        shared[_SCOPE_BASE] = _cookie_path(scope).rstrip("/")  # routes below see their mount's
        shared[_SCOPE_ROUTE] = path

        bearer = _bearer(headers)
        wrong_bearer = bearer is not None and not _is_token(state.token, bearer)
        if state.token is not None and wrong_bearer:
            refusal = _error(401, "Unauthenticated", "the bearer token is wrong")
            await refusal(scope, receive, wrapped_send)
            return
        open_path = path == "/login" or path.startswith("/static/") or path == "/static"
        if state.token is not None and bearer is None and session is None and not open_path:
            await _ask_to_log_in(scope, receive, wrapped_send, path, method)
            return

        if method not in CHANGING_METHODS:
            await self.app(scope, receive, wrapped_send)
            return

        if state.read_only and path not in ("/login", "/logout"):
            await _refuse(scope, receive, wrapped_send, path, "this dashboard is read-only")
            return

        by_browser = "origin" in headers or "sec-fetch-site" in headers
        if (state.token is not None and bearer is not None) or (
            state.token is None and not by_browser  # curl on a dashboard without a token
        ):
            await self.app(scope, receive, wrapped_send)
            return
        if not same_origin(scope, headers):
            message = "a change from another site is refused (Origin / Sec-Fetch-Site)"
            await _refuse(scope, receive, wrapped_send, path, message)
            return
        if path == "/login":  # the token in the form is the credential
            await self.app(scope, receive, wrapped_send)
            return
        given = headers.get(CSRF_HEADER)
        body_receive = receive
        if given is None:
            body, body_receive = await _read_body(receive)
            given = _form_field(headers, body, CSRF_FIELD)
        if not csrf or given is None or not hmac.compare_digest(given.encode(), csrf.encode()):
            message = "the CSRF token is missing or wrong: reload the page and try again"
            await _refuse(scope, body_receive, wrapped_send, path, message)
            return
        await self.app(scope, body_receive, wrapped_send)


async def _ask_to_log_in(
    scope: Scope, receive: Receive, send: Send, path: str, method: str
) -> None:
    """401 for the API; for a page, 303 to the login form (which comes back here after)."""
    response: Response
    if _is_api(path):
        response = _error(
            401,
            "Unauthenticated",
            "this dashboard needs a token: send 'Authorization: Bearer <token>'",
        )
        response.headers["www-authenticate"] = "Bearer"
    else:
        target = _cookie_path(scope).rstrip("/") + "/login"
        if method == "GET" and path != "/":
            query = scope.get("query_string", b"").decode("latin-1")
            wanted = path + (f"?{query}" if query else "")
            target += "?next=" + quote(wanted, safe="")
        response = RedirectResponse(target, status_code=303)
    await response(scope, receive, send)


def same_origin(scope: Scope, headers: Headers) -> bool:
    """Whether a browser sent this request from the dashboard's own origin: ``Sec-Fetch-Site``
    ``same-origin`` or ``none`` (typed, bookmarked) and ``Origin`` equal to the request's own
    scheme, host and port, each when present. Another port of the same host is another origin,
    though cookies do not keep ports apart."""
    site = headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    own = _origin(f"{scope.get('scheme', 'http')}://{headers.get('host', '')}")
    return own is not None and _origin(origin) == own


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin, defaults filled in; None when it is not one."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if scheme not in _DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        return None
    return scheme, parts.hostname.lower(), port


async def _refuse(scope: Scope, receive: Receive, send: Send, path: str, message: str) -> None:
    response: Response
    if _is_api(path):
        response = _error(403, "PermissionDenied", message)
    else:
        response = HTMLResponse(
            "<!doctype html><title>Refused</title><main><p role=alert>"
            + message.replace("&", "&amp;").replace("<", "&lt;")
            + "</p></main>",
            status_code=403,
        )
    await response(scope, receive, send)


def _host_name(headers: Headers) -> str:
    """The host name of the ``Host`` header, lower-cased, without port or IPv6 brackets."""
    host = headers.get("host", "").strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _cookie_values(headers: Headers, name: str) -> list[str]:
    """Every value the ``Cookie`` headers give ``name`` (another port of the same host may
    have set one more under a longer path: each is tried, none is trusted for it)."""
    values = []
    for header in headers.getlist("cookie"):
        for pair in header.split(";"):
            key, separator, value = pair.strip().partition("=")
            if separator and key == name:
                values.append(value.strip().strip('"'))
    return values


def _is_token(token: str | None, given: str) -> bool:
    """Whether ``given`` is the dashboard's token (compared in constant time)."""
    return token is not None and hmac.compare_digest(given.encode(), token.encode())


def _bearer(headers: Headers) -> str | None:
    value = headers.get("authorization")
    if value is None:
        return None
    scheme, _, credentials = value.partition(" ")
    if scheme.lower() != "bearer":
        return ""  # present but not a bearer token: wrong, never "absent"
    return credentials.strip()


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The body's first `MAX_FORM_BYTES` (where a form's CSRF field must be), and a receive
    that hands the app every message unchanged: those read here, then the rest."""
    read: list[Message] = []
    size = 0
    while size <= MAX_FORM_BYTES:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(message.get("body", b"") for message in read)

    async def replay() -> Message:
        if read:
            return read.pop(0)
        return await receive()

    return body, replay


def _form_field(headers: Headers, body: bytes, name: str) -> str | None:
    """A field of an urlencoded or multipart form body (None when it has none)."""
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/x-www-form-urlencoded":
        values = parse_qs(body.decode("latin-1"), keep_blank_values=True).get(name)
        return values[0] if values else None
    if content_type == "multipart/form-data":
        import email.parser
        import email.policy

        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: "
            + headers.get("content-type", "").encode("latin-1")
            + b"\r\n\r\n"
            + body
        )
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == name:
                payload = part.get_payload(decode=True)
                try:
                    return payload.decode() if isinstance(payload, bytes) else None
                except UnicodeDecodeError:  # answered 400 by txqueue.web.limits
                    raise InvalidArgument(f"the form field {name} is not UTF-8 text") from None
    return None


def _with_headers(send: Send) -> Send:
    """``send`` adding the security headers."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in SECURITY_HEADERS.items():
                if name not in headers:
                    headers[name] = value
        await send(message)

    return wrapped


def middleware() -> list[Middleware]:
    """The middleware stack of the dashboard app."""
    return [Middleware(SecurityMiddleware)]


# ---- login -----------------------------------------------------------------------------------


def _safe_next(value: str | None) -> str:
    """Where to go after logging in: a path inside the dashboard, never another site."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return "/"
    return value


async def login(request: Request) -> Response:
    """GET: the login form, or with ``?token=`` (the URL `txqueue dashboard` prints) a login;
    POST: the form's login. A right token starts a session and goes on (303) to ``next``,
    never carrying the token; a wrong one shows the form again with an error."""
    from txqueue.web.app import base_path_of, web_state

    state = web_state(request)
    base = base_path_of(request)
    wanted = _safe_next(request.query_params.get("next"))
    given: object = request.query_params.get("token")
    if request.method == "POST":
        form = await request.form()
        given = form.get("token")
        wanted = _safe_next(str(form.get("next") or wanted))
    if state.token is None and (given is not None or request.method == "POST"):
        return RedirectResponse(base + wanted, status_code=303)
    error = None
    if isinstance(given, str) and _is_token(state.token, given.strip()):
        return _start_session(request, base + wanted)
    if given is not None:
        error = "That token is not the dashboard's."
    context = {"error_message": error, "next_path": wanted}
    return state.templates.TemplateResponse(
        request, "login.html", context, status_code=400 if error else 200
    )


def _start_session(request: Request, target: str) -> Response:
    """A new session (ending the one the browser had), its cookie, and 303 to ``target``."""
    from txqueue.web.app import web_state

    sessions = web_state(request).sessions
    sessions.end(session_of(request))
    response = RedirectResponse(target, status_code=303)
    https = request.url.scheme == "https"
    response.set_cookie(
        session_cookie(request.scope),
        sessions.create(),
        path=_session_cookie_path(request),
        httponly=True,
        samesite="strict",
        secure=https,
    )
    return response


def _session_cookie_path(request: Request) -> str:
    """``/`` over HTTPS (a ``__Host-`` cookie must have it), else the base path."""
    from txqueue.web.app import base_path_of

    return "/" if request.url.scheme == "https" else base_path_of(request) or "/"


async def logout(request: Request) -> Response:
    """End the session on the server (its cookie is refused from now on) and forget it."""
    from txqueue.web.app import base_path_of, web_state

    web_state(request).sessions.end(session_of(request))
    response = RedirectResponse(base_path_of(request) + "/login", status_code=303)
    response.delete_cookie(
        session_cookie(request.scope),
        path=_session_cookie_path(request),
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


def routes() -> list[BaseRoute]:
    """``/login`` and ``/logout``."""
    return [
        Route("/login", login, methods=["GET", "POST"], name="login"),
        Route("/logout", logout, methods=["POST"], name="logout"),
    ]
