"""The HTTP API under ``/api/v1`` (JSON), and its OpenAPI document.

Keys are JSON arrays in primary-key order, payloads ``{"encoding": "json"|"text"|"base64",
"value": ...}``, timestamps RFC 3339 in UTC, durations seconds. Lists page by key: ``after``
(the last key of the previous page, as JSON) and ``limit``; the answer's ``next_after`` is
null on the last page. Every input goes through the same library calls as the pages, and
txqueue's errors become ``{"error": {"code": "<ErrorClassName>", "message": "..."}}`` with
the status of `STATUS_OF`.
"""

from __future__ import annotations

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
from txqueue.web.api_events import (
    create_bus,
    create_enrollment,
    create_pipeline,
    delete_bus,
    delete_enrollment,
    delete_pipeline,
    get_bus,
    get_enrollment,
    get_pipeline,
    list_attempts,
    list_buses,
    list_enrollments,
    list_pipelines,
    list_undelivered,
    list_unmatched,
    publish,
    replay_undelivered,
    update_bus,
    update_enrollment,
    update_pipeline,
)
from txqueue.web.api_messages import delete_messages, make_ready, send_message
from txqueue.web.api_support import (
    database_of,
    json_body,
    ok,
    query_int,
    query_json,
    query_name,
    queue_name,
    typed,
)
from txqueue.web.encoding import (
    dead_letter_json,
    message_json,
    queue_json,
    throughput_json,
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


# ---- queues and messages ---------------------------------------------------------------------


async def list_queues(request: Request) -> Response:
    rows = await run_in_threadpool(services.overview, database_of(request))
    return ok({"queues": [queue_json(row) for row in rows]})


async def get_queue(request: Request) -> Response:
    name = request.path_params["queue"]

    def read() -> Any:
        database = database_of(request)
        database.queue(name)
        return next(row for row in services.overview(database) if row.name == name)

    return ok(queue_json(await run_in_threadpool(read)))


async def pause_queue(request: Request) -> Response:
    return await _set_paused(request, paused=True)


async def resume_queue(request: Request) -> Response:
    return await _set_paused(request, paused=False)


async def _set_paused(request: Request, paused: bool) -> Response:
    """Pause or resume the queue (idempotent); the answer is the queue, as GET gives it."""
    name = request.path_params["queue"]
    database = database_of(request)

    def write() -> Any:
        (database.pause_queue if paused else database.resume_queue)(name)
        return database.queue_info(name, estimate=True)  # as the overview reads it

    return ok(queue_json(await run_in_threadpool(write)))


async def list_messages(request: Request) -> Response:
    name = request.path_params["queue"]
    database = database_of(request)
    limit = query_int(request, "limit", services.DEFAULT_PAGE_SIZE, services.MAX_PAGE_SIZE)
    state = request.query_params.get("state")
    if state is not None and state not in services.MESSAGE_STATES:
        raise InvalidArgument(
            f"state must be one of {', '.join(services.MESSAGE_STATES)}, got {state!r}"
        )
    after_json = query_json(request, "after")
    prefix_text = request.query_params.get("prefix")

    def read() -> services.MessagePage:
        table = database.queue(name)
        after = None if after_json is None else services.whole_key(table, after_json, "after")
        prefix = services.parse_prefix(table, prefix_text)
        return services.queue_page(database, name, prefix, state, after, limit)

    page = await run_in_threadpool(read)
    return ok(
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
    database = database_of(request)
    key_json = query_json(request, "key")
    if key_json is None:
        raise InvalidArgument("key is required: the message's key as a JSON array")

    def read() -> dict[str, Any]:
        table = database.queue(name)
        key = services.whole_key(table, key_json)
        return message_json(table, services.message(database, name, key))

    return ok(await run_in_threadpool(read))


async def list_dead_letters(request: Request) -> Response:
    name = request.path_params["queue"]
    database = database_of(request)
    limit = query_int(request, "limit", services.MAX_PAGE_SIZE, services.MAX_PAGE_SIZE)

    def read() -> list[dict[str, Any]]:
        table = database.queue(name)
        return [
            dead_letter_json(table, letter)
            for letter in services.dead_letters(database, name, limit)
        ]

    return ok({"dead_letters": await run_in_threadpool(read)})


async def _dead_letter_selection(request: Request) -> tuple[str, Any, Any]:
    body = await json_body(request, ("keys", "all"))
    keys = typed(body, "keys", list, "a list of keys (JSON arrays)")
    everything = typed(body, "all", bool, "true or false")
    if (keys is None) == (not everything):
        raise InvalidArgument('give either "keys" (a list of keys) or "all": true, not both')
    return request.path_params["queue"], database_of(request), keys


def _keys(database: Any, name: str, keys: list[Any] | None) -> list[tuple[Any, ...]] | None:
    if keys is None:
        return None
    table = database.queue(name)
    return [services.whole_key(table, key, f"keys[{index}]") for index, key in enumerate(keys)]


async def replay_dead_letters(request: Request) -> Response:
    name, database, keys = await _dead_letter_selection(request)

    def write() -> int:
        return services.replay_dead_letters(database, name, _keys(database, name, keys))

    return ok({"replayed": await run_in_threadpool(write)})


async def purge_dead_letters(request: Request) -> Response:
    name, database, keys = await _dead_letter_selection(request)

    def write() -> int:
        return services.purge_dead_letters(database, name, _keys(database, name, keys))

    return ok({"purged": await run_in_threadpool(write)})


async def list_workers(request: Request) -> Response:
    found = await run_in_threadpool(services.workers, database_of(request))
    return ok({"workers": [worker_json(worker) for worker in found]})


async def get_throughput(request: Request) -> Response:
    minutes = query_int(request, "minutes", 60, 24 * 60)
    queue = query_name(request, "queue", queue_name)
    series = await run_in_threadpool(
        lambda: services.throughput(
            database_of(request), since=timedelta(minutes=minutes), queue=queue
        )
    )
    return ok(throughput_json(series))


async def openapi_document(request: Request) -> Response:
    from txqueue.web.api_support import private_switch
    from txqueue.web.openapi import document
    from txqueue.web.security import base_path

    switch = private_switch(request)
    return ok(document(ENDPOINTS, base_path(request.scope), allow_private=switch))


Q = "/queues/{queue}"
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/queues", list_queues, "Every queue with its counts", "QueueList", errors=()),
    Endpoint("GET", Q, get_queue, "One queue's counts", "Queue"),
    Endpoint(
        "POST",
        f"{Q}/pause",
        pause_queue,
        "Pause a queue: it takes sends, and nothing leases from it until resumed",
        "Queue",
    ),
    Endpoint("POST", f"{Q}/resume", resume_queue, "Resume a paused queue", "Queue"),
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
        "POST",
        f"{Q}/messages",
        send_message,
        "Send a message",
        "Message",
        "MessageSend",
        (),
        201,
        (400, 404, 409),
    ),
    Endpoint(
        "POST",
        f"{Q}/messages/delete",
        delete_messages,
        "Delete (cancel) messages by key, all or none; a leased one only with force",
        "Deleted",
        "MessageSelection",
        errors=(400, 404, 412),
    ),
    Endpoint(
        "POST",
        f"{Q}/messages/ready",
        make_ready,
        "Make messages ready now (or at deliver_time), all or none; a leased one only with force",
        "MadeReady",
        "ReadySelection",
        errors=(400, 404, 412),
    ),
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
    Endpoint(
        "GET", "/workers", list_workers, "Live workers and dispatchers", "WorkerList", errors=()
    ),
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
        "GET",
        "/unmatched",
        list_unmatched,
        "Messages that no enrollment matched when published (not failures)",
        "UnmatchedList",
        query=("bus", "limit"),
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
        query=("attempt_pipeline",),
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
