"""The dashboard's limits, on SQLite and PostgreSQL where data is involved: who may allow
private pipeline destinations, request body caps (413 before the body is read), JSON nesting
(400, never a RecursionError), a malformed login form (400), control and bidi characters shown
escaped on every page, ``Cache-Control: no-store`` on data, and a ``txqueue dashboard``
process that closes half-open connections and refuses huge bodies without holding them."""

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
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

import txqueue
from txqueue.events.destinations import ALLOW_PRIVATE_ENV
from txqueue.web import create_app

pytest.importorskip("starlette")

TOKEN = "t0ken-for-limit-tests-91c2"
BEARER = {"authorization": f"Bearer {TOKEN}"}
DDL = {
    "googlesql": "CREATE QUEUE jobs (id STRING(MAX) NOT NULL, payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (id)",
    "postgresql": "CREATE QUEUE jobs (id varchar NOT NULL, payload bytea NOT NULL,"
    " PRIMARY KEY (id))",
}
PRIVATE_HOOK = "http://127.0.0.1:9/hook"  # never called: no dispatcher runs here
PUBLIC_HOOK = "https://93.184.216.34/hook"  # an IP literal: checked without DNS
MIB = 1024 * 1024
DEEP = "[" * 5000 + "]" * 5000  # deeper than Python's recursion limit


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        database.update_ddl([DDL[database.dialect]])
        yield database


def client_of(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://dashboard", headers=BEARER)


@pytest.fixture
def sqlite_db(sqlite_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(sqlite_url) as database:
        database.update_ddl([DDL[database.dialect]])
        yield database


@pytest.fixture
async def client(db: txqueue.Database) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(create_app(db, token=TOKEN)) as http:
        yield http


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    return f"{body['code']}: {body['message']}"


# ---- allow_private: an operator's switch, never an API client's ------------------------------


async def test_an_api_client_cannot_allow_private_destinations_without_the_server_switch(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    wanted = {"name": "p", "destination": PRIVATE_HOOK, "allow_private": True}
    refused = error_of(await client.post("/api/v1/pipelines", json=wanted), 400)
    assert "allow_private" in refused and "--allow-private-destinations" in refused
    assert (await client.get("/api/v1/pipelines")).json() == {"pipelines": []}

    txqueue.Events(db).create_pipeline("public", PUBLIC_HOOK)
    change = {"destination": PRIVATE_HOOK, "allow_private": True}
    refused = error_of(await client.patch("/api/v1/pipelines/public", json=change), 400)
    assert "allow_private" in refused and "--allow-private-destinations" in refused
    kept = txqueue.Events(db).get_pipeline("public")
    assert (str(kept.destination), kept.allow_private) == (PUBLIC_HOOK, False)
    # Taking the allowance away is always allowed.
    answer = await client.patch("/api/v1/pipelines/public", json={"allow_private": False})
    assert answer.status_code == 200, answer.text


async def test_the_server_switch_lets_api_clients_allow_private_destinations(
    db: txqueue.Database,
) -> None:
    app = create_app(db, token=TOKEN, allow_private_destinations=True)
    async with client_of(app) as http:
        wanted = {"name": "p", "destination": PRIVATE_HOOK, "allow_private": True}
        created = await http.post("/api/v1/pipelines", json=wanted)
        assert created.status_code == 201, created.text
        assert created.json()["allow_private"] is True
    assert txqueue.Events(db).get_pipeline("p").allow_private is True


async def test_the_environment_variable_is_not_recorded_on_pipelines_made_through_the_dashboard(
    db: txqueue.Database, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    txqueue.Events(db).create_pipeline("edited", PUBLIC_HOOK)
    monkeypatch.setenv(ALLOW_PRIVATE_ENV, "1")

    created = await client.post("/api/v1/pipelines", json={"name": "p", "destination": PUBLIC_HOOK})
    assert created.status_code == 201, created.text
    assert created.json()["allow_private"] is False
    assert txqueue.Events(db).get_pipeline("p").allow_private is False
    private = {"name": "q", "destination": PRIVATE_HOOK}
    assert "private" in error_of(await client.post("/api/v1/pipelines", json=private), 400)

    # The pipeline page's form: a private destination is refused, a public one saved as public.
    form = {"destination": PRIVATE_HOOK, "max_attempts": "5"}
    form |= {"min_retry_delay": "1", "max_retry_delay": "60"}
    refused = await client.post("/events/pipelines/edited", data=form)
    assert refused.status_code == 400, refused.text
    form["destination"] = "https://93.184.216.35/hook"
    saved = await client.post("/events/pipelines/edited", data=form)
    assert saved.status_code == 303, saved.text
    edited = txqueue.Events(db).get_pipeline("edited")
    assert (str(edited.destination), edited.allow_private) == (form["destination"], False)


async def test_a_new_destination_set_through_the_api_gets_no_private_allowance(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    txqueue.Events(db).create_pipeline("ops", PRIVATE_HOOK, allow_private=True)  # the operator

    moved = {"destination": "http://127.0.0.1:10/elsewhere"}
    refused = error_of(await client.patch("/api/v1/pipelines/ops", json=moved), 400)
    assert "private" in refused
    assert str(txqueue.Events(db).get_pipeline("ops").destination) == PRIVATE_HOOK

    # Retry settings (and the form's unchanged destination) keep the operator's allowance.
    answer = await client.patch("/api/v1/pipelines/ops", json={"max_attempts": 3})
    assert answer.status_code == 200 and answer.json()["allow_private"] is True, answer.text
    form = {"destination": PRIVATE_HOOK, "max_attempts": "4"}
    form |= {"min_retry_delay": "1", "max_retry_delay": "60"}
    assert (await client.post("/events/pipelines/ops", data=form)).status_code == 303
    assert txqueue.Events(db).get_pipeline("ops").allow_private is True

    public = await client.patch("/api/v1/pipelines/ops", json={"destination": PUBLIC_HOOK})
    assert public.status_code == 200, public.text
    assert public.json()["allow_private"] is False


# ---- request bodies ---------------------------------------------------------------------------


class Body:
    """A request body of ``size`` bytes made on demand, counting what the server pulled."""

    def __init__(self, size: int, chunk: int = 64 * 1024) -> None:
        self.size, self.chunk, self.pulled = size, chunk, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.pulled < self.size:
            piece = min(self.chunk, self.size - self.pulled)
            self.pulled += piece
            yield b" " * piece


async def test_a_body_over_the_cap_is_refused_with_413_before_it_is_read(
    sqlite_db: txqueue.Database,
) -> None:
    async with client_of(create_app(sqlite_db, token=TOKEN)) as http:
        declared = Body(300 * MIB)
        headers = {"content-type": "application/json", "content-length": str(declared.size)}
        answer = await http.post("/api/v1/buses", content=declared, headers=headers)
        assert "ContentTooLarge" in error_of(answer, 413)
        assert declared.pulled == 0
        assert answer.headers["connection"] == "close"

        streamed = Body(50 * MIB)  # chunked: no Content-Length
        answer = await http.post("/api/v1/buses", content=streamed)
        assert "1 MiB" in error_of(answer, 413)
        assert streamed.pulled <= 1 * MIB + streamed.chunk

        form = {"content-type": "application/x-www-form-urlencoded"}
        page = await http.post("/queues/jobs/dead-letters", content=Body(2 * MIB), headers=form)
        assert page.status_code == 413 and "1 MiB" in page.text


async def test_publishing_takes_events_up_to_the_cell_limit(sqlite_db: txqueue.Database) -> None:
    async with client_of(create_app(sqlite_db, token=TOKEN)) as http:
        assert (await http.post("/api/v1/buses", json={"name": "b"})).status_code == 201
        event = {"specversion": "1.0", "id": "1", "source": "s", "type": "t"}
        event["data"] = "x" * (3 * MIB)
        headers = {"content-type": "application/cloudevents+json"}
        published = await http.post("/api/v1/buses/b/events", json=event, headers=headers)
        assert published.status_code == 201, published.text[:300]
        event["data"] = "x" * (11 * MIB)
        too_large = await http.post("/api/v1/buses/b/events", json=event, headers=headers)
        assert "10.5 MiB" in error_of(too_large, 413)


# ---- JSON nesting -----------------------------------------------------------------------------


async def test_deeply_nested_json_anywhere_is_a_400_naming_the_depth_rule(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    def deep_rule(answer: httpx.Response) -> None:
        assert "nested deeper than 80 levels" in error_of(answer, 400)

    deep_rule(await client.post("/api/v1/buses", content=DEEP))
    deep_rule(await client.post("/api/v1/buses", content='{"name": ' + "[" * 100 + "]" * 100 + "}"))
    deep_rule(await client.get("/api/v1/queues/jobs/message", params={"key": DEEP}))
    deep_rule(await client.get("/api/v1/queues/jobs/messages", params={"after": DEEP}))
    deep_rule(await client.get("/api/v1/queues/jobs/messages", params={"prefix": DEEP}))

    assert (await client.post("/api/v1/buses", json={"name": "b"})).status_code == 201
    structured = '{"specversion": "1.0", "id": "1", "source": "s", "type": "t", "data": '
    headers = {"content-type": "application/cloudevents+json"}
    deep_rule(
        await client.post(
            "/api/v1/buses/b/events", content=structured + DEEP + "}", headers=headers
        )
    )
    nested = "[" * 90 + "]" * 90  # under the recursion limit, over JSON's
    deep_rule(
        await client.post(
            "/api/v1/buses/b/events", content=structured + nested + "}", headers=headers
        )
    )
    binary = {"ce-specversion": "1.0", "ce-id": "2", "ce-source": "s", "ce-type": "t"}
    binary["content-type"] = "application/json"
    deep_rule(await client.post("/api/v1/buses/b/events", content=DEEP, headers=binary))
    assert txqueue.Events(db).list_buses()[0].name == "b"

    for page in (
        f"/queues/jobs?after={quote(DEEP)}",
        f"/queues/jobs?prefix={quote(DEEP)}",
        f"/queues/jobs/message?key={quote(DEEP)}",
    ):
        answer = await client.get(page)
        assert answer.status_code == 400 and "nested deeper than 80 levels" in answer.text


# ---- the login form ---------------------------------------------------------------------------


async def test_a_malformed_multipart_form_is_a_400(sqlite_db: txqueue.Database) -> None:
    app = create_app(sqlite_db, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as http:
        headers = {"content-type": "multipart/form-data; boundary=xx"}
        body = (
            b'--xx\r\nContent-Disposition: form-data; name="csrf_token"\r\n\r\n\xff\xfe\r\n'
            b'--xx\r\nContent-Disposition: form-data; name="action"\r\n\r\nreplay-all\r\n'
            b"--xx--\r\n"
        )
        anonymous = await http.post("/login", content=body, headers=headers)
        assert anonymous.status_code < 500, anonymous.text
        broken = await http.post("/login", content=b"--yy\r\nbroken", headers=headers)
        assert broken.status_code == 400, broken.text

        logged_in = await http.get("/login", params={"token": TOKEN})
        assert logged_in.status_code == 303, logged_in.text
        answer = await http.post("/queues/jobs/dead-letters", content=body, headers=headers)
        assert answer.status_code == 400, answer.text
        assert "csrf_token" in answer.text


# ---- what pages show --------------------------------------------------------------------------

HOSTILE_KEY = "k\u202eevil\x1b[2J\nnext\u200f\u061c\x85end"
HOSTILE_ERROR = "boom\x1b[31m\nFORGED LINE\u202edrow\u2066x\u200e"
RAW = ("\u202e", "\x1b", "\u200f", "\u200e", "\u061c", "\x85", "\u2066")


def assert_escaped(html: str) -> None:
    shown = [repr(character) for character in RAW if character in html]
    assert not shown, f"raw {', '.join(shown)} on the page"


async def test_control_and_bidi_characters_in_keys_and_errors_are_shown_escaped(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    key = HOSTILE_KEY
    with db.batch() as batch:
        batch.send("jobs", (key,), "payload \x1b[2J \u202e".encode())
    [leased] = db.receive_now("jobs")
    db.dead_letter("jobs", leased.key, leased.lease_token, HOSTILE_ERROR)

    letters = await client.get("/queues/jobs/dead-letters")
    assert letters.status_code == 200
    assert_escaped(letters.text)
    assert "\\u202e" in letters.text and "\\nFORGED LINE" in letters.text
    assert "\nFORGED LINE" not in letters.text

    # The key a form sends back is still the key: replay it from the value the page holds.
    [value] = re.findall(r'name="replay_one" value="([^"]*)"', letters.text)
    replayed = await client.post("/queues/jobs/dead-letters", data={"replay_one": unescape(value)})
    assert replayed.status_code == 303, replayed.text
    assert db.dead_letters("jobs") == []

    queue = await client.get("/queues/jobs")
    assert queue.status_code == 200
    assert_escaped(queue.text)
    key_text = json.dumps([key])
    message = await client.get(f"/queues/jobs/message?key={quote(key_text)}")
    assert message.status_code == 200, message.text
    assert_escaped(message.text)
    title = re.search(r"<title>(.*?)</title>", message.text, re.S)
    assert title is not None and "\\u202e" in title.group(1)


# ---- caching ----------------------------------------------------------------------------------


async def test_api_answers_and_pages_are_not_stored(db: txqueue.Database) -> None:
    app = create_app(db, token=TOKEN)
    async with client_of(app) as client:
        for path in (
            "/api/v1/queues",
            "/api/v1/queues/missing",
            "/api/v1/pipelines",
            "/",
            "/queues/jobs",
            "/queues/jobs/dead-letters",
            "/events",
            "/fragments/queues",
        ):
            answer = await client.get(path)
            assert answer.headers.get("cache-control") == "no-store", path
        static = await client.get("/static/dashboard.css")
        assert static.status_code == 200 and static.headers.get("cache-control") != "no-store"
    async with client_of(app) as anonymous:
        del anonymous.headers["authorization"]
        refused = await anonymous.get("/api/v1/queues")
        assert refused.status_code == 401
        assert refused.headers.get("cache-control") == "no-store"


# ---- a real server: half-open connections and huge bodies -------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(folder: Path, *options: str) -> Iterator[tuple[int, int]]:
    """``txqueue dashboard`` as a process over a new database in ``folder``: its port, pid."""
    port = free_port()
    database = folder / "dashboard.db"
    with txqueue.connect(f"sqlite:///{database}") as created:
        created.update_ddl([DDL[created.dialect]])
    command = str(Path(sys.executable).parent / "txqueue")
    arguments = ["--database", f"sqlite:///{database}", "--port", str(port), "--token", TOKEN]
    process = subprocess.Popen(
        [command, "dashboard", *arguments, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if answers(port) == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.communicate(timeout=5)
                raise AssertionError(f"the dashboard did not start: {output!r}")
            time.sleep(0.05)
        yield port, process.pid
    finally:
        process.terminate()
        process.communicate(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """``txqueue dashboard`` as a process: its port and pid."""
    with serving(tmp_path_factory.mktemp("limits")) as running:
        yield running


def answers(port: int) -> int:
    return httpx.get(f"http://127.0.0.1:{port}/api/v1/queues", headers=BEARER).status_code


def resident_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found is not None
    return int(found.group(1)) * 1024


def test_half_open_connections_are_closed_in_bounded_time(server: tuple[int, int]) -> None:
    port, _ = server
    opened = []
    for number in range(60):
        connection = socket.create_connection(("127.0.0.1", port))
        if number % 3:
            connection.sendall(b"GET /api/v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        opened.append(connection)
    assert answers(port) == 200  # the others are still served meanwhile
    deadline = time.monotonic() + 30  # the header timeout is 10 s
    try:
        for connection in opened:
            connection.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                while connection.recv(4096):
                    pass
            except TimeoutError:
                raise AssertionError("a half-open connection is still open after 30 s") from None
            except ConnectionResetError:
                pass
    finally:
        for connection in opened:
            connection.close()
    assert answers(port) == 200


def test_a_huge_body_is_refused_without_being_held(server: tuple[int, int]) -> None:
    port, pid = server
    before = resident_bytes(pid)
    head = (
        b"POST /api/v1/buses HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n".encode()
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as declared:
        declared.sendall(head + f"Content-Length: {300 * MIB}\r\n\r\n".encode())
        assert declared.recv(4096).startswith(b"HTTP/1.1 413 ")

    sent = 0
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b" " * 64 * 1024)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as streamed:
        streamed.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
        try:
            while sent < 50 * MIB:
                streamed.sendall(chunk)
                sent += 64 * 1024
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
    assert sent < 50 * MIB, "the server read a 50 MiB body to its end"
    assert resident_bytes(pid) - before < 20 * MIB
    assert answers(port) == 200


def test_only_the_command_line_switch_lets_clients_allow_private_destinations(
    server: tuple[int, int], tmp_path: Path
) -> None:
    wanted = {"name": "p", "destination": PRIVATE_HOOK, "allow_private": True}
    port, _ = server
    refused = httpx.post(f"http://127.0.0.1:{port}/api/v1/pipelines", json=wanted, headers=BEARER)
    assert "--allow-private-destinations" in error_of(refused, 400)
    with serving(tmp_path, "--allow-private-destinations") as (switched, _):
        url = f"http://127.0.0.1:{switched}/api/v1/pipelines"
        created = httpx.post(url, json=wanted, headers=BEARER)
        assert created.status_code == 201 and created.json()["allow_private"] is True
