"""Unmatched events — published to an archiving bus, matched by no enrollment — are listed
apart from undelivered ones and never as failures: the API on both faces, ``txqueue events
unmatched``, the HTTP API and the count on the dashboard's events page, on both engines."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from test_web_pages import Browser

import txqueue
from txqueue.cli.main import main
from txqueue.web import create_app

TOKEN = "unmatched-test-token-93c1"


def order(identifier: str) -> dict[str, Any]:
    return {"type": "com.shop.order.paid", "source": "//shop", "id": identifier}


@pytest.fixture
def events(database_url: str) -> Iterator[txqueue.Events]:
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        events.create_bus("orders")
        events.create_bus("audit")
        events.create_pipeline("notify", "http://127.0.0.1:9/hook", allow_private=True)
        events.create_enrollment(
            "paid", bus="orders", pipeline="notify", cel_match="message.type == 'paid'"
        )
        yield events


def test_unmatched_events_are_listed_apart_from_undelivered_ones(events: txqueue.Events) -> None:
    unmatched_uid = events.publish("orders", order("nobody-wants-it"))
    audit_uid = events.publish("audit", order("no-enrollment-at-all"))
    events.publish("orders", {**order("routed"), "type": "paid"})

    assert events.undelivered() == []  # not failures
    found = events.unmatched()
    assert [(m.message_uid, m.bus, m.event.get_id()) for m in found] == [
        (unmatched_uid, "orders", "nobody-wants-it"),
        (audit_uid, "audit", "no-enrollment-at-all"),
    ]
    assert [m.message_uid for m in events.unmatched(bus="audit")] == [audit_uid]
    assert len(events.unmatched(limit=1)) == 1
    # Asked for by name, they can still be replayed: routed afresh under a new uid.
    assert [u.message_uid for u in events.undelivered(pipeline="")] == [unmatched_uid, audit_uid]
    [again] = events.replay(message_uids=[audit_uid])
    assert [m.message_uid for m in events.unmatched(bus="audit")] == [again]


def test_the_asyncio_face_lists_unmatched_events(database_url: str) -> None:
    async def scenario() -> None:
        async with await txqueue.connect_async(database_url) as db:
            events = txqueue.AsyncEvents(db)
            assert await events.unmatched() == []  # no event table yet
            await events.create_bus("orders")
            uid = await events.publish("orders", order("lonely"))
            assert await events.undelivered() == []
            [found] = await events.unmatched(bus="orders")
            assert (found.message_uid, found.event.get_id()) == (uid, "lonely")

    asyncio.run(scenario())


def test_the_command_lists_unmatched_events(database_url: str, events: txqueue.Events) -> None:
    uid = events.publish("audit", order("via-cli"))
    runner = CliRunner(env={"COLUMNS": "200"})
    listed = runner.invoke(
        main, ["events", "unmatched", "--format", "json", "--database", database_url]
    )
    assert listed.exit_code == 0, listed.output
    [row] = [json.loads(line) for line in listed.output.splitlines()]  # JSON lines
    assert (row["message_uid"], row["bus"], row["event"]["id"]) == (uid, "audit", "via-cli")
    table = runner.invoke(
        main, ["events", "unmatched", "--bus", "audit", "--database", database_url]
    )
    assert table.exit_code == 0 and uid in table.output and "via-cli" in table.output
    undelivered = runner.invoke(main, ["events", "undelivered", "--database", database_url])
    assert undelivered.exit_code == 0 and uid not in undelivered.output
    assert "(no enrollment)" not in undelivered.output


async def test_the_http_api_and_the_events_page_show_unmatched_events(
    events: txqueue.Events,
) -> None:
    uid = events.publish("audit", order("via-http"))
    events.publish("audit", order("another"))
    app = create_app(events.database, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        bearer = {"authorization": f"Bearer {TOKEN}"}
        listed = (await client.get("/api/v1/unmatched", headers=bearer)).json()["unmatched"]
        assert [item["message_uid"] for item in listed][:1] == [uid]
        assert listed[0]["bus"] == "audit" and listed[0]["event"]["id"] == "via-http"
        only = await client.get("/api/v1/unmatched", params={"bus": "orders"}, headers=bearer)
        assert only.json() == {"unmatched": []}
        undelivered = await client.get("/api/v1/undelivered", headers=bearer)
        assert undelivered.json() == {"undelivered": []}

        answer = await client.get("/login", params={"token": TOKEN})
        assert answer.status_code == 303
        page = await Browser(client).get("/events")
        counts = {
            row.get("data-bus"): row.find("td", data_unmatched=True).text.strip()
            for row in page.find("table", id="buses").find_all("tr", data_bus=True)
        }
        assert counts == {"orders": "0", "audit": "2"}
