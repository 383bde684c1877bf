"""Structured logs and metrics."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

import pytest

from txqueue.errors import InvalidArgument
from txqueue.models import QueueInfo
from txqueue.worker.observe import JsonFormatter, Metrics, Stats, TextFormatter, configure_logging
from txqueue.worker.outcomes import Outcome, OutcomeKind

AT = datetime(2030, 1, 1, tzinfo=timezone.utc)


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "txqueue.worker", logging.WARNING, __file__, 1, "retried %s", ("Q",), None
    )
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_the_extra_fields() -> None:
    line = JsonFormatter().format(_record(queue="Q", key=[1, "a"], delivery_count=2))
    data = json.loads(line)
    assert data["message"] == "retried Q" and data["level"] == "warning"
    assert (data["queue"], data["key"], data["delivery_count"]) == ("Q", [1, "a"], 2)
    assert data["time"].endswith("+00:00")


def test_text_lines_append_key_values() -> None:
    line = TextFormatter().format(_record(queue="Q", outcome="retried"))
    assert line.endswith("retried Q queue=Q outcome=retried")


def test_text_lines_show_control_characters_as_escapes() -> None:
    """Stored and remote text (keys, handler errors, response bodies) cannot drive the terminal."""
    record = _record(key=["a\x1b]8;;http://evil\x1b\\"], error="boom\x07\nforged line")
    record.args = ("\x1b[2J",)
    try:
        raise ValueError("bad \x1b[31mred")
    except ValueError:
        record.exc_info = sys.exc_info()
    line = TextFormatter().format(record)
    assert "retried \\x1b[2J " in line
    assert "key=['a\\x1b]8;;http://evil\\x1b\\\\'] error=boom\\x07\\nforged line" in line
    assert line.endswith("ValueError: bad \\x1b[31mred") and "Traceback" in line.splitlines()[1]
    assert not [c for c in line if c in "\x1b\x07\r"]


def test_configure_logging_checks_the_format() -> None:
    with pytest.raises(InvalidArgument, match="log format"):
        configure_logging("xml")


def test_metrics_are_named_after_spanners() -> None:
    metrics = Metrics()
    stats = Stats(metrics)
    stats.outcome(Outcome("Q", (1,), 1, OutcomeKind.ACKED, AT, duration=0.01))
    stats.outcome(Outcome("Q", (2,), 1, OutcomeKind.RETRIED, AT, duration=0.02))
    stats.sent("Q")
    stats.lease_lost("Q")
    stats.queue_info(
        QueueInfo("Q", ready=3, leased=1, scheduled=2, dead_letters=4, oldest_ready_age_seconds=1.5)
    )
    text = metrics.text()
    for line in [
        'txqueue_message_ack_count_total{queue="Q"} 1.0',
        'txqueue_message_send_count_total{queue="Q"} 1.0',
        'txqueue_buffered_ready_messages{queue="Q"} 3.0',
        'txqueue_oldest_unacked_message_age{queue="Q"} 1.5',
        'txqueue_lease_expiration_count_total{queue="Q"} 1.0',
        'txqueue_handler_outcome_count_total{outcome="retried",queue="Q"} 1.0',
        'txqueue_handler_latency_seconds_count{queue="Q"} 2.0',
        'txqueue_dead_letter_messages{queue="Q"} 4.0',
    ]:
        assert line in text, line
    assert stats.total(OutcomeKind.ACKED) == 1


def test_two_workers_in_one_process_have_separate_metrics() -> None:
    Metrics()
    Metrics()  # a shared default registry would refuse the second set of names
