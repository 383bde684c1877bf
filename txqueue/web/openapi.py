"""The OpenAPI 3.1 document of the HTTP API, assembled from its table of endpoints."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import txqueue

if TYPE_CHECKING:
    from txqueue.web.api import Endpoint

__all__ = ["PARAMETERS", "SCHEMAS", "document"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(
    properties: dict[str, Any], required: Iterable[str] = (), *, closed: bool = True
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


def _list_of(field: str, item: str) -> dict[str, Any]:
    return _object({field: {"type": "array", "items": _ref(item)}}, [field])


STRING: dict[str, Any] = {"type": "string"}
TIME: dict[str, Any] = {"type": ["string", "null"], "format": "date-time"}
SECONDS: dict[str, Any] = {"type": ["number", "null"], "description": "seconds"}
INTEGER: dict[str, Any] = {"type": "integer"}
KEY: dict[str, Any] = {
    "type": "array",
    "description": "a primary key, its parts in key order (bytes as base64, times RFC 3339)",
    "items": {},
}

SCHEMAS: dict[str, Any] = {
    "Error": _object(
        {"error": _object({"code": STRING, "message": STRING}, ["code", "message"])}, ["error"]
    ),
    "Key": KEY,
    "Payload": _object(
        {"encoding": {"enum": ["json", "text", "base64"]}, "value": {}}, ["encoding", "value"]
    ),
    "Queue": _object(
        {
            "name": STRING,
            "ready": INTEGER,
            "leased": INTEGER,
            "scheduled": INTEGER,
            "dead_letters": INTEGER,
            "oldest_ready_age_seconds": SECONDS,
            "estimated": {"type": "boolean", "description": "counts from planner statistics"},
        },
        ["name", "ready", "leased", "scheduled", "dead_letters", "estimated"],
    ),
    "QueueList": _list_of("queues", "Queue"),
    "Message": _object(
        {
            "queue": STRING,
            "key": _ref("Key"),
            "payload": _ref("Payload"),
            "deliver_time": TIME,
            "state": {"enum": ["ready", "leased", "scheduled"]},
            "lease_expiration": TIME,
            "delivery_count": INTEGER,
            "last_error": {"type": ["string", "null"]},
        },
        ["queue", "key", "payload", "deliver_time", "state", "delivery_count"],
    ),
    "MessagePage": _object(
        {
            "messages": {"type": "array", "items": _ref("Message")},
            "next_after": {"anyOf": [_ref("Key"), {"type": "null"}]},
        },
        ["messages", "next_after"],
    ),
    "DeadLetter": _object(
        {
            "queue": STRING,
            "key": _ref("Key"),
            "payload": _ref("Payload"),
            "attempts": INTEGER,
            "last_error": STRING,
            "first_failure": TIME,
            "last_failure": TIME,
        },
        ["queue", "key", "payload", "attempts", "last_error"],
    ),
    "DeadLetterList": _list_of("dead_letters", "DeadLetter"),
    "KeySelection": _object(
        {"keys": {"type": "array", "items": _ref("Key")}, "all": {"type": "boolean"}}
    ),
    "Replayed": _object({"replayed": INTEGER}, ["replayed"]),
    "Purged": _object({"purged": INTEGER}, ["purged"]),
    "Worker": _object(
        {
            "id": STRING,
            "host": STRING,
            "pid": INTEGER,
            "queues": {"type": "array", "items": STRING},
            "concurrency": INTEGER,
            "in_flight": INTEGER,
            "started": TIME,
            "last_seen": TIME,
        },
        ["id", "host", "pid", "queues", "concurrency", "in_flight", "started", "last_seen"],
    ),
    "WorkerList": _list_of("workers", "Worker"),
    "Throughput": _object(
        {
            "minutes": {"type": "array", "items": {"type": "string", "format": "date-time"}},
            "handled": {"type": "array", "items": INTEGER},
            "failed": {"type": "array", "items": INTEGER},
            "dead_lettered": {"type": "array", "items": INTEGER},
        },
        ["minutes", "handled", "failed", "dead_lettered"],
    ),
    "Bus": _object(
        {
            "name": STRING,
            "archive": {"type": "boolean"},
            "retention": SECONDS,
            "create_time": TIME,
            "update_time": TIME,
        },
        ["name", "archive", "retention"],
    ),
    "BusList": _list_of("buses", "Bus"),
    "BusCreate": _object(
        {"name": STRING, "archive": {"type": "boolean"}, "retention": SECONDS}, ["name"]
    ),
    "BusUpdate": _object({"archive": {"type": "boolean"}, "retention": SECONDS}),
    "Pipeline": _object(
        {
            "name": STRING,
            "destination": STRING,
            "max_attempts": INTEGER,
            "min_retry_delay": SECONDS,
            "max_retry_delay": SECONDS,
            "input_payload_format": {"type": ["string", "null"]},
            "has_json_schema": {"type": "boolean"},
            "signing_secret_set": {"type": "boolean"},
            "allow_private": {"type": "boolean"},
            "create_time": TIME,
            "update_time": TIME,
        },
        ["name", "destination", "max_attempts", "min_retry_delay", "max_retry_delay"],
    ),
    "PipelineList": _list_of("pipelines", "Pipeline"),
    "PipelineCreate": _object(
        {
            "name": STRING,
            "destination": {
                "type": "string",
                "description": "an http(s) URL, bus:NAME or queue:NAME",
            },
            "max_attempts": INTEGER,
            "min_retry_delay": SECONDS,
            "max_retry_delay": SECONDS,
            "input_payload_format": {"type": ["string", "null"]},
            "json_schema": {"type": ["object", "null"]},
            "signing_secret": {"type": ["string", "null"]},
            "allow_private": {"type": "boolean"},
        },
        ["name", "destination"],
    ),
    "PipelineUpdate": _object(
        {
            "destination": STRING,
            "max_attempts": INTEGER,
            "min_retry_delay": SECONDS,
            "max_retry_delay": SECONDS,
            "input_payload_format": {"type": ["string", "null"]},
            "json_schema": {"type": ["object", "null"]},
            "signing_secret": {"type": ["string", "null"]},
            "allow_private": {"type": "boolean"},
        }
    ),
    "Enrollment": _object(
        {
            "name": STRING,
            "bus": STRING,
            "pipeline": STRING,
            "cel_match": STRING,
            "create_time": TIME,
            "update_time": TIME,
        },
        ["name", "bus", "pipeline", "cel_match"],
    ),
    "EnrollmentList": _list_of("enrollments", "Enrollment"),
    "EnrollmentCreate": _object(
        {"name": STRING, "bus": STRING, "pipeline": STRING, "cel_match": STRING},
        ["name", "bus", "pipeline", "cel_match"],
    ),
    "EnrollmentUpdate": _object({"pipeline": STRING, "cel_match": STRING}),
    "Attempt": _object(
        {
            "message_uid": STRING,
            "pipeline": STRING,
            "attempt": INTEGER,
            "bus": STRING,
            "time": TIME,
            "state": STRING,
            "outcome": {"type": ["string", "null"]},
            "status": {"type": ["integer", "null"]},
            "error": {"type": ["string", "null"]},
            "latency": SECONDS,
            "retry_delay": SECONDS,
        },
        ["message_uid", "pipeline", "attempt", "bus", "time", "state"],
    ),
    "AttemptList": _list_of("attempts", "Attempt"),
    "Undelivered": _object(
        {
            "message_uid": STRING,
            "bus": STRING,
            "pipeline": {"type": "string", "description": "empty when no enrollment matched"},
            "event": _ref("CloudEvent"),
            "publish_time": TIME,
            "attempt_count": INTEGER,
            "status": {"type": ["integer", "null"]},
            "error": {"type": ["string", "null"]},
            "failure_time": TIME,
            "attempts": {"type": "array", "items": _ref("Attempt")},
        },
        ["message_uid", "bus", "pipeline", "event", "attempt_count", "attempts"],
    ),
    "UndeliveredList": _list_of("undelivered", "Undelivered"),
    "UndeliveredSelection": _object(
        {
            "message_uids": {"type": "array", "items": STRING},
            "all": {"type": "boolean"},
            "bus": STRING,
            "pipeline": STRING,
        }
    ),
    "ReplayedUids": _object(
        {"replayed": {"type": "array", "items": STRING, "description": "the new message_uids"}},
        ["replayed"],
    ),
    "CloudEvent": _object(
        {
            "specversion": {"const": "1.0"},
            "id": STRING,
            "source": STRING,
            "type": STRING,
            "subject": STRING,
            "time": {"type": "string", "format": "date-time"},
            "datacontenttype": STRING,
            "data": {},
            "data_base64": STRING,
        },
        ["specversion", "id", "source", "type"],
        closed=False,
    ),
    "Published": _object({"message_uid": STRING}, ["message_uid"]),
    "Empty": {"type": "null"},
    "OpenAPI": {"type": "object", "description": "an OpenAPI 3.1 document"},
}

PARAMETERS: dict[str, dict[str, Any]] = {
    "state": {"schema": {"enum": ["ready", "leased", "scheduled"]}, "description": "only these"},
    "prefix": {
        "schema": STRING,
        "description": "leading key parts as a JSON array, or text the first (STRING) key "
        "part starts with",
    },
    "after": {
        "schema": STRING,
        "description": "the key (JSON array) after which the page starts: the previous "
        "page's next_after",
    },
    "limit": {"schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
    "key": {"schema": STRING, "description": "the message's key as a JSON array", "required": True},
    "queue": {"schema": STRING},
    "minutes": {"schema": {"type": "integer", "minimum": 1, "maximum": 1440}},
    "bus": {"schema": STRING},
    "pipeline": {"schema": STRING, "description": "empty: messages no enrollment matched"},
}

_REASONS = {
    400: "Invalid argument",
    401: "No or wrong token",
    403: "Refused: read-only, or the CSRF token is missing",
    404: "Not found",
    409: "Already exists, or aborted",
    412: "Failed precondition",
}


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": STRING}
        for name in re.findall(r"{(\w+)}", endpoint.path)
    ]
    for name in endpoint.query:
        described = dict(PARAMETERS[name])
        required = bool(described.pop("required", False))
        parameters.append({"name": name, "in": "query", "required": required, **described})
    success: dict[str, Any] = {"description": endpoint.summary}
    if endpoint.status != 204:
        success["content"] = {"application/json": {"schema": _ref(endpoint.response)}}
    responses: dict[str, Any] = {str(endpoint.status): success}
    problems = set(endpoint.errors) | {401}
    if endpoint.method != "GET":
        problems.add(403)
    for status in sorted(problems):
        responses[str(status)] = {
            "description": _REASONS[status],
            "content": {"application/json": {"schema": _ref("Error")}},
        }
    operation: dict[str, Any] = {
        "operationId": endpoint.handler.__name__,
        "summary": endpoint.summary,
        "responses": responses,
    }
    if parameters:
        operation["parameters"] = parameters
    if endpoint.request == "CloudEvent":
        operation["requestBody"] = {
            "required": True,
            "description": "structured mode (this JSON), or binary mode: ce-* headers and the "
            "data as the body",
            "content": {
                "application/cloudevents+json": {"schema": _ref("CloudEvent")},
                "*/*": {"schema": {}},
            },
        }
    elif endpoint.request is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(endpoint.request)}},
        }
    return operation


def document(endpoints: Iterable[Endpoint], base_path: str = "") -> dict[str, Any]:
    """The OpenAPI 3.1 document listing every endpoint, served under ``base_path``."""
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "txqueue dashboard API",
            "version": txqueue.__version__,
            "description": "Queues, dead letters, workers and the event layer of one database.",
        },
        "servers": [{"url": f"{base_path}/api/v1"}],
        "security": [{"bearer": []}, {}],
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": paths,
    }
