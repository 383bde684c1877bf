"""Every failed delivery attempt keeps its error type, message and traceback, on SQLite and
PostgreSQL and both faces: a receiver answering 500 (``http.500``, no traceback), a refused
connection (the exception's type and traceback); the CLI and the HTTP API show them, the
dashboard escapes them; a table made before the columns existed gets them; a delivery keeps
the tracebacks of its newest ten attempts only."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from click.testing import CliRunner
from events_receiver import Receiver, wait_until

import txqueue
from txqueue.cli.main import main
from txqueue.core.failures import MAX_FAILURES, Raised
from txqueue.core.schema import Table
from txqueue.events.recorder import AttemptRecord, apply
from txqueue.events.records import ATTEMPTS, DELIVERIES, TABLES, Delivery, DeliveryAttempt

SECOND = timedelta(seconds=1)
SCRIPT = "<script>alert(1)</script>"
TOKEN = "delivery-failures-token-7c2"


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: the connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/gone"


def order(event_id: str) -> dict[str, str]:
    return {"specversion": "1.0", "type": "com.shop.paid", "source": "//shop", "id": event_id}


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        yield database


def _configure(events: txqueue.Events, receiver: Receiver) -> None:
    """Pipeline ``flaky`` (500 then 500: two attempts) and ``down`` (connection refused)."""
    receiver.script("/flaky", 500, 500)
    events.create_bus("orders")
    retry = txqueue.RetryPolicy(max_attempts=2, min_retry_delay=SECOND, max_retry_delay=SECOND)
    events.create_pipeline("flaky", receiver.url("/flaky"), retry=retry, allow_private=True)
    once = txqueue.RetryPolicy(max_attempts=1)
    events.create_pipeline("down", closed_port_url(), retry=once, allow_private=True)
    for name in ("flaky", "down"):
        events.create_enrollment(f"{name}-all", bus="orders", pipeline=name, cel_match="true")


def _check_attempts(rows: list[DeliveryAttempt]) -> None:
    flaky = [row for row in rows if row.pipeline == "flaky"]
    assert [(r.attempt, r.state, r.status) for r in flaky] == [
        (1, "retrying", 500),
        (2, "failed", 500),
    ]
    for row in flaky:
        assert row.error_type == "http.500"
        assert row.error is not None and row.error.startswith("HTTP 500 Internal Server Error")
        assert row.traceback is None
    [down] = [row for row in rows if row.pipeline == "down"]
    assert (down.state, down.status) == ("failed", None)
    assert down.error_type is not None and down.error_type.endswith("ConnectError"), down
    assert down.error is not None and down.error.startswith("connection error: ConnectError")
    assert down.traceback is not None and down.traceback.startswith("Traceback")
    assert "ConnectError" in down.traceback.splitlines()[-1]


def test_failed_attempts_keep_their_error_type_and_traceback(
    db: txqueue.Database, database_url: str, receiver: Receiver
) -> None:
    events = txqueue.Events(db)
    _configure(events, receiver)
    uid = events.publish("orders", order("o-1"))
    with txqueue.Dispatcher(database_url, concurrency=2, attempt_timeout=5 * SECOND):
        wait_until(lambda: len(events.undelivered()) == 2)

    _check_attempts(events.attempts(uid))
    by_pipeline = {item.pipeline: item for item in events.undelivered()}
    assert by_pipeline["flaky"].error_type == "http.500"
    assert by_pipeline["flaky"].traceback is None
    assert by_pipeline["down"].error_type == _type_of(events, uid, "down")
    assert by_pipeline["down"].traceback is not None
    assert "ConnectError" in by_pipeline["down"].traceback

    # The CLI: JSON carries both; a table shows the type, not the multi-line traceback.
    runner = CliRunner(env={"COLUMNS": "200"})
    result = runner.invoke(main, ["events", "attempts", uid, "--database", database_url])
    assert result.exit_code == 0, result.output
    logged = [json.loads(line) for line in result.output.splitlines()]
    assert {(a["pipeline"], a["error_type"]) for a in logged} >= {("flaky", "http.500")}
    [refused] = [a for a in logged if a["pipeline"] == "down"]
    assert refused["traceback"].startswith("Traceback")
    arguments = ["events", "undelivered", "--format", "json", "--database", database_url]
    result = runner.invoke(main, arguments)
    assert result.exit_code == 0, result.output
    listed = {item["pipeline"]: item for item in map(json.loads, result.output.splitlines())}
    assert listed["flaky"]["error_type"] == "http.500"
    assert "ConnectError" in listed["down"]["traceback"]
    arguments = ["events", "undelivered", "--format", "table", "--database", database_url]
    table = runner.invoke(main, arguments).output
    assert "http.500" in table and "Traceback" not in table


def _type_of(events: txqueue.Events, uid: str, pipeline: str) -> str | None:
    [row] = events.attempts(uid, pipeline=pipeline)
    return row.error_type


async def test_the_asyncio_face_keeps_them_too(database_url: str, receiver: Receiver) -> None:
    adb = await txqueue.connect_async(database_url)
    try:
        events = txqueue.AsyncEvents(adb)
        receiver.script("/flaky", 500, 500)
        await events.create_bus("orders")
        retry = txqueue.RetryPolicy(max_attempts=2, min_retry_delay=SECOND, max_retry_delay=SECOND)
        url = receiver.url("/flaky")
        await events.create_pipeline("flaky", url, retry=retry, allow_private=True)
        once = txqueue.RetryPolicy(max_attempts=1)
        await events.create_pipeline("down", closed_port_url(), retry=once, allow_private=True)
        for name in ("flaky", "down"):
            await events.create_enrollment(
                f"{name}-all", bus="orders", pipeline=name, cel_match="true"
            )
        uid = await events.publish("orders", order("o-2"))
        dispatcher = txqueue.AsyncDispatcher(adb, attempt_timeout=5 * SECOND)
        running = asyncio.create_task(dispatcher.run())
        try:
            for _ in range(400):
                if len(await events.undelivered()) == 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            dispatcher.stop()
            await running
        _check_attempts(await events.attempts(uid))
        kinds = {item.pipeline: item.error_type for item in await events.undelivered()}
        assert kinds["flaky"] == "http.500" and str(kinds["down"]).endswith("ConnectError")
    finally:
        await adb.close()


def test_an_attempt_log_made_before_the_columns_gets_them(
    db: txqueue.Database, database_url: str
) -> None:
    attempts = next(table for table in TABLES if table.name == ATTEMPTS)
    old = Table(ATTEMPTS, attempts.columns[:-2], attempts.primary_key)
    db.ensure_internal_tables([old])
    assert not db.table(ATTEMPTS).has_column("traceback")
    now = datetime.now(timezone.utc)
    earlier = ("u-0", "p", 1, "orders", now, "failed", "permanent", 400, "HTTP 400", None, None)
    db.run_in_transaction(
        lambda txn: txn.insert(ATTEMPTS, [c.name for c in old.columns], [earlier])
    )

    events = txqueue.Events(db)
    events.create_bus("orders")  # ensures the tables: adds the two columns

    table = db.table(ATTEMPTS)
    assert table.has_column("error_type") and table.has_column("traceback")
    [row] = events.attempts("u-0")
    assert (row.error, row.error_type, row.traceback) == ("HTTP 400", None, None)
    with txqueue.connect(database_url) as other:
        assert other.table(ATTEMPTS).has_column("traceback")  # recorded in the catalog


async def test_a_delivery_keeps_the_tracebacks_of_its_newest_attempts_only(
    database_url: str,
) -> None:
    adb = await txqueue.connect_async(database_url)
    try:
        await txqueue.AsyncEvents(adb).ensure_tables()
        try:
            raise ConnectionRefusedError(f"refused {SCRIPT}")
        except ConnectionRefusedError as error:
            raised = Raised.of(error)
        payload = Delivery("orders", {"id": "e"}).encode()
        now = datetime.now(timezone.utc)
        total = MAX_FAILURES + 3
        for number in range(1, total + 1):
            await adb.run_in_transaction(lambda txn: txn.send(DELIVERIES, ("p", "uid-1"), payload))
            [leased] = await adb.receive_now(DELIVERIES, lease_duration=timedelta(hours=1))
            row = DeliveryAttempt(
                "uid-1", "p", number, "orders", now, "retrying", "transient", None,
                raised.message, timedelta(0), SECOND, raised.error_type, raised.traceback,
            )  # fmt: skip
            record = AttemptRecord(leased.key, leased.lease_token, row)
            await adb.run_in_transaction(apply, [record])
        rows = await txqueue.AsyncEvents(adb).attempts("uid-1")
        assert [row.attempt for row in rows] == list(range(1, total + 1))
        kept = [row.attempt for row in rows if row.traceback is not None]
        assert kept == list(range(total - MAX_FAILURES + 1, total + 1))
        assert all(row.error_type == "ConnectionRefusedError" for row in rows)
    finally:
        await adb.close()


# ---- the HTTP API and the dashboard ----------------------------------------------------------


@pytest.fixture
async def client(db: txqueue.Database) -> AsyncIterator[httpx.AsyncClient]:
    pytest.importorskip("starlette")
    from txqueue.web import create_app

    transport = httpx.ASGITransport(app=create_app(db, token=TOKEN))
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://dashboard", headers=bearer
    ) as http:
        yield http


def _failed_with_script(db: txqueue.Database) -> str:
    """A message whose delivery to ``strict`` failed for good, raising an error whose message
    and traceback hold markup."""
    events = txqueue.Events(db)
    events.create_bus("orders")
    uid = events.publish("orders", order("o-3"))  # archived; no enrollment yet
    try:
        raise RuntimeError(f"refused {SCRIPT}")
    except RuntimeError as error:
        raised = Raised.of(error)
    row = DeliveryAttempt(
        uid, "strict", 1, "orders", datetime.now(timezone.utc), "failed", "permanent", None,
        raised.message, timedelta(0), None, f"{SCRIPT}Error", raised.traceback,
    )  # fmt: skip
    columns = [c.name for c in next(t for t in TABLES if t.name == ATTEMPTS).columns]
    db.run_in_transaction(lambda txn: txn.insert(ATTEMPTS, columns, [row.row()]))
    return uid


async def test_the_api_shows_error_type_and_traceback(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    uid = _failed_with_script(db)
    [item] = (await client.get("/api/v1/undelivered")).json()["undelivered"]
    assert item["message_uid"] == uid and item["error_type"] == f"{SCRIPT}Error"
    assert item["traceback"].startswith("Traceback") and SCRIPT in item["traceback"]
    [attempt] = item["attempts"]
    assert attempt["error_type"] == f"{SCRIPT}Error"
    assert "RuntimeError" in attempt["traceback"]
    log = (await client.get(f"/api/v1/messages/{uid}/attempts")).json()["attempts"]
    # The row published without an enrollment (unmatched: not a failure) has no type.
    assert [(a["pipeline"], a["error_type"]) for a in log] == [
        ("", None),
        ("strict", f"{SCRIPT}Error"),
    ]


async def test_the_undelivered_page_shows_the_traceback_escaped(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    _failed_with_script(db)
    response = await client.get("/events/undelivered")
    assert response.status_code == 200, response.text
    html = response.text
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;Error" in html
    assert '<details class="traceback"><summary>Traceback</summary><pre>' in html
    assert "in _failed_with_script" in html
    assert '<tr data-attempt="1">' in html
