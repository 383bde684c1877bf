"""The HTTP API under ``/api/v1`` (JSON), and its OpenAPI document.

Keys are JSON arrays in primary-key order, payloads ``{"encoding": "json"|"text"|"base64",
"value": ...}``, timestamps RFC 3339 in UTC, durations seconds. Lists page by key: ``after``
(the last key of the previous page, as JSON) and ``limit``; the answer's ``next_after`` is
null on the last page. Every input goes through the same library calls as the pages, and
txqueue's errors become ``{"error": {"code": "<ErrorClassName>", "message": "..."}}`` with
the status of `STATUS_OF`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from txqueue import errors
from txqueue.errors import InvalidArgument
from txqueue.web import services
from txqueue.web.encoding import (
    attempt_json,
    bus_json,
    dead_letter_json,
    enrollment_json,
    message_json,
    pipeline_json,
    queue_json,
    throughput_json,
    undelivered_json,
    worker_json,
)

__all__ = ["ENDPOINTS", "STATUS_OF", "Endpoint", "error_response", "exception_handlers", "routes"]

#: The HTTP status of each txqueue error.
STATUS_OF: dict[type[errors.TxqueueError], int] = {
    errors.InvalidArgument: 400,
    errors.NotFound: 404,
    errors.AlreadyExists: 409,
    errors.FailedPrecondition: 412,
    errors.OutOfRange: 400,
    errors.Aborted: 409,
    errors.DeadlineExceeded: 504,
    errors.Unavailable: 503,
    errors.CommitOutcomeUnknown: 500,
}

Handler = Callable[[Request], Awaitable[Response]]


def error_response(error: errors.TxqueueError) -> JSONResponse:
    """``{"error": {"code", "message"}}`` with the status of the error's class."""
    status = next((code for kind, code in STATUS_OF.items() if isinstance(error, kind)), 500)
    body = {"error": {"code": type(error).__name__, "message": str(error)}}
    return JSONResponse(body, status_code=status)


async def _handle(request: Request, error: Exception) -> Response:
    """A txqueue error: JSON under /api/v1, the error page elsewhere."""
    if not isinstance(error, errors.TxqueueError):
        raise error
    response = error_response(error)
    if _is_api(request):
        return response
    from txqueue.web.app import web_state

    return web_state(request).templates.TemplateResponse(
        request,
        "error.html",
        {"title": "Error", "error_message": str(error)},
        status_code=response.status_code,
    )


def _is_api(request: Request) -> bool:
    from txqueue.web.security import dashboard_path

    path = dashboard_path(request.scope)
    return path == "/api/v1" or path.startswith("/api/v1/")


async def _handle_http(request: Request, error: Exception) -> Response:
    """Starlette's own 404 and 405: JSON under /api/v1, plain text elsewhere."""
    assert isinstance(error, HTTPException)
    if _is_api(request):
        code = {404: "NotFound", 405: "MethodNotAllowed"}.get(error.status_code, "HTTPError")
        message = {404: "no such API path", 405: "this path does not take that method"}.get(
            error.status_code, str(error.detail)
        )
        body = {"error": {"code": code, "message": message}}
        return JSONResponse(body, status_code=error.status_code, headers=error.headers)
    return PlainTextResponse(str(error.detail), error.status_code, headers=error.headers)


def exception_handlers() -> dict[Any, Callable[..., Any]]:
    """txqueue errors raised by any route become error responses."""
    return {errors.TxqueueError: _handle, HTTPException: _handle_http}


@dataclass(frozen=True)
class Endpoint:
    """One method on one path, with what the OpenAPI document says of it."""

    method: str
    path: str
    handler: Handler
    summary: str
    response: str  # a schema name in txqueue.web.openapi.SCHEMAS
    request: str | None = None  # the body's schema name (JSON), if any
    query: tuple[str, ...] = ()  # query parameters, described in openapi.PARAMETERS
    status: int = 200
    errors: tuple[int, ...] = field(default=(400, 404))


# ---- request helpers -------------------------------------------------------------------------


def _database(request: Request) -> Any:
    from txqueue.web.app import web_state

    return web_state(request).database


def _events(request: Request) -> Any:
    from txqueue.web.app import web_state

    return web_state(request).events


async def _body(request: Request, allowed: tuple[str, ...]) -> dict[str, Any]:
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


def _typed(body: dict[str, Any], name: str, kind: type | tuple[type, ...], words: str) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) and kind is not bool:
        raise InvalidArgument(f"{name} must be {words}, got {value!r}")
    if not isinstance(value, kind):
        raise InvalidArgument(f"{name} must be {words}, got {json.dumps(value)}")
    return value


def _required(body: dict[str, Any], name: str) -> str:
    value = _typed(body, name, str, "a string")
    if value is None:
        raise InvalidArgument(f"{name} is required")
    return str(value)


def _query_int(request: Request, name: str, default: int, most: int) -> int:
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


def _query_json(request: Request, name: str) -> Any:
    text = request.query_params.get(name)
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError as error:
        raise InvalidArgument(f"{name} must be JSON (a key as an array), got {text!r}") from error


def _ok(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(value, status_code=status)


# ---- queues and messages ---------------------------------------------------------------------


async def list_queues(request: Request) -> Response:
    rows = await run_in_threadpool(services.overview, _database(request))
    return _ok({"queues": [queue_json(row) for row in rows]})


async def get_queue(request: Request) -> Response:
    name = request.path_params["queue"]

    def read() -> Any:
        database = _database(request)
        database.queue(name)
        return next(row for row in services.overview(database) if row.name == name)

    return _ok(queue_json(await run_in_threadpool(read)))


async def list_messages(request: Request) -> Response:
    name = request.path_params["queue"]
    database = _database(request)
    limit = _query_int(request, "limit", services.DEFAULT_PAGE_SIZE, services.MAX_PAGE_SIZE)
    state = request.query_params.get("state") or None
    after_json = _query_json(request, "after")
    prefix_text = request.query_params.get("prefix")

    def read() -> services.MessagePage:
        table = database.queue(name)
        after = None if after_json is None else services.whole_key(table, after_json, "after")
        prefix = services.parse_prefix(table, prefix_text)
        return services.queue_page(database, name, prefix, state, after, limit)

    page = await run_in_threadpool(read)
    return _ok(
        {
            "messages": [message_json(page.table, item) for item in page.messages],
            "next_after": (
                None
                if page.next_after is None
                else services.key_to_json(page.table, page.next_after)
            ),
        }
    )


async def get_message(request: Request) -> Response:
    name = request.path_params["queue"]
    database = _database(request)
    key_json = _query_json(request, "key")
    if key_json is None:
        raise InvalidArgument("key is required: the message's key as a JSON array")

    def read() -> dict[str, Any]:
        table = database.queue(name)
        key = services.whole_key(table, key_json)
        return message_json(table, services.message(database, name, key))

    return _ok(await run_in_threadpool(read))


async def list_dead_letters(request: Request) -> Response:
    name = request.path_params["queue"]
    database = _database(request)
    limit = _query_int(request, "limit", services.MAX_PAGE_SIZE, services.MAX_PAGE_SIZE)

    def read() -> list[dict[str, Any]]:
        table = database.queue(name)
        return [
            dead_letter_json(table, letter)
            for letter in services.dead_letters(database, name, limit)
        ]

    return _ok({"dead_letters": await run_in_threadpool(read)})


async def _dead_letter_selection(request: Request) -> tuple[str, Any, Any]:
    body = await _body(request, ("keys", "all"))
    keys = _typed(body, "keys", list, "a list of keys (JSON arrays)")
    everything = _typed(body, "all", bool, "true or false")
    if (keys is None) == (not everything):
        raise InvalidArgument('give either "keys" (a list of keys) or "all": true')
    return request.path_params["queue"], _database(request), keys


def _keys(database: Any, name: str, keys: list[Any] | None) -> list[tuple[Any, ...]] | None:
    if keys is None:
        return None
    table = database.queue(name)
    return [services.whole_key(table, key, f"keys[{index}]") for index, key in enumerate(keys)]


async def replay_dead_letters(request: Request) -> Response:
    name, database, keys = await _dead_letter_selection(request)

    def write() -> int:
        return services.replay_dead_letters(database, name, _keys(database, name, keys))

    return _ok({"replayed": await run_in_threadpool(write)})


async def purge_dead_letters(request: Request) -> Response:
    name, database, keys = await _dead_letter_selection(request)

    def write() -> int:
        return services.purge_dead_letters(database, name, _keys(database, name, keys))

    return _ok({"purged": await run_in_threadpool(write)})


async def list_workers(request: Request) -> Response:
    found = await run_in_threadpool(services.workers, _database(request))
    return _ok({"workers": [worker_json(worker) for worker in found]})


async def get_throughput(request: Request) -> Response:
    minutes = _query_int(request, "minutes", 60, 24 * 60)
    queue = request.query_params.get("queue") or None
    series = await run_in_threadpool(
        lambda: services.throughput(
            _database(request), since=timedelta(minutes=minutes), queue=queue
        )
    )
    return _ok(throughput_json(series))


# ---- event layer -----------------------------------------------------------------------------


def _duration(body: dict[str, Any], name: str) -> timedelta | None:
    value = _typed(body, name, (int, float), "a number of seconds")
    return services.seconds(value, name)


async def list_buses(request: Request) -> Response:
    found = await run_in_threadpool(services.buses, _events(request))
    return _ok({"buses": [bus_json(bus) for bus in found]})


async def create_bus(request: Request) -> Response:
    body = await _body(request, ("name", "archive", "retention"))
    name = _required(body, "name")
    archive = _typed(body, "archive", bool, "true or false")
    kwargs: dict[str, Any] = {"archive": True if archive is None else archive}
    if "retention" in body:
        kwargs["retention"] = _duration(body, "retention")
    bus = await run_in_threadpool(lambda: _events(request).create_bus(name, **kwargs))
    return _ok(bus_json(bus), 201)


async def get_bus(request: Request) -> Response:
    name = request.path_params["bus"]
    return _ok(bus_json(await run_in_threadpool(_events(request).get_bus, name)))


async def update_bus(request: Request) -> Response:
    body = await _body(request, ("archive", "retention"))
    kwargs: dict[str, Any] = {"archive": _typed(body, "archive", bool, "true or false")}
    if "retention" in body:
        kwargs["retention"] = _duration(body, "retention")
    name = request.path_params["bus"]
    bus = await run_in_threadpool(lambda: _events(request).update_bus(name, **kwargs))
    return _ok(bus_json(bus))


async def delete_bus(request: Request) -> Response:
    await run_in_threadpool(_events(request).delete_bus, request.path_params["bus"])
    return Response(status_code=204)


PIPELINE_FIELDS = (
    "destination",
    "max_attempts",
    "min_retry_delay",
    "max_retry_delay",
    "input_payload_format",
    "json_schema",
    "signing_secret",
    "allow_private",
)


def _pipeline_options(body: dict[str, Any]) -> dict[str, Any]:
    """The optional pipeline fields present in ``body``, typed (absent ones left out)."""
    options: dict[str, Any] = {}
    if "input_payload_format" in body:
        options["input_payload_format"] = _typed(
            body, "input_payload_format", str, "a string or null"
        )
    if "json_schema" in body:
        options["json_schema"] = _typed(body, "json_schema", dict, "a JSON Schema object or null")
    if "signing_secret" in body:
        options["signing_secret"] = _typed(body, "signing_secret", str, "a string or null")
    if body.get("allow_private") is not None:
        options["allow_private"] = _typed(body, "allow_private", bool, "true or false")
    return options


async def list_pipelines(request: Request) -> Response:
    found = await run_in_threadpool(services.pipelines, _events(request))
    return _ok({"pipelines": [pipeline_json(row) for row in found]})


async def create_pipeline(request: Request) -> Response:
    from txqueue.core.retry import RetryPolicy

    body = await _body(request, ("name", *PIPELINE_FIELDS))
    name = _required(body, "name")
    destination = _required(body, "destination")
    retry: dict[str, Any] = {}
    attempts = _typed(body, "max_attempts", int, "an integer")
    if attempts is not None:
        retry["max_attempts"] = attempts
    for delay in ("min_retry_delay", "max_retry_delay"):
        value = _duration(body, delay)
        if value is not None:
            retry[delay] = value
    options = _pipeline_options(body)

    def write() -> services.PipelineRow:
        policy = RetryPolicy(**retry)
        created = _events(request).create_pipeline(name, destination, retry=policy, **options)
        return services.pipeline_row(created)

    return _ok(pipeline_json(await run_in_threadpool(write)), 201)


async def get_pipeline(request: Request) -> Response:
    name = request.path_params["pipeline"]
    found = await run_in_threadpool(_events(request).get_pipeline, name)
    return _ok(pipeline_json(services.pipeline_row(found)))


async def update_pipeline(request: Request) -> Response:
    body = await _body(request, PIPELINE_FIELDS)
    name = request.path_params["pipeline"]
    destination = _typed(body, "destination", str, "a string")
    attempts = _typed(body, "max_attempts", int, "an integer")
    delays = {delay: _duration(body, delay) for delay in ("min_retry_delay", "max_retry_delay")}
    options = _pipeline_options(body)

    def write() -> services.PipelineRow:
        changed = _events(request).update_pipeline(
            name, destination=destination, max_attempts=attempts, **delays, **options
        )
        return services.pipeline_row(changed)

    return _ok(pipeline_json(await run_in_threadpool(write)))


async def delete_pipeline(request: Request) -> Response:
    await run_in_threadpool(_events(request).delete_pipeline, request.path_params["pipeline"])
    return Response(status_code=204)


async def list_enrollments(request: Request) -> Response:
    bus = request.query_params.get("bus") or None
    found = await run_in_threadpool(services.enrollments, _events(request), bus)
    return _ok({"enrollments": [enrollment_json(item) for item in found]})


async def create_enrollment(request: Request) -> Response:
    body = await _body(request, ("name", "bus", "pipeline", "cel_match"))
    name, bus = _required(body, "name"), _required(body, "bus")
    pipeline, cel_match = _required(body, "pipeline"), _required(body, "cel_match")
    created = await run_in_threadpool(
        lambda: _events(request).create_enrollment(
            name, bus=bus, pipeline=pipeline, cel_match=cel_match
        )
    )
    return _ok(enrollment_json(created), 201)


async def get_enrollment(request: Request) -> Response:
    name = request.path_params["enrollment"]
    return _ok(enrollment_json(await run_in_threadpool(_events(request).get_enrollment, name)))


async def update_enrollment(request: Request) -> Response:
    body = await _body(request, ("pipeline", "cel_match"))
    pipeline = _typed(body, "pipeline", str, "a string")
    cel_match = _typed(body, "cel_match", str, "a string")
    name = request.path_params["enrollment"]
    changed = await run_in_threadpool(
        lambda: _events(request).update_enrollment(name, cel_match=cel_match, pipeline=pipeline)
    )
    return _ok(enrollment_json(changed))


async def delete_enrollment(request: Request) -> Response:
    await run_in_threadpool(_events(request).delete_enrollment, request.path_params["enrollment"])
    return Response(status_code=204)


async def list_undelivered(request: Request) -> Response:
    bus = request.query_params.get("bus") or None
    pipeline = request.query_params.get("pipeline")
    limit = _query_int(request, "limit", services.MAX_PAGE_SIZE, services.MAX_PAGE_SIZE)
    rows = await run_in_threadpool(
        lambda: services.undelivered(_events(request), bus=bus, pipeline=pipeline, limit=limit)
    )
    return _ok({"undelivered": [undelivered_json(row) for row in rows]})


async def replay_undelivered(request: Request) -> Response:
    body = await _body(request, ("message_uids", "all", "bus", "pipeline"))
    uids = _typed(body, "message_uids", list, "a list of message_uids")
    everything = _typed(body, "all", bool, "true or false")
    if (uids is None) == (not everything):
        raise InvalidArgument('give either "message_uids" (a list) or "all": true')
    bus = _typed(body, "bus", str, "a string")
    pipeline = _typed(body, "pipeline", str, "a string")
    replayed = await run_in_threadpool(
        lambda: services.replay_undelivered(_events(request), uids, bus=bus, pipeline=pipeline)
    )
    return _ok({"replayed": replayed})


async def list_attempts(request: Request) -> Response:
    uid = request.path_params["message_uid"]
    pipeline = request.query_params.get("pipeline") or None
    found = await run_in_threadpool(lambda: _events(request).attempts(uid, pipeline=pipeline))
    return _ok({"attempts": [attempt_json(item) for item in found]})


async def publish(request: Request) -> Response:
    """A CloudEvent in structured (``application/cloudevents+json``) or binary mode."""
    from cloudevents.core.bindings.http import HTTPMessage, from_http_event
    from cloudevents.core.exceptions import BaseCloudEventException

    bus = request.path_params["bus"]
    body = await request.body()
    headers = {name.lower(): value for name, value in request.headers.items()}
    binary = any(name.startswith("ce-") for name in headers)
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if not binary and content_type != "application/cloudevents+json":
        raise InvalidArgument(
            "the body must be a CloudEvent: structured mode with Content-Type "
            "application/cloudevents+json, or binary mode with ce-* headers"
        )
    try:
        event = from_http_event(HTTPMessage(headers=headers, body=body))
    except (BaseCloudEventException, ValueError, TypeError, KeyError, AttributeError) as error:
        raise InvalidArgument(f"not a valid CloudEvent: {error}") from error
    uid = await run_in_threadpool(_events(request).publish, bus, event)
    return _ok({"message_uid": uid}, 201)


async def openapi_document(request: Request) -> Response:
    from txqueue.web.openapi import document
    from txqueue.web.security import base_path

    return _ok(document(ENDPOINTS, base_path(request.scope)))


Q = "/queues/{queue}"
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/queues", list_queues, "Every queue with its counts", "QueueList", errors=()),
    Endpoint("GET", Q, get_queue, "One queue's counts", "Queue"),
    Endpoint(
        "GET",
        f"{Q}/messages",
        list_messages,
        "A page of a queue's messages in key order",
        "MessagePage",
        query=("state", "prefix", "after", "limit"),
    ),
    Endpoint("GET", f"{Q}/message", get_message, "One message", "Message", query=("key",)),
    Endpoint(
        "GET",
        f"{Q}/dead-letters",
        list_dead_letters,
        "A queue's dead letters, oldest failure first",
        "DeadLetterList",
        query=("limit",),
    ),
    Endpoint(
        "POST",
        f"{Q}/dead-letters/replay",
        replay_dead_letters,
        "Send dead letters (keys, or all) back to their queue",
        "Replayed",
        "KeySelection",
    ),
    Endpoint(
        "POST",
        f"{Q}/dead-letters/purge",
        purge_dead_letters,
        "Delete dead letters (keys, or all) for good",
        "Purged",
        "KeySelection",
    ),
    Endpoint("GET", "/workers", list_workers, "Live workers", "WorkerList", errors=()),
    Endpoint(
        "GET",
        "/throughput",
        get_throughput,
        "Messages handled per minute",
        "Throughput",
        query=("queue", "minutes"),
        errors=(400,),
    ),
    Endpoint("GET", "/buses", list_buses, "Every bus", "BusList", errors=()),
    Endpoint("POST", "/buses", create_bus, "Create a bus", "Bus", "BusCreate", (), 201, (400, 409)),
    Endpoint("GET", "/buses/{bus}", get_bus, "One bus", "Bus"),
    Endpoint("PATCH", "/buses/{bus}", update_bus, "Change a bus", "Bus", "BusUpdate"),
    Endpoint(
        "DELETE", "/buses/{bus}", delete_bus, "Delete a bus", "Empty", None, (), 204, (404, 412)
    ),
    Endpoint(
        "POST",
        "/buses/{bus}/events",
        publish,
        "Publish a CloudEvent (structured or binary mode)",
        "Published",
        "CloudEvent",
        (),
        201,
    ),
    Endpoint("GET", "/pipelines", list_pipelines, "Every pipeline", "PipelineList", errors=()),
    Endpoint(
        "POST",
        "/pipelines",
        create_pipeline,
        "Create a pipeline",
        "Pipeline",
        "PipelineCreate",
        (),
        201,
        (400, 404, 409),
    ),
    Endpoint("GET", "/pipelines/{pipeline}", get_pipeline, "One pipeline", "Pipeline"),
    Endpoint(
        "PATCH",
        "/pipelines/{pipeline}",
        update_pipeline,
        "Change a pipeline",
        "Pipeline",
        "PipelineUpdate",
    ),
    Endpoint(
        "DELETE",
        "/pipelines/{pipeline}",
        delete_pipeline,
        "Delete a pipeline",
        "Empty",
        None,
        (),
        204,
        (404, 412),
    ),
    Endpoint(
        "GET",
        "/enrollments",
        list_enrollments,
        "Every enrollment (of a bus)",
        "EnrollmentList",
        query=("bus",),
        errors=(),
    ),
    Endpoint(
        "POST",
        "/enrollments",
        create_enrollment,
        "Create an enrollment",
        "Enrollment",
        "EnrollmentCreate",
        (),
        201,
        (400, 404, 409),
    ),
    Endpoint("GET", "/enrollments/{enrollment}", get_enrollment, "One enrollment", "Enrollment"),
    Endpoint(
        "PATCH",
        "/enrollments/{enrollment}",
        update_enrollment,
        "Change an enrollment",
        "Enrollment",
        "EnrollmentUpdate",
    ),
    Endpoint(
        "DELETE",
        "/enrollments/{enrollment}",
        delete_enrollment,
        "Delete an enrollment",
        "Empty",
        None,
        (),
        204,
        (404,),
    ),
    Endpoint(
        "GET",
        "/undelivered",
        list_undelivered,
        "Messages whose delivery failed for good, with their attempts",
        "UndeliveredList",
        query=("bus", "pipeline", "limit"),
        errors=(400,),
    ),
    Endpoint(
        "POST",
        "/undelivered/replay",
        replay_undelivered,
        "Republish undelivered messages (message_uids, or all)",
        "ReplayedUids",
        "UndeliveredSelection",
        errors=(400,),
    ),
    Endpoint(
        "GET",
        "/messages/{message_uid}/attempts",
        list_attempts,
        "The attempt log of one published message",
        "AttemptList",
        query=("pipeline",),
        errors=(),
    ),
    Endpoint(
        "GET", "/openapi.json", openapi_document, "This document", "OpenAPI", None, (), 200, ()
    ),
)


def routes() -> list[BaseRoute]:
    """The API's routes, relative to ``/api/v1`` (one Route per path, its methods together)."""
    by_path: dict[str, dict[str, Handler]] = {}
    for endpoint in ENDPOINTS:
        by_path.setdefault(endpoint.path, {})[endpoint.method] = endpoint.handler
    return [
        Route(path, _dispatch(methods), methods=list(methods)) for path, methods in by_path.items()
    ]


def _dispatch(methods: dict[str, Handler]) -> Handler:
    if len(methods) == 1:
        return next(iter(methods.values()))

    async def dispatch(request: Request) -> Response:
        return await methods[request.method if request.method != "HEAD" else "GET"](request)

    return dispatch
