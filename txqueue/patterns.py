"""The exactly-once patterns of Spanner's queue guides, as small functions over the public API.

Each function is a few lines over ``Database.run_in_transaction``, ``Transaction.ack`` /
``send`` / ``once`` and ``Database.renew_lease``; read them as worked examples as much as
helpers. They use the sync face and know nothing of workers or handlers.

=========================  ===================================================================
pattern                    guarantee
=========================  ===================================================================
`process_then_ack`         fast work: effects and the lease-fenced ack commit together, so an
                           effect is applied exactly once however often the message is
                           delivered; a worker that lost its lease rolls its effects back
`ack_and_resend_later`     long work, at most once: ack now and schedule a follow-up message
                           in one transaction; finish with `process_then_ack` on the follow-up
`keep_lease_alive`         long work, at least once: a thread renews the lease at half its
                           duration, exposes the current token and flags a lost lease
`checkpoint`               long work in steps: ack + send a future message carrying the state,
                           atomically; a crash resumes from the last checkpoint
`schedule_next_run`        periodic work: ack + send the next run (on a fixed grid, no drift)
`run_once`                 effects outside any queue, exactly once across retries and unknown
                           commit outcomes, with the idempotency ledger (``txn.once``)
=========================  ===================================================================

What none of them can do is make an external side effect (an email, a card charge, an HTTP
call) happen exactly once: such a call is not part of the transaction, so a crash between
the call and the commit repeats it. Send it with an idempotency key the other side honours,
or record it with `run_once` before/after as your failure model requires. See
``docs/guarantees.md``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from txqueue._sync.database import Database, Transaction
from txqueue.errors import (
    CommitOutcomeUnknown,
    InvalidArgument,
    TxqueueError,
    Unavailable,
)
from txqueue.models import Message

__all__ = [
    "LeaseKeeper",
    "Scheduled",
    "ack_and_resend_later",
    "checkpoint",
    "event_ledger_key",
    "keep_lease_alive",
    "ledger_key",
    "message_ledger_key",
    "process_then_ack",
    "run_once",
    "schedule_next_run",
]

T = TypeVar("T")
Effect = Callable[[Transaction], T]


@dataclass(frozen=True)
class Scheduled:
    """A message this code sent for later delivery; no one holds a lease on it yet.

    Acking it (`process_then_ack`, `checkpoint`, ...) needs no lease token. If it comes due
    and is received elsewhere before you ack it, your ack still deletes it and the other
    receiver's ack fails: choose delays longer than the work they cover.
    """

    queue: str
    key: tuple[Any, ...]
    deliver_time: datetime


def _ack(txn: Transaction, current: Message | Scheduled) -> None:
    if isinstance(current, Message):
        txn.ack(current.queue, current.key, lease_token=current.lease_token)
    elif isinstance(current, Scheduled):
        txn.ack(current.queue, current.key)
    else:
        raise InvalidArgument(
            f"expected a received Message or a Scheduled message, got {type(current).__name__}"
        )


def _now(db: Database) -> datetime:
    return db.now() or datetime.now(timezone.utc)


def _positive(value: timedelta, name: str) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidArgument(f"{name} must be a positive timedelta, got {value!r}")
    return value


def process_then_ack(
    db: Database, message: Message | Scheduled, effect: Effect[T] | None = None
) -> T | None:
    """Run ``effect(txn)`` and ack ``message`` in one transaction; return what effect returned.

    The ack of a received message is fenced by its lease token: if the lease expired and
    another worker received the message, the ack fails (``FailedPrecondition``, or
    ``NotFound`` once that worker acked) and the whole transaction — effects included — rolls
    back. So an effect written through ``txn`` is applied exactly once per message, however
    often the message is delivered (Spanner's advice: assert the modified rows). The effect may
    run more than once (``run_in_transaction`` re-runs it after an abort); keep anything
    outside the database out of it.
    """

    def work(txn: Transaction) -> T | None:
        result = effect(txn) if effect is not None else None
        _ack(txn, message)
        return result

    return db.run_in_transaction(work)


def ack_and_resend_later(
    db: Database,
    message: Message,
    *,
    key: tuple[Any, ...],
    delay: timedelta,
    payload: Any = None,
) -> Scheduled:
    """Ack ``message`` and send a follow-up ``key`` due in ``delay``, in one transaction.

    For work longer than a lease that must run at most once per delivery (Spanner's long-running tasks): call
    this on arrival, do the work, then ack the follow-up with ``process_then_ack(db,
    follow_up, effect)``. If the worker dies during the work, the follow-up comes due after
    ``delay`` and the work is retried then, not at once; if this call returns, the original
    message will never be delivered again. The follow-up carries ``payload`` (default: the
    original payload), so its receiver can redo the work.
    """
    _positive(delay, "delay")
    deliver_time = _now(db) + delay
    body = message.payload if payload is None else payload

    def work(txn: Transaction) -> None:
        txn.ack(message.queue, message.key, lease_token=message.lease_token)
        txn.send(message.queue, key, body, deliver_time=deliver_time)

    db.run_in_transaction(work)
    return Scheduled(message.queue, tuple(key), deliver_time)


def checkpoint(
    db: Database,
    current: Message | Scheduled,
    *,
    key: tuple[Any, ...],
    state: Any,
    delay: timedelta,
    effect: Effect[Any] | None = None,
) -> Scheduled:
    """Ack ``current`` and send ``key`` carrying ``state``, due in ``delay``, atomically.

    Long work in steps (Spanner's checkpointed long-running tasks):
    after each step, checkpoint; the new message is the task's only record, so there is
    always exactly one. If the worker dies, the last checkpoint comes due after ``delay``
    and whoever receives it resumes from ``state``; until then no one else starts the task.
    ``effect(txn)``, when given, commits with the checkpoint (e.g. the step's output rows).
    """
    _positive(delay, "delay")
    deliver_time = _now(db) + delay
    queue = current.queue

    def work(txn: Transaction) -> None:
        if effect is not None:
            effect(txn)
        _ack(txn, current)
        txn.send(queue, key, state, deliver_time=deliver_time)

    db.run_in_transaction(work)
    return Scheduled(queue, tuple(key), deliver_time)


def schedule_next_run(
    db: Database,
    message: Message | Scheduled,
    *,
    key: tuple[Any, ...],
    every: timedelta,
    payload: Any = b"",
    effect: Effect[Any] | None = None,
) -> Scheduled:
    """Ack this run's message and send the next run's, in one transaction (periodic work).

    The next run is due on the message's own grid — ``deliver_time + k·every`` for the
    smallest k that lies in the future — so a late or slow run neither drifts the schedule
    nor piles up missed runs. Because ack and send commit together, there is exactly one
    pending run at any time: a crash before the commit redelivers this run, a crash after
    it leaves the next one scheduled.
    """
    _positive(every, "every")
    now = _now(db)
    due = message.deliver_time + every
    if due <= now:
        missed = (now - message.deliver_time) // every
        due = message.deliver_time + (missed + 1) * every

    def work(txn: Transaction) -> None:
        if effect is not None:
            effect(txn)
        _ack(txn, message)
        txn.send(message.queue, key, payload, deliver_time=due)

    db.run_in_transaction(work)
    return Scheduled(message.queue, tuple(key), due)


class LeaseKeeper:
    """The lease of one message, kept alive by a background thread (see `keep_lease_alive`).

    ``token`` and ``message`` always carry the newest lease token (each renewal invalidates
    the previous one); ``lost`` becomes True, with ``lost_reason``, when a renewal says the
    lease cannot be renewed (the message was acked or taken over) or when the lease ran out
    while renewals failed. Once lost, stop working on the message: its ack will fail.
    """

    def __init__(self, db: Database, message: Message, every: timedelta, extension: timedelta):
        self._db = db
        self._message = message
        self._every = every.total_seconds()
        self._extension = extension
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._lost = threading.Event()
        self.lost_reason: str | None = None
        self.renewals = 0
        self._thread = threading.Thread(target=self._run, name="txqueue-lease", daemon=True)

    @property
    def message(self) -> Message:
        """The message with the current lease token and expiration."""
        with self._lock:
            return self._message

    @property
    def token(self) -> str:
        return self.message.lease_token

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the lease is lost (True) or ``timeout`` passes (False)."""
        return self._lost.wait(timeout)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing (and wait for a renewal in flight); the current token stays valid."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _lose(self, reason: str) -> None:
        self.lost_reason = reason
        self._lost.set()

    def _run(self) -> None:
        wait = self._every
        while not self._stop.wait(wait):
            current = self.message
            try:
                renewals = self._db.renew_lease(
                    current.queue, [current.lease_token], self._extension
                )
            except TxqueueError as error:
                # Unreachable database: try again soon, while the lease lasts.
                if _now(self._db) >= current.lease_expiration:
                    self._lose(f"lease expired while renewals failed: {error}")
                    return
                wait = self._every / 4
                continue
            wait = self._every
            renewal = renewals[0] if renewals else None
            if renewal is None or renewal.new_token is None or renewal.lease_expiration is None:
                self._lose("the lease can no longer be renewed (expired, acked or taken over)")
                return
            with self._lock:
                self._message = replace(
                    current,
                    lease_token=renewal.new_token,
                    lease_expiration=renewal.lease_expiration,
                )
                self.renewals += 1


@contextmanager
def keep_lease_alive(
    db: Database,
    message: Message,
    every: timedelta | None = None,
    extension: timedelta | None = None,
) -> Iterator[LeaseKeeper]:
    """Renew ``message``'s lease in a background thread while the ``with`` block runs.

    ``extension`` (default: the lease time left when the block starts, i.e. about the lease
    duration) is how far each renewal extends the lease from now; ``every`` (default: half of
    it) is how often it renews, leaving the other half as margin for a slow renewal. Finish
    with ``keeper.stop()`` and then ``process_then_ack(db, keeper.message, effect)``: stopping
    first means no renewal can replace the token between reading it and acking with it. The
    thread stops on leaving the block in any case.

    At least once, not at most once: if this process dies, the lease runs out and the message
    is delivered again. For at most once use `ack_and_resend_later`.
    """
    left = message.lease_expiration - _now(db)
    if extension is None:
        extension = max(left, timedelta(milliseconds=1))
    _positive(extension, "extension")
    interval = _positive(every, "every") if every is not None else extension / 2
    keeper = LeaseKeeper(db, message, interval, extension)
    if left <= timedelta(0):
        keeper._lose("the lease had already expired")
    else:
        keeper.start()
    try:
        yield keeper
    finally:
        keeper.stop()


def ledger_key(*parts: Any) -> str:
    """An idempotency-ledger key naming ``parts`` unambiguously (a JSON array of them).

    ``ledger_key("charge", order_id)``; parts may contain any characters, so ``("a:b", "c")``
    and ``("a", "b:c")`` never collide. Values JSON cannot hold are written with ``repr``.
    """
    if not parts:
        raise InvalidArgument("ledger_key needs at least one part")
    return json.dumps(list(parts), separators=(",", ":"), ensure_ascii=False, default=repr)


def message_ledger_key(message: Message | Scheduled) -> str:
    """The ledger key of a queue message: its queue (case-insensitive) and key."""
    return ledger_key("message", message.queue.lower(), *message.key)


def event_ledger_key(source: str, event_id: str) -> str:
    """The ledger key of a CloudEvent: ``source`` + ``id``, which CloudEvents makes unique."""
    if not isinstance(source, str) or not isinstance(event_id, str) or not source or not event_id:
        raise InvalidArgument("a CloudEvent's source and id must be non-empty strings")
    return ledger_key("cloudevent", source, event_id)


def run_once(
    db: Database,
    key: str,
    effect: Effect[Any],
    *,
    attempts: int = 5,
) -> bool:
    """Apply ``effect(txn)`` at most once for ``key``, retrying when the outcome is unknown.

    The transaction records ``key`` in the idempotency ledger (``txn.once``) and runs the
    effect only if the key was not there. So it is safe to run again after anything —
    ``CommitOutcomeUnknown``, ``Unavailable``, a crash of the caller, a SQLite database
    that lost its last commits on power loss (``synchronous=NORMAL``) — which is what this
    function does itself, up to ``attempts`` times, for the first two: a transaction that
    did commit is then found in the ledger and not applied again.

    Returns True when the committed transaction of this call applied the effect, False
    when the key was already recorded (by an earlier call, or by an attempt of this call
    whose commit outcome was unknown). Keys stay until ``db.expire_ledger(retention)``
    forgets them: keep them longer than any retry can arrive.
    """
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise InvalidArgument(f"attempts must be a positive integer, got {attempts!r}")

    def work(txn: Transaction) -> bool:
        if not txn.once(key):
            return False
        effect(txn)
        return True

    attempt = 1
    while True:
        try:
            return db.run_in_transaction(work)
        except (CommitOutcomeUnknown, Unavailable):
            if attempt >= attempts:
                raise
        time.sleep(min(0.1 * 2**attempt, 2.0))  # give a restarting server a moment
        attempt += 1
