"""The dashboard's guards on both engines: the token (Bearer and the login cookie), CSRF,
read-only, the security headers, serving under a base path or inside a parent app, and the
``txqueue dashboard`` command (refusing an open network address; serving for real). Sessions,
the origin checks and the generated token: test_web_closed_by_default.py."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.routing import Mount

import txqueue
from txqueue.cli.main import main
from txqueue.web import create_app

TOKEN = "t0ken-for-tests-7f3a"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
MAIL = "CREATE QUEUE mail (id STRING(MAX) NOT NULL, payload BYTES(MAX) NOT NULL) PRIMARY KEY (id)"
PG_MAIL = "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"
BEARER = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        database.update_ddl([PG_MAIL if database.dialect == "postgresql" else MAIL])
        yield database


def client_of(app: Starlette, base: str = "http://dashboard") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


@pytest.fixture
async def guarded(db: txqueue.Database) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(create_app(db, token=TOKEN)) as http:
        yield http


def dead_letter(db: txqueue.Database, id: str) -> None:
    db.run_in_transaction(lambda txn: txn.send("mail", id, b"x"))
    [leased] = db.receive_now("mail")
    db.dead_letter("mail", leased.key, leased.lease_token, "boom")


def csrf_of(page: httpx.Response) -> str:
    """The CSRF token a page hands its forms (the ``csrf-token`` meta element)."""
    found = re.search(r'<meta name="csrf-token" content="([^"]*)">', page.text)
    assert found is not None, page.text[:300]
    return found.group(1)


async def log_in(http: httpx.AsyncClient, prefix: str = "") -> str:
    """Log in through the form, as a browser does; the CSRF token of the session."""
    form = await http.get(f"{prefix}/login")
    assert form.status_code == 200
    answer = await http.post(f"{prefix}/login", data={"token": TOKEN})
    assert answer.status_code == 303, answer.text
    return csrf_of(await http.get(f"{prefix}/"))


async def test_without_the_token_the_api_answers_401_and_pages_redirect_to_login(
    guarded: httpx.AsyncClient,
) -> None:
    refused = await guarded.get("/api/v1/queues")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "Unauthenticated"
    assert refused.headers["www-authenticate"] == "Bearer"
    page = await guarded.get("/queues/mail", params={"state": "ready"})
    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=%2Fqueues%2Fmail%3Fstate%3Dready"
    assert (await guarded.get("/")).headers["location"] == "/login"

    assert (await guarded.get("/api/v1/queues", headers=BEARER)).status_code == 200
    for wrong in (f"Bearer {TOKEN}x", "Bearer ", f"Basic {TOKEN}", TOKEN):
        answer = await guarded.get("/api/v1/queues", headers={"authorization": wrong})
        assert answer.status_code == 401, wrong
    assert (await guarded.get("/login")).status_code == 200  # the form is open to all


async def test_login_sets_an_httponly_strict_cookie_that_is_not_the_token(
    db: txqueue.Database, guarded: httpx.AsyncClient
) -> None:
    wrong = await guarded.post("/login", data={"token": "guess"})
    assert wrong.status_code == 400 and "txq_session" not in guarded.cookies
    assert (await guarded.get("/api/v1/queues")).status_code == 401

    answer = await guarded.post("/login", data={"token": TOKEN, "next": "/workers"})
    assert answer.status_code == 303 and answer.headers["location"] == "/workers"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("txq_session=")
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes
    assert TOKEN not in cookie and TOKEN not in json.dumps(dict(answer.headers))
    assert (await guarded.get("/api/v1/queues")).status_code == 200  # the cookie authenticates

    async with client_of(create_app(db, token=TOKEN), "https://dashboard") as secure:
        form = await secure.get("/login")
        assert "set-cookie" not in form.headers  # no cookie before logging in
        answer = await secure.post("/login", data={"token": TOKEN})
        assert "secure" in {
            part.strip().lower() for part in answer.headers["set-cookie"].split(";")
        }

    elsewhere = await guarded.post("/login", data={"token": TOKEN, "next": "//evil.example/x"})
    assert elsewhere.headers["location"] == "/"  # never redirected off the dashboard


async def test_a_cookie_authenticated_change_needs_the_csrf_token(
    db: txqueue.Database, guarded: httpx.AsyncClient
) -> None:
    csrf = await log_in(guarded)
    refused = await guarded.post("/api/v1/buses", json={"name": "orders"})
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
    forged = await guarded.post(
        "/api/v1/buses", json={"name": "orders"}, headers={"x-csrf-token": "x" * 43}
    )
    assert forged.status_code == 403
    assert txqueue.Events(db).list_buses() == []

    allowed = await guarded.post(
        "/api/v1/buses", json={"name": "orders"}, headers={"x-csrf-token": csrf}
    )
    assert allowed.status_code == 201
    from_elsewhere = await guarded.post(
        "/login", data={"token": TOKEN}, headers={"origin": "http://evil.example"}
    )
    assert from_elsewhere.status_code == 403  # a login too must come from the dashboard

    async with client_of(create_app(db, token=TOKEN)) as script:  # Bearer, no cookies: exempt
        made = await script.post("/api/v1/buses", json={"name": "audit"}, headers=BEARER)
        assert made.status_code == 201


async def test_without_a_token_browsers_still_need_the_csrf_token(db: txqueue.Database) -> None:
    async with client_of(create_app(db, insecure_no_token=True)) as http:
        cross_site = await http.post(
            "/api/v1/buses", json={"name": "evil"}, headers={"origin": "https://evil.example"}
        )
        assert cross_site.status_code == 403
        fetched = await http.post(
            "/api/v1/buses", json={"name": "evil"}, headers={"sec-fetch-site": "cross-site"}
        )
        assert fetched.status_code == 403
        assert txqueue.Events(db).list_buses() == []
        scripted = await http.post("/api/v1/buses", json={"name": "orders"})  # curl, httpx
        assert scripted.status_code == 201

        csrf = csrf_of(await http.get("/"))
        same_origin = await http.post(
            "/api/v1/buses",
            json={"name": "shop"},
            headers={"origin": "http://dashboard", "x-csrf-token": csrf},
        )
        assert same_origin.status_code == 201


async def test_read_only_refuses_every_change_and_changes_nothing(db: txqueue.Database) -> None:
    dead_letter(db, "d1")
    async with client_of(create_app(db, read_only=True, token=TOKEN)) as http:
        http.headers.update(BEARER)
        assert (await http.get("/api/v1/queues")).status_code == 200
        for method, path, body in (
            ("POST", "/api/v1/queues/mail/dead-letters/replay", {"all": True}),
            ("POST", "/api/v1/queues/mail/dead-letters/purge", {"all": True}),
            ("POST", "/api/v1/buses", {"name": "orders"}),
            ("PATCH", "/api/v1/pipelines/p", {"max_attempts": 2}),
            ("DELETE", "/api/v1/buses/orders", None),
        ):
            answer = await http.request(method, path, json=body)
            assert answer.status_code == 403, (method, path)
            assert answer.json()["error"] == {
                "code": "PermissionDenied",
                "message": "this dashboard is read-only",
            }
        page = await http.post("/queues/mail/dead-letters", data={"action": "purge-all"})
        assert page.status_code == 403 and "read-only" in page.text
    assert len(db.dead_letters("mail")) == 1 and db.queue_info("mail").ready == 0
    assert txqueue.Events(db).list_buses() == []


async def test_every_response_carries_the_security_headers(
    db: txqueue.Database, guarded: httpx.AsyncClient
) -> None:
    await log_in(guarded)
    for path in ("/api/v1/queues", "/api/v1/nothing", "/login", "/", "/static/dashboard.css"):
        answer = await guarded.get(path)
        assert answer.headers["content-security-policy"] == CSP, path
        assert answer.headers["x-content-type-options"] == "nosniff", path
        assert answer.headers["referrer-policy"] == "same-origin", path
    assert (await guarded.get("/api/v1/nothing")).json()["error"]["code"] == "NotFound"
    async with client_of(create_app(db, token=TOKEN)) as fresh:
        assert (await fresh.get("/api/v1/queues")).headers["content-security-policy"] == CSP


async def test_mounted_inside_a_parent_app_everything_follows_the_mount(
    db: txqueue.Database,
) -> None:
    parent = Starlette(routes=[Mount("/txq", app=create_app(db, token=TOKEN))])
    async with client_of(parent) as http:
        assert (await http.get("/txq/api/v1/queues", headers=BEARER)).status_code == 200
        assert (await http.get("/txq/")).headers["location"] == "/txq/login"
        answer = await http.post("/txq/login", data={"token": TOKEN})
        assert answer.headers["location"] == "/txq/"
        assert "path=/txq" in answer.headers["set-cookie"].lower()
        document = (await http.get("/txq/api/v1/openapi.json")).json()
        assert document["servers"] == [{"url": "/txq/api/v1"}]
        assert (await http.get("/txq/api/v1/nothing")).status_code == 404

    async with client_of(create_app(db, base_path="/ops/txq/", token=TOKEN)) as http:
        http.headers.update(BEARER)
        assert (await http.get("/ops/txq/api/v1/queues")).status_code == 200
        assert (await http.get("/api/v1/queues")).status_code == 404


def test_a_network_address_without_a_token_is_refused_before_binding(
    sqlite_url: str, tmp_path: Path
) -> None:
    txqueue.connect(sqlite_url).close()
    runner = CliRunner()
    for host in ("0.0.0.0", "192.0.2.10", "::"):
        result = runner.invoke(main, ["dashboard", "--database", sqlite_url, "--host", host])
        assert result.exit_code == 2, result.output
        assert "--token" in result.output and "--token-file" in result.output

    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    result = runner.invoke(
        main, ["dashboard", "--database", sqlite_url, "--token-file", str(empty)]
    )
    assert result.exit_code == 2 and "no token" in result.output
    both = runner.invoke(
        main,
        ["dashboard", "--database", sqlite_url, "--token", "a", "--token-file", str(empty)],
    )
    assert both.exit_code == 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(arguments: list[str], ready_url: str) -> Iterator[list[str]]:
    """``txqueue dashboard ARGUMENTS`` as a process, once ``ready_url`` answers; terminated
    after, its output then appended to the list yielded."""
    txqueue_command = str(Path(sys.executable).parent / "txqueue")
    process = subprocess.Popen(
        [txqueue_command, "dashboard", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.communicate()
            try:
                httpx.get(ready_url, timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # polling the port until the server has bound it
        output: list[str] = []
        yield output
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    output.append((out + err).decode())


def test_the_dashboard_command_serves_the_api(sqlite_url: str, tmp_path: Path) -> None:
    with txqueue.connect(sqlite_url) as database:
        database.update_ddl([MAIL])
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\nignored second line\n")
    token_file.chmod(0o644)  # readable by others: served, with a warning
    port = free_port()
    arguments = ["--database", sqlite_url, "--port", str(port), "--token-file", str(token_file)]
    url = f"http://127.0.0.1:{port}/txq/api/v1/queues"
    with serving([*arguments, "--base-path", "/txq"], url) as output:
        answer = httpx.get(url, headers=BEARER, timeout=2)
        assert answer.status_code == 200
        assert [queue["name"] for queue in answer.json()["queues"]] == ["mail"]
        assert httpx.get(url, timeout=2).status_code == 401
    assert TOKEN not in output[0]
    assert "can be read by other users" in output[0] and f"127.0.0.1:{port}/txq/" in output[0]


def test_without_a_token_the_command_serves_only_loopback_host_names(sqlite_url: str) -> None:
    """A page whose DNS name is rebound to 127.0.0.1 sends its own name as Host: refused."""
    with txqueue.connect(sqlite_url) as database:
        database.update_ddl([MAIL])
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/v1/queues"
    arguments = ["--database", sqlite_url, "--port", str(port), "--insecure-no-token"]
    with serving(arguments, url):
        assert httpx.get(url, timeout=2).status_code == 200
        for host in (f"localhost:{port}", "127.0.0.1"):
            assert httpx.get(url, headers={"host": host}, timeout=2).status_code == 200
        rebound = httpx.get(url, headers={"host": f"attacker.example:{port}"}, timeout=2)
        assert rebound.status_code == 400
        assert rebound.json()["error"]["code"] == "InvalidArgument"


async def test_allowed_hosts_refuse_other_host_headers(db: txqueue.Database) -> None:
    app = create_app(db, allowed_hosts=["127.0.0.1", "localhost", "::1"], insecure_no_token=True)
    for base, status in [
        ("http://127.0.0.1:8080", 200),
        ("http://[::1]:8080", 200),
        ("http://LOCALHOST", 200),
        ("http://attacker.example:8080", 400),
        ("http://127.0.0.1.attacker.example", 400),
    ]:
        async with client_of(app, base) as http:
            assert (await http.get("/api/v1/queues")).status_code == status, base
    async with client_of(create_app(db, token=TOKEN), "http://any.example") as http:  # any
        assert (await http.get("/api/v1/queues", headers=BEARER)).status_code == 200


@pytest.mark.parametrize("package", ["starlette", "jinja2", "uvicorn"])
def test_without_the_extra_the_command_names_the_install(package: str, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/app.db"
    txqueue.connect(database).close()
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "from txqueue.cli.main import main\n"
        f"main(['dashboard', '--database', {database!r}], prog_name='txqueue')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    assert "pip install 'txqueue[dashboard]'" in result.stderr and package in result.stderr


async def test_a_large_form_reaches_the_app_whole_after_the_csrf_check(
    db: txqueue.Database, guarded: httpx.AsyncClient
) -> None:
    dead_letter(db, "d1")
    csrf = await log_in(guarded)
    padding = "p" * (64 * 1024)

    async def streamed() -> AsyncIterator[bytes]:
        """The form in 64 KiB chunks: the CSRF field first, the action after 896 KiB (under
        the 1 MiB a form may have, in fields of 448 KiB)."""
        yield f"csrf_token={csrf}".encode()
        for chunk in range(14):
            yield (f"&padding{chunk // 7}=" if chunk % 7 == 0 else "").encode() + padding.encode()
        yield b"&action=replay-all"

    answer = await guarded.post(
        "/queues/mail/dead-letters",
        content=streamed(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 303, answer.text[:200]
    assert "done=replayed" in answer.headers["location"]
    assert db.dead_letters("mail") == [] and db.queue_info("mail").ready == 1


def test_create_app_refuses_bad_arguments(db: txqueue.Database) -> None:
    for arguments, word in (
        ({"token": ""}, "token"),
        ({"token": "two words"}, "token"),
        ({"base_path": "txq"}, "base_path"),
        ({"base_path": "/txq?x=1"}, "base_path"),
    ):
        with pytest.raises(txqueue.errors.InvalidArgument, match=word):
            create_app(db, **arguments)
    with pytest.raises(txqueue.errors.InvalidArgument, match="sync face"):
        create_app(object(), token=TOKEN)
