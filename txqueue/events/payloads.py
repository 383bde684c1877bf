"""A pipeline's input payload format: JSON data, optionally checked against a JSON Schema.

An event that does not fit fails permanently before delivery (as in Eventarc Advanced:
the event does not match the configured schema); retrying could never fix it.

A schema never makes txqueue read a file or fetch a URL: validators resolve references in a
registry that retrieves nothing, and `check_schema` refuses any ``$ref`` (``$dynamicRef``,
``$recursiveRef``) that does not resolve within the schema itself, as well as schemas too
large or too deeply nested to validate cheaply.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import jsonschema  # type: ignore[import-untyped,unused-ignore]
import referencing.exceptions
import referencing.jsonschema
from cloudevents.core.formats.json import JSONFormat
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped,unused-ignore]
from referencing import Registry

from txqueue.errors import InvalidArgument
from txqueue.events.cloudevent import CloudEvent

__all__ = ["MAX_SCHEMA_BYTES", "MAX_SCHEMA_DEPTH", "check_schema", "payload_problem"]

#: Largest accepted schema, serialized as compact UTF-8 JSON.
MAX_SCHEMA_BYTES = 64 * 1024
#: Deepest accepted nesting of objects and arrays (the schema itself is level 1).
MAX_SCHEMA_DEPTH = 32
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
#: Validation errors that come from the schema, not from the event: the delivery fails.
_SCHEMA_FAILURES = (
    SchemaError,
    referencing.exceptions.Unresolvable,
    referencing.jsonschema.UnknownDialect,
    RecursionError,
)


def check_schema(schema: object) -> None:
    """Raise InvalidArgument unless ``schema`` is a valid, self-contained JSON Schema.

    Any draft jsonschema knows; every reference must be a local ``#...`` pointer or anchor
    that resolves within ``schema``; at most `MAX_SCHEMA_BYTES` and `MAX_SCHEMA_DEPTH`.
    """
    if not isinstance(schema, dict):
        raise InvalidArgument(f"json_schema must be a JSON object, got {type(schema).__name__}")
    references = _walk(schema)  # bounds the depth before anything recurses
    try:
        size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode())
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"json_schema is not JSON-serializable: {error}") from None
    if size > MAX_SCHEMA_BYTES:
        raise InvalidArgument(
            f"json_schema is {size} bytes serialized; at most {MAX_SCHEMA_BYTES} (64 KiB) "
            "are allowed"
        )
    for reference in references:
        if not reference.startswith("#"):
            raise InvalidArgument(
                f"json_schema: $ref {reference!r} points outside the schema; only local "
                "references ('#/$defs/name', '#anchor') are allowed, nothing is retrieved"
            )
    dialect = schema.get("$schema")
    if dialect is not None and (
        not isinstance(dialect, str) or jsonschema.validators.validator_for(schema, None) is None
    ):
        raise InvalidArgument(f"json_schema: $schema {dialect!r} is not a dialect txqueue knows")
    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except SchemaError as error:
        raise InvalidArgument(f"json_schema is not a valid JSON Schema: {error.message}") from None
    _check_resolvable(validator)


def payload_problem(
    event: CloudEvent, payload_format: str | None, schema: dict[str, Any] | None
) -> str | None:
    """Why ``event``'s data does not fit the format and schema, or None when it does.

    A schema that cannot be used (stored before `check_schema` refused it) is a problem too.
    """
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
    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
        problem = jsonschema.exceptions.best_match(validator.iter_errors(data))
    except _SCHEMA_FAILURES as error:
        return f"the pipeline's JSON schema cannot be used: {_schema_failure(error)}"
    if problem is None:
        return None
    where = "/".join(str(part) for part in problem.absolute_path) or "(root)"
    return f"payload does not match the pipeline's JSON schema at {where}: {problem.message}"


def _is_json(content_type: str) -> bool:
    return JSONFormat.JSON_CONTENT_TYPE_PATTERN.match(content_type) is not None


def _walk(schema: dict[str, Any]) -> list[str]:
    """Every reference string anywhere in ``schema``; InvalidArgument past the depth bound."""
    found: list[str] = []
    pending: list[tuple[object, int]] = [(schema, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Iterator[object] = iter(value.values())
            found += [value[key] for key in _REFERENCES if isinstance(value.get(key), str)]
        elif isinstance(value, list):
            children = iter(value)
        else:
            continue
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidArgument(
                f"json_schema is nested deeper than {MAX_SCHEMA_DEPTH} levels (objects and arrays)"
            )
        pending += [(child, depth + 1) for child in children]
    return found


def _check_resolvable(validator: Any) -> None:
    """Resolve every reference the validator can meet, each from its own base URI."""
    root = referencing.jsonschema.specification_with(
        validator.META_SCHEMA.get("$schema", ""), default=referencing.jsonschema.DRAFT202012
    ).create_resource(validator.schema)
    resolver = Registry().resolver_with_root(root)
    pending = [(resolver, root)]
    while pending:
        resolver, resource = pending.pop()
        contents = resource.contents
        if isinstance(contents, dict):
            for key in _REFERENCES:
                reference = contents.get(key)
                if isinstance(reference, str):
                    try:
                        resolver.lookup(reference)
                    except referencing.exceptions.Unresolvable:
                        raise InvalidArgument(
                            f"json_schema: $ref {reference!r} does not resolve within the schema"
                        ) from None
        pending += [(resolver.in_subresource(sub), sub) for sub in resource.subresources()]


def _schema_failure(error: BaseException) -> str:
    """What is wrong with a stored schema, in words (never anything retrieved: nothing is)."""
    if isinstance(error, referencing.exceptions.Unresolvable):
        cause = getattr(error, "_wrapped", error)  # jsonschema wraps referencing's errors
        if isinstance(cause, referencing.exceptions.NoSuchAnchor):
            reference = f"#{cause.anchor}"
        elif isinstance(cause, referencing.exceptions.PointerToNowhere):
            reference = f"#{cause.ref}"
        else:
            reference = cause.ref
        return f"$ref {reference!r} does not resolve within the schema (nothing is retrieved)"
    if isinstance(error, SchemaError):
        return f"not a valid JSON Schema: {error.message}"
    if isinstance(error, RecursionError):
        return "it is nested too deeply"
    return f"{type(error).__name__}: {error}"


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Any:
    """The validator for a schema; its registry retrieves nothing, so an outside reference
    raises `referencing.exceptions.Unresolvable` instead of reading a file or a URL."""
    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, jsonschema.validators.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, registry=Registry())
