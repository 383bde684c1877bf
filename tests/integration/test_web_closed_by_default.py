"""The dashboard is closed by default (issue #37, items 1 and 5), on both engines.

- ``txqueue dashboard`` without a token generates one: it prints a login URL, keeps the token
  in an owner-only file while it runs, and refuses anonymous calls; ``--insecure-no-token`` is
  the only open mode, and it warns. ``create_app`` needs ``token=`` or ``insecure_no_token``.
- A browser session is a random id kept by the server: logging out ends it for good, and it
  expires (12 h idle, 7 days at most). The CSRF token is derived from the session, never from
  a cookie another localhost port could plant. A change with a foreign ``Origin`` or a
  ``Sec-Fetch-Site`` other than ``same-origin`` / ``none`` is refused. Over HTTPS the cookie is
  ``__Host-txq_session``.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from starlette.applications import Starlette

import txqueue
from txqueue.cli.main import main
from txqueue.web import create_app

TOKEN = "t0ken-for-session-tests-2b9c"
BEARER = {"authorization": f"Bearer {TOKEN}"}
PIPELINE = "p-ok"
PUBLIC_HOOK = "https://1.1.1.1/ok"  # public, so allowed without allow_private
STOLEN = {"destination": "http://127.0.0.1:9/steal", "allow_private": True}
STARTUP_LIMIT = 30.0  # seconds for a dashboard process to answer


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        txqueue.Events(database).create_pipeline(PIPELINE, destination=PUBLIC_HOOK)
        yield database


def client_of(app: Starlette, base: str = "http://dashboard") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


def csrf_of(page: httpx.Response) -> str:
    """The CSRF token a page hands its forms (the ``csrf-token`` meta element)."""
    found = re.search(r'<meta name="csrf-token" content="([^"]*)">', page.text)
    assert found is not None, page.text[:300]
    return found.group(1)


async def log_in(http: httpx.AsyncClient, prefix: str = "") -> str:
    """Log in through the form as a browser does; the CSRF token of the new session."""
    form = await http.get(f"{prefix}/login")
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form.text))
    answer = await http.post(
        f"{prefix}/login",
        data={**fields, "token": TOKEN},
        headers={"origin": str(http.base_url).rstrip("/"), "sec-fetch-site": "same-origin"},
    )
    assert answer.status_code == 303, answer.text
    return csrf_of(await http.get(f"{prefix}/"))


def destination(db: txqueue.Database) -> str:
    return txqueue.Events(db).get_pipeline(PIPELINE).destination.target


@pytest.fixture
async def guarded(db: txqueue.Database) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(create_app(db, token=TOKEN)) as http:
        yield http


# ---- create_app ---------------------------------------------------------------------------------


def test_create_app_without_a_token_or_the_insecure_switch_is_refused(
    db: txqueue.Database,
) -> None:
    for arguments in ({}, {"read_only": True}, {"insecure_no_token": False}):
        with pytest.raises(txqueue.errors.InvalidArgument) as refused:
            create_app(db, **arguments)  # type: ignore[arg-type]
        assert "token=" in str(refused.value) and "insecure_no_token=True" in str(refused.value)
    with pytest.raises(txqueue.errors.InvalidArgument, match="not both"):
        create_app(db, token=TOKEN, insecure_no_token=True)
    create_app(db, token=TOKEN)
    create_app(db, insecure_no_token=True)


# ---- sessions -----------------------------------------------------------------------------------


async def test_after_logout_the_old_session_cookie_is_refused(
    db: txqueue.Database, guarded: httpx.AsyncClient
) -> None:
    csrf = await log_in(guarded)
    old_cookie = guarded.cookies["txq_session"]
    changed = await guarded.patch(
        f"/api/v1/pipelines/{PIPELINE}", json={"max_attempts": 7}, headers={"x-csrf-token": csrf}
    )
    assert changed.status_code == 200, changed.text

    out = await guarded.post("/logout", data={"csrf_token": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert "txq_session" not in guarded.cookies

    guarded.cookies.set("txq_session", old_cookie)  # kept, e.g. by someone who copied it
    assert (await guarded.get("/api/v1/queues")).status_code == 401
    assert (await guarded.get("/")).headers["location"] == "/login"
    replayed = await guarded.patch(
        f"/api/v1/pipelines/{PIPELINE}", json=STOLEN, headers={"x-csrf-token": csrf}
    )
    assert replayed.status_code == 401
    assert destination(db) == PUBLIC_HOOK
    assert txqueue.Events(db).get_pipeline(PIPELINE).retry.max_attempts == 7


async def test_each_session_has_its_own_random_id_and_csrf_token(
    guarded: httpx.AsyncClient, db: txqueue.Database
) -> None:
    first = await log_in(guarded)
    first_cookie = guarded.cookies["txq_session"]
    guarded.cookies.clear()
    second = await log_in(guarded)
    assert guarded.cookies["txq_session"] != first_cookie and second != first
    assert TOKEN not in first_cookie
    crossed = await guarded.patch(
        f"/api/v1/pipelines/{PIPELINE}", json=STOLEN, headers={"x-csrf-token": first}
    )
    assert crossed.status_code == 403  # the first session's token does not fit the second
    assert destination(db) == PUBLIC_HOOK


async def test_sessions_expire_when_idle_and_after_seven_days(
    db: txqueue.Database,
) -> None:
    app = create_app(db, token=TOKEN)
    sessions = app.state.txqueue.sessions
    now = [1_000_000.0]
    sessions.clock = lambda: now[0]
    async with client_of(app) as http:
        await log_in(http)
        for _ in range(14):  # every 11 h 59 min: never idle for 12 h, alive for 7 days
            now[0] += timedelta(hours=11, minutes=59).total_seconds()
            assert (await http.get("/api/v1/queues")).status_code == 200
        now[0] += timedelta(hours=11, minutes=59).total_seconds()  # 7 days are over
        assert (await http.get("/api/v1/queues")).status_code == 401

        http.cookies.clear()
        await log_in(http)
        now[0] += timedelta(hours=12, seconds=1).total_seconds()
        assert (await http.get("/api/v1/queues")).status_code == 401


def test_the_session_store_is_bounded_and_evicts_the_least_recently_used() -> None:
    from txqueue.web.sessions import Sessions

    now = [0.0]
    sessions = Sessions(limit=3, clock=lambda: now[0])
    first, second, third = (sessions.create() for _ in range(3))
    now[0] += 1
    assert sessions.touch(first)  # used: now the second is the least recently used
    fourth = sessions.create()
    assert sessions.touch(second) is False
    assert all(sessions.touch(kept) for kept in (first, third, fourth))
    sessions.end(third)
    assert sessions.touch(third) is False
    assert sessions.touch("made-up") is False and sessions.touch("") is False
    assert sessions.csrf_token(first) != sessions.csrf_token(fourth)
    assert Sessions().csrf_token(first) != sessions.csrf_token(first)  # a secret per store


async def test_the_login_url_logs_in_and_a_wrong_token_shows_the_form(
    guarded: httpx.AsyncClient,
) -> None:
    wrong = await guarded.get("/login", params={"token": "guess", "next": "/workers"})
    assert wrong.status_code == 400 and "location" not in wrong.headers
    assert 'id="login"' in wrong.text and "not the dashboard" in wrong.text
    assert "txq_session" not in guarded.cookies

    right = await guarded.get("/login", params={"token": TOKEN, "next": "/workers"})
    assert right.status_code == 303 and right.headers["location"] == "/workers"
    assert TOKEN not in right.headers["location"]
    assert (await guarded.get("/workers")).status_code == 200


# ---- CSRF and Origin ----------------------------------------------------------------------------


async def test_a_csrf_cookie_planted_by_another_port_is_not_trusted(
    db: txqueue.Database, guarded: httpx.AsyncClient
) -> None:
    """Cookies do not keep ports apart: a page on http://127.0.0.1:9999 may set ``txq_csrf``
    for the dashboard's host, and send the same value in its form."""
    await log_in(guarded)
    planted = "A" * 43
    guarded.cookies.set("txq_csrf", planted)
    forged = await guarded.patch(
        f"/api/v1/pipelines/{PIPELINE}", json=STOLEN, headers={"x-csrf-token": planted}
    )
    assert forged.status_code == 403
    form = await guarded.post(
        f"/events/pipelines/{PIPELINE}",
        data={"csrf_token": planted, "destination": STOLEN["destination"], "max_attempts": "5"},
    )
    assert form.status_code == 403
    assert destination(db) == PUBLIC_HOOK


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://127.0.0.1:9999"},
        {"origin": "null"},
        {"origin": "https://dashboard"},  # another scheme is another origin
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},  # another port of the same host
        {"origin": "http://dashboard", "sec-fetch-site": "same-site"},
    ],
)
async def test_a_cookie_change_from_another_origin_is_refused(
    db: txqueue.Database, guarded: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    csrf = await log_in(guarded)
    answer = await guarded.patch(
        f"/api/v1/pipelines/{PIPELINE}", json=STOLEN, headers={"x-csrf-token": csrf, **headers}
    )
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "PermissionDenied"
    assert destination(db) == PUBLIC_HOOK


async def test_same_origin_changes_and_bearer_calls_pass(
    db: txqueue.Database, guarded: httpx.AsyncClient
) -> None:
    csrf = await log_in(guarded)
    for number, headers in enumerate(
        [
            {},
            {"origin": "http://dashboard", "sec-fetch-site": "same-origin"},
            {"origin": "HTTP://Dashboard:80"},
            {"sec-fetch-site": "none"},
        ]
    ):
        answer = await guarded.post(
            "/api/v1/buses", json={"name": f"b{number}"}, headers={"x-csrf-token": csrf, **headers}
        )
        assert answer.status_code == 201, (headers, answer.text)
    async with client_of(create_app(db, token=TOKEN)) as script:  # Bearer: no cookie, no CSRF
        made = await script.post(
            "/api/v1/buses",
            json={"name": "scripted"},
            headers={**BEARER, "origin": "http://elsewhere.example"},
        )
        assert made.status_code == 201


async def test_a_login_post_from_another_origin_is_refused(guarded: httpx.AsyncClient) -> None:
    answer = await guarded.post(
        "/login", data={"token": TOKEN}, headers={"sec-fetch-site": "same-site"}
    )
    assert answer.status_code == 403 and "txq_session" not in guarded.cookies


async def test_open_mode_checks_the_origin_of_browsers_and_their_csrf_token(
    db: txqueue.Database,
) -> None:
    async with client_of(create_app(db, insecure_no_token=True)) as http:
        csrf = csrf_of(await http.get("/"))
        assert "txq_csrf" not in http.cookies and "txq_session" not in http.cookies
        for headers in (
            {"origin": "http://127.0.0.1:9999", "x-csrf-token": csrf},
            {"sec-fetch-site": "same-site", "x-csrf-token": csrf},
            {"origin": "http://dashboard", "x-csrf-token": "A" * 43},
            {"origin": "http://dashboard"},
        ):
            answer = await http.patch(f"/api/v1/pipelines/{PIPELINE}", json=STOLEN, headers=headers)
            assert answer.status_code == 403, headers
        assert destination(db) == PUBLIC_HOOK
        same_origin = {"origin": "http://dashboard", "x-csrf-token": csrf}
        allowed = await http.post("/api/v1/buses", json={"name": "shop"}, headers=same_origin)
        assert allowed.status_code == 201
        scripted = await http.post("/api/v1/buses", json={"name": "curl"})  # not a browser
        assert scripted.status_code == 201


async def test_over_https_the_session_cookie_is_a_host_cookie(db: txqueue.Database) -> None:
    async with client_of(
        create_app(db, token=TOKEN, base_path="/txq"), "https://dashboard"
    ) as http:
        answer = await http.post(
            "/txq/login", data={"token": TOKEN}, headers={"origin": "https://dashboard"}
        )
        assert answer.status_code == 303
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith("__Host-txq_session=")
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "secure", "path=/"} <= attributes
        assert not any(part.startswith("domain") for part in attributes)
        assert (await http.get("/txq/api/v1/queues")).status_code == 200

        session = http.cookies["__Host-txq_session"]
        http.cookies.clear()
        http.cookies.set("txq_session", session)  # the plain name does not count over HTTPS
        assert (await http.get("/txq/api/v1/queues")).status_code == 401


# ---- txqueue dashboard --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Served:
    url: str
    log: Path

    @property
    def output(self) -> str:
        return self.log.read_text()


@contextlib.contextmanager
def dashboard_process(
    arguments: list[str], tmp_path: Path, environment: dict[str, str]
) -> Iterator[Served]:
    """``txqueue dashboard ARGUMENTS`` as a process on a free port, once it answers; stopped
    with SIGTERM after (as a service manager stops it)."""
    port = free_port()
    log = tmp_path / f"dashboard-{port}.log"
    command = str(Path(sys.executable).parent / "txqueue")
    with log.open("wb") as output:
        process = subprocess.Popen(
            [command, "dashboard", "--port", str(port), *arguments],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    served = Served(f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + STARTUP_LIMIT
        while True:
            try:
                httpx.get(f"{served.url}/login", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, served.output
            try:  # the pause between tries doubles as the check that it still runs
                code = process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"txqueue dashboard exited with {code}:\n{served.output}")
        yield served
    finally:
        process.terminate()
        process.wait(timeout=30)


def private_directory(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True)
    path.chmod(0o700)
    return path


@pytest.mark.parametrize("where", ["runtime", "home", "runtime-not-private"])
def test_without_a_token_the_command_generates_one_and_refuses_anonymous_changes(
    sqlite_url: str, tmp_path: Path, where: str
) -> None:
    with txqueue.connect(sqlite_url) as database:
        txqueue.Events(database).create_pipeline(PIPELINE, destination=PUBLIC_HOOK)
    home = private_directory(tmp_path / "home")
    runtime = private_directory(tmp_path / "runtime")
    environment = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    expected_directory = runtime / "txqueue"
    if where == "home":
        environment.pop("XDG_RUNTIME_DIR", None)
        expected_directory = home / ".local" / "state" / "txqueue"
    elif where == "runtime-not-private":
        runtime.chmod(0o755)  # not the user's own: the token does not go there
        expected_directory = home / ".local" / "state" / "txqueue"

    with dashboard_process(["--database", sqlite_url], tmp_path, environment) as served:
        refused = httpx.patch(f"{served.url}/api/v1/pipelines/{PIPELINE}", json=STOLEN)
        assert refused.status_code == 401, refused.text
        assert httpx.get(f"{served.url}/api/v1/pipelines").status_code == 401

        port = served.url.rsplit(":", 1)[1]
        found = re.search(rf"{served.url}/login\?token=([A-Za-z0-9_-]+)", served.output)
        assert found is not None, served.output
        token = found.group(1)
        token_file = expected_directory / f"dashboard-{port}.token"
        assert str(token_file) in served.output
        assert token_file.read_text().strip() == token and len(token) >= 43
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(expected_directory.stat().st_mode) == 0o700

        with httpx.Client(base_url=served.url) as browser:
            entered = browser.get(found.group(0).removeprefix(served.url))
            assert entered.status_code == 303 and entered.headers["location"] == "/"
            assert browser.get("/").status_code == 200
        bearer = {"authorization": f"Bearer {token_file.read_text().strip()}"}
        assert httpx.get(f"{served.url}/api/v1/queues", headers=bearer).status_code == 200
    assert not token_file.exists()  # removed on exit
    with txqueue.connect(sqlite_url) as database:
        assert destination(database) == PUBLIC_HOOK


def test_insecure_no_token_serves_anonymously_and_warns(sqlite_url: str, tmp_path: Path) -> None:
    with txqueue.connect(sqlite_url) as database:
        txqueue.Events(database).create_pipeline(PIPELINE, destination=PUBLIC_HOOK)
    runtime = private_directory(tmp_path / "runtime")
    environment = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    arguments = ["--database", sqlite_url, "--insecure-no-token"]
    with dashboard_process(arguments, tmp_path, environment) as served:
        assert httpx.get(f"{served.url}/api/v1/pipelines").status_code == 200
        changed = httpx.patch(f"{served.url}/api/v1/pipelines/{PIPELINE}", json={"max_attempts": 2})
        assert changed.status_code == 200
        foreign = httpx.patch(
            f"{served.url}/api/v1/pipelines/{PIPELINE}",
            json=STOLEN,
            headers={"origin": "http://127.0.0.1:9", "sec-fetch-site": "same-site"},
        )
        assert foreign.status_code == 403
        assert "every local account" in served.output and "login?token=" not in served.output
    assert not (runtime / "txqueue").exists()

    runner = CliRunner()
    for extra in (["--host", "0.0.0.0"], ["--token", TOKEN]):
        result = runner.invoke(main, ["dashboard", *arguments, *extra])
        assert result.exit_code == 2, result.output


def test_the_token_file_never_follows_a_symlink(tmp_path: Path) -> None:
    from txqueue.cli.dashboard import remove_token_file, write_token_file

    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    runtime = private_directory(tmp_path / "runtime")
    home = private_directory(tmp_path / "home")
    environment = {"XDG_RUNTIME_DIR": str(runtime), "HOME": str(home)}

    (runtime / "txqueue").symlink_to(tmp_path)  # the directory is a symlink: not used
    written = write_token_file("secret-1", 8080, environment)
    assert written is not None and written.parent == home / ".local" / "state" / "txqueue"
    remove_token_file(written)

    (runtime / "txqueue").unlink()
    private_directory(runtime / "txqueue")
    (runtime / "txqueue" / "dashboard-8080.token").symlink_to(victim)  # a stale link
    written = write_token_file("secret-2", 8080, environment)
    assert written == runtime / "txqueue" / "dashboard-8080.token"
    assert not written.is_symlink() and written.read_text() == "secret-2\n"
    assert victim.read_text() == "keep me\n"
    remove_token_file(written)
    assert not written.exists() and victim.exists()
