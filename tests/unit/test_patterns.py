"""txqueue.patterns without a database: a fake Database records what each transaction did.

The fake runs a transaction function, records its operations in order, and "commits" them
as one unit only when the function returns — the atomicity the real faces give, so these
tests check what each pattern puts into one transaction, its arguments and its arithmetic.
Behaviour against real engines is in tests/integration/test_patterns_engines.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from txqueue import patterns
from txqueue.errors import CommitOutcomeUnknown, InvalidArgument, NotFound, Unavailable
from txqueue.models import LeaseRenewal, Message
from txqueue.patterns import Scheduled

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)


def message(token: str = "t1", deliver: datetime = T0, lease: float = 10.0) -> Message:
    return Message(
        queue="Jobs",
        key=(7, "a"),
        payload=b"p",
        deliver_time=deliver,
        lease_expiration=datetime.now(timezone.utc) + timedelta(seconds=lease),
        lease_token=token,
        delivery_count=1,
    )


class FakeTransaction:
    def __init__(self, ledger: set[str]) -> None:
        self.operations: list[tuple[Any, ...]] = []
        self._ledger = ledger

    def ack(self, queue: str, key: Any, ignore_not_found: bool = False, lease_token: Any = None):
        self.operations.append(("ack", queue, tuple(key), lease_token))

    def send(self, queue: str, key: Any, payload: Any, deliver_time: Any = None) -> None:
        self.operations.append(("send", queue, tuple(key), payload, deliver_time))

    def insert(self, table: str, columns: Any, values: Any) -> None:
        self.operations.append(("insert", table, tuple(map(tuple, values))))

    def once(self, key: str) -> bool:
        self.operations.append(("once", key))
        return key not in self._ledger


class FakeDatabase:
    """Records committed transactions; ``failures`` are raised by the next commits."""

    def __init__(self, now: datetime | None = T0) -> None:
        self.pinned = now
        self.committed: list[list[tuple[Any, ...]]] = []
        self.ledger: set[str] = set()
        self.failures: list[BaseException] = []
        self.commit_anyway = False  # a failure raised after the commit happened
        self.renewals: list[Callable[[list[str]], list[LeaseRenewal]]] = []
        self.renew_calls: list[tuple[str, list[str], timedelta]] = []

    def now(self) -> datetime | None:
        return self.pinned

    def run_in_transaction(self, function: Callable[..., Any]) -> Any:
        txn = FakeTransaction(self.ledger)
        result = function(txn)
        if self.failures:
            error = self.failures.pop(0)
            if self.commit_anyway:
                self._commit(txn)
            raise error
        self._commit(txn)
        return result

    def _commit(self, txn: FakeTransaction) -> None:
        self.committed.append(txn.operations)
        self.ledger.update(op[1] for op in txn.operations if op[0] == "once")

    def renew_lease(self, queue: str, tokens: list[str], extension: timedelta) -> Any:
        self.renew_calls.append((queue, list(tokens), extension))
        script = self.renewals.pop(0) if self.renewals else _renew
        return script(tokens)


def _renew(tokens: list[str]) -> list[LeaseRenewal]:
    new = f"{tokens[0]}+"
    return [LeaseRenewal(tokens[0], new, datetime.now(timezone.utc) + timedelta(seconds=10))]


def _wait(condition: Callable[[], Any], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# ---- process_then_ack --------------------------------------------------------------------


def test_process_then_ack_puts_effect_and_fenced_ack_in_one_transaction() -> None:
    db = FakeDatabase()
    result = patterns.process_then_ack(
        db, message(), lambda txn: txn.insert("Effects", ("K",), [(1,)]) or "done"
    )
    assert result == "done"
    assert db.committed == [
        [("insert", "Effects", ((1,),)), ("ack", "Jobs", (7, "a"), "t1")],
    ]


def test_process_then_ack_acks_a_scheduled_message_without_a_token() -> None:
    db = FakeDatabase()
    assert patterns.process_then_ack(db, Scheduled("Jobs", (1,), T0)) is None
    assert db.committed == [[("ack", "Jobs", (1,), None)]]


def test_process_then_ack_rejects_what_is_not_a_message() -> None:
    with pytest.raises(InvalidArgument, match="received Message or a Scheduled"):
        patterns.process_then_ack(FakeDatabase(), ("Jobs", (1,)))  # type: ignore[arg-type]


def test_a_failing_ack_commits_nothing() -> None:
    db = FakeDatabase()
    db.failures.append(NotFound("gone"))
    with pytest.raises(NotFound):
        patterns.process_then_ack(db, message(), lambda txn: txn.insert("E", ("K",), [(1,)]))
    assert db.committed == []


# ---- ack_and_resend_later, checkpoint, schedule_next_run --------------------------------


def test_ack_and_resend_later_acks_and_schedules_the_follow_up_atomically() -> None:
    db = FakeDatabase()
    follow_up = patterns.ack_and_resend_later(
        db, message(), key=(7, "b"), delay=timedelta(minutes=5)
    )
    assert follow_up == Scheduled("Jobs", (7, "b"), T0 + timedelta(minutes=5))
    assert db.committed == [
        [
            ("ack", "Jobs", (7, "a"), "t1"),
            ("send", "Jobs", (7, "b"), b"p", T0 + timedelta(minutes=5)),
        ]
    ]


def test_ack_and_resend_later_can_carry_another_payload() -> None:
    db = FakeDatabase()
    patterns.ack_and_resend_later(
        db, message(), key=(7, "b"), delay=timedelta(seconds=1), payload=b"x"
    )
    assert db.committed[0][1][3] == b"x"


@pytest.mark.parametrize("delay", [timedelta(0), timedelta(seconds=-1), 5])
def test_delays_must_be_positive_timedeltas(delay: Any) -> None:
    db = FakeDatabase()
    with pytest.raises(InvalidArgument, match="delay must be a positive timedelta"):
        patterns.ack_and_resend_later(db, message(), key=(1,), delay=delay)
    with pytest.raises(InvalidArgument, match="delay must be a positive timedelta"):
        patterns.checkpoint(db, message(), key=(1,), state=b"", delay=delay)
    with pytest.raises(InvalidArgument, match="every must be a positive timedelta"):
        patterns.schedule_next_run(db, message(), key=(1,), every=delay)
    assert db.committed == []


def test_checkpoint_commits_effect_ack_and_state_together() -> None:
    db = FakeDatabase()
    first = patterns.checkpoint(
        db,
        message(),
        key=(7, "step1"),
        state=b'{"done": 1}',
        delay=timedelta(seconds=30),
        effect=lambda txn: txn.insert("Out", ("N",), [(1,)]),
    )
    second = patterns.checkpoint(
        db, first, key=(7, "step2"), state=b'{"done": 2}', delay=timedelta(seconds=30)
    )
    assert second.key == (7, "step2")
    assert db.committed == [
        [
            ("insert", "Out", ((1,),)),
            ("ack", "Jobs", (7, "a"), "t1"),
            ("send", "Jobs", (7, "step1"), b'{"done": 1}', T0 + timedelta(seconds=30)),
        ],
        [
            ("ack", "Jobs", (7, "step1"), None),  # the checkpoint holds no lease
            ("send", "Jobs", (7, "step2"), b'{"done": 2}', T0 + timedelta(seconds=30)),
        ],
    ]


@pytest.mark.parametrize(
    ("now", "due"),
    [
        (T0 + timedelta(minutes=10), T0 + timedelta(hours=1)),  # on time: next slot
        (T0 + timedelta(hours=1), T0 + timedelta(hours=2)),  # exactly on the next slot
        (T0 + timedelta(hours=3, minutes=30), T0 + timedelta(hours=4)),  # late: skip missed
    ],
)
def test_schedule_next_run_stays_on_the_grid(now: datetime, due: datetime) -> None:
    db = FakeDatabase(now)
    next_run = patterns.schedule_next_run(
        db, message(deliver=T0), key=("hourly", "n2"), every=timedelta(hours=1)
    )
    assert next_run.deliver_time == due
    assert db.committed == [
        [("ack", "Jobs", (7, "a"), "t1"), ("send", "Jobs", ("hourly", "n2"), b"", due)]
    ]


def test_patterns_use_the_wall_clock_when_none_is_pinned() -> None:
    db = FakeDatabase(now=None)
    before = datetime.now(timezone.utc)
    follow_up = patterns.ack_and_resend_later(db, message(), key=(1,), delay=timedelta(seconds=60))
    assert before + timedelta(seconds=60) <= follow_up.deliver_time
    assert follow_up.deliver_time <= datetime.now(timezone.utc) + timedelta(seconds=60)


# ---- keep_lease_alive ----------------------------------------------------------------------


def test_keep_lease_alive_renews_and_exposes_the_newest_token() -> None:
    db = FakeDatabase(now=None)
    with patterns.keep_lease_alive(db, message("t1"), every=timedelta(milliseconds=10)) as lease:
        _wait(lambda: lease.renewals >= 3)
        lease.stop()
        renewals = lease.renewals
        assert lease.token == "t1" + "+" * renewals
        assert lease.message.lease_token == lease.token
        assert not lease.lost
    # Each renewal presented the token the previous one returned.
    presented = [tokens[0] for _, tokens, _ in db.renew_calls]
    assert presented == ["t1" + "+" * n for n in range(len(presented))]
    assert lease.renewals == renewals  # nothing renews after stop()


def test_keep_lease_alive_renews_at_half_the_lease_by_default() -> None:
    db = FakeDatabase(now=None)
    with patterns.keep_lease_alive(db, message(lease=0.4)) as lease:
        assert 0.15 < lease._every <= 0.2
        assert timedelta(seconds=0.3) < lease._extension <= timedelta(seconds=0.4)


def test_a_lease_that_cannot_be_renewed_is_flagged_lost() -> None:
    db = FakeDatabase(now=None)
    db.renewals.append(lambda tokens: [LeaseRenewal(tokens[0], None, None)])
    with patterns.keep_lease_alive(db, message(), every=timedelta(milliseconds=5)) as lease:
        assert lease.wait_lost(5)
        assert "can no longer be renewed" in (lease.lost_reason or "")
        assert lease.token == "t1"
    assert len(db.renew_calls) == 1  # it stops renewing once lost


def test_an_expired_token_that_renews_to_nothing_is_lost() -> None:
    db = FakeDatabase(now=None)
    db.renewals.append(lambda tokens: [])
    with patterns.keep_lease_alive(db, message(), every=timedelta(milliseconds=5)) as lease:
        assert lease.wait_lost(5)


def test_renewal_errors_are_retried_until_the_lease_runs_out() -> None:
    db = FakeDatabase(now=None)

    def unavailable(tokens: list[str]) -> list[LeaseRenewal]:
        raise Unavailable("down")

    db.renewals = [unavailable, unavailable, _renew]
    with patterns.keep_lease_alive(db, message(), every=timedelta(milliseconds=20)) as lease:
        _wait(lambda: lease.renewals == 1)
        assert not lease.lost  # two failures, then a renewal: the lease survived
    db = FakeDatabase(now=None)
    db.renewals = [unavailable] * 1000
    held = message(lease=0.2)
    with patterns.keep_lease_alive(
        db, held, every=timedelta(milliseconds=20), extension=timedelta(seconds=1)
    ) as lease:
        assert lease.wait_lost(5)
        assert "expired while renewals failed" in (lease.lost_reason or "")


def test_a_lease_already_expired_is_lost_from_the_start() -> None:
    db = FakeDatabase(now=None)
    with patterns.keep_lease_alive(db, message(lease=-1.0)) as lease:
        assert lease.lost and lease.lost_reason == "the lease had already expired"
    assert db.renew_calls == []


def test_the_renewing_thread_stops_with_the_block() -> None:
    db = FakeDatabase(now=None)
    with patterns.keep_lease_alive(db, message(), every=timedelta(milliseconds=5)) as lease:
        pass
    assert not lease._thread.is_alive()
    assert not [t for t in threading.enumerate() if t.name == "txqueue-lease" and t.is_alive()]


# ---- ledger keys and run_once ----------------------------------------------------------


def test_ledger_keys_are_unambiguous() -> None:
    assert patterns.ledger_key("a:b", "c") != patterns.ledger_key("a", "b:c")
    assert json.loads(patterns.ledger_key("charge", 42, "x")) == ["charge", 42, "x"]
    assert patterns.ledger_key(b"\x00") == "[\"b'\\\\x00'\"]"  # repr for non-JSON values
    with pytest.raises(InvalidArgument):
        patterns.ledger_key()


def test_message_ledger_key_names_queue_and_key() -> None:
    assert json.loads(patterns.message_ledger_key(message())) == ["message", "jobs", 7, "a"]
    scheduled = Scheduled("JOBS", (7, "a"), T0)
    assert patterns.message_ledger_key(scheduled) == patterns.message_ledger_key(message())


def test_event_ledger_key_is_source_and_id() -> None:
    key = patterns.event_ledger_key("//orders", "42")
    assert json.loads(key) == ["cloudevent", "//orders", "42"]
    assert patterns.event_ledger_key("a:b", "c") != patterns.event_ledger_key("a", "b:c")
    assert key != patterns.ledger_key("//orders", "42")  # kinds never collide
    for bad in [("", "1"), ("s", ""), (None, "1")]:
        with pytest.raises(InvalidArgument):
            patterns.event_ledger_key(*bad)  # type: ignore[arg-type]


def test_run_once_applies_then_skips() -> None:
    db = FakeDatabase()
    applied: list[int] = []
    assert patterns.run_once(db, "k", lambda txn: applied.append(1)) is True
    assert patterns.run_once(db, "k", lambda txn: applied.append(2)) is False
    assert applied == [1]


@pytest.mark.parametrize("error", [CommitOutcomeUnknown("?"), Unavailable("down")])
def test_run_once_retries_an_unknown_outcome_safely(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(patterns.time, "sleep", lambda seconds: None)
    db = FakeDatabase()
    db.failures.append(error)
    db.commit_anyway = True  # the first commit happened; the caller was not told
    effects: list[str] = []
    assert patterns.run_once(db, "k", lambda txn: effects.append("x")) is False
    assert effects == ["x"]  # the re-run found the key and did not apply it again
    assert len(db.committed) == 2 and ("once", "k") in db.committed[1]


def test_run_once_gives_up_after_its_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(patterns.time, "sleep", slept.append)
    db = FakeDatabase()
    db.failures = [Unavailable("down")] * 3
    with pytest.raises(Unavailable):
        patterns.run_once(db, "k", lambda txn: None, attempts=3)
    assert slept == [0.2, 0.4]
    with pytest.raises(InvalidArgument):
        patterns.run_once(db, "k", lambda txn: None, attempts=0)
