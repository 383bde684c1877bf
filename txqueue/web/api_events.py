"""The API's event-layer handlers: buses, pipelines, enrollments, undelivered messages and
their replay, attempt logs, and publishing a CloudEvent."""

from __future__ import annotations

import contextlib
import re
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
    pipeline_filter,
    private_switch,
    query_int,
    query_name,
    required,
    resource_name,
    seconds_field,
    typed,
)
from txqueue.web.encoding import (
    attempt_json,
    bus_json,
    enrollment_json,
    pipeline_json,
    undelivered_json,
    unmatched_json,
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
    """The optional pipeline fields present in ``body``, typed (absent ones left out;
    ``allow_private`` is left to `services.private_choice`)."""
    options: dict[str, Any] = {}
    if "input_payload_format" in body:
        options["input_payload_format"] = typed(
            body, "input_payload_format", str, '"json" or null', nullable=True
        )
    if "json_schema" in body:
        options["json_schema"] = typed(
            body, "json_schema", dict, "a JSON Schema object or null", nullable=True
        )
    if "signing_secret" in body:
        options["signing_secret"] = typed(
            body, "signing_secret", str, "a string or null", nullable=True
        )
    return options


async def list_pipelines(request: Request) -> Response:
    found = await run_in_threadpool(services.pipelines, events_of(request))
    return ok({"pipelines": [pipeline_json(row) for row in found]})


def _destination(body: dict[str, Any]) -> str | None:
    """The body's destination, if it has the documented form (`openapi.DESTINATION_PATTERN`)."""
    from txqueue.web.openapi import DESTINATION_PATTERN

    destination: str | None = typed(body, "destination", str, "a string")
    if destination is not None and not re.fullmatch(DESTINATION_PATTERN[1:-1], destination):
        raise InvalidArgument(
            f"destination {destination!r} is invalid: use an http(s) URL (a DNS name or IPv4 "
            "host, printable ASCII), 'bus:NAME' or 'queue:NAME'"
        )
    return destination


async def create_pipeline(request: Request) -> Response:
    from txqueue.core.retry import RetryPolicy

    body = await json_body(request, ("name", *PIPELINE_FIELDS))
    name = required(body, "name")
    destination = required(body, "destination")
    _destination(body)
    retry: dict[str, Any] = {}
    attempts = typed(body, "max_attempts", int, "an integer")
    if attempts is not None:
        retry["max_attempts"] = attempts
    for delay in ("min_retry_delay", "max_retry_delay"):
        value = seconds_field(body, delay)
        if value is not None:
            retry[delay] = value
    options = _pipeline_options(body)
    requested = typed(body, "allow_private", bool, "true or false")
    private = services.private_choice(
        events_of(request), None, destination, requested, private_switch(request)
    )

    def write() -> services.PipelineRow:
        policy = RetryPolicy(**retry)
        created = events_of(request).create_pipeline(
            name, destination, retry=policy, allow_private=bool(private), **options
        )
        return services.pipeline_row(created)

    return ok(pipeline_json(await run_in_threadpool(write)), 201)


async def get_pipeline(request: Request) -> Response:
    name = request.path_params["pipeline"]
    found = await run_in_threadpool(events_of(request).get_pipeline, name)
    return ok(pipeline_json(services.pipeline_row(found)))


async def update_pipeline(request: Request) -> Response:
    body = await json_body(request, PIPELINE_FIELDS)
    name = request.path_params["pipeline"]
    destination = _destination(body)
    attempts = typed(body, "max_attempts", int, "an integer")
    delays = {delay: seconds_field(body, delay) for delay in ("min_retry_delay", "max_retry_delay")}
    options = _pipeline_options(body)
    requested = typed(body, "allow_private", bool, "true or false")
    switch = private_switch(request)

    def write() -> services.PipelineRow:
        events = events_of(request)
        private = services.private_choice(events, name, destination, requested, switch)
        changed = events.update_pipeline(
            name,
            destination=destination,
            max_attempts=attempts,
            allow_private=private,
            **delays,
            **options,
        )
        return services.pipeline_row(changed)

    return ok(pipeline_json(await run_in_threadpool(write)))


async def delete_pipeline(request: Request) -> Response:
    await run_in_threadpool(events_of(request).delete_pipeline, request.path_params["pipeline"])
    return Response(status_code=204)


async def list_enrollments(request: Request) -> Response:
    bus = query_name(request, "bus", resource_name("bus"))
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
    bus = query_name(request, "bus", resource_name("bus"))
    pipeline = query_name(request, "pipeline", pipeline_filter)
    limit = query_int(request, "limit", services.MAX_PAGE_SIZE, services.MAX_PAGE_SIZE)
    rows = await run_in_threadpool(
        lambda: services.undelivered(events_of(request), bus=bus, pipeline=pipeline, limit=limit)
    )
    return ok({"undelivered": [undelivered_json(row) for row in rows]})


async def list_unmatched(request: Request) -> Response:
    bus = query_name(request, "bus", resource_name("bus"))
    limit = query_int(request, "limit", services.MAX_PAGE_SIZE, services.MAX_PAGE_SIZE)
    found = await run_in_threadpool(
        lambda: services.unmatched(events_of(request), bus=bus, limit=limit)
    )
    return ok({"unmatched": [unmatched_json(item) for item in found]})


async def replay_undelivered(request: Request) -> Response:
    body = await json_body(request, ("message_uids", "all", "bus", "pipeline"))
    uids = typed(body, "message_uids", list, "a list of message_uids")
    everything = typed(body, "all", bool, "true or false")
    if (uids is None) == (not everything):
        raise InvalidArgument('give either "message_uids" (a list) or "all": true, not both')
    bus = typed(body, "bus", str, "a string")
    if bus is not None:
        resource_name("bus")(bus)
    pipeline = typed(body, "pipeline", str, "a string")
    if pipeline is not None:
        pipeline_filter(pipeline)
    replayed = await run_in_threadpool(
        lambda: services.replay_undelivered(events_of(request), uids, bus=bus, pipeline=pipeline)
    )
    return ok({"replayed": replayed})


async def list_attempts(request: Request) -> Response:
    uid = request.path_params["message_uid"]
    pipeline = query_name(request, "pipeline", resource_name("pipeline"))
    found = await run_in_threadpool(lambda: events_of(request).attempts(uid, pipeline=pipeline))
    return ok({"attempts": [attempt_json(item) for item in found]})


def _integral(name: str, value: Any) -> Any:
    """An attribute's value, 3.0 read as 3: JSON has one number type, and JSON Schema (the
    document) counts 3.0 an integer."""
    if name not in ("data", "data_base64") and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: The attributes every published CloudEvent must carry.
REQUIRED_ATTRIBUTES = ("specversion", "id", "source", "type")


async def publish(request: Request) -> Response:
    """A CloudEvent in structured (``application/cloudevents+json``) or binary mode.

    Structured mode is read by txqueue's own JSON form (`txqueue.Events.publish` takes the
    object as it is: any JSON data, null attributes absent); binary mode by the SDK."""
    from cloudevents.core.bindings.http import HTTPMessage, from_http_event
    from cloudevents.core.exceptions import BaseCloudEventException
    from cloudevents.core.formats.json import JSONFormat

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
    event: Any
    if not binary:
        try:
            event = services.load_json(body, "the structured CloudEvent")
        except ValueError as error:
            raise InvalidArgument(f"the structured CloudEvent is not JSON: {error}") from error
        if not isinstance(event, dict):
            raise InvalidArgument(
                f"the structured CloudEvent must be a JSON object, got {type(event).__name__}"
            )
        missing = [name for name in REQUIRED_ATTRIBUTES if event.get(name) is None]
        event = {name: _integral(name, value) for name, value in event.items()}
    else:
        missing = [f"ce-{name}" for name in REQUIRED_ATTRIBUTES if f"ce-{name}" not in headers]
    if missing:  # the SDK would make up an id: a client must give every required attribute
        raise InvalidArgument(f"the CloudEvent lacks the required attribute {missing[0]}")
    if binary:
        if re.match(JSONFormat.JSON_CONTENT_TYPE_PATTERN, content_type or "application/json"):
            with contextlib.suppress(ValueError):  # data that is not JSON: text or bytes
                services.load_json(body, "the event's data")
        try:
            event = from_http_event(HTTPMessage(headers=headers, body=body))
        except (BaseCloudEventException, ValueError, TypeError, KeyError, AttributeError) as error:
            raise InvalidArgument(f"not a valid CloudEvent: {error}") from error
    uid = await run_in_threadpool(events_of(request).publish, bus, event)
    return ok({"message_uid": uid}, 201)
