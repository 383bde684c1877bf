"""The API's message actions: send a message, delete (cancel) messages, make messages ready.

Keys are JSON arrays (``services.whole_key``), payloads ``{"encoding", "value"}`` as the
API returns them, times RFC 3339 with a zone. Deleting and making ready take a selection of
keys and change all of them or none; a message under a live lease is refused (412) unless
``"force": true``.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from txqueue.core.schema import ColumnType, Table
from txqueue.errors import InvalidArgument
from txqueue.web import services
from txqueue.web.api_support import database_of, json_body, ok, typed
from txqueue.web.encoding import message_json

__all__ = [
    "delete_messages",
    "make_ready",
    "payload_from_json",
    "payload_from_text",
    "send_message",
    "time_from_text",
]

PAYLOAD_ENCODINGS = ("json", "text", "base64")


async def send_message(request: Request) -> Response:
    """Send one message; the answer is the message as GET gives it (201)."""
    name = request.path_params["queue"]
    database = database_of(request)
    body = await json_body(request, ("key", "payload", "deliver_time"))
    if "key" not in body or "payload" not in body:
        raise InvalidArgument('"key" and "payload" are required')
    key_json = typed(body, "key", list, "a key (JSON array)")
    payload_json = typed(body, "payload", dict, 'a payload ({"encoding", "value"})')
    when = _time(body, "deliver_time")

    def write() -> dict[str, Any]:
        table = database.queue(name)
        key = services.whole_key(table, key_json)
        with database.batch() as batch:
            batch.send(name, key, payload_from_json(table, payload_json), deliver_time=when)
        return message_json(table, database.get_message(name, key))

    return ok(await run_in_threadpool(write), 201)


async def delete_messages(request: Request) -> Response:
    """Delete the selected messages, all or none."""
    name, database, keys, body = await _selection(request, ("keys", "force"))
    force = bool(typed(body, "force", bool, "true or false"))

    def write() -> int:
        return int(database.delete_messages(name, _keys(database, name, keys), force=force))

    return ok({"deleted": await run_in_threadpool(write)})


async def make_ready(request: Request) -> Response:
    """Make the selected messages ready now, or at ``deliver_time``, all or none."""
    name, database, keys, body = await _selection(request, ("keys", "deliver_time", "force"))
    force = bool(typed(body, "force", bool, "true or false"))
    when = _time(body, "deliver_time")

    def write() -> int:
        chosen = _keys(database, name, keys)
        return int(database.make_ready(name, chosen, deliver_time=when, force=force))

    return ok({"made_ready": await run_in_threadpool(write)})


async def _selection(
    request: Request, allowed: tuple[str, ...]
) -> tuple[str, Any, list[Any], dict[str, Any]]:
    body = await json_body(request, allowed)
    keys = typed(body, "keys", list, "a list of keys (JSON arrays)")
    if not keys:
        raise InvalidArgument('"keys" is required: a list of at least one key (JSON array)')
    return request.path_params["queue"], database_of(request), keys, body


def _keys(database: Any, name: str, keys: list[Any]) -> list[tuple[Any, ...]]:
    table = database.queue(name)
    return [services.whole_key(table, key, f"keys[{index}]") for index, key in enumerate(keys)]


def _time(body: dict[str, Any], name: str) -> datetime | None:
    """An RFC 3339 time with its zone (None when absent or null)."""
    text = typed(body, name, str, "an RFC 3339 time with a zone", nullable=True)
    return None if text is None else time_from_text(text, name)


def time_from_text(text: str, name: str) -> datetime | None:
    """``text`` as an RFC 3339 time with its zone; None when it is blank (now)."""
    if not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{name} must be an RFC 3339 time, got {text!r}") from None
    if moment.tzinfo is None:
        raise InvalidArgument(f"{name} must be timezone-aware (got {text!r}, without a zone)")
    return moment


def payload_from_json(table: Table, value: dict[str, Any]) -> Any:
    """A payload as the API writes it, for ``table``'s payload column: base64 as bytes, text
    as text (UTF-8 bytes for a BYTES column), json as the value."""
    unknown = sorted(set(value) - {"encoding", "value"})
    if unknown or "value" not in value or value.get("encoding") not in PAYLOAD_ENCODINGS:
        raise InvalidArgument('payload must be {"encoding": "json"|"text"|"base64", "value": ...}')
    encoding, content = value["encoding"], value["value"]
    if encoding == "json":
        return content
    if not isinstance(content, str):
        raise InvalidArgument(f"payload.value must be a string for encoding {encoding!r}")
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as error:
            raise InvalidArgument(f"payload.value is not base64: {error}") from None
    if table.payload_column.type is ColumnType.BYTES:
        return content.encode("utf-8", errors="surrogatepass")
    return content


def payload_from_text(table: Table, text: str) -> Any:
    """A payload typed into a form: JSON for a JSON payload column, else text (as UTF-8
    bytes for a BYTES column)."""
    if table.payload_column.type is not ColumnType.JSON:
        return payload_from_json(table, {"encoding": "text", "value": text})
    try:
        return services.load_json(text, "payload")
    except ValueError as error:
        raise InvalidArgument(f"payload of {table.name} must be JSON: {error}") from None
