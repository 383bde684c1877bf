"""What the API's handlers share: the app's database and event layer, and strict reading of
JSON bodies and query parameters (InvalidArgument naming the field)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from txqueue.errors import InvalidArgument
from txqueue.web import services

__all__ = [
    "database_of",
    "events_of",
    "json_body",
    "ok",
    "query_int",
    "query_json",
    "required",
    "seconds_field",
    "typed",
]


def database_of(request: Request) -> Any:
    """The dashboard's sync `txqueue.Database`."""
    from txqueue.web.app import web_state

    return web_state(request).database


def events_of(request: Request) -> Any:
    """The dashboard's `txqueue.Events`."""
    from txqueue.web.app import web_state

    return web_state(request).events


async def json_body(request: Request, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The JSON object in the body (empty body: ``{}``), with only ``allowed`` fields."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise InvalidArgument(f"the request body is not JSON: {error}") from error
    if not isinstance(value, dict):
        raise InvalidArgument(f"the request body must be a JSON object, got {type(value).__name__}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise InvalidArgument(
            f"unknown field {unknown[0]!r} in the request body; the fields are: "
            + ", ".join(allowed)
        )
    return value


def typed(body: dict[str, Any], name: str, kind: type | tuple[type, ...], words: str) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) and kind is not bool:
        raise InvalidArgument(f"{name} must be {words}, got {value!r}")
    if not isinstance(value, kind):
        raise InvalidArgument(f"{name} must be {words}, got {json.dumps(value)}")
    return value


def required(body: dict[str, Any], name: str) -> str:
    value = typed(body, name, str, "a string")
    if value is None:
        raise InvalidArgument(f"{name} is required")
    return str(value)


def query_int(request: Request, name: str, default: int, most: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError as error:
        raise InvalidArgument(f"{name} must be an integer, got {text!r}") from error
    if not 1 <= value <= most:
        raise InvalidArgument(f"{name} must be from 1 to {most}, got {value}")
    return value


def query_json(request: Request, name: str) -> Any:
    text = request.query_params.get(name)
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        raise InvalidArgument(f"{name} must be JSON (a key as an array), got {text!r}") from error


def ok(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(value, status_code=status)


def seconds_field(body: dict[str, Any], name: str) -> timedelta | None:
    value = typed(body, name, (int, float), "a number of seconds")
    return services.seconds(value, name)
