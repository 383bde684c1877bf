"""What the API's handlers share: the app's database and event layer, the operator's switch
for private destinations, and strict reading of JSON bodies and query parameters
(InvalidArgument naming the field; JSON nested deeper than JSON's limit is refused before
anything recurses into it)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
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
    "pipeline_filter",
    "private_switch",
    "query_int",
    "query_json",
    "query_name",
    "queue_name",
    "required",
    "resource_name",
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


def private_switch(request: Request) -> bool:
    """Whether the operator let this dashboard's clients allow private destinations."""
    from txqueue.web.app import web_state

    return web_state(request).allow_private_destinations


async def json_body(request: Request, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The JSON object in the body, with only ``allowed`` fields; a body that is empty or
    only whitespace is refused, as the document says every such body is required."""
    raw = await request.body()
    if not raw.strip():
        raise InvalidArgument(
            "the request body is required: a JSON object (send {} to change nothing)"
        )
    try:
        value = services.load_json(raw, "the request body")
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


def typed(
    body: dict[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    words: str,
    *,
    nullable: bool = False,
) -> Any:
    """``body[name]`` if it is a ``kind`` (None when absent); an explicit null only where
    the document allows one (``nullable``)."""
    value = body.get(name)
    if value is None:
        if name in body and not nullable:
            raise InvalidArgument(f"{name} must be {words}, got null")
        return None
    if isinstance(value, bool) and kind is not bool:
        raise InvalidArgument(f"{name} must be {words}, got {value!r}")
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)  # JSON has one number type: 3.0 is the integer 3, as JSON Schema says
    if not isinstance(value, kind):
        raise InvalidArgument(f"{name} must be {words}, got {json.dumps(value)}")
    return value


def required(body: dict[str, Any], name: str) -> str:
    value = typed(body, name, str, "a string")
    if value is None:
        raise InvalidArgument(f"{name} is required")
    return str(value)


def query_int(request: Request, name: str, default: int, most: int) -> int:
    """The integer query parameter ``name`` (1 to ``most``), ``default`` when absent; given
    empty (``?limit=``) it is refused like any other text that is not an integer."""
    text = request.query_params.get(name)
    if text is None:
        return default
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise InvalidArgument(f"{name} must be an integer, got {text!r}")
    try:
        value = int(text)
    except ValueError as error:
        raise InvalidArgument(f"{name} must be an integer, got {text!r}") from error
    if not 1 <= value <= most:
        raise InvalidArgument(f"{name} must be from 1 to {most}, got {value}")
    return value


def query_json(request: Request, name: str) -> Any:
    """The JSON query parameter ``name`` (None when absent; given empty it is refused)."""
    text = request.query_params.get(name)
    if text is None:
        return None
    try:
        return services.load_json(text, name)
    except ValueError as error:
        raise InvalidArgument(f"{name} must be JSON (a key as an array), got {text!r}") from error


def query_name(request: Request, name: str, check: Callable[[str], object]) -> str | None:
    """The query parameter ``name`` (None when absent) if ``check`` takes it; ``check``
    raises InvalidArgument naming the rule, so ``?bus=`` or a malformed name is refused."""
    text = request.query_params.get(name)
    if text is None:
        return None
    check(text)
    return text


def queue_name(text: str) -> None:
    """Refuse (InvalidArgument) text that is not a queue name."""
    from txqueue.core.schema import validate_name

    validate_name(text, "queue")


def resource_name(what: str) -> Callable[[str], None]:
    """A check refusing text that is not a bus, pipeline or enrollment name."""

    def check(text: str) -> None:
        from txqueue.events.resources import check_resource_name

        check_resource_name(text, what)

    return check


def pipeline_filter(text: str) -> None:
    """Refuse text that is neither empty (no enrollment matched) nor a pipeline name."""
    if text:
        resource_name("pipeline")(text)


def ok(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(value, status_code=status)


def seconds_field(body: dict[str, Any], name: str) -> timedelta | None:
    value = typed(body, name, (int, float), "a number of seconds", nullable=True)
    return services.seconds(value, name)
