"""A pipeline's input payload format: JSON data, optionally checked against a JSON Schema.

An event that does not fit fails permanently before delivery (seed 004: "das Ereignis
entspricht nicht dem konfigurierten erwarteten Schema"); retrying could never fix it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]
from cloudevents.core.formats.json import JSONFormat
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped,unused-ignore]

from txqueue.errors import InvalidArgument
from txqueue.events.cloudevent import CloudEvent

__all__ = ["check_schema", "payload_problem"]


def check_schema(schema: object) -> None:
    """Raise InvalidArgument unless ``schema`` is a valid JSON Schema (any draft jsonschema knows)."""
    if not isinstance(schema, dict):
        raise InvalidArgument(f"json_schema must be a JSON object, got {type(schema).__name__}")
    try:
        _validator(json.dumps(schema, sort_keys=True))
    except SchemaError as error:
        raise InvalidArgument(f"json_schema is not a valid JSON Schema: {error.message}") from None
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"json_schema is not JSON-serializable: {error}") from None


def payload_problem(
    event: CloudEvent, payload_format: str | None, schema: dict[str, Any] | None
) -> str | None:
    """Why ``event``'s data does not fit the format and schema, or None when it does."""
    if payload_format is None:
        return None
    data = event.get_data()
    if data is None:
        return "payload format is json but the event has no data"
    content_type = event.get_datacontenttype() or ""
    if not _is_json(content_type):
        return f"payload format is json but datacontenttype is {content_type or 'absent'!r}"
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except ValueError as error:
            return f"payload is not valid JSON: {error}"
    if schema is None:
        return None
    problem = jsonschema.exceptions.best_match(
        _validator(json.dumps(schema, sort_keys=True)).iter_errors(data)
    )
    if problem is None:
        return None
    where = "/".join(str(part) for part in problem.absolute_path) or "(root)"
    return f"payload does not match the pipeline's JSON schema at {where}: {problem.message}"


def _is_json(content_type: str) -> bool:
    return JSONFormat.JSON_CONTENT_TYPE_PATTERN.match(content_type) is not None


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Any:
    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)
