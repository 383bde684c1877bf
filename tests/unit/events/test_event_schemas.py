"""Which JSON Schemas a pipeline accepts, and what a stored schema that cannot be used does."""

from __future__ import annotations

from typing import Any

import pytest

from txqueue.errors import InvalidArgument
from txqueue.events.cloudevent import make_event
from txqueue.events.payloads import check_schema, payload_problem

ATTRIBUTES = {"type": "t", "source": "//s", "id": "1", "specversion": "1.0"}


@pytest.mark.parametrize(
    "schema",
    [
        {"definitions": {"a": {"type": "integer"}}, "items": {"$ref": "#/definitions/a"}},
        {"$defs": {"a/b": {"type": "integer"}}, "items": {"$ref": "#/$defs/a~1b"}},
        {"$defs": {"a": {"$anchor": "amount", "type": "integer"}}, "items": {"$ref": "#amount"}},
        {
            "$id": "https://example.com/root",
            "$defs": {
                "b": {"$id": "https://example.com/b", "$defs": {"c": {}}, "$ref": "#/$defs/c"}
            },
            "items": {"$ref": "#/$defs/b"},
        },
        {"$dynamicAnchor": "node", "items": {"$dynamicRef": "#node"}},
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "$recursiveAnchor": True,
            "items": {"$recursiveRef": "#"},
        },
        {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/s"},
        {"items": True, "not": False},
    ],
)
def test_self_contained_schemas_are_accepted(schema: dict[str, Any]) -> None:
    check_schema(schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"$ref": "https://json-schema.org/draft/2020-12/schema"}, "points outside the schema"),
        ({"$id": "https://example.com/root", "$ref": "other.json"}, "'other.json' points outside"),
        ({"$ref": ""}, "$ref '' points outside"),
        ({"enum": [{"$ref": "http://example.com/x"}]}, "'http://example.com/x' points outside"),
        ({"items": {"$dynamicRef": "https://example.com/x#n"}}, "points outside the schema"),
        ({"items": {"$ref": "#nowhere"}}, "$ref '#nowhere' does not resolve within the schema"),
        ({"items": {"$ref": "#/$defs/x"}}, "$ref '#/$defs/x' does not resolve within the schema"),
        ({"$schema": "http://127.0.0.1/dialect"}, "$schema 'http://127.0.0.1/dialect' is not a"),
        ({"type": 5}, "is not a valid JSON Schema"),
        ({"const": {1, 2}}, "is not JSON-serializable"),
    ],
)
def test_schemas_that_reach_outside_or_are_broken_are_refused(
    schema: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=r"^json_schema") as refused:
        check_schema(schema)
    assert message in str(refused.value)


def test_a_cyclic_schema_bounds_itself() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["items"] = cyclic
    with pytest.raises(InvalidArgument, match="nested deeper than 32 levels"):
        check_schema(cyclic)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"properties": {"a": {"$ref": "file:///etc/hostname"}}}, "$ref 'file:///etc/hostname'"),
        ({"properties": {"a": {"$ref": "#nowhere"}}}, "$ref '#nowhere'"),
        ({"properties": {"a": {"$ref": "#/$defs/x"}}}, "$ref '#/$defs/x'"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "nested too deeply"),
        ({"type": 5}, "not a valid JSON Schema"),
    ],
)
def test_a_stored_schema_that_cannot_be_used_is_a_payload_problem(
    schema: dict[str, Any], message: str
) -> None:
    problem = payload_problem(make_event(ATTRIBUTES, {"a": [1]}), "json", schema)
    assert str(problem).startswith("the pipeline's JSON schema cannot be used: ")
    assert message in str(problem)
