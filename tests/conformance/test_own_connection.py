"""The application's own connection (SPEC §2, §4): sqlite3, psycopg and SQLAlchemy.

txqueue joins the caller's open transaction (``batch(connection=...)``,
``run_in_transaction(fn, connection=...)``) without committing it, and a plain SQL INSERT or
DELETE on the queue table from that connection is a send or an ack. Either way the effect
becomes visible exactly when the application commits.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import pytest
from blocking import shared_loop
from spannerfixtures import SpannerAppTransaction

from txqueue.errors import AlreadyExists, NotFound

from .support import SKEW, BackgroundReceiver, Env, Face, is_postgres, is_spanner, seconds, utcnow

INSERT_TASK = (
    "INSERT INTO usertasks (userid, messageid, payload) VALUES (:userid, :messageid, :payload)"
)
DELETE_TASK = "DELETE FROM usertasks WHERE userid = :userid AND messageid = :messageid"
INSERT_USER = "INSERT INTO users (userid, username) VALUES (:userid, :username)"


def sqlite_path(url: str) -> str:
    assert url.startswith("sqlite:///"), url
    return url[len("sqlite:///") :]


class AppConnection:
    """A connection the application opened itself, with an open transaction on it.

    On the asyncio face it is what an asyncio application holds: a psycopg
    ``AsyncConnection`` (or a SQLAlchemy connection of an async engine) on PostgreSQL; on
    SQLite a sqlite3 connection the event loop's thread may use as well as the test's.
    """

    def __init__(self, url: str, kind: str, face: Face) -> None:
        self.kind = kind
        self._engine: Any = None
        self._async: Any = None  # the awaitable connection the test's statements go through
        self._loop = shared_loop() if face.is_async else None
        self._spanner: SpannerAppTransaction | None = None
        self._conn: Any = None
        if is_spanner(url):
            # On Spanner the application's own connection is a google-cloud-spanner
            # read-write transaction (both kinds: the driver joins only that).
            self._spanner = SpannerAppTransaction(url)
        elif kind == "sqlalchemy":
            import sqlalchemy
            from sqlalchemy.ext.asyncio import create_async_engine

            sa_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
            if self._loop is not None and is_postgres(url):
                self._engine = create_async_engine(sa_url)
                self._async = self._run(self._engine.connect())
                self.conn = self._async.sync_connection
            else:
                self._engine = sqlalchemy.create_engine(sa_url)
                self.conn = self._engine.connect()
        elif is_postgres(url):
            import psycopg

            if self._loop is not None:
                self._async = self._run(psycopg.AsyncConnection.connect(url))
                self.conn = self._async
            else:
                self.conn = psycopg.connect(url)  # autocommit off: the first statement begins
        else:
            same_thread = self._loop is None
            self.conn = sqlite3.connect(sqlite_path(url), timeout=10, check_same_thread=same_thread)

    @property
    def conn(self) -> Any:
        return self._spanner.conn if self._spanner is not None else self._conn

    @conn.setter
    def conn(self, value: Any) -> None:
        self._conn = value

    def _run(self, awaitable: Any) -> Any:
        assert self._loop is not None
        return self._loop.run(_awaited(awaitable))

    def execute(self, sql: str, params: dict[str, Any]) -> int:
        if self._spanner is not None:
            return self._spanner.execute(sql, params)
        if self.kind == "sqlalchemy":
            import sqlalchemy

            if self._async is not None:
                return int(self._run(self._async.execute(sqlalchemy.text(sql), params)).rowcount)
            return int(self.conn.execute(sqlalchemy.text(sql), params).rowcount)
        if isinstance(self.conn, sqlite3.Connection):
            return self.conn.execute(sql, params).rowcount
        statement = re.sub(r":(\w+)", r"%(\1)s", sql)
        if self._async is not None:
            return int(self._run(self._async.execute(statement, params)).rowcount)
        return int(self.conn.execute(statement, params).rowcount)

    def commit(self) -> None:
        if self._spanner is not None:
            self._spanner.commit()
        elif self._async is not None:
            self._run(self._async.commit())
        else:
            self.conn.commit()

    def rollback(self) -> None:
        if self._spanner is not None:
            self._spanner.rollback()
        elif self._async is not None:
            self._run(self._async.rollback())
        else:
            self.conn.rollback()

    def close(self) -> None:
        if self._spanner is not None:
            self._spanner.close()
            return
        if self._async is not None:
            self._run(self._async.close())
            if self._engine is not None:
                self._run(self._engine.dispose())
            return
        self.conn.close()
        if self._engine is not None:
            self._engine.dispose()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@pytest.fixture(params=["driver", "sqlalchemy"])
def app(request: pytest.FixtureRequest, env: Env) -> Iterator[AppConnection]:
    """The app's own connection: sqlite3 or psycopg ("driver"), or a SQLAlchemy Connection."""
    connection = AppConnection(env.url, str(request.param), env.face)
    try:
        yield connection
    finally:
        connection.close()


def test_batch_on_app_connection_is_visible_only_after_the_app_commits(
    env: Env, app: AppConnection
) -> None:
    env.add_users(1)

    with env.db.batch(connection=app.conn) as b:
        b.send(queue=env.tasks, key=(1, "welcome"), payload=b"hi")

    # the batch joined the app's transaction and did not commit it
    assert env.receive(max_duration=seconds(1)) == []
    assert env.task_keys() == []

    app.commit()

    m = env.receive_one()
    assert (m.key, m.payload, m.delivery_count) == ((1, "welcome"), b"hi", 1)


def test_app_rollback_discards_the_joined_send(env: Env, app: AppConnection) -> None:
    env.add_users(1)

    with env.db.batch(connection=app.conn) as b:
        b.send(queue=env.tasks, key=(1, "doomed"), payload=b"x")
    app.rollback()

    assert env.receive(max_duration=seconds(1.5)) == []
    assert env.task_keys() == []


def test_run_in_transaction_joins_the_app_transaction_without_committing(
    env: Env, app: AppConnection
) -> None:
    # the business row is written with the app's own SQL, the send through txqueue
    app.execute(INSERT_USER, {"userid": 124, "username": "New User"})

    def work(txn: Any, user_id: int) -> str:
        txn.send(queue=env.tasks, key=(user_id, "welcome-email-id"), payload=b"{}")
        return "sent"

    assert env.db.run_in_transaction(work, 124, connection=app.conn) == "sent"

    assert env.state() == ([], [])
    assert env.receive(max_duration=seconds(1)) == []

    app.commit()

    assert env.state() == ([(124, "New User")], [(124, "welcome-email-id")])
    assert env.receive_one().key == (124, "welcome-email-id")


def test_run_in_transaction_on_app_connection_then_app_rollback(
    env: Env, app: AppConnection
) -> None:
    app.execute(INSERT_USER, {"userid": 124, "username": "New User"})
    env.db.run_in_transaction(
        lambda txn: txn.send(queue=env.tasks, key=(124, "m"), payload=b"x"),
        connection=app.conn,
    )

    app.rollback()

    assert env.state() == ([], [])
    assert env.receive(max_duration=seconds(1.5)) == []


def test_plain_sql_insert_from_the_app_is_a_send(env: Env, app: AppConnection) -> None:
    env.add_users(124)
    before = utcnow()

    inserted = app.execute(
        INSERT_TASK, {"userid": 124, "messageid": "welcome-email-id", "payload": b"mail"}
    )
    assert inserted == 1
    assert env.receive(max_duration=seconds(1)) == []

    app.commit()
    after = utcnow()

    m = env.receive_one()
    assert (m.key, m.payload, m.delivery_count) == ((124, "welcome-email-id"), b"mail", 1)
    assert isinstance(m.payload, bytes)
    # DeliverTime defaulted to the moment of the insert
    assert before - SKEW <= m.deliver_time <= after + SKEW
    env.ack(m.key, lease_token=m.lease_token)
    assert env.task_keys() == []


def test_plain_sql_insert_wakes_a_running_receiver(env: Env, app: AppConnection) -> None:
    env.add_users(1)
    receiver = BackgroundReceiver(
        env.url, env.tasks, face=env.face, max_duration=seconds(8), limit=1
    ).start()
    time.sleep(1.0)  # pacing: let the stream reach its wait before the send

    app.execute(INSERT_TASK, {"userid": 1, "messageid": "raw", "payload": b"x"})
    app.commit()
    committed_at = utcnow()

    assert receiver.arrived.wait(8), "a committed plain INSERT never reached the stream"
    receiver.join()
    [(m, arrived)] = receiver.received
    assert m.key == (1, "raw")
    assert arrived - committed_at < seconds(4)


def test_plain_sql_duplicate_insert_is_refused(env: Env, app: AppConnection) -> None:
    env.add_users(1)
    env.send(1, "taken")

    # (Spanner's own words: "due to previously existing row")
    with pytest.raises(Exception, match=r"(?i)unique|duplicate|constraint|previously existing"):
        app.execute(INSERT_TASK, {"userid": 1, "messageid": "taken", "payload": b"again"})
    app.rollback()

    assert env.receive_one().payload == b"payload"


def test_plain_sql_delete_from_the_app_is_an_ack(env: Env, app: AppConnection) -> None:
    env.add_users(1)
    env.send(1, "a")
    env.send(1, "b")
    m = env.receive_one()

    deleted = app.execute(DELETE_TASK, {"userid": m.key[0], "messageid": m.key[1]})
    assert deleted == 1
    assert m.key in env.task_keys(), "not acked before the app commits"

    app.commit()

    assert m.key not in env.task_keys()
    assert len(env.task_keys()) == 1
    [r] = env.db.renew_lease(env.tasks, [m.lease_token])
    assert r.new_token is None
    with pytest.raises(NotFound):
        env.ack(m.key, lease_token=m.lease_token)


def test_joined_ack_applies_only_when_the_app_commits(env: Env, app: AppConnection) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one()

    with env.db.batch(connection=app.conn) as b:
        b.ack(queue=env.tasks, key=m.key, lease_token=m.lease_token)
    app.execute(INSERT_USER, {"userid": 2, "username": "result of the work"})

    assert env.state() == ([(1, "user 1")], [(1, "a")])

    app.commit()

    assert env.state() == ([(1, "user 1"), (2, "result of the work")], [])


def test_joined_batch_error_leaves_the_app_transaction_to_the_app(
    env: Env, app: AppConnection
) -> None:
    env.add_users(1)
    env.send(1, "taken")

    app.execute(INSERT_USER, {"userid": 2, "username": "two"})
    with pytest.raises(AlreadyExists), env.db.batch(connection=app.conn) as b:
        b.send(queue=env.tasks, key=(1, "taken"), payload=b"dup")
    app.rollback()

    assert env.state() == ([(1, "user 1")], [(1, "taken")])


def test_joined_batch_applied_again_after_a_miss_keeps_the_app_writes(
    env: Env, app: AppConnection
) -> None:
    """Undoing a joined batch's first flush (to apply it row by row) undoes only txqueue's
    part: the application's earlier writes in the same transaction stay."""
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one()

    app.execute(INSERT_USER, {"userid": 2, "username": "two"})
    with env.db.batch(connection=app.conn) as b:
        b.ack(queue=env.tasks, key=(1, "never-sent"), ignore_not_found=True)
        b.ack(queue=env.tasks, key=m.key, lease_token=m.lease_token)
        b.send(queue=env.tasks, key=(1, "b"), payload=b"b")
    app.commit()

    assert env.state() == ([(1, "user 1"), (2, "two")], [(1, "b")])


@pytest.mark.parametrize("kind", ["driver", "sqlalchemy"])
def test_each_app_commit_publishes_only_its_own_sends(env: Env, kind: str) -> None:
    """Two app transactions in a row on one connection: each send shows with its commit."""
    env.add_users(1)
    first = AppConnection(env.url, kind, env.face)
    try:
        with env.db.batch(connection=first.conn) as b:
            b.send(queue=env.tasks, key=(1, "first"), payload=b"1")
        first.commit()
        with env.db.batch(connection=first.conn) as b:
            b.send(queue=env.tasks, key=(1, "second"), payload=b"2")

        assert env.task_keys() == [(1, "first")]
        if env.db.engine == "postgres":
            # SQLite admits one writer: while the app's transaction holds the write lock, no
            # lease can be written, so receivers wait (docs/guarantees.md). PostgreSQL leases
            # the committed message at once.
            received = env.receive(max_duration=seconds(1.5), max_batch_size=5)
            assert [m.key for m in received] == [(1, "first")]

        first.commit()
        if env.db.engine == "postgres":
            assert env.receive_one().key == (1, "second")
        else:
            received = env.receive(max_duration=seconds(1.5), max_batch_size=5)
            assert sorted(m.key for m in received) == [(1, "first"), (1, "second")]
    finally:
        first.close()
