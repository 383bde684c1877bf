"""CloudEvents 1.0: checked construction, HTTP binary encoding and structured JSON, via the SDK.

The event type is the ``cloudevents`` SDK's own ``cloudevents.core.v1.event.CloudEvent``; this
module adds the checks the SDK leaves out, so that bad input fails at publish time with an
`InvalidArgument` naming the attribute instead of failing later at delivery:

- attribute names are lowercase ASCII letters and digits (the CloudEvents MUST; the "at most
  20 characters" SHOULD is not enforced), ``data``, ``messageuid`` and ``xgooglemessageuid``
  are reserved;
- ``id``, ``source``, ``type`` are non-empty strings and ``specversion`` is ``"1.0"``;
- extension values are strings, booleans or 32-bit integers (the CloudEvents type system);
- ``time`` is a timezone-aware datetime or an RFC 3339 string; strings hold no control
  characters;
- data is a JSON object (dict; ``datacontenttype`` defaults to ``application/json``), text
  (str, with a non-JSON ``datacontenttype`` or none) or bytes.

As the SDK does, an event without ``time`` gets the current UTC time when it is made.
``messageuid`` is set by the bus on every publish (see `to_binary_http`), never by producers;
``xgooglemessageuid`` carries the same value, under Eventarc Advanced's name for it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from cloudevents.core.bindings.http import to_binary
from cloudevents.core.exceptions import CloudEventValidationError
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from txqueue.core.values import json_text
from txqueue.errors import InvalidArgument

__all__ = [
    "GOOGLE_MESSAGE_UID_ATTRIBUTE",
    "MESSAGE_UID_ATTRIBUTE",
    "CloudEvent",
    "attributes_of",
    "coerce_event",
    "from_json",
    "make_event",
    "to_binary_http",
    "to_json",
]

Data = dict[str, Any] | str | bytes | None
Payload = Mapping[str, Any] | str | bytes | bytearray | None

MESSAGE_UID_ATTRIBUTE = "messageuid"
#: Eventarc Advanced's name for the same value: receivers written for it read this one.
GOOGLE_MESSAGE_UID_ATTRIBUTE = "xgooglemessageuid"
_REQUIRED = ("id", "source", "type", "specversion")
_OPTIONAL_STRINGS = ("subject", "datacontenttype", "dataschema")
_RESERVED = {
    "data": "it names the event payload",
    MESSAGE_UID_ATTRIBUTE: "the bus assigns it on every publish",
    GOOGLE_MESSAGE_UID_ATTRIBUTE: "the bus assigns it on every publish",
}
_NAME = re.compile(r"[a-z0-9]+\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})\Z"
)
_INT32 = range(-(2**31), 2**31)
_FORMAT = JSONFormat()


def make_event(attributes: Mapping[str, Any], data: Payload = None) -> CloudEvent:
    """Build a CloudEvent from attributes and data, refusing anything CloudEvents 1.0 forbids."""
    if not isinstance(attributes, Mapping):
        raise InvalidArgument(
            f"CloudEvent attributes must be a mapping, got {type(attributes).__name__}"
        )
    checked: dict[str, Any] = {}
    for name, value in attributes.items():
        _check_name(name)
        if value is not None:  # a null attribute is an absent one (CloudEvents JSON format)
            checked[name] = value
    for name in _REQUIRED:
        value = checked.get(name)
        if value is None:
            raise InvalidArgument(f"CloudEvent attribute {name!r} is required")
        _check_string(name, value)
    if checked["specversion"] != "1.0":
        raise InvalidArgument(
            f"CloudEvent attribute 'specversion' must be '1.0', got {checked['specversion']!r}"
        )
    for name in _OPTIONAL_STRINGS:
        if name in checked:
            _check_string(name, checked[name])
    if "time" in checked:
        checked["time"] = _check_time(checked["time"])
    for name, value in checked.items():
        if name not in _REQUIRED and name not in _OPTIONAL_STRINGS and name != "time":
            _check_extension(name, value)
    payload = _check_data(data, checked)
    try:
        return CloudEvent(checked, payload)
    except CloudEventValidationError as error:  # a rule the checks above missed
        name = next(iter(error.errors), "?")
        raise InvalidArgument(f"CloudEvent attribute {name!r}: {error}") from error


def coerce_event(event: object) -> CloudEvent:
    """A checked CloudEvent from an SDK event object (either SDK API) or a JSON-form mapping.

    Every event goes through `make_event`, so an SDK object gets the same checks as a mapping;
    a mapping without ``specversion`` gets ``"1.0"``.
    """
    if isinstance(event, Mapping):
        return from_json({"specversion": "1.0", **event})
    get_attributes = getattr(event, "get_attributes", None)
    get_data = getattr(event, "get_data", None)
    if not callable(get_attributes) or not callable(get_data):
        raise InvalidArgument(
            "event must be a cloudevents CloudEvent or a mapping in CloudEvents JSON form, "
            f"got {type(event).__name__}"
        )
    return make_event(dict(get_attributes()), get_data())


def attributes_of(event: CloudEvent) -> dict[str, Any]:
    """A copy of the event's context attributes (``time`` as a datetime), without its data."""
    return dict(event.get_attributes())


def to_binary_http(event: CloudEvent, message_uid: str) -> tuple[dict[str, str], bytes]:
    """Headers and body of a CloudEvents HTTP binary-mode request carrying ``message_uid``.

    Attributes become percent-encoded ``ce-`` headers, ``datacontenttype`` becomes
    ``content-type`` and ``message_uid`` travels as ``ce-messageuid`` and, the same value, as
    ``ce-xgooglemessageuid`` (Eventarc Advanced's name). Booleans are written in
    their canonical CloudEvents form ``true``/``false``.
    """
    if not isinstance(message_uid, str) or not message_uid:
        raise InvalidArgument("message_uid must be a non-empty string")
    _check_string(MESSAGE_UID_ATTRIBUTE, message_uid)
    attributes = {
        name: ("true" if value else "false") if isinstance(value, bool) else value
        for name, value in event.get_attributes().items()
    }
    attributes[MESSAGE_UID_ATTRIBUTE] = message_uid
    attributes[GOOGLE_MESSAGE_UID_ATTRIBUTE] = message_uid
    message = to_binary(CloudEvent(attributes, event.get_data()), _FORMAT)
    return dict(message.headers), message.body


def to_json(event: CloudEvent, message_uid: str | None = None) -> dict[str, Any]:
    """The event in CloudEvents structured JSON form, with ``message_uid`` (if given) as
    ``messageuid`` and ``xgooglemessageuid``.

    As the JSON format requires, JSON data (a JSON ``datacontenttype``, ``+json`` included)
    is a JSON value in ``data``, also when it is held as its encoded bytes; text (``text/*``,
    XML) that is UTF-8 is a string in ``data``; other bytes are ``data_base64``.
    """
    result: dict[str, Any] = json.loads(_FORMAT.write(event))
    data = event.get_data()
    if isinstance(data, bytes):
        value = _readable(data, event.get_datacontenttype())
        if value is not _BINARY:
            del result["data_base64"]
            result["data"] = value
    if message_uid is not None:
        _check_string(MESSAGE_UID_ATTRIBUTE, message_uid)
        result[MESSAGE_UID_ATTRIBUTE] = message_uid
        result[GOOGLE_MESSAGE_UID_ATTRIBUTE] = message_uid
    return result


_BINARY = object()
_TEXT_TYPE = re.compile(r"\s*(?:text/[^;\s]+|[^;\s]+[/+]xml)\s*(?:;|\Z)", re.IGNORECASE)
_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([^\";\s]+)", re.IGNORECASE)


def _readable(data: bytes, content_type: str | None) -> Any:
    """``data`` as the JSON value or the text it holds under ``content_type``, or `_BINARY`
    when it is neither (not UTF-8, not JSON, a charset other than UTF-8, no content type)."""
    if content_type is None:
        return _BINARY  # bytes the producer gave without saying what they are
    charset = _CHARSET.search(content_type)
    if charset is not None and charset[1].lower() not in ("utf-8", "utf8", "us-ascii"):
        return _BINARY
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return _BINARY
    if _is_json(content_type):
        try:
            value = json.loads(text, parse_constant=_not_json)
            _json_text(value)  # refuses what overflowed to infinity, or nests too deep
        except (ValueError, InvalidArgument, RecursionError):
            return _BINARY
        return value
    return text if _TEXT_TYPE.match(content_type) else _BINARY


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def from_json(document: Mapping[str, Any]) -> CloudEvent:
    """Parse a structured JSON CloudEvent (as from `to_json` or ``--json-message``), checked.

    Under a JSON ``datacontenttype`` (or none), a ``data`` value that is not an object or a
    string is kept as its JSON encoding in bytes, so the delivered body is that same JSON.
    """
    if not isinstance(document, Mapping):
        raise InvalidArgument(f"a JSON CloudEvent must be an object, got {type(document).__name__}")
    attributes = dict(document)
    has_data = "data" in attributes
    data: Any = attributes.pop("data", None)
    encoded = attributes.pop("data_base64", None)
    if has_data and encoded is not None:
        raise InvalidArgument("a JSON CloudEvent must not hold both 'data' and 'data_base64'")
    if encoded is not None:
        if not isinstance(encoded, str):
            raise InvalidArgument("CloudEvent 'data_base64' must be a base64 string")
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as error:
            raise InvalidArgument(
                f"CloudEvent 'data_base64' is not valid base64: {error}"
            ) from error
    elif data is not None and not isinstance(data, dict):
        content_type = attributes.get("datacontenttype")
        if content_type is not None:
            _check_string("datacontenttype", content_type)
        if content_type is None and isinstance(data, str):
            pass  # plain text, sent as is
        elif content_type is None or _is_json(content_type):
            if content_type is None:
                attributes["datacontenttype"] = JSONFormat.DEFAULT_CONTENT_TYPE
            data = _json_text(data).encode()
        elif not isinstance(data, str):
            raise InvalidArgument(
                f"CloudEvent 'data' must be a string for datacontenttype {content_type!r}"
            )
    return make_event(attributes, data)


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgument(
            f"CloudEvent attribute name {name!r} is invalid: names are lowercase ASCII "
            "letters and digits only (a-z, 0-9)"
        )
    if name in _RESERVED:
        raise InvalidArgument(f"CloudEvent attribute name {name!r} is reserved: {_RESERVED[name]}")


def _check_string(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise InvalidArgument(
            f"CloudEvent attribute {name!r} must be a string, got {type(value).__name__}"
        )
    if not value:
        raise InvalidArgument(f"CloudEvent attribute {name!r} must not be empty")
    _check_text(name, value)


def _check_text(name: str, value: str) -> None:
    if _CONTROL.search(value):
        raise InvalidArgument(f"CloudEvent attribute {name!r} must not contain control characters")
    if not _is_text(value):
        raise InvalidArgument(
            f"CloudEvent attribute {name!r} is not valid Unicode: it holds a lone surrogate"
        )


def _is_text(value: str) -> bool:
    """True when ``value`` encodes as UTF-8 (no lone surrogate, which no HTTP header or body
    can carry)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _json_text(data: object) -> str:
    """``data`` as JSON text that encodes as UTF-8; InvalidArgument saying why not otherwise
    (not JSON, NaN or infinity, a lone surrogate, nested deeper than Spanner's JSON)."""
    return json_text(data, "CloudEvent data")


def _check_time(value: object) -> datetime:
    if isinstance(value, str):
        match = _RFC3339.match(value)
        if match is None:
            raise InvalidArgument(
                f"CloudEvent attribute 'time' must be an RFC 3339 timestamp, got {value!r}"
            )
        day, clock, fraction, offset = match.groups()
        micros = f".{(fraction or '')[:6]:0<6}"
        zone = "+00:00" if offset in ("Z", "z") else offset
        try:
            value = datetime.fromisoformat(f"{day}T{clock}{micros}{zone}")
        except ValueError as error:
            raise InvalidArgument(f"CloudEvent attribute 'time' is invalid: {error}") from error
    if not isinstance(value, datetime):
        raise InvalidArgument(
            "CloudEvent attribute 'time' must be a datetime or an RFC 3339 string, "
            f"got {type(value).__name__}"
        )
    offset = value.utcoffset()
    if value.tzinfo is None or offset is None:
        raise InvalidArgument("CloudEvent attribute 'time' must be timezone-aware")
    if offset % timedelta(minutes=1):  # RFC 3339 offsets are whole minutes: write it in UTC
        try:
            value = value.astimezone(timezone.utc)
        except OverflowError as error:
            raise InvalidArgument(
                "CloudEvent attribute 'time' is outside the years 1 to 9999 in UTC"
            ) from error
    return value


def _check_extension(name: str, value: object) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if value not in _INT32:
            raise InvalidArgument(
                f"CloudEvent attribute {name!r} must be a 32-bit signed integer, got {value}"
            )
        return
    if isinstance(value, str):
        _check_text(name, value)
        return
    raise InvalidArgument(
        f"CloudEvent attribute {name!r} must be a string, boolean or integer, "
        f"got {type(value).__name__}"
    )


def _is_json(content_type: str) -> bool:
    return JSONFormat.JSON_CONTENT_TYPE_PATTERN.match(content_type) is not None


def _check_data(data: object, attributes: dict[str, Any]) -> Data:
    """Check ``data`` against ``datacontenttype``; dicts are deep-copied through JSON."""
    content_type = attributes.get("datacontenttype")
    if data is None:
        return None
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, Mapping):
        if content_type is None:
            attributes["datacontenttype"] = content_type = JSONFormat.DEFAULT_CONTENT_TYPE
        if not _is_json(content_type):
            raise InvalidArgument(
                f"CloudEvent data is a JSON object but datacontenttype is {content_type!r}: "
                "use a JSON content type or pass the encoded bytes"
            )
        copied: dict[str, Any] = json.loads(_json_text(dict(data)))
        return copied
    if isinstance(data, str):
        if content_type is not None and _is_json(content_type):
            raise InvalidArgument(
                f"CloudEvent data is a str but datacontenttype is {content_type!r}: pass a dict "
                "for a JSON object, or the JSON text encoded as bytes"
            )
        if not _is_text(data):
            raise InvalidArgument("CloudEvent data is not valid Unicode: it holds a lone surrogate")
        return data
    raise InvalidArgument(
        "CloudEvent data must be a dict (JSON object), str, bytes or None, "
        f"got {type(data).__name__}: wrap JSON arrays in an object or pass encoded bytes"
    )
