"""CloudEvents construction checks, HTTP binary encoding and structured JSON round trips."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from txqueue.errors import InvalidArgument
from txqueue.events.cloudevent import (
    CloudEvent,
    attributes_of,
    from_json,
    make_event,
    to_binary_http,
    to_json,
)

WHEN = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)


def required(**extra: Any) -> dict[str, Any]:
    return {
        "id": "evt-1",
        "source": "//shop/orders",
        "type": "com.example.order.created",
        "specversion": "1.0",
        "time": WHEN,
        **extra,
    }


# --- required attributes -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["id", "source", "type", "specversion"])
def test_each_required_attribute_is_required(name: str) -> None:
    attributes = required()
    del attributes[name]
    with pytest.raises(InvalidArgument, match=f"attribute '{name}' is required"):
        make_event(attributes)


@pytest.mark.parametrize("name", ["id", "source", "type"])
def test_required_attributes_must_be_non_empty_strings(name: str) -> None:
    with pytest.raises(InvalidArgument, match=f"'{name}' must not be empty"):
        make_event(required(**{name: ""}))
    with pytest.raises(InvalidArgument, match=f"'{name}' must be a string, got int"):
        make_event(required(**{name: 5}))
    with pytest.raises(InvalidArgument, match=f"'{name}' is required"):
        make_event(required(**{name: None}))


@pytest.mark.parametrize("version", ["0.3", "1", "2.0"])
def test_specversion_must_be_1_0(version: str) -> None:
    with pytest.raises(InvalidArgument, match=r"'specversion' must be '1\.0'"):
        make_event(required(specversion=version))


def test_a_valid_event_keeps_its_attributes() -> None:
    event = make_event(required(subject="orders/42", region="eu"), {"order": 42})
    assert isinstance(event, CloudEvent)
    assert event.get_id() == "evt-1"
    assert event.get_subject() == "orders/42"
    assert event.get_extension("region") == "eu"
    assert event.get_data() == {"order": 42}


def test_attributes_must_be_a_mapping() -> None:
    with pytest.raises(InvalidArgument, match="must be a mapping"):
        make_event([("id", "1")])  # type: ignore[arg-type]


# --- names and values ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Region", "my-ext", "my_ext", "ext.one", "", "régión", " x"])
def test_bad_attribute_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidArgument, match="lowercase ASCII letters and digits") as caught:
        make_event(required(**{name: "v"}))
    assert repr(name) in str(caught.value)


@pytest.mark.parametrize("name", ["data", "messageuid", "xgooglemessageuid"])
def test_reserved_attribute_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidArgument, match=f"{name!r} is reserved"):
        make_event(required(**{name: "v"}))


def test_long_names_are_allowed_since_20_characters_is_only_a_recommendation() -> None:
    event = make_event(required(averyveryverylongextensionname1="v"))
    assert event.get_extension("averyveryverylongextensionname1") == "v"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.5, "string, boolean or integer, got float"),
        (["a"], "string, boolean or integer, got list"),
        (2**31, "32-bit signed integer"),
        (-(2**31) - 1, "32-bit signed integer"),
        ("line\nbreak", "control characters"),
    ],
)
def test_bad_extension_values_are_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=f"attribute 'ext' must .*{message}"):
        make_event(required(ext=value))


@pytest.mark.parametrize("value", ["text", True, False, 0, 2**31 - 1, -(2**31)])
def test_good_extension_values_are_kept(value: object) -> None:
    assert make_event(required(ext=value)).get_extension("ext") == value


def test_control_characters_in_core_attributes_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="'subject' must not contain control characters"):
        make_event(required(subject="a\r\nx-injected: 1"))


def test_time_may_be_an_rfc3339_string() -> None:
    event = make_event(required(time="2024-05-06T09:08:09.123456789+02:00"))
    assert event.get_time() == datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yesterday", "RFC 3339"),
        ("2024-05-06 07:08:09Z", "RFC 3339"),
        ("2024-13-06T07:08:09Z", "invalid"),
        (datetime(2024, 5, 6), "timezone-aware"),
        (1714979289, "datetime or an RFC 3339 string"),
    ],
)
def test_bad_times_are_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=f"'time' .*{message}"):
        make_event(required(time=value))


def test_time_defaults_to_now_as_in_the_sdk() -> None:
    attributes = required()
    del attributes["time"]
    before = datetime.now(timezone.utc)
    time = make_event(attributes).get_time()
    assert time is not None and before <= time <= datetime.now(timezone.utc)


def test_make_event_does_not_change_the_callers_mapping() -> None:
    attributes = {"id": "1", "source": "s", "type": "t", "specversion": "1.0"}
    make_event(attributes, {"a": 1})
    assert attributes == {"id": "1", "source": "s", "type": "t", "specversion": "1.0"}


# --- data ----------------------------------------------------------------------------------


def test_dict_data_defaults_to_application_json_and_is_copied() -> None:
    payload: dict[str, Any] = {"order": {"lines": [1, 2]}}
    event = make_event(required(), payload)
    payload["order"]["lines"].append(3)
    assert event.get_datacontenttype() == "application/json"
    assert event.get_data() == {"order": {"lines": [1, 2]}}


def test_bytes_data_is_kept_as_bytes_without_a_content_type() -> None:
    event = make_event(required(), bytearray(b"\x00\xffraw"))
    assert event.get_data() == b"\x00\xffraw"
    assert event.get_datacontenttype() is None


def test_str_data_is_text() -> None:
    event = make_event(required(datacontenttype="text/plain"), "hello")
    assert event.get_data() == "hello"


@pytest.mark.parametrize(
    ("content_type", "data", "message"),
    [
        ("text/plain", {"a": 1}, "JSON object but datacontenttype is 'text/plain'"),
        ("application/json", "hello", "str but datacontenttype is 'application/json'"),
        (None, [1, 2], "got list"),
        (None, 42, "got int"),
        (None, {"when": WHEN}, "not JSON-serializable"),
        (None, {"x": float("nan")}, "not JSON-serializable"),
    ],
)
def test_data_must_fit_its_content_type(content_type: str | None, data: Any, message: str) -> None:
    attributes = required() if content_type is None else required(datacontenttype=content_type)
    with pytest.raises(InvalidArgument, match=message):
        make_event(attributes, data)


def test_attributes_of_is_a_copy_without_data() -> None:
    event = make_event(required(region="eu"), {"order": 42})
    attributes = attributes_of(event)
    assert attributes == {**required(region="eu"), "datacontenttype": "application/json"}
    attributes["region"] = "us"
    assert event.get_extension("region") == "eu"


# --- HTTP binary mode ----------------------------------------------------------------------


def test_binary_headers_are_exact() -> None:
    event = make_event(
        required(subject="orders/42 (new)", region="eu", urgent=True, priority=3),
        {"order": 42},
    )
    headers, body = to_binary_http(event, "uid-0001")
    assert headers == {
        "ce-id": "evt-1",
        "ce-source": "//shop/orders",
        "ce-type": "com.example.order.created",
        "ce-specversion": "1.0",
        "ce-time": "2024-05-06T07:08:09Z",
        "ce-subject": "orders/42%20(new)",
        "ce-region": "eu",
        "ce-urgent": "true",
        "ce-priority": "3",
        "ce-messageuid": "uid-0001",
        "ce-xgooglemessageuid": "uid-0001",
        "content-type": "application/json",
    }
    assert body == b'{"order": 42}'


def test_binary_bytes_body_without_content_type() -> None:
    event = make_event(required(), b"\x00\x01")
    headers, body = to_binary_http(event, "uid-2")
    assert "content-type" not in headers
    assert headers["ce-messageuid"] == headers["ce-xgooglemessageuid"] == "uid-2"
    assert body == b"\x00\x01"


def test_binary_text_body_and_non_ascii_header() -> None:
    event = make_event(required(datacontenttype="text/plain", subject="Straße"), "grüß dich")
    headers, body = to_binary_http(event, "uid-3")
    assert headers["content-type"] == "text/plain"
    assert headers["ce-subject"] == "Stra%C3%9Fe"
    assert body == "grüß dich".encode()


def test_binary_does_not_change_the_event() -> None:
    event = make_event(required(urgent=True))
    to_binary_http(event, "uid-4")
    assert event.get_extension("urgent") is True
    assert event.get_extension("messageuid") is None


@pytest.mark.parametrize("uid", ["", "a\nb", None])
def test_bad_message_uid_is_refused(uid: Any) -> None:
    with pytest.raises(InvalidArgument, match=r"message_?uid"):
        to_binary_http(make_event(required()), uid)


# --- structured JSON -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "data"),
    [
        ({}, {"order": 42, "lines": [{"sku": "A", "qty": 2}]}),
        ({"datacontenttype": "text/plain"}, "plain text"),
        ({}, "text without a content type"),
        ({"datacontenttype": "application/octet-stream"}, b"\x00\xff\x10"),
        ({}, None),
        ({"subject": "s", "dataschema": "https://x/s.json", "n": 5, "flag": False}, {"a": None}),
    ],
)
def test_json_round_trip(extra: dict[str, Any], data: Any) -> None:
    event = make_event(required(**extra), data)
    document = to_json(event)
    again = from_json(document)
    assert attributes_of(again) == attributes_of(event)
    assert again.get_data() == event.get_data()
    assert to_json(again) == document


def test_json_forms_of_data() -> None:
    as_dict = to_json(make_event(required(), {"a": 1}))
    assert as_dict["data"] == {"a": 1}
    assert as_dict["time"] == "2024-05-06T07:08:09Z"
    as_bytes = to_json(make_event(required(), b"\x00\xff"))
    assert "data" not in as_bytes
    assert as_bytes["data_base64"] == base64.b64encode(b"\x00\xff").decode()


def test_from_json_of_a_handwritten_message() -> None:
    event = from_json(
        {
            "specversion": "1.0",
            "id": "42",
            "source": "cli",
            "type": "com.example.test",
            "time": "2024-05-06T07:08:09.5Z",
            "region": "eu",
            "data": {"hello": "world"},
        }
    )
    assert event.get_time() == WHEN + timedelta(milliseconds=500)
    assert event.get_datacontenttype() == "application/json"
    assert event.get_data() == {"hello": "world"}


@pytest.mark.parametrize(
    ("data", "body"), [([1, 2], b"[1, 2]"), (7, b"7"), (True, b"true"), ("x", b"x")]
)
def test_from_json_keeps_non_object_json_data_as_its_encoding(data: Any, body: bytes) -> None:
    event = from_json({**required(time="2024-05-06T07:08:09Z"), "data": data})
    assert to_binary_http(event, "uid")[1] == body


def test_from_json_json_string_under_a_json_content_type_is_encoded() -> None:
    event = from_json(
        {
            **required(time="2024-05-06T07:08:09Z"),
            "datacontenttype": "application/json",
            "data": "x",
        }
    )
    assert to_binary_http(event, "uid")[1] == b'"x"'


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"source": "s", "type": "t", "specversion": "1.0"}, "'id' is required"),
        ({**required(time="2024-05-06T07:08:09Z"), "data": 1, "data_base64": "AA=="}, "both"),
        ({**required(time="2024-05-06T07:08:09Z"), "data_base64": "***"}, "not valid base64"),
        ({**required(time="2024-05-06T07:08:09Z"), "data_base64": 5}, "base64 string"),
        (
            {**required(time="2024-05-06T07:08:09Z"), "datacontenttype": "text/plain", "data": 5},
            "must be a string for datacontenttype 'text/plain'",
        ),
        ({**required(time="2024-05-06T07:08:09Z"), "Bad": 1}, "'Bad' is invalid"),
    ],
)
def test_from_json_refuses_bad_documents(document: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        from_json(document)


def test_from_json_requires_an_object() -> None:
    with pytest.raises(InvalidArgument, match="must be an object, got list"):
        from_json([])  # type: ignore[arg-type]
