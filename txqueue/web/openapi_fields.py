"""The field rules of the HTTP API's OpenAPI schemas: names, times, delays, destinations,
CloudEvent text; and the helpers the schemas are written with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "ALLOW_PRIVATE",
    "ATTRIBUTE_TEXT",
    "BASE64",
    "CEL_MATCH",
    "DELAY",
    "DESTINATION",
    "DESTINATION_PATTERN",
    "FORCE",
    "INTEGER",
    "JSON_TYPE",
    "KEY",
    "MAX_ATTEMPTS",
    "NONEMPTY",
    "NULLABLE_TEXT",
    "PIPELINE_CHANGES",
    "PIPELINE_FILTER",
    "QUEUE_NAME",
    "RESOURCE_NAME",
    "RETENTION",
    "SECONDS",
    "SIGNING_SECRET",
    "STRING",
    "TEXT_PATTERN",
    "TIME",
    "ZONED_TIME",
    "list_of",
    "object_schema",
    "ref",
]


def ref(name: str) -> dict[str, str]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def object_schema(
    properties: dict[str, Any], required: Iterable[str] = (), *, closed: bool = True
) -> dict[str, Any]:
    """An object schema; ``closed``: no properties beyond ``properties``."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


def list_of(field: str, item: str) -> dict[str, Any]:
    """An object whose one ``field`` is a list of ``item`` schemas (a list response)."""
    return object_schema({field: {"type": "array", "items": ref(item)}}, [field])


STRING: dict[str, Any] = {"type": "string"}
TIME: dict[str, Any] = {"type": ["string", "null"], "format": "date-time"}
SECONDS: dict[str, Any] = {"type": ["number", "null"], "description": "seconds"}
INTEGER: dict[str, Any] = {"type": "integer"}

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
