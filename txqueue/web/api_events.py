"""The API's event-layer handlers: buses, pipelines, enrollments, undelivered messages and
their replay, attempt logs, and publishing a CloudEvent."""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from txqueue.errors import InvalidArgument
from txqueue.web import services
from txqueue.web.api_support import (
    events_of,
    json_body,
    ok,
    query_int,
    required,
    seconds_field,
    typed,
)
from txqueue.web.encoding import (
    attempt_json,
    bus_json,
    enrollment_json,
    pipeline_json,
    undelivered_json,
)


async def list_buses(request: Request) -> Response:
    found = await run_in_threadpool(services.buses, events_of(request))
    return ok({"buses": [bus_json(bus) for bus in found]})


async def create_bus(request: Request) -> Response:
    body = await json_body(request, ("name", "archive", "retention"))
    name = required(body, "name")
    archive = typed(body, "archive", bool, "true or false")
    kwargs: dict[str, Any] = {"archive": True if archive is None else archive}
    if "retention" in body:
        kwargs["retention"] = seconds_field(body, "retention")
    bus = await run_in_threadpool(lambda: events_of(request).create_bus(name, **kwargs))
    return ok(bus_json(bus), 201)


async def get_bus(request: Request) -> Response:
    name = request.path_params["bus"]
    return ok(bus_json(await run_in_threadpool(events_of(request).get_bus, name)))


async def update_bus(request: Request) -> Response:
    body = await json_body(request, ("archive", "retention"))
    kwargs: dict[str, Any] = {"archive": typed(body, "archive", bool, "true or false")}
    if "retention" in body:
        kwargs["retention"] = seconds_field(body, "retention")
    name = request.path_params["bus"]
    bus = await run_in_threadpool(lambda: events_of(request).update_bus(name, **kwargs))
    return ok(bus_json(bus))


async def delete_bus(request: Request) -> Response:
    await run_in_threadpool(events_of(request).delete_bus, request.path_params["bus"])
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
        options["input_payload_format"] = typed(
            body, "input_payload_format", str, "a string or null"
        )
    if "json_schema" in body:
        options["json_schema"] = typed(body, "json_schema", dict, "a JSON Schema object or null")
    if "signing_secret" in body:
        options["signing_secret"] = typed(body, "signing_secret", str, "a string or null")
    if body.get("allow_private") is not None:
        options["allow_private"] = typed(body, "allow_private", bool, "true or false")
    return options


async def list_pipelines(request: Request) -> Response:
    found = await run_in_threadpool(services.pipelines, events_of(request))
    return ok({"pipelines": [pipeline_json(row) for row in found]})


async def create_pipeline(request: Request) -> Response:
    from txqueue.core.retry import RetryPolicy

    body = await json_body(request, ("name", *PIPELINE_FIELDS))
    name = required(body, "name")
    destination = required(body, "destination")
    retry: dict[str, Any] = {}
    attempts = typed(body, "max_attempts", int, "an integer")
    if attempts is not None:
        retry["max_attempts"] = attempts
    for delay in ("min_retry_delay", "max_retry_delay"):
        value = seconds_field(body, delay)
        if value is not None:
            retry[delay] = value
    options = _pipeline_options(body)

    def write() -> services.PipelineRow:
        policy = RetryPolicy(**retry)
        created = events_of(request).create_pipeline(name, destination, retry=policy, **options)
        return services.pipeline_row(created)

    return ok(pipeline_json(await run_in_threadpool(write)), 201)


async def get_pipeline(request: Request) -> Response:
    name = request.path_params["pipeline"]
    found = await run_in_threadpool(events_of(request).get_pipeline, name)
    return ok(pipeline_json(services.pipeline_row(found)))


async def update_pipeline(request: Request) -> Response:
    body = await json_body(request, PIPELINE_FIELDS)
    name = request.path_params["pipeline"]
    destination = typed(body, "destination", str, "a string")
    attempts = typed(body, "max_attempts", int, "an integer")
    delays = {delay: seconds_field(body, delay) for delay in ("min_retry_delay", "max_retry_delay")}
    options = _pipeline_options(body)

    def write() -> services.PipelineRow:
        changed = events_of(request).update_pipeline(
            name, destination=destination, max_attempts=attempts, **delays, **options
        )
        return services.pipeline_row(changed)

    return ok(pipeline_json(await run_in_threadpool(write)))


async def delete_pipeline(request: Request) -> Response:
    await run_in_threadpool(events_of(request).delete_pipeline, request.path_params["pipeline"])
    return Response(status_code=204)


async def list_enrollments(request: Request) -> Response:
    bus = request.query_params.get("bus") or None
    found = await run_in_threadpool(services.enrollments, events_of(request), bus)
    return ok({"enrollments": [enrollment_json(item) for item in found]})


async def create_enrollment(request: Request) -> Response:
    body = await json_body(request, ("name", "bus", "pipeline", "cel_match"))
    name, bus = required(body, "name"), required(body, "bus")
    pipeline, cel_match = required(body, "pipeline"), required(body, "cel_match")
    created = await run_in_threadpool(
        lambda: events_of(request).create_enrollment(
            name, bus=bus, pipeline=pipeline, cel_match=cel_match
        )
    )
    return ok(enrollment_json(created), 201)


async def get_enrollment(request: Request) -> Response:
    name = request.path_params["enrollment"]
    return ok(enrollment_json(await run_in_threadpool(events_of(request).get_enrollment, name)))


async def update_enrollment(request: Request) -> Response:
    body = await json_body(request, ("pipeline", "cel_match"))
    pipeline = typed(body, "pipeline", str, "a string")
    cel_match = typed(body, "cel_match", str, "a string")
    name = request.path_params["enrollment"]
    changed = await run_in_threadpool(
        lambda: events_of(request).update_enrollment(name, cel_match=cel_match, pipeline=pipeline)
    )
    return ok(enrollment_json(changed))


async def delete_enrollment(request: Request) -> Response:
    await run_in_threadpool(events_of(request).delete_enrollment, request.path_params["enrollment"])
    return Response(status_code=204)


async def list_undelivered(request: Request) -> Response:
    bus = request.query_params.get("bus") or None
    pipeline = request.query_params.get("pipeline")
    limit = query_int(request, "limit", services.MAX_PAGE_SIZE, services.MAX_PAGE_SIZE)
    rows = await run_in_threadpool(
        lambda: services.undelivered(events_of(request), bus=bus, pipeline=pipeline, limit=limit)
    )
    return ok({"undelivered": [undelivered_json(row) for row in rows]})


async def replay_undelivered(request: Request) -> Response:
    body = await json_body(request, ("message_uids", "all", "bus", "pipeline"))
    uids = typed(body, "message_uids", list, "a list of message_uids")
    everything = typed(body, "all", bool, "true or false")
    if (uids is None) == (not everything):
        raise InvalidArgument('give either "message_uids" (a list) or "all": true')
    bus = typed(body, "bus", str, "a string")
    pipeline = typed(body, "pipeline", str, "a string")
    replayed = await run_in_threadpool(
        lambda: services.replay_undelivered(events_of(request), uids, bus=bus, pipeline=pipeline)
    )
    return ok({"replayed": replayed})


async def list_attempts(request: Request) -> Response:
    uid = request.path_params["message_uid"]
    pipeline = request.query_params.get("pipeline") or None
    found = await run_in_threadpool(lambda: events_of(request).attempts(uid, pipeline=pipeline))
    return ok({"attempts": [attempt_json(item) for item in found]})


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
    if not binary:
        try:
            document = json.loads(body)
        except ValueError as error:
            raise InvalidArgument(f"the structured CloudEvent is not JSON: {error}") from error
        if not isinstance(document, dict):
            raise InvalidArgument(
                f"the structured CloudEvent must be a JSON object, got {type(document).__name__}"
            )
    try:
        event = from_http_event(HTTPMessage(headers=headers, body=body))
    except (BaseCloudEventException, ValueError, TypeError, KeyError, AttributeError) as error:
        raise InvalidArgument(f"not a valid CloudEvent: {error}") from error
    uid = await run_in_threadpool(events_of(request).publish, bus, event)
    return ok({"message_uid": uid}, 201)
