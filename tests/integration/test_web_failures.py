"""A message's failure history on the dashboard and in the HTTP API, on SQLite and
PostgreSQL: the message page and the dead-letter page show each attempt (number, time, type,
message, the traceback in a <details>), escaped; the API's message and dead-letter objects
carry ``failures``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import httpx
import pytest

import txqueue
from txqueue.web import create_app

pytest.importorskip("starlette")

SCRIPT = "<script>alert(1)</script>"
TOKEN = "failures-test-token-41ab"
MAIL = "CREATE QUEUE mail (id STRING(MAX) NOT NULL, payload BYTES(MAX) NOT NULL) PRIMARY KEY (id)"
PG_MAIL = "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"


class SmtpDown(Exception):
    pass


def deliver_mail(message_id: str) -> None:
    raise SmtpDown(f"smtp down for {message_id}: {SCRIPT}")


def _fail(db: txqueue.Database, message_id: str, *, dead: bool) -> None:
    """Lease ``message_id`` and fail it: released for a retry, or dead-lettered."""
    [message] = db.receive_now("mail")
    assert message.key == (message_id,)
    try:
        deliver_mail(message_id)
    except SmtpDown as error:
        if dead:
            db.dead_letter("mail", message.key, message.lease_token, repr(error), exception=error)
        else:
            db.release_lease("mail", [message.lease_token], timedelta(hours=1), exception=error)


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        database.update_ddl([PG_MAIL if database.dialect == "postgresql" else MAIL])
        with database.batch() as batch:
            batch.send("mail", ("waiting",), b"x")
        _fail(database, "waiting", dead=False)
        with database.batch() as batch:
            batch.send("mail", ("dead",), b"y")
        _fail(database, "dead", dead=True)
        yield database


@pytest.fixture
async def client(db: txqueue.Database) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(db, token=TOKEN))
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://dashboard", headers=bearer
    ) as http:
        yield http


def _check(failures: list[dict[str, object]], message_id: str) -> None:
    [failure] = failures
    assert failure["attempt"] == 1
    assert str(failure["failed_at"]).endswith("Z")
    assert failure["error_type"] == f"{__name__}.SmtpDown"
    assert failure["message"] == f"smtp down for {message_id}: {SCRIPT}"
    assert "in deliver_mail" in str(failure["traceback"])


async def test_the_api_shows_the_failures_of_a_waiting_message_and_a_dead_letter(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/api/v1/queues/mail/message", params={"key": '["waiting"]'})
    assert response.status_code == 200, response.text
    message = response.json()
    assert message["last_error"].startswith("SmtpDown(")
    _check(message["failures"], "waiting")
    letters = (await client.get("/api/v1/queues/mail/dead-letters")).json()["dead_letters"]
    [letter] = letters
    _check(letter["failures"], "dead")
    page = (await client.get("/api/v1/queues/mail/messages")).json()
    assert [m["key"] for m in page["messages"]] == [["waiting"]]


async def test_the_message_and_dead_letter_pages_show_the_history_escaped(
    client: httpx.AsyncClient,
) -> None:
    for path in ("/queues/mail/message?key=%5B%22waiting%22%5D", "/queues/mail/dead-letters"):
        response = await client.get(path)
        assert response.status_code == 200, response.text
        html = response.text
        assert SCRIPT not in html, path
        assert "smtp down for " in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert '<details class="traceback"><summary>Traceback</summary><pre>' in html, path
        assert "in deliver_mail" in html, path
        assert f"<code>{__name__}.SmtpDown</code>" in html, path
        assert '<tr data-attempt="1">' in html, path
