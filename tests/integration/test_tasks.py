"""Tasks as functions (``App.task``) on both engines and both faces: sends in the caller's
transaction, arguments checked before any write, the queue made on first use, the version
rule, and a round trip through a real ``txqueue worker`` process with a retry and a dead
letter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from worker_support import WorkerProcess, reap, records, wait_for

import txqueue
from txqueue.errors import FailedPrecondition, InvalidArgument, NotFound
from txqueue.testing import FakeClock, drain, drain_async
from txqueue.worker import OutcomeKind


@pytest.fixture
def url(database_url: str) -> Iterator[str]:
    yield database_url
    reap()


def _app(url: str, clock: FakeClock | None = None) -> tuple[txqueue.App, list[object]]:
    app = txqueue.App(url, clock=clock)
    calls: list[object] = []

    @app.task(queue="Mail", retry=txqueue.RetryPolicy(max_attempts=2))
    def welcome(user_id: int, template: str = "welcome") -> None:
        calls.append(("welcome", user_id, template))

    return app, calls


def _total(info: txqueue.QueueInfo) -> int:
    return info.ready + info.leased + info.scheduled


def _count(url: str, queue: str) -> int:
    with txqueue.connect(url) as db:
        return _total(db.queue_info(queue))


def test_a_task_is_sent_in_the_callers_transaction_and_run_with_its_arguments(url: str) -> None:
    app, calls = _app(url)
    [welcome] = app.tasks
    with txqueue.connect(url) as db:
        db.update_ddl(
            "CREATE TABLE Users (UserId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (UserId)"
            if db.dialect == "googlesql"
            else "CREATE TABLE users (userid bigint NOT NULL, name text, PRIMARY KEY (userid))"
        )
        with db.batch() as batch:  # the queue does not exist yet: the first send makes it
            batch.insert("Users", columns=("UserId", "Name"), values=[(5, "Ada")])
            key = welcome.send(batch, user_id=5, key="welcome-5")
        assert key == "welcome-5"

        class Abandon(Exception):
            pass

        def signs_up_then_fails(txn: txqueue.Transaction) -> None:
            welcome.send(txn, user_id=6)
            raise Abandon

        with pytest.raises(Abandon):
            db.run_in_transaction(signs_up_then_fails)
        assert _total(db.queue_info("Mail")) == 1  # the rolled-back send was never written

        with pytest.raises(txqueue.errors.AlreadyExists), db.batch() as batch:
            welcome.send(batch, user_id=5, key="welcome-5")  # a chosen key: sent once
    outcomes = drain(app, "Mail")
    assert [o.kind for o in outcomes] == [OutcomeKind.ACKED]
    assert calls == [("welcome", 5, "welcome")]


def test_arguments_are_checked_against_the_signature_before_anything_is_written(
    url: str,
) -> None:
    app, _ = _app(url)
    [welcome] = app.tasks
    with txqueue.connect(url) as db:
        app.create_task_queues(db)
        app.create_task_queues(db)  # idempotent
        for args, kwargs, named in [
            ((), {"user_id": "5"}, "parameter 'user_id': expected int, got str"),
            ((), {}, "missing a required argument: 'user_id'"),
            ((), {"user_id": 5, "colour": "red"}, "unexpected keyword argument 'colour'"),
            ((5,), {"template": 7}, "parameter 'template': expected str, got int"),
            ((True,), {}, "parameter 'user_id': expected int, got bool"),
        ]:
            with pytest.raises(InvalidArgument, match=named), db.batch() as batch:
                batch.send("Mail", ("other",), {"task": "welcome", "arguments": {"user_id": 1}})
                welcome.send(batch, *args, **kwargs)
            assert _total(db.queue_info("Mail")) == 0  # the batch's other send went nowhere
        with pytest.raises(InvalidArgument, match="key must be a non-empty string"):
            welcome.send(db.batch(), user_id=1, key=("tuple",))


def test_a_missing_task_queue_cannot_be_made_inside_a_transaction(url: str) -> None:
    app, _ = _app(url)
    [welcome] = app.tasks
    with txqueue.connect(url) as db:
        with pytest.raises(FailedPrecondition, match="create_task_queues"):
            db.run_in_transaction(lambda txn: welcome.send(txn, user_id=1))
        with pytest.raises(NotFound):
            db.queue("Mail")
        app.create_task_queues(db)
        db.run_in_transaction(lambda txn: welcome.send(txn, user_id=1))
        assert _total(db.queue_info("Mail")) == 1


def test_the_version_rule_for_messages_the_running_code_cannot_take(url: str) -> None:
    clock = FakeClock()
    app, calls = _app(url, clock)
    with txqueue.connect(url, clock=clock) as db:
        app.create_task_queues(db)
        with db.batch() as batch:  # as plain SQL or an older/newer version would write them
            batch.send("Mail", ("old-fits",), {"task": "welcome", "arguments": {"user_id": 1}})
            batch.send("Mail", ("old-unfit",), {"task": "welcome", "arguments": {"id": 2}})
            batch.send("Mail", ("unknown",), {"task": "gone", "arguments": {}})
            batch.send(
                "Mail", ("newer",), {"task": "welcome", "version": 2, "arguments": {"user_id": 3}}
            )
        outcomes = {o.key[0]: o for o in drain(app, "Mail", advance_clock=False)}
        dead = {d.key[0]: d for d in db.dead_letters("Mail")}
    assert calls == [("welcome", 1, "welcome")]
    assert outcomes["old-fits"].kind is OutcomeKind.ACKED
    # Unfit arguments or an unknown task: dead-lettered at the first delivery, with the reason.
    assert outcomes["old-unfit"].kind is OutcomeKind.DEAD_LETTERED
    assert "missing a required argument: 'user_id'" in (dead["old-unfit"].last_error)
    assert outcomes["unknown"].kind is OutcomeKind.DEAD_LETTERED
    assert "no task named 'gone'" in (dead["unknown"].last_error)
    # A message of a newer version waits for a newer worker (retried, not run, not dropped).
    assert outcomes["newer"].kind is OutcomeKind.RETRIED
    assert "version 2" in (outcomes["newer"].error or "")


def test_registration_refuses_what_cannot_be_sent_as_json() -> None:
    app = txqueue.App()
    with pytest.raises(InvalidArgument, match=r"parameter 'when': .* is not a JSON shape"):

        @app.task()
        def later(when: Path) -> None: ...

    with pytest.raises(InvalidArgument, match="parameter 'user_id': annotate it"):

        @app.task()
        def unannotated(user_id) -> None:  # type: ignore[no-untyped-def]
            ...

    with pytest.raises(InvalidArgument, match="the name is reserved"):

        @app.task()
        def keyed(key: str) -> None: ...

    with pytest.raises(InvalidArgument, match="kwargs cannot be sent"):

        @app.task()
        def loose(**options: int) -> None: ...

    @app.task(queue="Shared")
    def first(n: int) -> None: ...

    with pytest.raises(InvalidArgument, match="has other retry"):

        @app.task(queue="Shared", retry=txqueue.RetryPolicy(max_attempts=9))
        def second(n: int) -> None: ...

    with pytest.raises(InvalidArgument, match="sync tasks; give this one its own queue"):

        @app.task(queue="Shared")
        async def third(n: int) -> None: ...

    @app.task()
    def measure(value: float, extra: dict[str, float]) -> float:
        return value

    for arguments in ({"value": float("nan"), "extra": {}}, {"value": 1, "extra": {"x": 1e999}}):
        with pytest.raises(InvalidArgument, match="is not a JSON number"):
            measure.signature.arguments((), arguments)
    assert measure(value=2.5, extra={}) == 2.5  # calling a task calls the function


async def test_tasks_on_the_asyncio_face(url: str) -> None:
    app = txqueue.App(url)
    heard: list[str] = []

    @app.task(queue="Shouts")
    async def shout(word: str) -> None:
        heard.append(word.upper())

    adb = await txqueue.connect_async(url)
    try:
        async with adb.batch() as batch:  # an AsyncBatch records the send: made on first use
            await shout.send_async(batch, word="batch")

        async def in_transaction(txn: txqueue.AsyncTransaction) -> None:
            await shout.send_async(txn, "transaction")

        await adb.run_in_transaction(in_transaction)
        with pytest.raises(InvalidArgument, match="expected str, got int"):
            await adb.run_in_transaction(lambda txn: shout.send_async(txn, word=3))
        outcomes = await drain_async(app, "Shouts")
    finally:
        await adb.close()
    assert [o.kind for o in outcomes] == [OutcomeKind.ACKED] * 2
    assert sorted(heard) == ["BATCH", "TRANSACTION"]


def test_a_task_round_trip_through_a_real_worker_process(url: str, tmp_path: Path) -> None:
    from task_app import add, broken, flaky, shout

    worker = WorkerProcess(
        url, tmp_path, "--concurrency", "2", app="tests.integration.task_app:app"
    )
    with txqueue.connect(url) as db:  # the worker made both task queues when it started
        assert {q.name.lower() for q in db.queues()} >= {"taskjobs", "asynctaskjobs"}
        refused = pytest.raises(InvalidArgument, match="parameter 'b': expected int")
        with refused, db.batch() as batch:
            add.send(batch, a=1, b=2, key="refused-with-its-batch")
            add.send(batch, a=1, b="2")
        with db.batch() as batch:
            add.send(batch, a=2, b=3, tags=["x"], key="add")
            flaky.send(batch, "f", key="flaky")
            broken.send(batch, label="b", key="broken")
        with db.batch() as batch:
            shout.send(batch, word="hi", key="shout")

    wait_for(lambda: records(tmp_path, event="flaky"), 60, "the flaky task's retry", worker)
    wait_for(lambda: len(records(tmp_path, event="broken-failed")) == 2, 60, "two tries", worker)
    wait_for(lambda: _count(url, "TaskJobs") == 0, 60, "an empty TaskJobs queue", worker)
    assert worker.stop() == 0

    assert [r["total"] for r in records(tmp_path, event="add")] == [5]
    assert records(tmp_path, event="add")[0]["tags"] == ["x"]
    assert [r["delivery"] for r in records(tmp_path, event="flaky-failed")] == [1]
    assert [r["delivery"] for r in records(tmp_path, event="flaky")] == [2]
    assert [r["word"] for r in records(tmp_path, event="shout")] == ["HI"]
    with txqueue.connect(url) as db:
        [dead] = db.dead_letters("TaskJobs")
        assert dead.key == ("broken",) and "broken b" in dead.last_error
        assert dead.payload["task"] == "broken"
        with pytest.raises(NotFound):
            db.get_message("TaskJobs", ("refused-with-its-batch",))
