"""The OpenAPI 3.1 document of the HTTP API, assembled from its table of endpoints.

The field rules are in `openapi_fields`, the component schemas in `openapi_schemas`; this
module adds the parameters and responses of each endpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import txqueue
from txqueue.web.openapi_fields import (
    ALLOW_PRIVATE,
    DESTINATION_PATTERN,
    PIPELINE_FILTER,
    QUEUE_NAME,
    RESOURCE_NAME,
    STRING,
    ref,
)
from txqueue.web.openapi_schemas import SCHEMAS

if TYPE_CHECKING:
    from txqueue.web.api import Endpoint

__all__ = ["DESTINATION_PATTERN", "PARAMETERS", "SCHEMAS", "document"]


#: The query parameters, by the name an Endpoint lists; ``name`` when it is sent as another.
PARAMETERS: dict[str, dict[str, Any]] = {
    "state": {"schema": {"enum": ["ready", "leased", "scheduled"]}, "description": "only these"},
    "prefix": {
        "schema": STRING,
        "description": "leading key parts as a JSON array, or text the first (STRING) key "
        "part starts with",
    },
    "after": {
        "content": {"application/json": {"schema": ref("Key")}},
        "description": "the key (JSON array) after which the page starts: the previous "
        "page's next_after",
    },
    "limit": {"schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
    "key": {
        "content": {"application/json": {"schema": ref("Key")}},
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
        success["content"] = {"application/json": {"schema": ref(endpoint.response)}}
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
            "content": {"application/json": {"schema": ref("Error")}},
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
            "content": {"application/cloudevents+json": {"schema": ref("CloudEvent")}},
        }
    elif endpoint.request is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": ref(endpoint.request)}},
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
