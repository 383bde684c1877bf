"""The dashboard's message actions without JavaScript, on SQLite and PostgreSQL: "Ready now"
and "Delete…" (with its confirmation step) on the message page, a leased message refused
until the force box is ticked, and the queue page's "Send message" form."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import httpx
import pytest
from test_web_pages import DDL, TOKEN, Browser, logged_in, parse, status_text

import txqueue
from txqueue.web import create_app

pytest.importorskip("starlette")


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    database = txqueue.connect(database_url)
    dialect = "postgresql" if database_url.startswith("postgres") else "googlesql"
    database.update_ddl([DDL[dialect]])
    yield database
    database.close()


@pytest.fixture
async def browser(db: txqueue.Database) -> AsyncIterator[Browser]:
    transport = httpx.ASGITransport(app=create_app(db, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        yield await logged_in(client)


def _message_path(queue: str, key: str) -> str:
    return f"/queues/{queue}/message?key={quote(key)}"


async def test_ready_now_and_delete_with_its_confirmation(
    db: txqueue.Database, browser: Browser
) -> None:
    queue = db.queue("jobs").name
    later = datetime.now(timezone.utc) + timedelta(days=1)
    with db.batch() as batch:
        batch.send(queue, ("a",), b"x", deliver_time=later)
    key = json.dumps(["a"])
    page = await browser.get(_message_path(queue, key))
    form = page.find("form", id="message-actions")
    ready = form.find("button", data_action="ready")
    form.find("button", data_action="delete")

    response = await browser.post(
        f"/queues/{queue}/message", {"key": key, "action": ready.get("value") or ""}
    )
    assert response.status_code == 303, response.text
    shown = await browser.get(response.headers["location"])
    assert status_text(shown) == "The message is ready now."
    assert shown.find("dd", data_field="state").text.strip() == "ready"

    asked = await browser.post(f"/queues/{queue}/message", {"key": key, "action": "delete"})
    assert asked.status_code == 200
    assert len(db.list_messages(queue)) == 1  # only asked
    confirm = parse(asked.text).find("button", data_action="confirm-delete")
    response = await browser.post(
        f"/queues/{queue}/message", {"key": key, "action": confirm.get("value") or ""}
    )
    assert response.status_code == 303
    assert status_text(await browser.get(response.headers["location"])) == "Deleted 1 message."
    assert db.list_messages(queue) == []


async def test_a_leased_message_needs_the_force_box(db: txqueue.Database, browser: Browser) -> None:
    queue = db.queue("jobs").name
    with db.batch() as batch:
        batch.send(queue, ("a",), b"x")
    db.receive_now(queue, lease_duration=timedelta(minutes=5))
    key = json.dumps(["a"])
    await browser.get(_message_path(queue, key))

    refused = await browser.post(f"/queues/{queue}/message", {"key": key, "action": "ready"})
    assert refused.status_code == 412
    page = parse(refused.text)
    assert "live lease" in page.find("*", role="alert").text
    page.find("input", data_field="force")
    asked = parse((await browser.post(f"/queues/{queue}/message",
                                      {"key": key, "action": "delete"})).text)  # fmt: skip
    asked.find("input", data_field="force")
    refused = await browser.post(
        f"/queues/{queue}/message", {"key": key, "action": "confirm-delete"}
    )
    assert refused.status_code == 412
    assert len(db.list_messages(queue)) == 1
    forced = await browser.post(
        f"/queues/{queue}/message", {"key": key, "action": "confirm-delete", "force": "1"}
    )
    assert forced.status_code == 303
    assert db.list_messages(queue) == []


async def test_the_queue_page_sends_a_message(db: txqueue.Database, browser: Browser) -> None:
    queue = db.queue("jobs").name
    page = await browser.get(f"/queues/{queue}")
    page.find("button", data_action="send")
    sent = await browser.post(
        f"/queues/{queue}/send", {"key": '["new"]', "payload": "hello", "deliver_time": ""}
    )
    assert sent.status_code == 303, sent.text
    assert status_text(await browser.get(sent.headers["location"])) == "Sent the message."
    assert db.get_message(queue, ("new",)).payload == b"hello"
    bad = await browser.post(
        f"/queues/{queue}/send", {"key": '["x"]', "payload": "p", "deliver_time": "tomorrow"}
    )
    assert bad.status_code == 400
    assert [m.key for m in db.list_messages(queue)] == [("new",)]
