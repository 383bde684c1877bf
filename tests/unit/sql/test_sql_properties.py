"""Properties of the SQL layer (hypothesis).

1. The translator answers any input, text or a mutated valid statement, either with a plan or
   with InvalidArgument / NotFound: never another exception. A plan binds only values its SQL
   uses.
2. A streamed ``RECEIVE_`` query yields what ``db.receive`` yields for the same queue state:
   the same keys, payloads, deliver times and batch ends, in the same order.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sql_catalog import plan

import txqueue
from txqueue.core.schema import Dialect
from txqueue.errors import InvalidArgument, NotFound
from txqueue.sql import DmlPlan, QueryPlan, StreamingResultSet

PARAMS: dict[Dialect, Any] = {
    Dialect.GOOGLESQL: {
        "a": 1,
        "id": 2,
        "n": 1,
        "ids": [1, 2],
        "t": datetime(2030, 1, 1, tzinfo=timezone.utc),
        "leaseToken": "token",
        "tokens": ["t1"],
        "b": b"\x00",
    },
    Dialect.POSTGRESQL: [1, "text", ["t1"], datetime(2030, 1, 1, tzinfo=timezone.utc), b"\x00"],
}
VALID = {
    Dialect.GOOGLESQL: [
        "INSERT INTO UserTasks (UserId, MessageId, Payload, DeliverTime) VALUES (125, 'r',"
        ' b\'{"type": "reminder"}\', TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL 29 DAY))',
        "SELECT UserId, MessageId, Payload, DeliverTime, SpannerLeaseExpirationTimestamp,"
        " SpannerLeaseToken FROM RECEIVE_UserTasks(max_duration=>'20m')",
        "DELETE FROM UserTasks WHERE UserId = 124 AND MessageId = 'x' ASSERT_ROWS_MODIFIED 1",
        "SELECT * FROM RENEWLEASE_UserTasks(lease_tokens => [leaseToken, 't2'])",
        "WITH c AS (SELECT * FROM UserTasks WHERE DeliverTime < '2030-01-01') SELECT c.*,"
        " u.UserName FROM c JOIN Users u ON u.UserId = c.UserId WHERE u.UserId IN UNNEST(@ids)"
        " ORDER BY c.DeliverTime DESC LIMIT 5",
        "UPDATE Users SET UserName = 'x', Joined = CURRENT_TIMESTAMP() WHERE UserId = @id",
        "SELECT CAST(Joined AS STRING), CAST('2024-01-02' AS DATE), COUNT(*) AS n,"
        " MAX(Joined), IF(Active, 'y', 'n') FROM Users GROUP BY 1, 2, 5 HAVING COUNT(*) > @a",
    ],
    Dialect.POSTGRESQL: [
        "INSERT INTO usertasks (userid, messageid, payload, deliver_time) VALUES (125, 'r',"
        " CAST('{\"type\": \"reminder\"}' AS bytea), CURRENT_TIMESTAMP + INTERVAL '29 DAY')",
        "SELECT userid, messageid, payload, deliver_time, spanner_lease_expiration_timestamp,"
        " spanner_lease_token FROM spanner.receive_usertasks(NULL, NULL, '20m')",
        "DELETE FROM usertasks WHERE userid = $1 AND messageid = 'x' ASSERT_ROWS_MODIFIED 1",
        "SELECT * FROM spanner.renewlease_usertasks(lease_tokens => ARRAY[$2])",
        "SELECT u.username, count(*) FROM users u JOIN usertasks t ON t.userid = u.userid"
        " WHERE t.deliver_time > now() - INTERVAL '1 hour' AND u.username LIKE '%a%'"
        " GROUP BY u.username",
        "INSERT INTO users (userid, username) VALUES ($1, $2) ON CONFLICT (userid) DO NOTHING",
    ],
}
WORDS = [
    "SELECT", "FROM", "WHERE", "INSERT", "INTO", "VALUES", "DELETE", "UPDATE", "SET", "AND",
    "ASSERT_ROWS_MODIFIED", "RECEIVE_UserTasks", "RENEWLEASE_UserTasks", "spanner.receive_usertasks",
    "UserTasks", "Users", "UserId", "DeliverTime", "_txq_lease_token", "*", "(", ")", ",", ";",
    "=>", "=", "'20m'", "b''", "@a", "$1", "NULL", "1", "-1", "INTERVAL", "29", "DAY", "[", "]",
    "CAST", "AS", "bytea", "STRING(36)", "TIMESTAMP_ADD", "CURRENT_TIMESTAMP()", "+", "'x'",
    "WITH", "UNNEST", "ARRAY", "JOIN", "ON", "--", "/*", "*/", "'", '"', "`",
]  # fmt: skip
ENGINES = st.sampled_from(["sqlite", "postgres"])
DIALECTS = st.sampled_from(list(Dialect))


def translate(text: str, dialect: Dialect, engine: str) -> None:
    """Translate; only InvalidArgument / NotFound may escape, and plans must be coherent."""
    try:
        result = plan(text, dialect, engine, PARAMS[dialect])
    except (InvalidArgument, NotFound):
        return
    if isinstance(result, (QueryPlan, DmlPlan)):
        for name in result.params:
            assert re.search(rf"(:{name}\b|%\({name}\)s)", result.sql), (name, result.sql)


@given(text=st.text(max_size=300), dialect=DIALECTS, engine=ENGINES)
@settings(max_examples=400, deadline=None)
def test_any_text_gets_a_plan_or_invalid_argument(text: str, dialect: Dialect, engine: str) -> None:
    translate(text, dialect, engine)


@given(words=st.lists(st.sampled_from(WORDS), max_size=25), dialect=DIALECTS, engine=ENGINES)
@settings(max_examples=600, deadline=None)
def test_any_sql_words_get_a_plan_or_invalid_argument(
    words: list[str], dialect: Dialect, engine: str
) -> None:
    translate(" ".join(words), dialect, engine)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Dialect]:
    dialect = draw(DIALECTS)
    text = draw(st.sampled_from(VALID[dialect]))
    for _ in range(draw(st.integers(1, 3))):
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(len(text), start + 12)))
        kind = draw(st.sampled_from(["delete", "duplicate", "insert", "replace"]))
        if kind == "delete":
            text = text[:start] + text[end:]
        elif kind == "duplicate":
            text = text[:end] + text[start:end] + text[end:]
        else:
            word = draw(st.sampled_from(WORDS) | st.text(max_size=3))
            text = text[:start] + f" {word} " + text[end if kind == "replace" else start :]
    return text, dialect


@given(case=mutated(), engine=ENGINES)
@settings(max_examples=800, deadline=None)
def test_mutated_statements_get_a_plan_or_invalid_argument(
    case: tuple[str, Dialect], engine: str
) -> None:
    translate(*case, engine)


@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_valid_statements_translate(dialect: Dialect, engine: str) -> None:
    for text in VALID[dialect]:
        plan(text, dialect, engine, PARAMS[dialect])


# ---- streamed RECEIVE_ equals db.receive -------------------------------------------------------

QUEUES = {
    "googlesql": [
        f"CREATE QUEUE {name} (Shard INT64 NOT NULL, JobId STRING(MAX) NOT NULL,"
        " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Shard, JobId)"
        for name in ("JobsA", "JobsB")
    ],
    "postgresql": [
        f"CREATE QUEUE {name} (shard bigint NOT NULL, jobid varchar NOT NULL,"
        " payload bytea NOT NULL, PRIMARY KEY (shard, jobid))"
        for name in ("jobsa", "jobsb")
    ],
}
MESSAGES = st.lists(
    st.tuples(st.integers(-3, 3), st.text(max_size=6), st.binary(max_size=24)),
    min_size=1,
    max_size=8,
    unique_by=lambda m: (m[0], m[1]),
)


@pytest.fixture
def queues_db(database_url: str) -> Iterator[txqueue.Database]:
    """A database with two queues of the same shape, JobsA and JobsB."""
    db = txqueue.connect(database_url)
    db.update_ddl(QUEUES[db.dialect.value])
    yield db
    db.close()


def _sql_receive(db: txqueue.Database, batch: int, count: int) -> list[tuple[Any, ...]]:
    if db.dialect is Dialect.GOOGLESQL:
        sql = (
            "SELECT Shard, JobId, Payload, DeliverTime, SpannerLastBatchMessage"
            f" FROM RECEIVE_JobsA(max_duration=>'30s', max_batch_size=>{batch})"
        )
    else:
        sql = (
            "SELECT shard, jobid, payload, deliver_time, spanner_last_batch_message"
            f" FROM spanner.receive_jobsa({batch}, NULL, '30s')"
        )
    with db.snapshot() as snapshot:
        result = snapshot.execute_sql(sql)
        assert isinstance(result, StreamingResultSet)
        with result:
            rows = list(itertools.islice(result, count))
    return [((shard, job), payload, deliver, last) for shard, job, payload, deliver, last in rows]


@given(messages=MESSAGES, batch=st.integers(1, 4))
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_streamed_receive_equals_db_receive(
    queues_db: txqueue.Database, messages: list[tuple[int, str, bytes]], batch: int
) -> None:
    db = queues_db
    assume(all("\x00" not in job for _, job, _ in messages) or db.engine == "sqlite")
    base = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1)
    with db.batch() as b:
        b.delete("JobsA", None)
        b.delete("JobsB", None)
        for i, (shard, job, payload) in enumerate(messages):
            for queue in ("JobsA", "JobsB"):
                b.send(queue, (shard, job), payload, deliver_time=base + timedelta(seconds=i))

    streamed = _sql_receive(db, batch, len(messages))
    stream = db.receive("JobsB", max_duration=timedelta(seconds=30), max_batch_size=batch)
    try:
        received = [
            (m.key, m.payload, m.deliver_time, m.last_in_batch)
            for m in itertools.islice(stream, len(messages))
        ]
    finally:
        stream.close()  # type: ignore[attr-defined]
    assert streamed == received
    assert [key for key, *_ in streamed] == [(s, j) for s, j, _ in messages]
