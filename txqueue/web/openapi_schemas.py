"""The component schemas of the HTTP API's OpenAPI document: what each endpoint takes and
gives, by name."""

from __future__ import annotations

from typing import Any

from txqueue.web.openapi_fields import (
    ATTRIBUTE_TEXT,
    BASE64,
    CEL_MATCH,
    FORCE,
    INTEGER,
    JSON_TYPE,
    KEY,
    NULLABLE_TEXT,
    PIPELINE_CHANGES,
    PIPELINE_FILTER,
    RESOURCE_NAME,
    RETENTION,
    SECONDS,
    STRING,
    TEXT_PATTERN,
    TIME,
    ZONED_TIME,
    list_of,
    object_schema,
    ref,
)

__all__ = ["SCHEMAS"]

#: a message's failed attempts, oldest first (at most the last ten)
_ERROR_TYPE: dict[str, Any] = {
    "type": ["string", "null"],
    "description": "a failed attempt's: http.<status>, the exception's type, or refused",
}
_TRACEBACK: dict[str, Any] = {
    "type": ["string", "null"],
    "description": "the exception's traceback (its end), when the attempt raised one",
}
_FAILURES: dict[str, Any] = {"type": "array", "items": ref("Failure")}

SCHEMAS: dict[str, Any] = {
    "Error": object_schema(
        {"error": object_schema({"code": STRING, "message": STRING}, ["code", "message"])},
        ["error"],
    ),
    "Key": KEY,
    "Payload": object_schema(
        {"encoding": {"enum": ["json", "text", "base64"]}, "value": {}}, ["encoding", "value"]
    ),
    "Queue": object_schema(
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
    "QueueList": list_of("queues", "Queue"),
    "Message": object_schema(
        {
            "queue": STRING,
            "key": ref("Key"),
            "payload": ref("Payload"),
            "deliver_time": TIME,
            "state": {"enum": ["ready", "leased", "scheduled"]},
            "lease_expiration": TIME,
            "delivery_count": INTEGER,
            "last_error": {"type": ["string", "null"]},
            "failures": _FAILURES,
        },
        ["queue", "key", "payload", "deliver_time", "state", "delivery_count", "failures"],
    ),
    "MessagePage": object_schema(
        {
            "messages": {"type": "array", "items": ref("Message")},
            "next_after": {"anyOf": [ref("Key"), {"type": "null"}]},
        },
        ["messages", "next_after"],
    ),
    "DeadLetter": object_schema(
        {
            "queue": STRING,
            "key": ref("Key"),
            "payload": ref("Payload"),
            "attempts": INTEGER,
            "last_error": STRING,
            "first_failure": TIME,
            "last_failure": TIME,
            "failures": _FAILURES,
        },
        ["queue", "key", "payload", "attempts", "last_error", "failures"],
    ),
    "Failure": object_schema(
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
    "DeadLetterList": list_of("dead_letters", "DeadLetter"),
    "KeySelection": {
        "description": 'either "keys" (at least one) or "all": true',
        "oneOf": [
            object_schema(
                {
                    "keys": {"type": "array", "items": ref("Key"), "minItems": 1},
                    "all": {"const": False},
                },
                ["keys"],
            ),
            object_schema({"all": {"const": True}}, ["all"]),
        ],
    },
    "MessageSend": object_schema(
        {"key": ref("Key"), "payload": ref("Payload"), "deliver_time": ZONED_TIME},
        ["key", "payload"],
    ),
    "MessageSelection": object_schema(
        {
            "keys": {"type": "array", "items": ref("Key"), "minItems": 1},
            "force": FORCE,
        },
        ["keys"],
    ),
    "ReadySelection": object_schema(
        {
            "keys": {"type": "array", "items": ref("Key"), "minItems": 1},
            "deliver_time": ZONED_TIME,
            "force": FORCE,
        },
        ["keys"],
    ),
    "Deleted": object_schema({"deleted": INTEGER}, ["deleted"]),
    "MadeReady": object_schema({"made_ready": INTEGER}, ["made_ready"]),
    "Replayed": object_schema({"replayed": INTEGER}, ["replayed"]),
    "Purged": object_schema({"purged": INTEGER}, ["purged"]),
    "Worker": object_schema(
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
    "WorkerList": list_of("workers", "Worker"),
    "Throughput": object_schema(
        {
            "minutes": {"type": "array", "items": {"type": "string", "format": "date-time"}},
            "handled": {"type": "array", "items": INTEGER},
            "failed": {"type": "array", "items": INTEGER},
            "dead_lettered": {"type": "array", "items": INTEGER},
        },
        ["minutes", "handled", "failed", "dead_lettered"],
    ),
    "Bus": object_schema(
        {
            "name": STRING,
            "archive": {"type": "boolean"},
            "retention": SECONDS,
            "create_time": TIME,
            "update_time": TIME,
        },
        ["name", "archive", "retention"],
    ),
    "BusList": list_of("buses", "Bus"),
    "BusCreate": object_schema(
        {"name": RESOURCE_NAME, "archive": {"type": "boolean"}, "retention": RETENTION}, ["name"]
    ),
    "BusUpdate": object_schema({"archive": {"type": "boolean"}, "retention": RETENTION}),
    "Pipeline": object_schema(
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
    "PipelineList": list_of("pipelines", "Pipeline"),
    "PipelineCreate": object_schema(
        {"name": RESOURCE_NAME, **PIPELINE_CHANGES}, ["name", "destination"]
    ),
    "PipelineUpdate": object_schema(PIPELINE_CHANGES),
    "Enrollment": object_schema(
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
    "EnrollmentList": list_of("enrollments", "Enrollment"),
    "EnrollmentCreate": object_schema(
        {
            "name": RESOURCE_NAME,
            "bus": RESOURCE_NAME,
            "pipeline": RESOURCE_NAME,
            "cel_match": CEL_MATCH,
        },
        ["name", "bus", "pipeline", "cel_match"],
    ),
    "EnrollmentUpdate": object_schema({"pipeline": RESOURCE_NAME, "cel_match": CEL_MATCH}),
    "Attempt": object_schema(
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
    "AttemptList": list_of("attempts", "Attempt"),
    "Undelivered": object_schema(
        {
            "message_uid": STRING,
            "bus": STRING,
            "pipeline": {"type": "string", "description": "empty when no enrollment matched"},
            "event": ref("CloudEvent"),
            "publish_time": TIME,
            "attempt_count": INTEGER,
            "status": {"type": ["integer", "null"]},
            "error": {"type": ["string", "null"]},
            "error_type": _ERROR_TYPE,
            "traceback": _TRACEBACK,
            "failure_time": TIME,
            "attempts": {"type": "array", "items": ref("Attempt")},
        },
        ["message_uid", "bus", "pipeline", "event", "attempt_count", "attempts"],
    ),
    "UndeliveredList": list_of("undelivered", "Undelivered"),
    "Unmatched": object_schema(
        {
            "message_uid": STRING,
            "bus": STRING,
            "event": ref("CloudEvent"),
            "publish_time": TIME,
        },
        ["message_uid", "bus", "event", "publish_time"],
    ),
    "UnmatchedList": list_of("unmatched", "Unmatched"),
    "UndeliveredSelection": {
        "description": 'either "message_uids" (at least one) or "all": true, perhaps only '
        "those of a bus or pipeline",
        "oneOf": [
            object_schema(
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
            object_schema(
                {"all": {"const": True}, "bus": RESOURCE_NAME, "pipeline": PIPELINE_FILTER},
                ["all"],
            ),
        ],
    },
    "ReplayedUids": object_schema(
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
    "Published": object_schema({"message_uid": STRING}, ["message_uid"]),
    "Empty": {"type": "null"},
    "OpenAPI": {"type": "object", "description": "an OpenAPI 3.1 document"},
}
