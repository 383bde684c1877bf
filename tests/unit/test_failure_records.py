"""The stored failure history (``txqueue.core.failures``): capped tracebacks and messages, a
bounded record, and plain text of older versions read as one failure."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from txqueue.core.failures import (
    MAX_FAILURES,
    MAX_HISTORY,
    MAX_MESSAGE,
    MAX_TRACEBACK,
    Raised,
    cap_traceback,
    read_history,
    record_failure,
)

AT = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)


def _deep(depth: int) -> None:
    if depth:
        _deeper(depth - 1)  # two functions in turn: Python folds only repeats of one frame
    raise ValueError("at the bottom")


def _deeper(depth: int) -> None:
    _deep(depth)


def _raised_deep(depth: int = 400) -> Raised:
    try:
        _deep(depth)
    except ValueError as error:
        return Raised.of(error)
    raise AssertionError("unreachable")


class PaymentDeclined(Exception):
    pass


def test_the_type_is_qualified_outside_builtins() -> None:
    assert Raised.of(KeyError("x")).error_type == "KeyError"
    assert Raised.of(PaymentDeclined("no")).error_type == (f"{__name__}.PaymentDeclined")
    assert Raised.of(KeyError("x")).traceback is None  # never raised: no traceback


def test_a_huge_traceback_keeps_its_end_with_a_marker() -> None:
    raised = _raised_deep()
    text = raised.traceback or ""
    assert len(text) <= MAX_TRACEBACK + 80
    assert text.startswith("[… ") and "characters of outer frames cut" in text
    assert text.endswith("ValueError: at the bottom\n")  # the innermost frame and the error
    assert "in _deep" in text


def test_cap_traceback_leaves_short_text_alone() -> None:
    assert cap_traceback("short\n") == "short\n"


def test_a_long_message_keeps_its_start() -> None:
    raised = Raised.of(ValueError("x" * (MAX_MESSAGE * 3)))
    assert raised.message.startswith("x" * MAX_MESSAGE)
    assert raised.message.endswith(f"[…{MAX_MESSAGE * 2} characters cut]")


def test_the_history_keeps_the_newest_and_stays_within_its_cap() -> None:
    stored = None
    for attempt in range(1, MAX_FAILURES + 6):
        at = AT + timedelta(seconds=attempt)
        stored = record_failure(stored, f"boom {attempt}", _raised_deep(), attempt, at)
        assert len(stored) <= MAX_HISTORY
    last_error, failures = read_history(stored, 0, None)
    assert last_error == f"boom {MAX_FAILURES + 5}"
    assert [f.attempt for f in failures] == list(range(6, MAX_FAILURES + 6))
    assert failures[-1].traceback is not None  # the newest keeps its traceback
    assert failures[-1].failed_at == AT + timedelta(seconds=MAX_FAILURES + 5)


def test_plain_text_reads_as_one_failure() -> None:
    assert read_history(None, 1, AT) == (None, ())
    last_error, [failure] = read_history("KeyError('email')", 3, AT)
    assert last_error == "KeyError('email')"
    assert (failure.attempt, failure.failed_at, failure.error_type) == (3, AT, "")
    assert (failure.message, failure.traceback) == ("KeyError('email')", None)
    # text that only looks like JSON is plain text too
    assert read_history('{"a": 1}', 1, AT)[0] == '{"a": 1}'


def test_a_text_only_failure_is_recorded() -> None:
    stored = record_failure(None, "gave up: no", None, 2, AT)
    record = json.loads(stored)
    assert record["last_error"] == "gave up: no"
    _, [failure] = read_history(stored, 0, None)
    assert (failure.attempt, failure.error_type, failure.message) == (2, "", "gave up: no")
