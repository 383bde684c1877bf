"""``txqueue.testing``: drain and FakeClock on both engines — retry timing, dead letters,
transactional handlers, periodic runs, checkpoints and resend-later, with no waiting."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

import txqueue
from txqueue.testing import FakeClock, drain, drain_async
from txqueue.worker import OutcomeKind, checkpoint, checkpoint_async

GOOGLESQL = [
    "CREATE TABLE Handled (Id INT64 NOT NULL, Note STRING(MAX)) PRIMARY KEY (Id)",
    "CREATE QUEUE Tasks (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
    "CREATE QUEUE Ticks (Name STRING(MAX) NOT NULL, Slot STRING(MAX) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Name, Slot)",
]
POSTGRESQL = [
    "CREATE TABLE handled (id bigint NOT NULL, note varchar, PRIMARY KEY (id))",
    "CREATE QUEUE tasks (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
    "CREATE QUEUE ticks (name varchar NOT NULL, slot varchar NOT NULL, payload bytea NOT NULL,"
    " PRIMARY KEY (name, slot))",
]
POLICY = txqueue.RetryPolicy(
    max_attempts=4, min_retry_delay=timedelta(seconds=1), max_retry_delay=timedelta(seconds=3)
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db(database_url: str, clock: FakeClock) -> txqueue.Database:
    database = txqueue.connect(database_url, clock=clock)
    database.update_ddl(POSTGRESQL if database.dialect == "postgresql" else GOOGLESQL)
    yield database  # type: ignore[misc]
    database.close()


def _send(db: txqueue.Database, *keys: int, payload: object = None) -> None:
    with db.batch() as batch:
        for key in keys:
            batch.send("Tasks", (key,), json.dumps(payload or {}).encode())


def _handled(db: txqueue.Database) -> list[tuple[int, str]]:
    with db.snapshot() as snapshot:
        rows = snapshot.execute_sql("SELECT id, note FROM handled ORDER BY id")
    return [(int(r[0]), str(r[1])) for r in rows]


def test_retry_timing_follows_the_policy_on_the_fake_clock(
    db: txqueue.Database, clock: FakeClock
) -> None:
    def always_fails(message: txqueue.Message) -> None:
        raise RuntimeError("down")

    _send(db, 1)
    start = clock()
    outcomes = drain(db, "Tasks", always_fails, retry=POLICY, clock=clock)
    assert [o.kind for o in outcomes] == [OutcomeKind.RETRIED] * 3 + [OutcomeKind.DEAD_LETTERED]
    assert [o.delivery_count for o in outcomes] == [1, 2, 3, 4]
    assert [(o.at - start).total_seconds() for o in outcomes] == [0, 1, 3, 6]  # 1, 2, 3 (capped)
    [letter] = db.dead_letters("Tasks")
    assert (letter.key, letter.attempts, letter.last_error) == ((1,), 4, "RuntimeError('down')")
    assert letter.first_failure == start and letter.last_failure == start + timedelta(seconds=6)


def test_released_message_is_not_ready_before_its_delay(
    db: txqueue.Database, clock: FakeClock
) -> None:
    def fails(message: txqueue.Message) -> None:
        raise txqueue.Retry(timedelta(seconds=30))

    _send(db, 1)
    [outcome] = drain(db, "Tasks", fails, clock=clock, advance_clock=False)
    assert outcome.delay == timedelta(seconds=30)
    clock.advance(timedelta(seconds=29, microseconds=999_000))
    assert db.queue_info("Tasks").ready == 0
    clock.advance(timedelta(milliseconds=1))
    assert db.queue_info("Tasks").ready == 1


def test_give_up_dead_letters_at_once(db: txqueue.Database, clock: FakeClock) -> None:
    def refuse(message: txqueue.Message) -> None:
        raise txqueue.GiveUp("malformed")

    _send(db, 1, 2)
    outcomes = drain(db, "Tasks", refuse, clock=clock)
    assert [o.kind for o in outcomes] == [OutcomeKind.DEAD_LETTERED] * 2
    assert {d.last_error for d in db.dead_letters("Tasks")} == {"gave up: malformed"}


def test_expired_leases_count_as_attempts(db: txqueue.Database, clock: FakeClock) -> None:
    _send(db, 1)
    for _ in range(4):  # four crashed deliveries: received, never acked, lease expired
        assert len(list(db.receive("Tasks", max_duration=timedelta(milliseconds=1)))) == 1
        clock.advance(timedelta(hours=2))
    ran: list[int] = []
    outcomes = drain(db, "Tasks", lambda m: ran.append(m.delivery_count), retry=POLICY, clock=clock)
    assert ran == [] and [o.delivery_count for o in outcomes] == [5]
    [letter] = db.dead_letters("Tasks")
    assert letter.last_error.startswith("exceeded max_attempts=4 (delivery 5")


def test_transactional_handler_applies_effects_once(
    db: txqueue.Database, clock: FakeClock, database_url: str
) -> None:
    app = txqueue.App(database_url, clock=clock)
    attempts: list[int] = []

    @app.handler("Tasks", transactional=True, retry=POLICY)
    def record(message: txqueue.Message, txn: txqueue.Transaction) -> None:
        attempts.append(message.key[0])
        txn.insert("Handled", ("Id", "Note"), [(message.key[0], "done")])
        if message.key[0] == 2 and message.delivery_count == 1:
            raise RuntimeError("fails after writing")  # rolls the insert (and the ack) back

    _send(db, 1, 2)
    outcomes = drain(app, "Tasks")
    assert [o.kind for o in outcomes] == [OutcomeKind.ACKED, OutcomeKind.RETRIED, OutcomeKind.ACKED]
    assert attempts == [1, 2, 2]
    assert _handled(db) == [(1, "done"), (2, "done")]
    assert db.queue_info("Tasks").ready + db.queue_info("Tasks").scheduled == 0


def test_stale_transactional_worker_rolls_back(
    db: txqueue.Database, clock: FakeClock, database_url: str
) -> None:
    """A worker whose lease expired and was taken over: its ack fails, so its effects roll back."""
    from txqueue.worker.leases import Lease
    from txqueue.worker.process import Handling

    app = txqueue.App(database_url, clock=clock)

    @app.handler("Tasks", transactional=True)
    def record(message: txqueue.Message, txn: txqueue.Transaction) -> None:
        txn.insert("Handled", ("Id", "Note"), [(message.key[0], f"lease {message.delivery_count}")])

    _send(db, 1)
    [stale] = list(db.receive("Tasks", max_duration=timedelta(milliseconds=1)))
    clock.advance(timedelta(minutes=5))  # the lease expires; another worker takes the message
    [current] = list(db.receive("Tasks", max_duration=timedelta(milliseconds=1)))

    async def run_stale() -> OutcomeKind:
        from txqueue.worker.database_access import SyncDatabaseAccess
        from txqueue.worker.process import process

        async def settle() -> str | None:
            return stale.lease_token

        spec = app.handler_for("Tasks")
        handling = Handling(spec, stale, Lease(stale, spec.lease_duration), settle)
        return (await process(handling, SyncDatabaseAccess(db))).kind

    import asyncio

    assert asyncio.run(run_stale()) is OutcomeKind.LEASE_LOST
    assert _handled(db) == []
    clock.advance(timedelta(seconds=1))
    db.release_lease("Tasks", [current.lease_token])
    assert [o.kind for o in drain(app, "Tasks")] == [OutcomeKind.ACKED]
    assert _handled(db) == [(1, "lease 3")]


async def test_async_transactional_handler_and_checkpoint(
    database_url: str, clock: FakeClock
) -> None:
    adb = await txqueue.connect_async(database_url, clock=clock)
    await adb.update_ddl(POSTGRESQL if adb.dialect == "postgresql" else GOOGLESQL)
    app = txqueue.App(database_url, clock=clock)

    @app.handler("Tasks", transactional=True)
    async def step(message: txqueue.Message, txn: txqueue.AsyncTransaction) -> None:
        state = json.loads(message.payload)
        done = state.get("step", 0) + 1
        await txn.insert("Handled", ("Id", "Note"), [(done, f"step {done}")])
        if done < 3:
            await checkpoint_async(txn, message, json.dumps({"step": done}).encode())

    async with adb.batch() as batch:
        batch.send("Tasks", (1,), b"{}")
    outcomes = await drain_async(app, "Tasks", clock=clock)
    assert [o.kind for o in outcomes] == [OutcomeKind.ACKED] * 3
    assert [o.delivery_count for o in outcomes] == [1, 1, 1], "each step is a new message"
    async with adb.snapshot() as snapshot:
        rows = await snapshot.execute_sql("SELECT id, note FROM handled ORDER BY id")
    assert [tuple(r) for r in rows] == [(1, "step 1"), (2, "step 2"), (3, "step 3")]
    await adb.close()


def test_checkpoint_outside_the_worker_acks_and_sends_atomically(
    db: txqueue.Database, clock: FakeClock
) -> None:
    _send(db, 1)
    [message] = list(db.receive("Tasks", max_duration=timedelta(milliseconds=1)))
    db.run_in_transaction(
        lambda txn: checkpoint(txn, message, b'{"step": 1}', delay=timedelta(minutes=5))
    )
    info = db.queue_info("Tasks")
    assert (info.ready, info.leased, info.scheduled) == (0, 0, 1)
    clock.advance(timedelta(minutes=5))
    [resumed] = list(db.receive("Tasks", max_duration=timedelta(milliseconds=1)))
    assert (resumed.key, resumed.payload, resumed.delivery_count) == ((1,), b'{"step": 1}', 1)


def test_periodic_one_chain_per_schedule(
    db: txqueue.Database, clock: FakeClock, database_url: str
) -> None:
    clock.set(datetime(2030, 1, 1, 9, 59, 0, tzinfo=timezone.utc))
    app = txqueue.App(database_url, clock=clock)
    runs: list[tuple[object, ...]] = []

    @app.periodic("Ticks", every=timedelta(minutes=15), name="agg")
    def aggregate(message: txqueue.Message) -> None:
        runs.append(message.key)

    assert drain(app, "Ticks") == [], "seeded for 10:00, not due yet"
    assert drain(app, "Ticks") == [], "a second worker's seed is a duplicate: dropped"
    assert db.queue_info("Ticks").scheduled == 1
    clock.set(datetime(2030, 1, 1, 10, 0, 5, tzinfo=timezone.utc))
    assert [o.kind for o in drain(app, "Ticks")] == [OutcomeKind.ACKED]
    clock.set(datetime(2030, 1, 1, 10, 15, 0, tzinfo=timezone.utc))
    drain(app, "Ticks")
    clock.set(datetime(2030, 1, 1, 11, 40, 0, tzinfo=timezone.utc))  # late: missed slots skipped
    drain(app, "Ticks")
    assert runs == [
        ("agg", "2030-01-01T10:00:00Z"),
        ("agg", "2030-01-01T10:15:00Z"),
        ("agg", "2030-01-01T10:30:00Z"),
    ]
    assert db.queue_info("Ticks").scheduled == 1, "exactly one next run (11:45)"


def test_periodic_failure_keeps_the_chain(
    db: txqueue.Database, clock: FakeClock, database_url: str
) -> None:
    clock.set(datetime(2030, 1, 1, 9, 0, 0, tzinfo=timezone.utc))
    app = txqueue.App(database_url, clock=clock)

    @app.periodic("Ticks", every=timedelta(hours=1), retry=txqueue.RetryPolicy(max_attempts=1))
    def broken(message: txqueue.Message) -> None:
        raise RuntimeError("bad run")

    drain(app, "Ticks")
    clock.set(datetime(2030, 1, 1, 10, 0, 1, tzinfo=timezone.utc))
    assert [o.kind for o in drain(app, "Ticks")] == [OutcomeKind.DEAD_LETTERED]
    assert len(db.dead_letters("Ticks")) == 1
    assert db.queue_info("Ticks").scheduled == 1, "the 11:00 run is still scheduled"


def test_resend_after_is_at_most_once_per_delivery(
    db: txqueue.Database, clock: FakeClock, database_url: str
) -> None:
    app = txqueue.App(database_url, clock=clock)
    seen: list[int] = []

    @app.handler("Tasks", resend_after=timedelta(hours=1))
    def report(message: txqueue.Message) -> None:
        seen.append(message.delivery_count)
        info = db.queue_info("Tasks")
        assert (info.leased, info.scheduled) == (0, 1), "acked on arrival, the copy waits"
        if len(seen) == 1:
            raise RuntimeError("crashed half-way")

    _send(db, 1)
    assert [o.kind for o in drain(app, "Tasks", advance_clock=False)] == [OutcomeKind.RETRIED]
    clock.advance(timedelta(hours=1))
    assert [o.kind for o in drain(app, "Tasks")] == [OutcomeKind.ACKED]
    assert seen == [1, 1], "the copy is a new message"
    info = db.queue_info("Tasks")
    assert info.ready + info.leased + info.scheduled == 0


def test_fake_clock() -> None:
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    clock = FakeClock(start)
    assert clock() == start
    assert clock.advance(1.5) == start + timedelta(seconds=1.5)
    clock.set(start)
    assert clock() == start
    with pytest.raises(txqueue.errors.InvalidArgument):
        clock.advance(-1)
    with pytest.raises(txqueue.errors.InvalidArgument):
        FakeClock(datetime(2030, 1, 1))
    assert FakeClock()() > datetime.now(timezone.utc), "ahead, so fresh sends are ready"
