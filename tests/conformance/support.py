"""Helpers for the conformance suite: the shared schema in both dialects, waits, receivers.

The suite runs one schema everywhere, the seed's ``Users`` table and its interleaved
``UserTasks`` queue, spelled in the dialect the database records (GoogleSQL on SQLite by
default, PostgreSQL on PostgreSQL). Plain SQL in the tests uses lower-case names, which both
engines accept for both dialects.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from blocking import Blocking, shared_loop, unwrap

import txqueue

# Clock slack for comparing timestamps from the database with the test's wall clock: both
# read the same host clock, so this only absorbs rounding and statement latency.
SKEW = timedelta(milliseconds=250)

GOOGLESQL_DDL = (
    "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX)) PRIMARY KEY (UserId)",
    "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL, "
    "Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId), "
    "INTERLEAVE IN PARENT Users ON DELETE CASCADE",
)
POSTGRESQL_DDL = (
    "CREATE TABLE users (userid bigint NOT NULL, username varchar(100), PRIMARY KEY (userid))",
    "CREATE QUEUE usertasks (userid bigint NOT NULL, messageid varchar(36) NOT NULL, "
    "payload bytea NOT NULL, PRIMARY KEY (userid, messageid)) "
    "INTERLEAVE IN PARENT users ON DELETE CASCADE",
)

OTHER_DIALECT = {"googlesql": "postgresql", "postgresql": "googlesql"}


def dialect_name(dialect: Any) -> str:
    """``db.dialect`` as a plain string ("googlesql" or "postgresql")."""
    value = getattr(dialect, "value", dialect)
    assert value in OTHER_DIALECT, f"unexpected dialect {dialect!r}"
    return str(value)


def default_dialect(url: str) -> str:
    return "postgresql" if url.startswith("postgres") else "googlesql"


def asked_dialect(url: str, dialect: str) -> str | None:
    """The ``dialect=`` a test connects with to use ``dialect``: on Cloud Spanner None, since a
    database's dialect is the one it was made with (asking for another is InvalidArgument)."""
    return None if is_spanner(url) else dialect


def is_postgres(url: str) -> bool:
    return url.startswith("postgres")


def is_spanner(url: str) -> bool:
    return url.startswith("spanner://")


@dataclass(frozen=True)
class Names:
    """Table, queue and column names of the shared schema in one dialect."""

    users: str
    user_id: str
    user_name: str
    tasks: str
    message_id: str
    ddl: tuple[str, ...]

    @classmethod
    def for_dialect(cls, dialect: Any) -> Names:
        if dialect_name(dialect) == "postgresql":
            return cls("users", "userid", "username", "usertasks", "messageid", POSTGRESQL_DDL)
        return cls("Users", "UserId", "UserName", "UserTasks", "MessageId", GOOGLESQL_DDL)

    @property
    def user_columns(self) -> tuple[str, str]:
        return (self.user_id, self.user_name)


@dataclass(frozen=True)
class Face:
    """One face of the public API: the blocking one, or the asyncio one through a Blocking view.

    Every conformance test that opens a database does it through ``face.connect`` so that it
    runs once per face (test ids name ``sync`` or ``async``).
    """

    name: str

    @property
    def is_async(self) -> bool:
        return self.name == "async"

    def connect(self, url: str, dialect: Any = None, **options: Any) -> Any:
        """``txqueue.connect``, or ``await txqueue.connect_async`` behind a Blocking view."""
        if not self.is_async:
            return txqueue.connect(url, dialect, **options)
        loop = shared_loop()
        return Blocking(loop.run(txqueue.connect_async(url, dialect, **options)), loop)

    def events(self, db: Any, **options: Any) -> Any:
        """``txqueue.Events`` on ``db``, or ``txqueue.AsyncEvents`` behind a Blocking view."""
        if not self.is_async:
            return txqueue.Events(db, **options)
        return Blocking(txqueue.AsyncEvents(unwrap(db), **options))


SYNC = Face("sync")
ASYNC = Face("async")
FACES = (SYNC, ASYNC)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout} s: {what or predicate}")
        time.sleep(0.05)


def sleep_until(moment: datetime) -> None:
    """Wait for the wall clock to pass ``moment`` (a time, not an outcome to poll for)."""
    delay = (moment - utcnow()).total_seconds()
    if delay > 0:
        time.sleep(delay)


def close_stream(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()


def receive_timed(
    db: Any,
    queue: str,
    *,
    max_duration: timedelta,
    max_batch_size: int = 1,
    lease_duration: timedelta = timedelta(seconds=10),
    limit: int | None = None,
) -> list[tuple[txqueue.Message, datetime]]:
    """Receive until ``limit`` messages arrived or the stream ends; each with its arrival time."""
    got: list[tuple[txqueue.Message, datetime]] = []
    stream = db.receive(
        queue,
        max_duration=max_duration,
        max_batch_size=max_batch_size,
        lease_duration=lease_duration,
    )
    try:
        for message in stream:
            got.append((message, utcnow()))
            if limit is not None and len(got) >= limit:
                break
    finally:
        close_stream(stream)
    return got


class Env:
    """A connected database with the shared schema, plus short-hands the tests share."""

    def __init__(self, db: Any, url: str, face: Face) -> None:
        self.db = db
        self.url = url
        self.face = face
        self.dialect = dialect_name(db.dialect)
        self.names = Names.for_dialect(self.dialect)

    @property
    def tasks(self) -> str:
        return self.names.tasks

    def add_users(self, *user_ids: int) -> None:
        with self.db.batch() as b:
            b.insert(
                self.names.users,
                columns=self.names.user_columns,
                values=[(user_id, f"user {user_id}") for user_id in user_ids],
            )

    def send(
        self,
        user_id: int,
        message_id: str,
        payload: bytes = b"payload",
        deliver_time: datetime | None = None,
    ) -> None:
        with self.db.batch() as b:
            b.send(
                queue=self.tasks,
                key=(user_id, message_id),
                payload=payload,
                deliver_time=deliver_time,
            )

    def ack(
        self, key: tuple[Any, ...], lease_token: str | None = None, ignore_not_found: bool = False
    ) -> None:
        with self.db.batch() as b:
            b.ack(
                queue=self.tasks,
                key=key,
                lease_token=lease_token,
                ignore_not_found=ignore_not_found,
            )

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with self.db.snapshot() as snapshot:
            return [tuple(row) for row in snapshot.execute_sql(sql)]

    def task_keys(self) -> list[tuple[Any, ...]]:
        """Keys of every message in the queue, leased or not."""
        return self.query("SELECT userid, messageid FROM usertasks ORDER BY userid, messageid")

    def user_rows(self) -> list[tuple[Any, ...]]:
        return self.query("SELECT userid, username FROM users ORDER BY userid")

    def state(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Everything a test may change: to assert that a refused request changed nothing."""
        return self.user_rows(), self.task_keys()

    def receive_timed(self, **kwargs: Any) -> list[tuple[txqueue.Message, datetime]]:
        kwargs.setdefault("max_duration", seconds(5))
        return receive_timed(self.db, self.tasks, **kwargs)

    def receive(self, **kwargs: Any) -> list[txqueue.Message]:
        return [message for message, _ in self.receive_timed(**kwargs)]

    def receive_one(self, **kwargs: Any) -> txqueue.Message:
        got = self.receive(limit=1, **kwargs)
        assert len(got) == 1, "expected a message within max_duration"
        return got[0]


class BackgroundReceiver:
    """Runs one receive stream on its own thread and its own connection, recording arrivals."""

    def __init__(
        self,
        url: str,
        queue: str,
        *,
        face: Face,
        max_duration: timedelta,
        max_batch_size: int = 1,
        lease_duration: timedelta = timedelta(seconds=10),
        limit: int | None = None,
    ) -> None:
        self.url = url
        self.queue = queue
        self.face = face
        self.kwargs = {
            "max_duration": max_duration,
            "max_batch_size": max_batch_size,
            "lease_duration": lease_duration,
        }
        self.limit = limit
        self.received: list[tuple[txqueue.Message, datetime]] = []
        self.started = threading.Event()
        self.arrived = threading.Event()
        self.started_at: datetime | None = None
        self.ended_at: datetime | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BackgroundReceiver:
        self._thread.start()
        assert self.started.wait(30), "receiver thread did not start"
        if self.error is not None:
            raise self.error
        return self

    def _run(self) -> None:
        try:
            with self.face.connect(self.url) as db:
                stream = db.receive(self.queue, **self.kwargs)
                self.started_at = utcnow()
                self.started.set()
                try:
                    for message in stream:
                        self.received.append((message, utcnow()))
                        self.arrived.set()
                        if self.limit is not None and len(self.received) >= self.limit:
                            break
                finally:
                    close_stream(stream)
                self.ended_at = utcnow()
        except BaseException as exc:  # re-raised in the test's thread by join()
            self.error = exc
        finally:
            self.started.set()

    def join(self, timeout: float = 30.0) -> list[tuple[txqueue.Message, datetime]]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"receiver still running after {timeout} s"
        if self.error is not None:
            raise self.error
        return self.received

    def keys(self) -> list[tuple[Any, ...]]:
        return [message.key for message, _ in self.received]


def batches(messages: Sequence[txqueue.Message]) -> list[list[txqueue.Message]]:
    """Split a stream into its batches using ``last_in_batch``."""
    result: list[list[txqueue.Message]] = [[]]
    for message in messages:
        result[-1].append(message)
        if message.last_in_batch:
            result.append([])
    if not result[-1]:
        result.pop()
    return result
