"""`to_json` places data as the CloudEvents JSON format says (issue #40, item 3): JSON data
as a JSON value in ``data``, UTF-8 text as a string, anything else as ``data_base64``; with a
message_uid, ``messageuid`` and ``xgooglemessageuid`` carry it."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from txqueue.events.cloudevent import from_json, to_json

REQUIRED = {"specversion": "1.0", "id": "1", "source": "//s", "type": "t"}


def _bytes(content_type: str | None, data: bytes) -> dict[str, Any]:
    event = {**REQUIRED, "data_base64": base64.b64encode(data).decode()}
    if content_type is not None:
        event["datacontenttype"] = content_type
    return to_json(from_json(event))


@pytest.mark.parametrize(
    ("content_type", "data", "expected"),
    [
        ("application/json", b"[1, 2, 3]", [1, 2, 3]),
        ("application/json; charset=utf-8", b'{"a": "\xc3\xa9"}', {"a": "é"}),
        ("application/cloudevents-batch+json", b'"text"', "text"),
        ("text/plain", b"h\xc3\xa9llo", "héllo"),
        ("application/xml", b"<a/>", "<a/>"),
    ],
)
def test_json_and_text_go_in_data(content_type: str, data: bytes, expected: Any) -> None:
    document = _bytes(content_type, data)
    assert "data_base64" not in document
    assert document["data"] == expected


@pytest.mark.parametrize(
    ("content_type", "data"),
    [
        ("application/json", b"NaN"),  # not JSON
        ("application/json", b"1e400"),  # overflows to infinity
        ("application/json", b"\xff[]"),  # not UTF-8
        ("text/plain", b"\xff\xfe"),
        ("text/plain; charset=latin-1", b"caf\xe9"),  # a charset other than UTF-8
        ("application/octet-stream", b"{}"),
        (None, b"{}"),  # bytes given without a content type stay bytes
    ],
)
def test_anything_else_is_base64(content_type: str | None, data: bytes) -> None:
    document = _bytes(content_type, data)
    assert "data" not in document
    assert base64.b64decode(document["data_base64"]) == data


def test_round_trip_keeps_the_data() -> None:
    event = from_json({**REQUIRED, "datacontenttype": "application/json", "data": [1, 2, 3]})
    again = from_json(to_json(event))
    assert again.get_data() == event.get_data()


def test_message_uid_is_carried_under_both_names() -> None:
    document = to_json(from_json(REQUIRED), "uid-1")
    assert document["messageuid"] == document["xgooglemessageuid"] == "uid-1"
    assert "messageuid" not in to_json(from_json(REQUIRED))
