"""Pausing and resuming a queue from the HTTP API (POST /api/v1/queues/{queue}/pause and
/resume, with the token) and from the dashboard (the queue page's button, a form POST with the
CSRF token); both show ``paused``: the queue objects, the overview and the queue page."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from test_web_pages import TOKEN, Browser, logged_in, parse, status_text

import txqueue
from txqueue.web import create_app

GOOGLESQL = [
    "CREATE QUEUE Jobs (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
    "CREATE TABLE Notes (Id INT64 NOT NULL) PRIMARY KEY (Id)",
]
POSTGRESQL = [
    "CREATE QUEUE jobs (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
    "CREATE TABLE notes (id bigint NOT NULL, PRIMARY KEY (id))",
]


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        database.update_ddl(POSTGRESQL if database.dialect == "postgresql" else GOOGLESQL)
        with database.batch() as batch:
            batch.send("jobs", ("a",), b"x")
        yield database


@pytest.fixture
async def app_client(db: txqueue.Database) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(db, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        yield client


BEARER = {"authorization": f"Bearer {TOKEN}"}


async def test_the_api_pauses_and_resumes_a_queue(
    db: txqueue.Database, app_client: httpx.AsyncClient
) -> None:
    name = db.queue("jobs").name
    answer = await app_client.post(f"/api/v1/queues/{name}/pause", headers=BEARER)
    assert answer.status_code == 200, answer.text
    assert (answer.json()["name"], answer.json()["paused"], answer.json()["ready"]) == (
        name,
        True,
        1,
    )
    assert (await app_client.post(f"/api/v1/queues/{name}/pause", headers=BEARER)).json()["paused"]
    assert db.queue_info(name).paused and db.receive_now(name) == []
    listed = (await app_client.get("/api/v1/queues", headers=BEARER)).json()["queues"]
    assert [queue["paused"] for queue in listed] == [True]
    assert (await app_client.get(f"/api/v1/queues/{name}", headers=BEARER)).json()["paused"]

    answer = await app_client.post(f"/api/v1/queues/{name}/resume", headers=BEARER)
    assert answer.status_code == 200 and answer.json()["paused"] is False
    assert not db.queue_info(name).paused


async def test_the_api_refuses_pausing_without_the_token_or_a_queue(
    db: txqueue.Database, app_client: httpx.AsyncClient
) -> None:
    name = db.queue("jobs").name
    for change in ("pause", "resume"):
        answer = await app_client.post(f"/api/v1/queues/{name}/{change}")
        assert answer.status_code == 401, answer.text
        wrong = {"authorization": "Bearer wrong"}
        assert (
            await app_client.post(f"/api/v1/queues/{name}/{change}", headers=wrong)
        ).status_code == 401
    assert not db.queue_info(name).paused
    answer = await app_client.post("/api/v1/queues/missing/pause", headers=BEARER)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "NotFound"
    answer = await app_client.post("/api/v1/queues/notes/pause", headers=BEARER)
    assert answer.status_code == 400 and "is a table" in answer.json()["error"]["message"]


async def test_the_read_only_dashboard_refuses_pausing(db: txqueue.Database) -> None:
    transport = httpx.ASGITransport(app=create_app(db, token=TOKEN, read_only=True))
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        answer = await client.post("/api/v1/queues/jobs/pause", headers=BEARER)
        assert answer.status_code == 403
        page = parse((await (await logged_in(client)).client.get("/queues/jobs")).text)
        assert not page.find_all("button", data_action="pause")
    assert not db.queue_info("jobs").paused


async def test_the_queue_page_pauses_and_resumes_with_a_badge_on_the_overview(
    db: txqueue.Database, app_client: httpx.AsyncClient
) -> None:
    name = db.queue("jobs").name
    browser: Browser = await logged_in(app_client)
    page = await browser.get(f"/queues/{name}")
    assert not page.find_all("span", data_paused=True)
    form = page.find("form", id="queue-pause")
    assert form.get("action") == f"/queues/{name}/pause"
    assert form.find("button", data_action="pause")

    answer = await browser.post(f"/queues/{name}/pause", {})
    assert answer.status_code == 303, answer.text
    page = await browser.get(answer.headers["location"])
    assert status_text(page).startswith("Paused the queue")
    assert page.find("span", data_paused=True).text.strip() == "paused"
    assert page.find("form", id="queue-pause").find("button", data_action="resume")
    assert db.queue_info(name).paused
    overview = await browser.get("/")
    row = overview.find("table", id="queues").find("tr", data_queue=name)
    assert row.find("span", data_paused=True).text.strip() == "paused"

    answer = await browser.post(f"/queues/{name}/resume", {})
    page = await browser.get(answer.headers["location"])
    assert status_text(page) == "Resumed the queue."
    assert not page.find_all("span", data_paused=True)
    assert not db.queue_info(name).paused
    overview = await browser.get("/")
    assert not overview.find("tr", data_queue=name).find_all("span", data_paused=True)


async def test_a_pause_without_the_csrf_token_is_refused(
    db: txqueue.Database, app_client: httpx.AsyncClient
) -> None:
    browser = await logged_in(app_client)
    await browser.get("/queues/jobs")
    answer = await browser.client.post("/queues/jobs/pause", data={})
    assert answer.status_code == 403
    assert not db.queue_info("jobs").paused
