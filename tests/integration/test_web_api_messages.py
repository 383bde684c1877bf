"""The HTTP API's message actions on both engines: send a message, delete (cancel) messages
and make them ready, all or none; a leased message only with force; 401 without the token."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone

import httpx
import pytest

import txqueue
from txqueue.web import create_app

JOBS = (
    "CREATE QUEUE jobs (tenant STRING(MAX) NOT NULL, id INT64 NOT NULL, payload JSON NOT NULL)"
    " PRIMARY KEY (tenant, id)"
)
PG_JOBS = (
    "CREATE QUEUE jobs (tenant varchar NOT NULL, id bigint NOT NULL, payload jsonb NOT NULL,"
    " PRIMARY KEY (tenant, id))"
)
MAIL = "CREATE QUEUE mail (id STRING(MAX) NOT NULL, payload BYTES(MAX) NOT NULL) PRIMARY KEY (id)"
PG_MAIL = "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"
TOKEN = "api-messages-token-81f2"
LATER = "2099-01-02T03:04:05Z"


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        postgres = database.dialect == "postgresql"
        database.update_ddl([PG_JOBS, PG_MAIL] if postgres else [JOBS, MAIL])
        yield database


@pytest.fixture
async def client(db: txqueue.Database) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(db, token=TOKEN))
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://dashboard/api/v1", headers=bearer
    ) as http:
        yield http


def error_of(response: httpx.Response, status: int) -> dict[str, str]:
    assert response.status_code == status, response.text
    error: dict[str, str] = response.json()["error"]
    return error


async def test_send_answers_the_message_and_refuses_bad_input(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    sent = await client.post(
        "/queues/jobs/messages",
        json={"key": ["t", 1], "payload": {"encoding": "json", "value": {"n": 1}}},
    )
    assert sent.status_code == 201, sent.text
    assert (sent.json()["key"], sent.json()["state"]) == (["t", 1], "ready")
    later = await client.post(
        "/queues/mail/messages",
        json={
            "key": ["m"],
            "payload": {"encoding": "base64", "value": base64.b64encode(b"\xff\x00").decode()},
            "deliver_time": LATER,
        },
    )
    assert later.json()["state"] == "scheduled", later.text
    assert db.get_message("mail", ("m",)).payload == b"\xff\x00"

    again = await client.post(
        "/queues/jobs/messages", json={"key": ["t", 1], "payload": {"encoding": "json", "value": 1}}
    )
    assert error_of(again, 409)["code"] == "AlreadyExists"
    naive = {"key": ["m2"], "payload": {"encoding": "text", "value": "x"},
             "deliver_time": "2099-01-02T03:04:05"}  # fmt: skip
    assert (
        "zone" in error_of(await client.post("/queues/mail/messages", json=naive), 400)["message"]
    )
    short = {"key": ["t"], "payload": {"encoding": "json", "value": 1}}
    assert error_of(await client.post("/queues/jobs/messages", json=short), 400)
    assert [m.key for m in db.list_messages("mail")] == [("m",)]


async def test_delete_refuses_leased_and_unknown_keys_and_forces(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    db.run_in_transaction(lambda txn: [txn.send("jobs", ("t", n), {"n": n}) for n in (1, 2, 3)])
    [leased] = db.receive_now("jobs", lease_duration=timedelta(minutes=5))
    waiting = [["t", n] for n in (1, 2, 3) if ("t", n) != leased.key]
    everything = [*waiting, list(leased.key)]

    refused = await client.post("/queues/jobs/messages/delete", json={"keys": everything})
    assert error_of(refused, 412)["code"] == "FailedPrecondition"
    unknown = await client.post("/queues/jobs/messages/delete", json={"keys": [["t", 9]]})
    assert error_of(unknown, 404)["code"] == "NotFound"
    empty = await client.post("/queues/jobs/messages/delete", json={"keys": []})
    assert error_of(empty, 400)["code"] == "InvalidArgument"
    assert len(db.list_messages("jobs")) == 3

    deleted = await client.post(
        "/queues/jobs/messages/delete", json={"keys": everything, "force": True}
    )
    assert deleted.json() == {"deleted": 3}, deleted.text
    assert db.list_messages("jobs") == []


async def test_ready_brings_messages_forward_or_puts_them_off(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    later = datetime.now(timezone.utc) + timedelta(days=1)
    db.run_in_transaction(lambda txn: txn.send("mail", ("a",), b"x", later))
    db.run_in_transaction(lambda txn: txn.send("mail", ("b",), b"y"))

    ready = await client.post("/queues/mail/messages/ready", json={"keys": [["a"]]})
    assert ready.json() == {"made_ready": 1}, ready.text
    put_off = await client.post(
        "/queues/mail/messages/ready", json={"keys": [["b"]], "deliver_time": LATER}
    )
    assert put_off.json() == {"made_ready": 1}, put_off.text
    states = {m.key: m.state for m in db.list_messages("mail")}
    assert states == {("a",): "ready", ("b",): "scheduled"}

    [leased] = db.receive_now("mail")
    refused = await client.post("/queues/mail/messages/ready", json={"keys": [["a"]]})
    assert error_of(refused, 412)["code"] == "FailedPrecondition"
    forced = await client.post("/queues/mail/messages/ready", json={"keys": [["a"]], "force": True})
    assert forced.json() == {"made_ready": 1}
    assert leased.key == ("a",) and db.get_message("mail", ("a",)).state == "ready"


async def test_every_action_needs_the_token(db: txqueue.Database) -> None:
    db.run_in_transaction(lambda txn: txn.send("mail", ("a",), b"x"))
    transport = httpx.ASGITransport(app=create_app(db, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard/api/v1") as http:
        payload = {"encoding": "text", "value": "x"}
        for path, body in (
            ("/queues/mail/messages", {"key": ["b"], "payload": payload}),
            ("/queues/mail/messages/delete", {"keys": [["a"]]}),
            ("/queues/mail/messages/ready", {"keys": [["a"]]}),
        ):
            assert (await http.post(path, json=body)).status_code == 401, path
    assert [m.key for m in db.list_messages("mail")] == [("a",)]
