"""Adversarial input to the pure checks: every value is refused with an InvalidArgument that
names its field, never an OverflowError, ValueError, UnicodeEncodeError or RecursionError.

The database-facing side of the same rules (both engines, nothing written) is in
``tests/conformance/test_adversarial.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from txqueue.core.durations import parse_duration, require_aware, to_duration
from txqueue.core.leases import is_token, token_expiration_micros, token_locator
from txqueue.core.schema import Column, ColumnType
from txqueue.core.values import check_value
from txqueue.drivers.engines import parse_url
from txqueue.errors import InvalidArgument
from txqueue.events.cloudevent import from_json, make_event
from txqueue.events.signing import sign, verify

STORED = "0" * 30
MAX_DURATION = timedelta(days=36_500)  # txqueue.core.durations.MAX_DURATION
MAX_JSON_NESTING = 80  # txqueue.core.values.MAX_JSON_NESTING, as Spanner's JSON


def nested(depth: int) -> Any:
    """A list nested ``depth`` levels deep, built without recursion."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "text", ["99999999999d", "1" + "0" * 400 + "s", "36501d", "nan", "inf", "-1s", "1e3s"]
)
def test_a_duration_string_out_of_range_or_not_a_number_is_invalid_argument(text: str) -> None:
    with pytest.raises(InvalidArgument, match="--grace"):
        parse_duration(text, "--grace")


def test_durations_are_bounded_at_one_hundred_years() -> None:
    from txqueue.core import durations

    assert durations.MAX_DURATION == MAX_DURATION
    assert parse_duration("36500d") == MAX_DURATION
    assert to_duration(MAX_DURATION, "lease_duration") == MAX_DURATION
    with pytest.raises(InvalidArgument, match="lease_duration must be at most 36500 days"):
        to_duration(timedelta(days=900_000), "lease_duration")
    with pytest.raises(InvalidArgument, match="extension"):
        to_duration(timedelta.max, "extension")


def test_a_time_that_leaves_the_calendar_in_utc_is_invalid_argument() -> None:
    late = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14)))
    with pytest.raises(InvalidArgument, match=r"deliver_time .* outside the years 1 to 9999"):
        require_aware(late, "deliver_time")
    early = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
    with pytest.raises(InvalidArgument, match="deliver_time"):
        require_aware(early, "deliver_time")


@pytest.mark.parametrize("locator", ["ffffffffffffffff", "8000000000000000"])
def test_a_locator_beyond_int64_makes_a_token_not_ours(locator: str) -> None:
    token = f"{STORED}.{locator}"
    assert not is_token(token)
    assert token_expiration_micros(token) is None
    assert token_locator(token) is None
    assert token_locator(f"{STORED}.7fffffffffffffff") == 2**63 - 1


@pytest.mark.parametrize("size", [2**63, 10**30])
def test_a_batch_size_beyond_int64_is_invalid_argument(size: int) -> None:
    from txqueue.core.values import check_count

    with pytest.raises(InvalidArgument, match="max_batch_size must be at most"):
        check_count(size, "max_batch_size")
    assert check_count(2**63 - 1, "max_batch_size") == 2**63 - 1


@pytest.mark.parametrize(
    ("kind", "value", "rule"),
    [
        (ColumnType.STRING, "\ud800", "lone surrogate"),
        (ColumnType.STRING, "ok \udfff", "lone surrogate"),
        (ColumnType.JSON, {"a": "\ud800"}, "lone surrogate"),
        (ColumnType.JSON, {"a": float("nan")}, "not JSON-serializable"),
        (ColumnType.JSON, nested(100_000), "nested deeper than 80"),
        (ColumnType.JSON, nested(MAX_JSON_NESTING + 1), "nested deeper than 80"),
        (ColumnType.INT64, 2**63, "outside the INT64 range"),
    ],
)
def test_a_value_no_engine_stores_is_invalid_argument(
    kind: ColumnType, value: Any, rule: str
) -> None:
    with pytest.raises(InvalidArgument, match=rf"key\[0\] \(K\) .*{rule}"):
        check_value(Column("K", kind), value, "key[0]")


def test_json_nested_as_deep_as_spanner_allows_is_accepted() -> None:
    value = nested(MAX_JSON_NESTING)
    assert check_value(Column("P", ColumnType.JSON), value, "payload") is value


@pytest.mark.parametrize(
    ("url", "option"),
    [
        ("sqlite:///x.db?busy_timeout_ms=99999999999999999999999", "busy_timeout_ms"),
        ("sqlite:///x.db?busy_timeout_ms=2147483648", "busy_timeout_ms"),
        ("sqlite:///x.db?busy_timeout_ms=%D9%A3", "busy_timeout_ms"),
        ("sqlite:///x.db?busy_timeout_ms=0", "busy_timeout_ms"),
        ("postgresql://h/db?pool_size=99999999999999999999", "pool_size"),
        ("postgresql://h/db?pool_size=1_0", "pool_size"),
        ("postgresql://h/db?pool_size=" + "9" * 5000, "pool_size"),
        ("postgresql://h/db?pool_size=000", "pool_size"),
    ],
)
def test_a_numeric_url_option_out_of_range_is_invalid_argument(url: str, option: str) -> None:
    from txqueue.core.url import integer_option

    parsed = parse_url(url)
    with pytest.raises(InvalidArgument, match=f"URL option {option}"):
        integer_option(parsed, option, 1)


def test_numeric_url_options_at_their_maximum_are_accepted() -> None:
    from txqueue.core.url import integer_option

    parsed = parse_url("sqlite:///x.db?busy_timeout_ms=2147483647")
    assert integer_option(parsed, "busy_timeout_ms", 5000) == 2**31 - 1


def _headers(**changes: str) -> dict[str, str]:
    headers = sign(b"secret", "message-1", 1_700_000_000, b"{}")
    headers.update(changes)
    return headers


NOW = datetime.fromtimestamp(1_700_000_000, timezone.utc)


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"webhook-signature": "v1,\ud800"}, "no signature matches"),
        ({"webhook-signature": "v1,\ud800 v1,abc"}, "no signature matches"),
        ({"webhook-id": "message-\ud800"}, "'webhook-id' is not valid Unicode"),
        ({"webhook-timestamp": "9" * 401}, "'webhook-timestamp' is not an integer"),
        ({"webhook-timestamp": "1_700_000_000"}, "'webhook-timestamp' is not an integer"),
    ],
)
def test_a_hostile_signature_header_is_invalid_argument(changes: dict[str, str], rule: str) -> None:
    with pytest.raises(InvalidArgument, match=rule):
        verify(b"secret", _headers(**changes), b"{}", now=NOW)


def test_verify_checks_its_tolerance_and_body() -> None:
    verify(b"secret", _headers(), b"{}", now=NOW)  # the untouched headers pass
    with pytest.raises(InvalidArgument, match="tolerance"):
        verify(b"secret", _headers(), b"{}", tolerance=float("nan"), now=NOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="body must be bytes"):
        verify(b"secret", _headers(), "{}", now=NOW)  # type: ignore[arg-type]


ATTRIBUTES = {"id": "1", "source": "s", "type": "t", "specversion": "1.0"}


@pytest.mark.parametrize(
    ("attributes", "data", "rule"),
    [
        ({}, {"a": nested(100_000)}, "nested deeper than 80"),
        ({}, {"a": "\ud800"}, "lone surrogate"),
        ({"datacontenttype": "text/plain"}, "\ud800", "lone surrogate"),
        ({"id": "\ud800"}, None, "'id' is not valid Unicode"),
        ({"extra": "\udc00"}, None, "'extra' is not valid Unicode"),
    ],
)
def test_a_cloudevent_no_receiver_could_read_is_invalid_argument(
    attributes: dict[str, Any], data: Any, rule: str
) -> None:
    with pytest.raises(InvalidArgument, match=rule):
        make_event({**ATTRIBUTES, **attributes}, data)


def test_a_json_cloudevent_with_deeply_nested_array_data_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgument, match="nested deeper than 80"):
        from_json({**ATTRIBUTES, "data": nested(100_000)})


@pytest.mark.parametrize(
    "url",
    ["sqlite:///x\ud800.db", "postgresql://h/db?pool_size=\ud800", "x://[", "postgresql://[::1/db"],
)
def test_a_url_that_is_malformed_or_not_text_is_invalid_argument(url: str) -> None:
    with pytest.raises(InvalidArgument, match="database URL"):
        parse_url(url)


def test_a_json_cloudevent_whose_content_type_is_no_string_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgument, match="'datacontenttype' must be a string"):
        from_json({**ATTRIBUTES, "data": False, "datacontenttype": False})
