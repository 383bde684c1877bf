"""CloudEvents JSON format on the way out (issue #40, item 3), SQLite and PostgreSQL.

An event reaching a ``queue:`` destination, and one listed by ``events archived --format
json``, is in structured JSON form: JSON data is a JSON value in ``data``, text a string in
``data``, other bytes ``data_base64``; the queue's copy carries ``messageuid`` and, the same
value, ``xgooglemessageuid``. The cloudevents SDK's own readers (structured JSON, structured
and binary HTTP) read back the data that was published.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta

import pytest
from click.testing import CliRunner
from cloudevents.v1.http import from_http, from_json
from events_receiver import Receiver, wait_until

import txqueue
from txqueue.cli.main import main

SECOND = timedelta(seconds=1)

# (published data attributes, where the JSON form holds the data, the data read back)
CASES = {
    "json-array": ({"datacontenttype": "application/json", "data": [1, 2, 3]}, "data", [1, 2, 3]),
    "json-suffix": (
        {"datacontenttype": "application/vnd.shop+json", "data": "a JSON string"},
        "data",
        "a JSON string",
    ),
    "json-object": ({"data": {"total": 12}}, "data", {"total": 12}),
    "text": ({"datacontenttype": "text/plain", "data": "héllo"}, "data", "héllo"),
    "binary": (
        {
            "datacontenttype": "application/octet-stream",
            "data_base64": base64.b64encode(b"\x00\xff\x01").decode(),
        },
        "data_base64",
        b"\x00\xff\x01",
    ),
}


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        if database.dialect is txqueue.Dialect.POSTGRESQL:
            database.update_ddl(
                "CREATE QUEUE inbox (messageid varchar(64) NOT NULL, payload text NOT NULL,"
                " PRIMARY KEY (messageid))"
            )
        else:
            database.update_ddl(
                "CREATE QUEUE Inbox (MessageId STRING(64) NOT NULL, Payload STRING(MAX) NOT NULL)"
                " PRIMARY KEY (MessageId)"
            )
        yield database


@pytest.fixture
def dispatcher(database_url: str, events: txqueue.Events) -> Iterator[txqueue.Dispatcher]:
    with txqueue.Dispatcher(database_url, attempt_timeout=5 * SECOND) as running:
        yield running


def _other(member: str) -> str:
    return "data_base64" if member == "data" else "data"


@pytest.mark.parametrize("case", list(CASES))
def test_the_queue_copy_and_the_http_request_read_back_through_the_sdk(
    case: str,
    db: txqueue.Database,
    events: txqueue.Events,
    receiver: Receiver,
    dispatcher: txqueue.Dispatcher,
) -> None:
    published, member, expected = CASES[case]
    events.create_pipeline("to-inbox", "queue:Inbox")
    events.create_pipeline("to-hook", receiver.url("/hook"), allow_private=True)
    events.create_enrollment("inbox", bus="orders", pipeline="to-inbox", cel_match="true")
    events.create_enrollment("hook", bus="orders", pipeline="to-hook", cel_match="true")

    uid = events.publish(
        "orders", {"type": "com.shop.order.paid", "source": "//shop", "id": case, **published}
    )

    with closing(db.receive("Inbox", max_duration=20 * SECOND)) as stream:
        message = next(iter(stream))
    text = message.payload
    document = json.loads(text)
    assert message.key == (uid,)
    assert member in document and _other(member) not in document, document
    assert document["messageuid"] == uid
    assert document["xgooglemessageuid"] == uid
    # The SDK's structured readers: the JSON format, and structured mode over HTTP.
    for read in (
        from_json(text),
        from_http({"content-type": "application/cloudevents+json"}, text),
    ):
        assert read["id"] == case
        assert read["xgooglemessageuid"] == uid
        assert read.data == expected
    # The SDK's binary-mode reader, on the request the HTTP pipeline received.
    [request] = receiver.wait_for("/hook", 1)
    received = from_http(request.headers, request.body)
    assert received["xgooglemessageuid"] == received["messageuid"] == uid
    # (the binary reader gives a non-JSON body as bytes: text is its UTF-8)
    body = expected.encode() if case == "text" else expected
    assert received.data == body


@pytest.mark.parametrize("case", list(CASES))
def test_events_archived_as_json_holds_data_as_the_format_says(
    case: str, database_url: str, events: txqueue.Events
) -> None:
    published, member, expected = CASES[case]
    events.publish(
        "orders", {"type": "com.shop.order.paid", "source": "//shop", "id": case, **published}
    )
    result = CliRunner().invoke(
        main, ["events", "archived", "--format", "json", "--database", database_url]
    )
    assert result.exit_code == 0, result.output
    [line] = result.output.splitlines()
    document = json.loads(line)["event"]
    assert member in document and _other(member) not in document, document
    assert from_json(json.dumps(document)).data == expected


def test_json_data_held_as_bytes_is_json_in_the_queue_copy(
    db: txqueue.Database, events: txqueue.Events, dispatcher: txqueue.Dispatcher
) -> None:
    """The issue's reproducer: ``[1,2,3]`` must not come out as ``data_base64``."""
    events.create_pipeline("to-inbox", "queue:Inbox")
    events.create_enrollment("inbox", bus="orders", pipeline="to-inbox", cel_match="true")
    events.publish(
        "orders",
        {"type": "t", "source": "//s", "id": "1", "datacontenttype": "application/json",
         "data": [1, 2, 3]},
    )  # fmt: skip
    with closing(db.receive("Inbox", max_duration=20 * SECOND)) as stream:
        document = json.loads(next(iter(stream)).payload)
    assert "data_base64" not in document
    assert document["data"] == [1, 2, 3]
    assert wait_until(lambda: events.attempts()[-1].state == "delivered")
