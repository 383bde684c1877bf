"""Handling one delivery, against a fake DatabaseAccess: which database calls each outcome makes."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import txqueue
from txqueue.core.schema import Column, ColumnType, Table
from txqueue.errors import FailedPrecondition
from txqueue.models import LeaseRenewal, Message
from txqueue.worker import lease_lost
from txqueue.worker.app import HandlerSpec
from txqueue.worker.leases import Lease
from txqueue.worker.operations import Ack, LeaseLostError, Operation, Send
from txqueue.worker.outcomes import OutcomeKind
from txqueue.worker.process import Handling, process

NOW = datetime(2030, 1, 1, 10, 0, 0, tzinfo=timezone.utc)
POLICY = txqueue.RetryPolicy(max_attempts=3)


class FakeDatabaseAccess:
    """Records every call; ``refuse`` makes acks and releases fail as after a lost lease."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.refuse = False
        self.table = Table(
            "Q",
            (
                Column("Name", ColumnType.STRING, nullable=False),
                Column("Slot", ColumnType.STRING, nullable=False),
                Column("Payload", ColumnType.BYTES, nullable=False),
            ),
            ("Name", "Slot"),
            is_queue=True,
        )

    def now(self) -> datetime:
        return NOW

    async def queue(self, name: str) -> Table:
        return self.table

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    async def apply(self, operations: Sequence[Operation]) -> None:
        self.calls.append(("apply", list(operations)))
        if self.refuse and isinstance(operations[0], Ack) and operations[0].lease_token:
            raise LeaseLostError("refused")

    async def transact(
        self,
        function: Callable[..., Any],
        message: Message,
        before: Sequence[Operation],
        after: Sequence[Operation],
    ) -> None:
        self.calls.append(("transact", list(before), list(after)))
        if self.refuse:
            raise LeaseLostError("refused")
        result = function(message, "txn")
        if inspect.isawaitable(result):
            await result

    async def ack(self, queue: str, key: tuple[Any, ...], token: str) -> None:
        self.calls.append(("ack", key, token))
        if self.refuse:
            raise FailedPrecondition("refused")

    async def release(
        self,
        queue: str,
        token: str,
        delay: timedelta,
        error: str | None,
        exception: BaseException | None = None,
    ) -> int:
        self.calls.append(("release", token, delay, error))
        return 0 if self.refuse else 1

    async def dead_letter(
        self,
        queue: str,
        key: tuple[Any, ...],
        token: str,
        error: str,
        exception: BaseException | None = None,
    ) -> None:
        self.calls.append(("dead_letter", key, token, error))

    async def renew(
        self, queue: str, tokens: Sequence[str], extension: timedelta
    ) -> list[LeaseRenewal]:
        return []


def _handling(
    function: Callable[..., Any], delivery: int = 1, token: str | None = "t2", **options: Any
) -> Handling:
    spec = HandlerSpec(queue="Q", function=function, retry=options.pop("retry", POLICY), **options)
    message = Message("Q", ("job", "1"), b"{}", NOW, NOW, "t1", delivery)
    lease = Lease(message, spec.lease_duration)

    async def settle() -> str | None:
        return token  # the renewer's newest token (renewed from t1), or None when lost

    return Handling(spec, message, lease, settle)


async def test_return_acks_with_the_newest_token() -> None:
    access = FakeDatabaseAccess()
    outcome = await process(_handling(lambda m: None), access)
    assert outcome.kind is OutcomeKind.ACKED and outcome.at == NOW
    assert access.calls == [("ack", ("job", "1"), "t2")]


async def test_failure_releases_with_the_policy_delay_and_the_error() -> None:
    access = FakeDatabaseAccess()

    def fail(message: Message) -> None:
        raise KeyError("x")

    outcome = await process(_handling(fail, delivery=2), access)
    assert (outcome.kind, outcome.delay) == (OutcomeKind.RETRIED, timedelta(seconds=2))
    assert access.calls == [("release", "t2", timedelta(seconds=2), "KeyError('x')")]


async def test_last_attempt_dead_letters() -> None:
    access = FakeDatabaseAccess()

    async def fail(message: Message) -> None:
        raise ValueError("no")

    outcome = await process(_handling(fail, delivery=3), access)
    assert outcome.kind is OutcomeKind.DEAD_LETTERED
    assert access.calls == [("dead_letter", ("job", "1"), "t2", "ValueError('no')")]


async def test_too_many_deliveries_dead_letter_without_running() -> None:
    access, ran = FakeDatabaseAccess(), []
    outcome = await process(_handling(ran.append, delivery=4), access)
    assert ran == [] and outcome.kind is OutcomeKind.DEAD_LETTERED
    assert "exceeded max_attempts=3" in access.calls[0][3]


async def test_a_lost_lease_is_never_acked() -> None:
    access = FakeDatabaseAccess()
    outcome = await process(_handling(lambda m: None, token=None), access)
    assert outcome.kind is OutcomeKind.LEASE_LOST and access.calls == []


async def test_a_refused_ack_is_a_lost_lease() -> None:
    access = FakeDatabaseAccess()
    access.refuse = True
    outcome = await process(_handling(lambda m: None), access)
    assert outcome.kind is OutcomeKind.LEASE_LOST


async def test_async_handler_is_cancelled_when_its_lease_is_lost() -> None:
    access, seen = FakeDatabaseAccess(), []
    started = asyncio.Event()

    async def forever(message: Message) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    handling = _handling(forever, token=None)
    task = asyncio.create_task(process(handling, access))
    await started.wait()
    handling.lease.lose()
    outcome = await task
    assert seen == ["cancelled"] and outcome.kind is OutcomeKind.LEASE_LOST
    assert access.calls == []


async def test_sync_handler_can_see_its_lost_lease() -> None:
    access, seen = FakeDatabaseAccess(), []
    handling = _handling(lambda m: seen.append(lease_lost()), token=None)
    handling.lease.lose()
    await process(handling, access)
    assert seen == [True]
    assert lease_lost() is False, "outside a handler"


async def test_shutdown_releases_a_running_handler_at_once() -> None:
    access = FakeDatabaseAccess()
    started = asyncio.Event()

    async def slow(message: Message) -> None:
        started.set()
        await asyncio.sleep(60)

    task = asyncio.create_task(process(_handling(slow), access))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert access.calls == [("release", "t2", timedelta(0), None)]


async def test_transactional_handler_acks_first_in_its_transaction() -> None:
    access, seen = FakeDatabaseAccess(), []
    handling = _handling(lambda m, txn: seen.append(txn), transactional=True)
    outcome = await process(handling, access)
    assert outcome.kind is OutcomeKind.ACKED and seen == ["txn"]
    assert access.calls == [("transact", [Ack("Q", ("job", "1"), "t2")], [])]


async def test_transactional_failure_follows_the_policy() -> None:
    access = FakeDatabaseAccess()

    def fail(message: Message, txn: object) -> None:
        raise txqueue.Retry(timedelta(seconds=9))

    outcome = await process(_handling(fail, transactional=True), access)
    assert outcome.kind is OutcomeKind.RETRIED
    assert access.calls[-1] == ("release", "t2", timedelta(seconds=9), "Retry(retry requested)")


async def test_transactional_lost_lease_rolls_back() -> None:
    access = FakeDatabaseAccess()
    access.refuse = True
    outcome = await process(_handling(lambda m, txn: None, transactional=True), access)
    assert outcome.kind is OutcomeKind.LEASE_LOST


async def test_periodic_acks_and_sends_the_next_slot_together() -> None:
    from txqueue.worker.app import Schedule

    access = FakeDatabaseAccess()
    handling = _handling(lambda m: None, schedule=Schedule("job", timedelta(minutes=15)))
    handling.message = Message("Q", ("job", "2030-01-01T10:00:00Z"), b"", NOW, NOW, "t1", 1)
    await process(handling, access)
    [(kind, operations)] = access.calls
    next_run = Send(
        "Q",
        ("job", "2030-01-01T10:15:00Z"),
        b"",
        datetime(2030, 1, 1, 10, 15, tzinfo=timezone.utc),
        True,
    )
    assert kind == "apply" and operations == [
        Ack("Q", ("job", "2030-01-01T10:00:00Z"), "t2"),
        next_run,
    ]


async def test_resend_after_acks_on_arrival_and_acks_the_copy_on_success() -> None:
    access, seen = FakeDatabaseAccess(), []
    handling = _handling(seen.append, resend_after=timedelta(hours=1))
    outcome = await process(handling, access)
    assert outcome.kind is OutcomeKind.ACKED and len(seen) == 1
    copy = Send("Q", ("job", "1"), b"{}", NOW + timedelta(hours=1))
    assert access.calls == [
        ("apply", [Ack("Q", ("job", "1"), "t2"), copy]),
        ("apply", [Ack("Q", ("job", "1"), None, ignore_not_found=True)]),
    ]


async def test_resend_after_failure_leaves_the_copy() -> None:
    access = FakeDatabaseAccess()

    def fail(message: Message) -> None:
        raise RuntimeError("x")

    outcome = await process(_handling(fail, resend_after=timedelta(hours=1)), access)
    assert (outcome.kind, outcome.delay) == (OutcomeKind.RETRIED, timedelta(hours=1))
    assert len(access.calls) == 1
