"""Failure history through the worker's own rules (``txqueue.testing.drain``, both faces) and
the worker runtime's log: each failed attempt is kept with its traceback, and the log record of
a failed delivery carries the traceback (``exc_info``), on both engines."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

import pytest

import txqueue
from txqueue.testing import FakeClock, drain, drain_async
from txqueue.worker import OutcomeKind, Worker

QUEUE = "CREATE QUEUE Tasks (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
QUEUE_PG = "CREATE QUEUE tasks (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"
THREE = txqueue.RetryPolicy(max_attempts=3)


def welcome_email(message: txqueue.Message) -> None:
    raise KeyError("email")


async def welcome_email_async(message: txqueue.Message) -> None:
    raise KeyError("email")


def _check_letter(letter: txqueue.DeadLetter, handler: str) -> None:
    assert letter.attempts == 3
    assert letter.last_error == "KeyError('email')"
    assert [(f.attempt, f.error_type, f.message) for f in letter.failures] == [
        (n, "KeyError", "'email'") for n in (1, 2, 3)
    ]
    for failure in letter.failures:
        assert f"in {handler}" in (failure.traceback or "")
        assert (failure.traceback or "").endswith("KeyError: 'email'\n")
    assert letter.failures[0].failed_at == letter.first_failure
    assert letter.failures[-1].failed_at == letter.last_failure


def test_each_failed_attempt_is_kept_and_moves_into_the_dead_letter(database_url: str) -> None:
    clock = FakeClock()
    with txqueue.connect(database_url, clock=clock) as db:
        db.update_ddl([QUEUE_PG if db.dialect == "postgresql" else QUEUE])
        with db.batch() as batch:
            batch.send("Tasks", (999,), b"{}")
        [first] = drain(db, "Tasks", welcome_email, retry=THREE, clock=clock, max_deliveries=1)
        assert first.kind is OutcomeKind.RETRIED
        waiting = db.get_message("Tasks", (999,))  # waiting for its retry
        [failure] = waiting.failures
        assert (failure.attempt, failure.error_type, failure.failed_at) == (1, "KeyError", first.at)
        assert "in welcome_email" in (failure.traceback or "")
        assert first.delay is not None
        clock.advance(first.delay)
        rest = drain(db, "Tasks", welcome_email, retry=THREE, clock=clock)
        assert [o.kind for o in rest] == [OutcomeKind.RETRIED, OutcomeKind.DEAD_LETTERED]
        [letter] = db.dead_letters("Tasks")
        _check_letter(letter, "welcome_email")


async def test_the_asyncio_face_keeps_the_same_history(database_url: str) -> None:
    clock = FakeClock()
    db = await txqueue.connect_async(database_url, clock=clock)
    try:
        await db.update_ddl([QUEUE_PG if db.dialect == "postgresql" else QUEUE])
        async with db.batch() as batch:
            batch.send("Tasks", (999,), b"{}")
        outcomes = await drain_async(db, "Tasks", welcome_email_async, retry=THREE, clock=clock)
        assert [o.kind for o in outcomes][-1] is OutcomeKind.DEAD_LETTERED
        [letter] = await db.dead_letters("Tasks")
        _check_letter(letter, "welcome_email_async")
    finally:
        await db.close()


async def test_the_log_record_of_a_failed_delivery_carries_its_traceback(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = await txqueue.connect_async(database_url)
    await db.update_ddl([QUEUE_PG if db.dialect == "postgresql" else QUEUE])
    async with db.batch() as batch:
        batch.send("Tasks", (999,), b"{}")
    app = txqueue.App(database_url)
    app.handler("Tasks", retry=txqueue.RetryPolicy(max_attempts=2))(welcome_email)
    worker = Worker(app, concurrency=2)
    caplog.set_level(logging.WARNING, logger="txqueue.worker")
    running = asyncio.create_task(worker.run())
    try:
        deadline = time.monotonic() + 30
        while worker.stats.total(OutcomeKind.DEAD_LETTERED) == 0:
            assert time.monotonic() < deadline, "timed out waiting for the dead letter"
            await asyncio.sleep(0.02)
    finally:
        worker.stop()
        await running
        await db.close()
    outcomes = [r for r in caplog.records if getattr(r, "outcome", None) is not None]
    assert [r.getMessage().lower() for r in outcomes] == [
        "retried tasks [999]",
        "dead_lettered tasks [999]",
    ]
    for record in outcomes:
        assert record.exc_info is not None and isinstance(record.exc_info[1], KeyError)
        assert record.error == "KeyError('email')"  # type: ignore[attr-defined]
        text = logging.Formatter().format(record)
        assert "in welcome_email" in text and text.endswith("KeyError: 'email'")
    assert timedelta(seconds=outcomes[0].delay_s) == timedelta(seconds=1)  # type: ignore[attr-defined]
