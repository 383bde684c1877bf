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
#: a message's failed attempts, oldest first (at most the last ten)
_ERROR_TYPE: dict[str, Any] = {
    "type": ["string", "null"],
    "description": "a failed attempt's: http.<status>, the exception's type, or refused",
}
_TRACEBACK: dict[str, Any] = {
    "type": ["string", "null"],
    "description": "the exception's traceback (its end), when the attempt raised one",
}
_FAILURES: dict[str, Any] = {"type": "array", "items": _ref("Failure")}

#: A time given to the API: RFC 3339 with its zone (null: now).
ZONED_TIME: dict[str, Any] = {
    "type": ["string", "null"],
    "format": "date-time",
    "description": "RFC 3339 with a zone; null or absent: now",
}
#: Act on messages under a live lease too (their worker's ack then fails).
FORCE: dict[str, Any] = {
    "type": "boolean",
    "description": "act on messages under a live lease too (their worker's ack then fails)",
}
#: A queue's name, as `txqueue.core.schema.validate_name` takes it (ASCII: 63 bytes).
QUEUE_NAME: dict[str, Any] = {
    "type": "string",
    "pattern": "^[A-Za-z][A-Za-z0-9_]{0,62}$",
    "not": {"pattern": "^[Tt][Xx][Qq][Uu][Ee][Uu][Ee]_"},
    "description": "a letter, then letters, digits or underscores, at most 63 characters, "
    "not starting with txqueue_",
}
#: A bus, pipeline or enrollment name (Eventarc resource IDs).
RESOURCE_NAME: dict[str, Any] = {
    "type": "string",
    "pattern": "^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$",
    "description": "a lowercase letter, then lowercase letters, digits or hyphens, not ending "
    "with a hyphen, at most 63 characters",
}
#: A pipeline filter: a pipeline's name, or empty for messages no enrollment matched.
PIPELINE_FILTER: dict[str, Any] = {
    "type": "string",
    "pattern": "^([a-z]([a-z0-9-]{0,61}[a-z0-9])?)?$",
    "description": "a pipeline's name; empty: messages no enrollment matched",
}
#: A retry delay: 1 to 600 seconds (null: unchanged, or the default).
DELAY: dict[str, Any] = {
    "type": ["number", "null"],
    "minimum": 1,
    "maximum": 600,
    "description": "seconds, 1 to 600; min_retry_delay may not exceed max_retry_delay "
    "(defaults 1 and 60)",
}
#: How long a bus keeps archived messages: at least 1 µs, at most 36,500 days (null: forever).
RETENTION: dict[str, Any] = {
    "type": ["number", "null"],
    "minimum": 0.000001,
    "maximum": 36_500 * 86_400,
    "description": "seconds; null keeps archived messages until purged by hand",
}
#: Every try of a delivery, the first included: 1 to INT64's largest value.
MAX_ATTEMPTS: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
KEY: dict[str, Any] = {
    "type": "array",
    "description": "a primary key, its parts in key order (bytes as base64, times RFC 3339)",
    "items": {},
}

#: What a pipeline's allow_private means through this API.
ALLOW_PRIVATE: dict[str, Any] = {
    "type": "boolean",
    "description": "deliver to private, loopback and link-local addresses; true only when "
    "the server runs with --allow-private-destinations (else it is refused). A new "
    "destination sent "
    "without allow_private: true is checked, and recorded, as a public one",
}

#: What an enrollment matches: a CEL expression over the event's attributes.
CEL_MATCH: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "description": "a CEL expression over message (the event's attributes) giving a bool; "
    "one that does not compile or is over the limits is refused (400)",
}
_LABEL = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PORT = "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
#: The destinations the API takes (the server checks this very pattern): an http(s) URL
#: with a DNS name or IPv4 host, an optional port and printable ASCII after it; bus:NAME;
#: queue:NAME.
DESTINATION_PATTERN = (
    f"^([Hh][Tt][Tt][Pp][Ss]?://{_LABEL}([.]{_LABEL})*(:{_PORT})?([/?#][!-~]*)?"
    "|bus:[a-z]([a-z0-9-]{0,61}[a-z0-9])?"
    "|queue:[A-Za-z][A-Za-z0-9_]{0,62})$"
)
DESTINATION: dict[str, Any] = {
    "type": "string",
    "pattern": DESTINATION_PATTERN,
    "description": "an http(s) URL (a DNS name or IPv4 host, printable ASCII; the host must "
    "resolve to public addresses unless allow_private), bus:NAME or queue:NAME",
}
NONEMPTY: dict[str, Any] = {"type": "string", "minLength": 1}
#: Text without control characters (C0, DEL, C1), as a CloudEvent attribute holds.
TEXT_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
ATTRIBUTE_TEXT: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": TEXT_PATTERN}
NULLABLE_TEXT: dict[str, Any] = {**ATTRIBUTE_TEXT, "type": ["string", "null"]}
#: A JSON media type (CloudEvents: application/json, text/json, application/x+json ...).
JSON_TYPE = "^(application|text)/([a-zA-Z0-9.-]+[+])?json(;.*)?$"
#: Base64 text (RFC 4648, padded).
BASE64 = "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?$"
#: A Standard Webhooks secret: whsec_ (optional) and a non-empty base64 key.
SIGNING_SECRET: dict[str, Any] = {
    "type": ["string", "null"],
    "pattern": "^(whsec_)?([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)$",
    "description": "whsec_ and a base64 key (Standard Webhooks); null removes it",
}
#: The fields a pipeline is created with and changed by.
PIPELINE_CHANGES: dict[str, Any] = {
    "destination": DESTINATION,
    "max_attempts": MAX_ATTEMPTS,
    "min_retry_delay": DELAY,
    "max_retry_delay": DELAY,
    "input_payload_format": {"enum": ["json", None]},
    "json_schema": {"type": ["object", "null"], "description": "a JSON Schema the data must match"},
    "signing_secret": SIGNING_SECRET,
    "allow_private": ALLOW_PRIVATE,
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
            "paused": {
                "type": "boolean",
                "description": "paused: sends are taken, and nothing leases from the queue",
            },
        },
        ["name", "ready", "leased", "scheduled", "dead_letters", "estimated", "paused"],
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
            "failures": _FAILURES,
        },
        ["queue", "key", "payload", "deliver_time", "state", "delivery_count", "failures"],
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
            "failures": _FAILURES,
        },
        ["queue", "key", "payload", "attempts", "last_error", "failures"],
    ),
    "Failure": _object(
        {
            "attempt": INTEGER,
            "failed_at": TIME,
            "error_type": {
                "type": "string",
                "description": "the exception's qualified name; empty for a text alone",
            },
            "message": STRING,
            "traceback": {
                "type": ["string", "null"],
                "description": "its end is kept when long",
            },
        },
        ["attempt", "failed_at", "error_type", "message", "traceback"],
    ),
    "DeadLetterList": _list_of("dead_letters", "DeadLetter"),
    "KeySelection": {
        "description": 'either "keys" (at least one) or "all": true',
        "oneOf": [
            _object(
                {
                    "keys": {"type": "array", "items": _ref("Key"), "minItems": 1},
                    "all": {"const": False},
                },
                ["keys"],
            ),
            _object({"all": {"const": True}}, ["all"]),
        ],
    },
    "MessageSend": _object(
        {"key": _ref("Key"), "payload": _ref("Payload"), "deliver_time": ZONED_TIME},
        ["key", "payload"],
    ),
    "MessageSelection": _object(
        {
            "keys": {"type": "array", "items": _ref("Key"), "minItems": 1},
            "force": FORCE,
        },
        ["keys"],
    ),
    "ReadySelection": _object(
        {
            "keys": {"type": "array", "items": _ref("Key"), "minItems": 1},
            "deliver_time": ZONED_TIME,
            "force": FORCE,
        },
        ["keys"],
    ),
    "Deleted": _object({"deleted": INTEGER}, ["deleted"]),
    "MadeReady": _object({"made_ready": INTEGER}, ["made_ready"]),
    "Replayed": _object({"replayed": INTEGER}, ["replayed"]),
    "Purged": _object({"purged": INTEGER}, ["purged"]),
    "Worker": _object(
        {
            "id": STRING,
            "host": STRING,
            "pid": INTEGER,
            "kind": {"type": "string", "enum": ["worker", "dispatcher"]},
            "queues": {"type": "array", "items": STRING},
            "pipelines": {"type": "array", "items": STRING},
            "concurrency": INTEGER,
            "in_flight": INTEGER,
            "started": TIME,
            "last_seen": TIME,
        },
        [
            "id",
            "host",
            "pid",
            "kind",
            "queues",
            "pipelines",
            "concurrency",
            "in_flight",
            "started",
            "last_seen",
        ],
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
        {"name": RESOURCE_NAME, "archive": {"type": "boolean"}, "retention": RETENTION}, ["name"]
    ),
    "BusUpdate": _object({"archive": {"type": "boolean"}, "retention": RETENTION}),
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
    "PipelineCreate": _object({"name": RESOURCE_NAME, **PIPELINE_CHANGES}, ["name", "destination"]),
    "PipelineUpdate": _object(PIPELINE_CHANGES),
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
        {
            "name": RESOURCE_NAME,
            "bus": RESOURCE_NAME,
            "pipeline": RESOURCE_NAME,
            "cel_match": CEL_MATCH,
        },
        ["name", "bus", "pipeline", "cel_match"],
    ),
    "EnrollmentUpdate": _object({"pipeline": RESOURCE_NAME, "cel_match": CEL_MATCH}),
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
            "error_type": _ERROR_TYPE,
            "traceback": _TRACEBACK,
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
            "error_type": _ERROR_TYPE,
            "traceback": _TRACEBACK,
            "failure_time": TIME,
            "attempts": {"type": "array", "items": _ref("Attempt")},
        },
        ["message_uid", "bus", "pipeline", "event", "attempt_count", "attempts"],
    ),
    "UndeliveredList": _list_of("undelivered", "Undelivered"),
    "Unmatched": _object(
        {
            "message_uid": STRING,
            "bus": STRING,
            "event": _ref("CloudEvent"),
            "publish_time": TIME,
        },
        ["message_uid", "bus", "event", "publish_time"],
    ),
    "UnmatchedList": _list_of("unmatched", "Unmatched"),
    "UndeliveredSelection": {
        "description": 'either "message_uids" (at least one) or "all": true, perhaps only '
        "those of a bus or pipeline",
        "oneOf": [
            _object(
                {
                    "message_uids": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1},
                        "minItems": 1,
                    },
                    "all": {"const": False},
                    "bus": RESOURCE_NAME,
                    "pipeline": PIPELINE_FILTER,
                },
                ["message_uids"],
            ),
            _object(
                {"all": {"const": True}, "bus": RESOURCE_NAME, "pipeline": PIPELINE_FILTER},
                ["all"],
            ),
        ],
    },
    "ReplayedUids": _object(
        {"replayed": {"type": "array", "items": STRING, "description": "the new message_uids"}},
        ["replayed"],
    ),
    "CloudEvent": {
        "type": "object",
        "description": "a CloudEvent 1.0 in JSON. Attribute names are lowercase letters and "
        "digits; text holds no control characters; null is an absent attribute. Extension "
        "values are text, booleans or 32-bit integers. data that is not text needs a JSON "
        "datacontenttype (or none); text data needs a datacontenttype that is not JSON",
        "properties": {
            "specversion": {"const": "1.0"},
            "id": ATTRIBUTE_TEXT,
            "source": ATTRIBUTE_TEXT,
            "type": ATTRIBUTE_TEXT,
            "subject": NULLABLE_TEXT,
            "time": {
                "type": ["string", "null"],
                "format": "date-time",
                "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}"
                "([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$",
            },
            "datacontenttype": NULLABLE_TEXT,
            "dataschema": NULLABLE_TEXT,
            "data": {},
            "data_base64": {"type": ["string", "null"], "pattern": BASE64},
        },
        "required": ["specversion", "id", "source", "type"],
        "propertyNames": {
            "pattern": "^([a-z0-9]+|data_base64)$",
            "not": {"enum": ["messageuid", "xgooglemessageuid"]},
        },
        "additionalProperties": {
            "anyOf": [
                {"type": ["boolean", "null"]},
                {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
                {"type": "string", "pattern": TEXT_PATTERN},
            ]
        },
        "allOf": [
            {
                "not": {
                    "required": ["data", "data_base64"],
                    "properties": {"data_base64": STRING},
                }
            },
            {
                "if": {
                    "required": ["data", "datacontenttype"],
                    "properties": {"datacontenttype": {"type": "string"}},
                },
                "then": {
                    "if": {"properties": {"data": {"type": "string"}}},
                    "then": {"properties": {"datacontenttype": {"not": {"pattern": JSON_TYPE}}}},
                    "else": {
                        "if": {"properties": {"data": {"type": ["null"]}}},
                        "else": {"properties": {"datacontenttype": {"pattern": JSON_TYPE}}},
                    },
                },
            },
        ],
    },
    "Published": _object({"message_uid": STRING}, ["message_uid"]),
    "Empty": {"type": "null"},
    "OpenAPI": {"type": "object", "description": "an OpenAPI 3.1 document"},
}

#: The query parameters, by the name an Endpoint lists; ``name`` when it is sent as another.
PARAMETERS: dict[str, dict[str, Any]] = {
    "state": {"schema": {"enum": ["ready", "leased", "scheduled"]}, "description": "only these"},
    "prefix": {
        "schema": STRING,
        "description": "leading key parts as a JSON array, or text the first (STRING) key "
        "part starts with",
    },
    "after": {
        "content": {"application/json": {"schema": _ref("Key")}},
        "description": "the key (JSON array) after which the page starts: the previous "
        "page's next_after",
    },
    "limit": {"schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
    "key": {
        "content": {"application/json": {"schema": _ref("Key")}},
        "description": "the message's key as a JSON array",
        "required": True,
    },
    "queue": {"schema": QUEUE_NAME, "description": "only this queue"},
    "minutes": {"schema": {"type": "integer", "minimum": 1, "maximum": 1440}},
    "bus": {"schema": RESOURCE_NAME, "description": "only this bus"},
    "pipeline": {"schema": PIPELINE_FILTER},
    "attempt_pipeline": {"name": "pipeline", "schema": RESOURCE_NAME, "description": "only this"},
}

#: The path parameters' rules: a name that breaks one is refused (400) before any lookup.
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "queue": QUEUE_NAME,
    "bus": RESOURCE_NAME,
    "pipeline": RESOURCE_NAME,
    "enrollment": RESOURCE_NAME,
    "message_uid": {"type": "string", "minLength": 1},
}

_REASONS = {
    400: "Invalid argument",
    401: "No or wrong token",
    403: "Refused: read-only, or the CSRF token is missing",
    404: "Not found, or a path that names nothing (a line break in a name, say)",
    409: "Already exists, or aborted",
    412: "Failed precondition",
    413: "The body is over the path's limit (10.5 MiB to publish an event, else 1 MiB)",
}


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    in_path = re.findall(r"{(\w+)}", endpoint.path)
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": PATH_PARAMETERS[name]}
        for name in in_path
    ]
    for key in endpoint.query:
        described = dict(PARAMETERS[key])
        required = bool(described.pop("required", False))
        name = described.pop("name", key)
        parameters.append({"name": name, "in": "query", "required": required, **described})
    success: dict[str, Any] = {"description": endpoint.summary}
    if endpoint.status != 204:
        success["content"] = {"application/json": {"schema": _ref(endpoint.response)}}
    responses: dict[str, Any] = {str(endpoint.status): success}
    problems = set(endpoint.errors) | {401}
    if in_path:
        problems.add(404)
    if endpoint.query or endpoint.request is not None or set(in_path) - {"message_uid"}:
        problems.add(400)
    if endpoint.method != "GET":
        problems.add(403)
    if endpoint.request is not None:
        problems.add(413)
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
            "description": "structured mode (this JSON); binary mode also works: the "
            "attributes as ce-* headers (ce-specversion, ce-id, ce-source, ce-type, ...) and "
            "the data as the body, of any Content-Type",
            "content": {"application/cloudevents+json": {"schema": _ref("CloudEvent")}},
        }
    elif endpoint.request is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(endpoint.request)}},
        }
    return operation


def _schemas(allow_private: bool) -> dict[str, Any]:
    """`SCHEMAS`, where without the operator's switch a pipeline's allow_private can only
    be false (true is refused, 400)."""
    if allow_private:
        return SCHEMAS
    refused = {**ALLOW_PRIVATE, "const": False}
    schemas = dict(SCHEMAS)
    for name in ("PipelineCreate", "PipelineUpdate"):
        schema = dict(schemas[name])
        schema["properties"] = {**schema["properties"], "allow_private": refused}
        schemas[name] = schema
    return schemas


def document(
    endpoints: Iterable[Endpoint], base_path: str = "", *, allow_private: bool = False
) -> dict[str, Any]:
    """The OpenAPI 3.1 document listing every endpoint, served under ``base_path``; whether
    a pipeline may allow private destinations follows the operator's switch."""
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
            "schemas": _schemas(allow_private),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": paths,
    }
