"""CEL enrollment conditions: checks at create time, matching over CloudEvent attributes."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from txqueue.errors import InvalidArgument
from txqueue.events.cloudevent import attributes_of, make_event
from txqueue.events.matching import compile_condition, prepare

ORDER: dict[str, Any] = {
    "id": "order-1",
    "source": "//shop/orders",
    "type": "com.example.order.created",
    "specversion": "1.0",
    "subject": "orders/42",
    "time": datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc),
    "datacontenttype": "application/json",
    "dataschema": "https://example.com/schemas/order.json",
    "region": "eu",
    "priority": 7,
    "urgent": True,
}


@pytest.mark.parametrize(
    "expression",
    [
        'message.type == "com.example.order.created"',
        'message.source.startsWith("//shop/")',
        'message.id == "order-1"',
        'message.subject.matches("^orders/[0-9]+$")',
        'message.specversion == "1.0"',
        'message.datacontenttype == "application/json"',
        'message.dataschema.endsWith("/order.json")',
        'message.time > timestamp("2024-01-01T00:00:00Z")',
        'message.type in ["com.example.order.created", "com.example.order.paid"]',
        'message.type == "com.example.order.created" && !(message.source == "//other")',
        'has(message.subject) && message.subject.startsWith("orders/")',
        "message.exists(name, name == 'region')",
        "size(message) == 11",
    ],
)
def test_attribute_conditions_match(expression: str) -> None:
    condition = compile_condition(expression)
    assert condition.matches(ORDER) is True
    assert condition.matches(prepare(ORDER)) is True


@pytest.mark.parametrize(
    "expression",
    [
        'message.type == "com.example.order.paid"',
        'message.source.startsWith("//billing/")',
        'message.time < timestamp("2024-01-01T00:00:00Z")',
    ],
)
def test_attribute_conditions_do_not_match(expression: str) -> None:
    condition = compile_condition(expression)
    assert condition.matches(ORDER) is False
    assert condition.matches(prepare(ORDER)) is False


def test_true_matches_every_event() -> None:
    condition = compile_condition("true")
    assert condition.matches(ORDER)
    assert condition.matches({})
    assert condition.matches({"type": "x", "source": "y"})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('message.region == "eu"', True),
        ('message.region == "us"', False),
        ("message.priority > 5", True),
        ("message.priority > 9", False),
        ("message.urgent", True),
        ("message.urgent && message.priority == 7", True),
    ],
)
def test_extension_attributes(expression: str, expected: bool) -> None:
    assert compile_condition(expression).matches(ORDER) is expected


def test_matches_attributes_of_a_cloudevent() -> None:
    event = make_event(
        {
            "id": "1",
            "source": "//shop",
            "type": "com.example.order.created",
            "specversion": "1.0",
            "time": "2024-05-06T07:08:09Z",
            "tenant": "acme",
        },
        {"order": 42},
    )
    condition = compile_condition(
        'message.tenant == "acme" && message.time == timestamp("2024-05-06T07:08:09Z")'
    )
    assert condition.matches(attributes_of(event))


@pytest.mark.parametrize(
    "expression",
    [
        "message.data.amount > 100",
        'message["data"] == "x"',
        'message[ "data" ] == "x"',
        r'message["d\x61ta"] == "x"',
        "has(message.data)",
        'message.type == "a" || message.data.kind == "b"',
        "[message].exists(m, m.data == 1)",
    ],
)
def test_message_data_is_refused(expression: str) -> None:
    with pytest.raises(InvalidArgument, match=r"must not reference message\.data \(line 1, column"):
        compile_condition(expression)


@pytest.mark.parametrize(
    "expression",
    [
        'message.type == "data"',
        'message.type in ["data", "other"]',
        'message.datacontenttype == "application/json"',
        "has(message.dataschema)",
        'message.type == "x" // message.data is not read: this is a comment',
    ],
)
def test_data_lookalikes_are_accepted(expression: str) -> None:
    compile_condition(expression)


def test_payload_is_never_visible_even_if_passed() -> None:
    condition = compile_condition('message.exists(name, name == "data")')
    assert condition.matches({"type": "t", "data": {"secret": 1}}) is False
    assert condition.matches(prepare({"type": "t", "data": {"secret": 1}})) is False


@pytest.mark.parametrize(
    ("expression", "position"),
    [
        ("message.type ==", "line 1, column 16"),
        ('message.type == "a" &&& true', "line 1, column 23"),
        ('message.type == "a"\n  && )', "line 2, column"),
    ],
)
def test_syntax_errors_are_rejected_with_position(expression: str, position: str) -> None:
    with pytest.raises(InvalidArgument, match="condition is not valid CEL") as caught:
        compile_condition(expression)
    assert position in str(caught.value)


@pytest.mark.parametrize("expression", ["", "   ", "\n"])
def test_empty_condition_is_refused(expression: str) -> None:
    with pytest.raises(InvalidArgument, match='use "true"'):
        compile_condition(expression)


def test_non_string_condition_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="must be a CEL expression string"):
        compile_condition(True)  # type: ignore[arg-type]


def test_unknown_variables_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="unknown variable 'mesage' \\(line 1, column 1\\)"):
        compile_condition('mesage.type == "a"')
    with pytest.raises(InvalidArgument, match="unknown variable 'type'"):
        compile_condition('type == "a"')


def test_macro_loop_variables_are_not_unknown() -> None:
    condition = compile_condition('["eu", "us"].exists(r, r == message.region)')
    assert condition.matches(ORDER)
    assert not condition.matches({**ORDER, "region": "apac"})


@pytest.mark.parametrize("expression", ["message.type", "1", '"true"', "[true]", "null"])
def test_non_boolean_result_is_no_match(expression: str) -> None:
    condition = compile_condition(expression)
    assert condition.matches(ORDER) is False
    assert condition.matches(prepare(ORDER)) is False


@pytest.mark.parametrize(
    "expression",
    [
        'message.missing == "x"',  # attribute absent
        'message.subject.startsWith("orders/")',  # subject absent in the event below
        "message.priority + 1.5 > 0.0",  # int + double: no overload
        "undefinedFunction(message.type)",
        "1 / 0 == 1",
    ],
)
def test_evaluation_errors_are_no_match(expression: str) -> None:
    condition = compile_condition(expression)
    event = {key: value for key, value in ORDER.items() if key != "subject"}
    assert condition.matches(event) is False
    assert condition.matches(prepare(event)) is False


def test_none_valued_attributes_count_as_absent() -> None:
    condition = compile_condition("has(message.subject)")
    assert condition.matches({"type": "t", "subject": "s"})
    assert not condition.matches({"type": "t", "subject": None})


def test_condition_keeps_its_expression() -> None:
    condition = compile_condition('message.type == "a"')
    assert condition.expression == 'message.type == "a"'
    assert "message.type" in repr(condition)


def test_prepare_refuses_values_cel_cannot_hold() -> None:
    with pytest.raises(InvalidArgument, match="event attributes cannot be matched"):
        prepare({"type": "t", "odd": object()})
    # matches() never raises: an unconvertible value is an evaluation error, hence no match,
    # unless the condition does not read it at all.
    assert compile_condition("size(message) > 0").matches({"type": "t", "odd": object()}) is False
    assert compile_condition('message.type == "t"').matches({"type": "t", "odd": object()})
