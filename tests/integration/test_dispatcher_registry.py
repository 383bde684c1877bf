"""Dispatchers in the registry, with real dispatcher processes on both engines: one registers
and beats with its kind and pipelines, is gone at once after SIGTERM and ages out after
SIGKILL (its row deleted by another dispatcher's heartbeat); the Workers page and the HTTP
API list it beside the workers."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_web_pages import Browser
from test_worker_registry import wait_until

import txqueue
from txqueue.errors import InvalidArgument
from txqueue.web import create_app
from txqueue.worker.observe import Stats
from txqueue.worker.registry import (
    DISPATCHERS,
    DispatcherRegistration,
    Registration,
    workers,
)

SCRIPT = Path(__file__).with_name("registry_dispatcher.py")
TOKEN = "dispatchers-test-token-41aa"


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        events.create_bus("orders")
        events.create_pipeline("notify", "http://127.0.0.1:9/hook", allow_private=True)
        yield db


@pytest.fixture
def start(database_url: str) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, str(SCRIPT), database_url], stderr=subprocess.PIPE
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stderr:
            process.stderr.close()


def _mine(db: txqueue.Database, process: subprocess.Popen[bytes]) -> Any:
    return next((w for w in workers(db) if w.pid == process.pid), None)


def _rows(db: txqueue.Database) -> int:
    with db.snapshot() as snapshot:
        rows = snapshot.execute_internal_sql(f"SELECT COUNT(*) FROM {DISPATCHERS}")
        return int(rows.one()[0])


def test_a_dispatcher_registers_beats_and_leaves_gracefully(
    db: txqueue.Database, start: Callable[[], subprocess.Popen[bytes]]
) -> None:
    process = start()
    first = wait_until(lambda: _mine(db, process), "the dispatcher registered")
    assert (first.kind, first.queues, first.concurrency) == ("dispatcher", (), 2)
    assert first.id.startswith(f"{first.host}:{process.pid}:")
    wait_until(lambda: (_mine(db, process) or first).pipelines == ("notify",), "its pipelines")
    wait_until(lambda: (_mine(db, process) or first).last_seen > first.last_seen, "a heartbeat")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert _mine(db, process) is None
    assert _rows(db) == 0  # deleted at shutdown, not merely aged out


def test_a_killed_dispatcher_ages_out_and_a_later_heartbeat_deletes_it(
    db: txqueue.Database, start: Callable[[], subprocess.Popen[bytes]]
) -> None:
    killed = start()
    wait_until(lambda: _mine(db, killed), "the dispatcher registered")
    killed.kill()
    killed.wait()
    wait_until(lambda: _mine(db, killed) is None, "the killed dispatcher aged out")
    assert _rows(db) == 1  # unlisted, its row still there
    survivor = start()
    wait_until(lambda: _mine(db, survivor), "another dispatcher registered")
    wait_until(lambda: _rows(db) == 1, "the killed dispatcher's row deleted")
    assert [(w.kind, w.pid) for w in workers(db)] == [("dispatcher", survivor.pid)]


def test_a_bad_heartbeat_is_refused(db: txqueue.Database, database_url: str) -> None:
    import asyncio

    async def scenario() -> None:
        async with await txqueue.connect_async(database_url) as database:
            with pytest.raises(InvalidArgument, match=r"heartbeat must be a datetime\.timedelta"):
                txqueue.AsyncDispatcher(database, heartbeat=timedelta(minutes=2))

    asyncio.run(scenario())


async def _notify() -> list[str]:
    return ["notify"]


async def _register_both(database_url: str) -> tuple[Registration, DispatcherRegistration]:
    async with await txqueue.connect_async(database_url) as database:
        stats = Stats()
        stats.started(["jobs"], 4)
        worker = Registration(database, stats, ["jobs"], 4)
        await worker.beat()
        dispatcher = DispatcherRegistration(database, 8, _notify, lambda: 3)
        await dispatcher.beat()
    return worker, dispatcher


@pytest.fixture
async def browser(db: txqueue.Database) -> AsyncIterator[Browser]:
    app = create_app(db, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        answer = await client.get("/login", params={"token": TOKEN})
        assert answer.status_code == 303, answer.text
        yield Browser(client)


async def test_the_workers_page_and_the_api_list_dispatchers_beside_workers(
    database_url: str, db: txqueue.Database, browser: Browser
) -> None:
    worker, dispatcher = await _register_both(database_url)

    page = await browser.get("/workers")
    table = page.find("table", id="workers")
    row = table.find("tr", data_worker=dispatcher.id)
    assert row.get("data-kind") == "dispatcher"
    cells = [cell.text.strip() for cell in row.find_all("td")]
    assert cells[:6] == [dispatcher.id, dispatcher.host, str(dispatcher.pid), "notify", "8", "3"]
    assert cells[-1] == "dispatcher"
    assert row.find("a").get("href") == "/events/pipelines/notify"
    worker_row = table.find("tr", data_worker=worker.id)
    assert worker_row.get("data-kind") == "worker"
    assert [c.text.strip() for c in worker_row.find_all("td")][3] == "jobs"

    answer = await browser.client.get(
        "/api/v1/workers", headers={"authorization": f"Bearer {TOKEN}"}
    )
    listed = {entry["id"]: entry for entry in answer.json()["workers"]}
    assert set(listed) == {worker.id, dispatcher.id}
    assert (listed[dispatcher.id]["kind"], listed[dispatcher.id]["pipelines"]) == (
        "dispatcher",
        ["notify"],
    )
    assert (listed[dispatcher.id]["queues"], listed[dispatcher.id]["in_flight"]) == ([], 3)
    assert (listed[worker.id]["kind"], listed[worker.id]["queues"]) == ("worker", ["jobs"])
    assert listed[worker.id]["pipelines"] == []
