"""Who may use the dashboard, and what a page in a browser may do.

- Token: with one set, API calls carry ``Authorization: Bearer <token>``, and browsers log in
  at ``/login``, which sets an HttpOnly, SameSite=Strict cookie holding an HMAC of the token
  (never the token itself). Pages redirect there (303) when not logged in; the API answers 401.
- CSRF: every POST/PUT/PATCH/DELETE from a browser carries the per-session double-submit
  token: the ``txq_csrf`` cookie, repeated in the form field ``csrf_token`` or the
  ``X-CSRF-Token`` header. A call authenticated by a valid Bearer header is exempt (a browser
  never adds that header across sites), and so is, on a dashboard without a token, a client
  that is not a browser (neither ``Origin`` nor ``Sec-Fetch-Site``, which browsers send with
  every cross-site POST).
- Read-only: every change is refused with 403.
- Headers: a strict Content-Security-Policy (no inline script), nosniff, no referrer.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from txqueue.errors import InvalidArgument

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "check_token",
    "csrf_token_of",
    "middleware",
    "routes",
    "session_value",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
SESSION_COOKIE = "txq_session"
CSRF_COOKIE = "txq_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The most a body may hold when the CSRF check has to read a form field from it.
MAX_FORM_BYTES = 1024 * 1024
_SCOPE_CSRF = "txqueue_csrf"
_SCOPE_BASE = "txqueue_base_path"
_SCOPE_ROUTE = "txqueue_route_path"


def check_token(token: str) -> None:
    """A token must be a non-empty string of printable characters, without spaces."""
    if not isinstance(token, str):
        raise InvalidArgument(f"token must be a string, got {type(token).__name__}")
    if not token or any(character.isspace() or not character.isprintable() for character in token):
        raise InvalidArgument("token must be non-empty, printable, without spaces")


def session_value(token: str) -> str:
    """What the login cookie holds: an HMAC of the token, so the cookie never reveals it."""
    return hmac.new(token.encode(), b"txqueue dashboard session", hashlib.sha256).hexdigest()


def csrf_token_of(request: Request) -> str:
    """The CSRF token of this browser session (the cookie's, or the one being set now)."""
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
    """Authentication, CSRF, read-only and the security headers, around the whole app."""

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
        cookies = _cookies(headers)
        path = route_path(scope)
        method = str(scope["method"]).upper()

        csrf = cookies.get(CSRF_COOKIE, "")
        new_csrf = None
        if not _plausible_csrf(csrf):
            csrf = new_csrf = secrets.token_urlsafe(32)
        shared = scope.setdefault("state", {})
        shared[_SCOPE_CSRF] = csrf
        shared[_SCOPE_BASE] = _cookie_path(scope).rstrip("/")  # routes below see their mount's
        shared[_SCOPE_ROUTE] = path
        wrapped_send = _with_headers(send, scope, None if _is_api(path) else new_csrf)

        bearer = _bearer(headers)
        open_path = path == "/login" or path.startswith("/static/") or path == "/static"
        if state.token is not None and not open_path:
            if bearer is not None:
                if not hmac.compare_digest(bearer.encode(), state.token.encode()):
                    await _error(401, "Unauthenticated", "the bearer token is wrong")(
                        scope, receive, wrapped_send
                    )
                    return
            elif not _logged_in(cookies, state.token):
                if _is_api(path):
                    response: Response = _error(
                        401,
                        "Unauthenticated",
                        "this dashboard needs a token: send 'Authorization: Bearer <token>'",
                    )
                    response.headers["www-authenticate"] = "Bearer"
                else:
                    target = _cookie_path(scope).rstrip("/") + "/login"
                    wanted = route_path(scope)
                    if method == "GET" and wanted != "/":
                        query = scope.get("query_string", b"").decode("latin-1")
                        wanted += f"?{query}" if query else ""
                        target += "?next=" + quote(wanted, safe="")
                    response = RedirectResponse(target, status_code=303)
                await response(scope, receive, wrapped_send)
                return

        if method not in CHANGING_METHODS:
            await self.app(scope, receive, wrapped_send)
            return

        if state.read_only and path not in ("/login", "/logout"):
            await _refuse(scope, receive, wrapped_send, path, "this dashboard is read-only")
            return

        body_receive = receive
        bearer_ok = bearer is not None and state.token is not None
        not_browser = (  # every browser sends Origin on a cross-site POST, and Sec-Fetch-Site
            state.token is None and "origin" not in headers and "sec-fetch-site" not in headers
        )
        if not (bearer_ok or not_browser):
            given = headers.get(CSRF_HEADER)
            if given is None:
                body, body_receive = await _read_body(receive)
                given = _form_field(headers, body, CSRF_FIELD)
            if (
                new_csrf is not None
                or given is None
                or not hmac.compare_digest(given.encode(), csrf.encode())
            ):
                await _refuse(
                    scope,
                    body_receive,
                    wrapped_send,
                    path,
                    "the CSRF token is missing or wrong: reload the page and try again",
                )
                return
        await self.app(scope, body_receive, wrapped_send)


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


def _plausible_csrf(value: str) -> bool:
    return 20 <= len(value) <= 100 and value.replace("-", "").replace("_", "").isalnum()


def _cookies(headers: Headers) -> dict[str, str]:
    from http.cookies import SimpleCookie

    jar: SimpleCookie = SimpleCookie()
    for header in headers.getlist("cookie"):
        try:
            jar.load(header)
        except Exception:  # a malformed Cookie header counts as no cookies
            continue
    return {name: morsel.value for name, morsel in jar.items()}


def _bearer(headers: Headers) -> str | None:
    value = headers.get("authorization")
    if value is None:
        return None
    scheme, _, credentials = value.partition(" ")
    if scheme.lower() != "bearer":
        return ""  # present but not a bearer token: wrong, never "absent"
    return credentials.strip()


def _logged_in(cookies: dict[str, str], token: str) -> bool:
    value = cookies.get(SESSION_COOKIE)
    return value is not None and hmac.compare_digest(value.encode(), session_value(token).encode())


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
                return payload.decode() if isinstance(payload, bytes) else None
    return None


def _with_headers(send: Send, scope: Scope, new_csrf: str | None) -> Send:
    """``send`` adding the security headers, and the CSRF cookie when it is new."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in SECURITY_HEADERS.items():
                if name not in headers:
                    headers[name] = value
            if new_csrf is not None:
                secure = "; Secure" if scope.get("scheme") == "https" else ""
                headers.append(
                    "set-cookie",
                    f"{CSRF_COOKIE}={new_csrf}; Path={_cookie_path(scope)}; HttpOnly; "
                    f"SameSite=Strict{secure}",
                )
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
    """GET: the login form; POST: check the token, set the session cookie, go on."""
    from txqueue.web.app import base_path_of, web_state

    state = web_state(request)
    base = base_path_of(request)
    wanted = _safe_next(request.query_params.get("next"))
    error = None
    if request.method == "POST":
        form = await request.form()
        given = form.get("token")
        wanted = _safe_next(str(form.get("next") or wanted))
        if state.token is None:
            return RedirectResponse(base + wanted, status_code=303)
        if isinstance(given, str) and hmac.compare_digest(
            given.strip().encode(), state.token.encode()
        ):
            response = RedirectResponse(base + wanted, status_code=303)
            response.set_cookie(
                SESSION_COOKIE,
                session_value(state.token),
                path=base or "/",
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
            )
            return response
        error = "That token is not the dashboard's."
    status = 400 if error else 200
    try:
        return state.templates.TemplateResponse(
            request, "login.html", {"error_message": error, "next_path": wanted}, status_code=status
        )
    except Exception as problem:  # the page template is not there yet: a plain form
        import jinja2

        if not isinstance(problem, jinja2.TemplateNotFound):
            raise
        return HTMLResponse(_plain_login(base, wanted, error, csrf_token_of(request)), status)


async def logout(request: Request) -> Response:
    """Forget the session cookie."""
    from txqueue.web.app import base_path_of

    base = base_path_of(request)
    response = RedirectResponse((base or "") + "/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=base or "/", httponly=True, samesite="strict")
    return response


def _plain_login(base: str, wanted: str, error: str | None, csrf: str) -> str:
    from html import escape

    alert = f"<p role=alert>{escape(error)}</p>" if error else ""
    return (
        "<!doctype html><html><head><title>txqueue: log in</title></head><body><main>"
        f"{alert}<form id=login method=post action='{escape(base)}/login'>"
        f"<input type=hidden name=csrf_token value='{escape(csrf)}'>"
        f"<input type=hidden name=next value='{escape(wanted)}'>"
        "<label>Token <input type=password name=token autocomplete=current-password></label>"
        "<button type=submit>Log in</button></form></main></body></html>"
    )


def routes() -> list[BaseRoute]:
    """``/login`` and ``/logout``."""
    return [
        Route("/login", login, methods=["GET", "POST"], name="login"),
        Route("/logout", logout, methods=["POST"], name="logout"),
    ]
