"""The Cloud Spanner engine on the emulator, through the public API on both faces.

Each test runs on a fresh GoogleSQL database holding ``Users`` and its interleaved
``UserTasks`` queue (``conftest.py``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from conformance.support import Face

import txqueue
from txqueue.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
)

# Bytes that are not valid base64 text nor UTF-8: they reach Spanner only when the driver
# encodes them for the client (raw bytes would be stored as if they were base64).
PAYLOAD = b"\x00\xff\xfe payload \x80"


def _send(db: Any, *keys: tuple[int, str], payload: bytes = PAYLOAD) -> None:
    with db.batch() as batch:
        batch.insert_or_update(
            "Users", columns=("UserId", "UserName"), values=[(k[0], "u") for k in keys]
        )
        for key in keys:
            batch.send(queue="UserTasks", key=key, payload=payload)


def test_connect_reads_the_database_dialect_and_makes_the_catalog(face: Face, spanner_url: str):
    db = face.connect(spanner_url)
    try:
        assert (db.engine, db.dialect.value) == ("spanner", "googlesql")
        assert db.queues() == []
    finally:
        db.close()
    with pytest.raises(InvalidArgument, match="dialect 'postgresql' differs"):
        face.connect(spanner_url, "postgresql")


def test_update_ddl_creates_tables_and_queues_in_the_catalog(db: Any, face: Face) -> None:
    tasks = db.queue("UserTasks")
    assert tasks.is_queue and tasks.parent == "Users" and tasks.on_delete_cascade
    assert not db.table("Users").is_queue
    db.update_ddl("CREATE INDEX UsersByName ON Users (UserName)")
    db.update_ddl("DROP INDEX UsersByName")
    db.update_ddl(
        "CREATE QUEUE Mail (Id STRING(36) NOT NULL, Payload STRING(MAX) NOT NULL) PRIMARY KEY (Id)"
    )
    assert [q.name for q in db.queues()] == ["Mail", "UserTasks"]
    db.update_ddl("DROP QUEUE Mail")
    assert [q.name for q in db.queues()] == ["UserTasks"]


def test_a_failed_ddl_batch_leaves_nothing_behind(db: Any) -> None:
    with pytest.raises(txqueue.errors.TxqueueError):
        db.update_ddl(
            [
                "CREATE TABLE Orders (Id INT64 NOT NULL) PRIMARY KEY (Id)",
                # Spanner refuses an index on an ARRAY column; the checks above it do not
                "CREATE TABLE Tags (Id INT64 NOT NULL, Names ARRAY<STRING(MAX)>) PRIMARY KEY (Id)",
                "CREATE INDEX TagsByNames ON Tags (Names)",
            ]
        )
    with pytest.raises(NotFound):
        db.table("Orders")
    db.update_ddl("CREATE TABLE Orders (Id INT64 NOT NULL) PRIMARY KEY (Id)")  # name is free


def test_send_receive_and_ack_with_the_lease_token(db: Any) -> None:
    _send(db, (1, "welcome"))
    [message] = db.receive_now("UserTasks", max_batch_size=10)
    assert (message.key, message.payload, message.delivery_count) == ((1, "welcome"), PAYLOAD, 1)
    assert message.lease_token and message.last_in_batch
    assert message.lease_expiration > message.deliver_time
    assert db.receive_now("UserTasks") == []  # leased
    info = db.queue_info("UserTasks")
    assert (info.ready, info.leased, info.scheduled) == (0, 1, 0)
    with db.batch() as batch:
        batch.ack(queue="UserTasks", key=(1, "welcome"), lease_token=message.lease_token)
    info = db.queue_info("UserTasks")
    assert (info.ready, info.leased, info.scheduled) == (0, 0, 0)
    with pytest.raises(NotFound), db.batch() as batch:
        batch.ack(queue="UserTasks", key=(1, "welcome"))
    with db.batch() as batch:
        batch.ack(queue="UserTasks", key=(1, "welcome"), ignore_not_found=True)


def test_receive_takes_the_oldest_first_up_to_the_batch_size(db: Any) -> None:
    for n in range(3):
        _send(db, (1, f"m{n}"))
    first = db.receive_now("UserTasks", max_batch_size=2)
    assert [m.key for m in first] == [(1, "m0"), (1, "m1")]
    assert len({m.lease_token for m in first}) == 2
    assert [m.key for m in db.receive_now("UserTasks", max_batch_size=2)] == [(1, "m2")]


def test_a_duplicate_send_is_already_exists_and_commits_nothing(db: Any) -> None:
    _send(db, (1, "once"))
    with pytest.raises(AlreadyExists), db.batch() as batch:
        batch.insert("Users", columns=("UserId", "UserName"), values=[(2, "two")])
        batch.send(queue="UserTasks", key=(1, "once"), payload=b"again")
    with db.snapshot() as snapshot:
        assert list(snapshot.execute_sql("SELECT UserId FROM Users ORDER BY UserId")) == [(1,)]


def test_renew_gives_a_new_token_and_the_old_one_loses_the_ack(db: Any) -> None:
    _send(db, (1, "long"))
    [message] = db.receive_now("UserTasks", lease_duration=timedelta(seconds=5))
    [renewal] = db.renew_lease("UserTasks", [message.lease_token])
    assert renewal.old_token == message.lease_token
    assert renewal.new_token not in (None, message.lease_token)
    assert renewal.lease_expiration >= message.lease_expiration
    [again] = db.renew_lease("UserTasks", [message.lease_token])
    assert again.new_token is None  # taken over by the renewal: a row, no new token
    assert db.renew_lease("UserTasks", ["not-a-token"]) == []
    with pytest.raises(FailedPrecondition), db.batch() as batch:
        batch.ack(queue="UserTasks", key=(1, "long"), lease_token=message.lease_token)
    with db.batch() as batch:
        batch.ack(queue="UserTasks", key=(1, "long"), lease_token=renewal.new_token)
    assert db.queue_info("UserTasks").leased == 0


def test_release_makes_the_message_receivable_again(db: Any) -> None:
    _send(db, (1, "retry"))
    [message] = db.receive_now("UserTasks")
    assert db.release_lease("UserTasks", [message.lease_token]) == 1
    assert db.release_lease("UserTasks", [message.lease_token]) == 0
    [again] = db.receive_now("UserTasks")
    assert (again.key, again.delivery_count) == ((1, "retry"), 2)


def test_an_expired_lease_redelivers_after_its_backoff(face: Face, spanner_url: str) -> None:
    moment = [datetime.now(timezone.utc)]
    db = face.connect(spanner_url, clock=lambda: moment[0])
    try:
        db.update_ddl(
            "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
            " PRIMARY KEY (Id)"
        )
        with db.batch() as batch:
            batch.send(queue="Jobs", key=("j",), payload=b"x")
        [message] = db.receive_now("Jobs", lease_duration=timedelta(seconds=10))
        moment[0] += timedelta(seconds=10, milliseconds=500)  # expired, backoff (1 s) running
        assert db.receive_now("Jobs") == []
        assert db.queue_info("Jobs").scheduled == 1
        moment[0] += timedelta(seconds=1)
        [again] = db.receive_now("Jobs")
        assert (again.key, again.delivery_count) == (("j",), 2)
        with pytest.raises(FailedPrecondition), db.batch() as batch:
            batch.ack(queue="Jobs", key=("j",), lease_token=message.lease_token)
    finally:
        db.close()


def test_a_future_deliver_time_is_scheduled(db: Any) -> None:
    with db.batch() as batch:
        batch.insert("Users", columns=("UserId", "UserName"), values=[(1, "u")])
        later = datetime.now(timezone.utc) + timedelta(hours=1)
        batch.send(queue="UserTasks", key=(1, "later"), payload=b"x", deliver_time=later)
    info = db.queue_info("UserTasks")
    assert (info.ready, info.scheduled) == (0, 1)
    assert db.receive_now("UserTasks") == []


def test_the_receive_stream_yields_what_is_sent(db: Any) -> None:
    _send(db, (1, "streamed"))
    stream = db.receive("UserTasks", max_duration=timedelta(seconds=5))
    try:
        message = next(iter(stream))
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    assert message.key == (1, "streamed")


def test_deleting_the_parent_row_deletes_its_messages(db: Any) -> None:
    _send(db, (1, "a"), (1, "b"))
    with db.batch() as batch:
        batch.delete("Users", keys=[(1,)])
    assert db.queue_info("UserTasks").ready == 0


def test_execute_sql_runs_spanner_sql_with_parameters(db: Any) -> None:
    _send(db, (7, "sql"))
    with db.snapshot() as snapshot:
        rows = list(
            snapshot.execute_sql(
                "SELECT UserId, MessageId, Payload FROM UserTasks WHERE UserId = @id",
                params={"id": 7},
            )
        )
    assert rows == [(7, "sql", PAYLOAD)]


def test_execute_update_asserts_the_rows_it_modified(db: Any) -> None:
    _send(db, (1, "sql-ack"))

    def work(transaction: Any) -> int:
        transaction.execute_update("UPDATE Users SET UserName = 'x' WHERE UserId = 1")
        with pytest.raises(OutOfRange):
            transaction.execute_update(
                "DELETE FROM UserTasks WHERE UserId = 1 AND MessageId = 'nope'"
                " ASSERT_ROWS_MODIFIED 1"
            )
        return int(
            transaction.execute_update(
                "DELETE FROM UserTasks WHERE UserId = 1 AND MessageId = 'sql-ack'"
                " ASSERT_ROWS_MODIFIED 1"
            )
        )

    assert db.run_in_transaction(work) == 1
    assert db.queue_info("UserTasks").ready == 0
    with db.snapshot() as snapshot:
        assert list(snapshot.execute_sql("SELECT UserName FROM Users")) == [("x",)]


def test_a_failing_transaction_commits_nothing(db: Any) -> None:
    def work(transaction: Any) -> None:
        transaction.insert("Users", columns=("UserId", "UserName"), values=[(5, "five")])
        transaction.send(queue="UserTasks", key=(5, "m"), payload=b"x")
        raise RuntimeError("the handler failed")

    with pytest.raises(RuntimeError):
        db.run_in_transaction(work)
    with db.snapshot() as snapshot:
        assert list(snapshot.execute_sql("SELECT UserId FROM Users")) == []
    assert db.queue_info("UserTasks").ready == 0


def test_dead_letters_move_replay_and_purge(db: Any) -> None:
    _send(db, (1, "bad"))
    [message] = db.receive_now("UserTasks")
    db.dead_letter("UserTasks", (1, "bad"), message.lease_token, "boom")
    [letter] = db.dead_letters("UserTasks")
    assert (letter.key, letter.payload, letter.attempts, letter.last_error) == (
        (1, "bad"),
        PAYLOAD,
        1,
        "boom",
    )
    assert db.queue_info("UserTasks").dead_letters == 1
    assert db.replay_dead_letters("UserTasks") == 1
    [again] = db.receive_now("UserTasks")
    assert (again.key, again.payload, again.delivery_count) == ((1, "bad"), PAYLOAD, 1)
    db.dead_letter("UserTasks", (1, "bad"), again.lease_token, "boom again")
    assert db.purge_dead_letters("UserTasks") == 1
    assert db.dead_letters("UserTasks") == []


def test_list_messages_browses_in_key_order_by_state(db: Any) -> None:
    _send(db, (1, "a"), (1, "b"), (2, "c"))
    [leased] = db.receive_now("UserTasks")
    assert [m.key for m in db.list_messages("UserTasks")] == [(1, "a"), (1, "b"), (2, "c")]
    assert [m.key for m in db.list_messages("UserTasks", state="leased")] == [leased.key]
    page = db.list_messages("UserTasks", after=(1, "a"), limit=1)
    assert [m.key for m in page] == [(1, "b")]
    assert [m.key for m in db.list_messages("UserTasks", key_prefix=(2,))] == [(2, "c")]
    assert db.get_message("UserTasks", (2, "c")).payload == PAYLOAD


def test_once_records_a_key_only_once(db: Any) -> None:
    def work(transaction: Any) -> bool:
        return bool(transaction.once("order-17"))

    assert db.run_in_transaction(work) is True
    assert db.run_in_transaction(work) is False


def _client_database(url: str) -> Any:
    from google.cloud import spanner

    _, project, _, instance, _, database = url.removeprefix("spanner://").split("/")
    return spanner.Client(project=project).instance(instance).database(database)


def test_a_batch_joins_the_applications_own_transaction(db: Any, spanner_url: str) -> None:
    database = _client_database(spanner_url)

    def work(transaction: Any, fail: bool) -> None:
        transaction.insert("Users", columns=("UserId", "UserName"), values=[(3, "own")])
        with db.batch(connection=transaction) as batch:
            batch.send(queue="UserTasks", key=(3, "joined"), payload=PAYLOAD)
        if fail:
            raise RuntimeError("the application changed its mind")

    with pytest.raises(RuntimeError):
        database.run_in_transaction(work, True)
    assert db.queue_info("UserTasks").ready == 0
    database.run_in_transaction(work, False)
    [message] = db.receive_now("UserTasks")
    assert (message.key, message.payload) == ((3, "joined"), PAYLOAD)
    refused = r"open google\.cloud\.spanner Transaction"
    with pytest.raises(InvalidArgument, match=refused), db.batch(connection=object()) as batch:
        batch.send(queue="UserTasks", key=(3, "other"), payload=b"x")


def test_a_key_sent_twice_in_one_transaction_is_already_exists_naming_it(db: Any) -> None:
    with pytest.raises(AlreadyExists, match=r"\(1, 'twice'\)"), db.batch() as batch:
        batch.insert("Users", columns=("UserId", "UserName"), values=[(1, "u")])
        batch.send(queue="UserTasks", key=(1, "twice"), payload=b"x")
        batch.send(queue="UserTasks", key=(1, "twice"), payload=b"y")
    assert db.queue_info("UserTasks").ready == 0


def test_engine_sql_takes_question_mark_markers_and_a_list(db: Any) -> None:
    _send(db, (4, "marked"))

    def work(transaction: Any) -> Any:
        return transaction.execute_engine_sql(
            "SELECT MessageId FROM UserTasks WHERE UserId = ? AND MessageId != '?'", [4]
        )

    assert list(db.run_in_transaction(work)) == [("marked",)]
