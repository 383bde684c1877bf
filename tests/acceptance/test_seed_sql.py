"""Every SQL statement of seeds 000 and 003, run verbatim through txqueue's SQL layer.

Each test runs once per engine (SQLite, PostgreSQL, Cloud Spanner on its emulator) and
database dialect (GoogleSQL, PostgreSQL); a seed text runs where its dialect applies. The
texts are copied from the seeds exactly, comments included (``test_texts_are_verbatim``
checks that); a block is cut into statements with ``txqueue.sql.split_script``, as a client
runs them one at a time.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import txqueue
from txqueue.errors import InvalidArgument, OutOfRange
from txqueue.sql import StreamingResultSet, split_script, statement_kind


def _seeds() -> Path:
    """The shared seed documents: beside the project (../shared), or $TXQUEUE_SEEDS."""
    candidates = [Path(os.environ["TXQUEUE_SEEDS"])] if os.environ.get("TXQUEUE_SEEDS") else []
    candidates += [parent / "shared" / "seeds" for parent in Path(__file__).resolve().parents]
    candidates.append(Path("/work/shared/seeds"))
    return next((path for path in candidates if path.is_dir()), candidates[-1])


SEEDS = _seeds()

# ---- seed 003: scenarios and examples ----------------------------------------------------------

GSQL_WELCOME_SEND = """-- Inside your application transaction:
-- 1. Insert into Users table
INSERT INTO Users (UserId, UserName) VALUES (124, 'New User');

-- 2. Send message to queue to trigger email
INSERT INTO UserTasks (UserId, MessageId, Payload)
VALUES (
  124,
  'welcome-email-id',
  b'{"type": "welcome", "email": "user@example.com"}'
);"""

PG_WELCOME_SEND = """-- Inside your application transaction:
-- 1. Insert into users table
INSERT INTO users (userid, username) VALUES (124, 'New User');

-- 2. Send message to queue to trigger email
INSERT INTO usertasks (userid, messageid, payload)
VALUES (
  124,
  'welcome-email-id',
  CAST('{"type": "welcome", "email": "user@example.com"}' AS bytea)
);"""

GSQL_WELCOME_RECEIVE_ACK = """-- 1. In the receiver process, stream messages from the queue
SELECT
  UserId,
  MessageId,
  Payload,
  DeliverTime,
  SpannerLeaseExpirationTimestamp,
  SpannerLeaseToken
FROM RECEIVE_UserTasks(max_duration=>'20m');

-- 2. After sending the welcome email, acknowledge the message
DELETE FROM UserTasks
WHERE UserId = 124 AND MessageId = 'welcome-email-id';"""

PG_WELCOME_RECEIVE_ACK = """-- 1. In the receiver process, stream messages from the queue
SELECT
  userid,
  messageid,
  payload,
  deliver_time,
  spanner_lease_expiration_timestamp,
  spanner_lease_token
FROM spanner.receive_usertasks(NULL, NULL, '20m');

-- 2. After sending the welcome email, acknowledge the message
DELETE FROM usertasks
WHERE userid = 124 AND messageid = 'welcome-email-id';"""

GSQL_TRIAL = """-- 1. Insert into Users table
INSERT INTO Users (UserId, UserName) VALUES (125, 'Trial User');

-- 2. Send message to queue with a future delivery time
INSERT INTO UserTasks (UserId, MessageId, Payload, DeliverTime)
VALUES (125, 'trial-expire-reminder', b'{"type": "reminder"}', TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL 29 DAY));"""

PG_TRIAL = """-- 1. Insert into users table
INSERT INTO users (userid, username) VALUES (125, 'Trial User');

-- 2. Send message to queue with a future delivery time
INSERT INTO usertasks (userid, messageid, payload, deliver_time)
VALUES (125, 'trial-expire-reminder', CAST('{"type": "reminder"}' AS bytea), CURRENT_TIMESTAMP + INTERVAL '29 DAY');"""

GSQL_IMAGES = """-- Schema
CREATE TABLE ImageUploads (
  UserId    INT64 NOT NULL,
  ImageId   STRING(36) NOT NULL,
  ImageData BYTES(MAX),
  Status    STRING(MAX) -- PENDING, PROCESSING, DONE
) PRIMARY KEY (UserId, ImageId),
  INTERLEAVE IN PARENT Users;

CREATE QUEUE ImageProcessingQueue (
  UserId    INT64 NOT NULL,
  ImageId   STRING(36) NOT NULL,
  Payload   BYTES(1) NOT NULL -- Payload can be minimal
) PRIMARY KEY (UserId, ImageId),
  INTERLEAVE IN PARENT ImageUploads ON DELETE CASCADE;

-- Application Logic
-- 1. Upload image, insert into ImageUploads with Status 'PENDING'
-- 2. Send message to ImageProcessingQueue
INSERT INTO ImageProcessingQueue (UserId, ImageId, Payload) VALUES (123, 'image-uuid-1', b'');

-- Receiver for ImageProcessingQueue:
-- 1. Receives message (UserId, ImageId).
-- 2. Reads ImageData from ImageUploads.
-- 3. Processes image.
-- 4. Updates ImageUploads Status to 'DONE'.
-- 5. ACKs the queue message."""

PG_IMAGES = """-- Schema
CREATE TABLE imageuploads (
  userid    bigint NOT NULL,
  imageid   varchar(36) NOT NULL,
  imagedata bytea,
  status    varchar, -- PENDING, PROCESSING, DONE
  PRIMARY KEY (userid, imageid)
) INTERLEAVE IN PARENT users;

CREATE QUEUE imageprocessingqueue (
  userid    bigint NOT NULL,
  imageid   varchar(36) NOT NULL,
  payload   bytea NOT NULL, -- Payload can be minimal
  PRIMARY KEY (userid, imageid)
) INTERLEAVE IN PARENT imageuploads ON DELETE CASCADE;

-- Application Logic
-- 1. Upload image, insert into imageuploads with status 'PENDING'
-- 2. Send message to imageprocessingqueue
INSERT INTO imageprocessingqueue (userid, imageid, payload) VALUES (123, 'image-uuid-1', CAST('' AS bytea));

-- Receiver for imageprocessingqueue:
-- 1. Receives message (userid, imageid).
-- 2. Reads imagedata from imageuploads.
-- 3. Processes image.
-- 4. Updates imageuploads status to 'DONE'.
-- 5. ACKs the queue message."""

GSQL_AGGREGATION = """-- Inside your application transaction:
-- 1. Acknowledge current message
DELETE FROM AggregationQueue
WHERE TaskType = 'hourly-aggregator' AND MessageId = 'current-uuid'
ASSERT_ROWS_MODIFIED 1;

-- 2. Schedule next run 1 hour in the future
INSERT INTO AggregationQueue (TaskType, MessageId, Payload, DeliverTime)
VALUES ('hourly-aggregator', 'next-uuid', b'', TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL 1 HOUR));"""

PG_AGGREGATION = """-- Inside your application transaction:
-- 1. Acknowledge current message
DELETE FROM aggregationqueue
WHERE tasktype = 'hourly-aggregator' AND messageid = 'current-uuid'
ASSERT_ROWS_MODIFIED 1;

-- 2. Schedule next run 1 hour in the future
INSERT INTO aggregationqueue (tasktype, messageid, payload, deliver_time)
VALUES ('hourly-aggregator', 'next-uuid', CAST('' AS bytea), CURRENT_TIMESTAMP + INTERVAL '1 HOUR');"""

# The long-running report (prose of seed 003): receive, renew every few seconds, ack.
GSQL_REPORT_RECEIVE = "RECEIVE_ReportQueue()"
GSQL_REPORT_RENEW = "SELECT * FROM RENEWLEASE_ReportQueue([leaseToken])"

# ---- seed 000: exactly-once processing ---------------------------------------------------------

ACK_ASSERT_ONE = "DELETE FROM MessageQueue WHERE message_id = '123' ASSERT_ROWS_MODIFIED 1"

# ---- the schema the seeds assume (UserTasks as in Spanner's "Use queues" page) -------------------

SCHEMA = {
    "googlesql": [
        "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX)) PRIMARY KEY (UserId)",
        "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
        " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId),"
        " INTERLEAVE IN PARENT Users ON DELETE CASCADE",
        "CREATE QUEUE AggregationQueue (TaskType STRING(64) NOT NULL,"
        " MessageId STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
        " PRIMARY KEY (TaskType, MessageId)",
        "CREATE QUEUE ReportQueue (ReportId STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
        " PRIMARY KEY (ReportId)",
        "CREATE QUEUE MessageQueue (message_id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
        " PRIMARY KEY (message_id)",
        "CREATE TABLE Ledger (EntryId INT64 NOT NULL, Note STRING(MAX)) PRIMARY KEY (EntryId)",
    ],
    "postgresql": [
        "CREATE TABLE users (userid bigint NOT NULL, username varchar, PRIMARY KEY (userid))",
        "CREATE QUEUE usertasks (userid bigint NOT NULL, messageid varchar(36) NOT NULL,"
        " payload bytea NOT NULL, PRIMARY KEY (userid, messageid))"
        " INTERLEAVE IN PARENT users ON DELETE CASCADE",
        "CREATE QUEUE aggregationqueue (tasktype varchar(64) NOT NULL,"
        " messageid varchar(36) NOT NULL, payload bytea NOT NULL,"
        " PRIMARY KEY (tasktype, messageid))",
        "CREATE QUEUE reportqueue (reportid varchar(36) NOT NULL, payload bytea NOT NULL,"
        " PRIMARY KEY (reportid))",
        "CREATE QUEUE messagequeue (message_id varchar(36) NOT NULL, payload bytea NOT NULL,"
        " PRIMARY KEY (message_id))",
        "CREATE TABLE ledger (entryid bigint NOT NULL, note varchar, PRIMARY KEY (entryid))",
    ],
}
COMBINATIONS = [
    pytest.param(("sqlite", "googlesql"), id="sqlite-googlesql"),
    pytest.param(("sqlite", "postgresql"), id="sqlite-postgresql"),
    pytest.param(("postgres", "googlesql"), id="postgres-googlesql", marks=pytest.mark.postgres),
    pytest.param(("postgres", "postgresql"), id="postgres-postgresql", marks=pytest.mark.postgres),
    # Cloud Spanner on its emulator (the database's dialect is its own, fixed at creation)
    pytest.param(("spanner", "googlesql"), id="spanner-googlesql"),
    pytest.param(("spanner_postgresql", "postgresql"), id="spanner-postgresql"),
]
_URLS = {
    "sqlite": "sqlite_url",
    "postgres": "pg_database_url",
    "spanner": "spanner_url",
    "spanner_postgresql": "spanner_postgresql_database_url",
}
SHORT = timedelta(seconds=1)
SLACK = timedelta(minutes=2)


@pytest.fixture(params=COMBINATIONS)
def db(request: pytest.FixtureRequest) -> Iterator[txqueue.Database]:
    """A database of one engine and dialect holding the schema the seeds assume."""
    engine, dialect = request.param
    url = request.getfixturevalue(_URLS[engine])
    database = txqueue.connect(url, dialect=dialect)
    try:
        database.update_ddl(SCHEMA[dialect])
        yield database
    finally:
        database.close()


def gsql(db: txqueue.Database) -> bool:
    return db.dialect is txqueue.Dialect.GOOGLESQL


def statements(db: txqueue.Database, block: str) -> list[str]:
    return split_script(block, db.dialect)


def in_one_transaction(db: txqueue.Database, block: list[str] | str) -> list[int]:
    pieces = statements(db, block) if isinstance(block, str) else block
    return db.run_in_transaction(lambda txn: txn.batch_update(pieces))


def query(db: txqueue.Database, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with db.snapshot() as snapshot:
        return list(snapshot.execute_sql(sql, params))


def first_rows(
    db: txqueue.Database, sql: str, count: int = 1, params: Any = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The first ``count`` rows of a RECEIVE_ stream, then the stream is closed."""
    with db.snapshot() as snapshot:
        result = snapshot.execute_sql(sql, params)
        assert isinstance(result, StreamingResultSet)
        with result:
            return result.fields, list(itertools.islice(result, count))


def deliver(db: txqueue.Database) -> str:
    return "DeliverTime" if gsql(db) else "deliver_time"


def now() -> datetime:
    return datetime.now(timezone.utc)


# ---- scenarios -----------------------------------------------------------------------------------


def test_welcome_email_is_sent_with_the_user_then_received_and_acked(
    db: txqueue.Database,
) -> None:
    sent = statements(db, GSQL_WELCOME_SEND if gsql(db) else PG_WELCOME_SEND)
    assert len(sent) == 2
    assert in_one_transaction(db, sent) == [1, 1]
    assert query(db, "SELECT userid, username FROM users") == [(124, "New User")]

    receive, ack = statements(db, GSQL_WELCOME_RECEIVE_ACK if gsql(db) else PG_WELCOME_RECEIVE_ACK)
    before = now()
    fields, rows = first_rows(db, receive)
    assert fields == (
        ["UserId", "MessageId", "Payload", "DeliverTime", "SpannerLeaseExpirationTimestamp",
         "SpannerLeaseToken"]
        if gsql(db)
        else ["userid", "messageid", "payload", "deliver_time",
              "spanner_lease_expiration_timestamp", "spanner_lease_token"]
    )  # fmt: skip
    [(user_id, message_id, payload, deliver_time, expiration, token)] = rows
    assert (user_id, message_id) == (124, "welcome-email-id")
    assert payload == b'{"type": "welcome", "email": "user@example.com"}'
    assert deliver_time.tzinfo is not None and deliver_time <= now() + SLACK
    assert before + timedelta(seconds=9) <= expiration <= now() + timedelta(seconds=11)
    assert isinstance(token, str) and token

    # While leased, nobody else receives it; the plain DELETE is the ack.
    assert list(db.receive("UserTasks", max_duration=SHORT)) == []
    assert db.run_in_transaction(lambda txn: txn.execute_update(ack)) == 1
    assert query(db, "SELECT COUNT(*) FROM usertasks") == [(0,)]


def test_a_rolled_back_welcome_email_is_never_received(db: txqueue.Database) -> None:
    pieces = statements(db, GSQL_WELCOME_SEND if gsql(db) else PG_WELCOME_SEND)

    def sign_up_then_fail(txn: txqueue.Transaction) -> None:
        txn.batch_update(pieces)
        raise RuntimeError("payment check failed")

    with pytest.raises(RuntimeError):
        db.run_in_transaction(sign_up_then_fail)
    assert query(db, "SELECT COUNT(*) FROM users") == [(0,)]
    assert list(db.receive("UserTasks", max_duration=SHORT)) == []


def test_trial_reminder_is_delivered_29_days_later(db: txqueue.Database) -> None:
    before = now()
    assert in_one_transaction(db, GSQL_TRIAL if gsql(db) else PG_TRIAL) == [1, 1]
    after = now()

    rows = query(db, f"SELECT messageid, payload, {deliver(db)} FROM usertasks")
    [(message_id, payload, deliver_time)] = rows
    assert (message_id, payload) == ("trial-expire-reminder", b'{"type": "reminder"}')
    assert before + timedelta(days=29) - SLACK <= deliver_time <= after + timedelta(days=29) + SLACK
    info = db.queue_info("UserTasks")
    assert (info.ready, info.scheduled) == (0, 1)
    assert list(db.receive("UserTasks", max_duration=SHORT)) == []


def test_image_upload_with_interleaved_queue_and_cascade(db: txqueue.Database) -> None:
    pieces = statements(db, GSQL_IMAGES if gsql(db) else PG_IMAGES)
    ddl = [p for p in pieces if statement_kind(p, db.dialect) == "ddl"]
    dml = [p for p in pieces if statement_kind(p, db.dialect) == "dml"]
    assert (len(ddl), len(dml)) == (2, 1)
    db.update_ddl(ddl)

    # Step 1 of the block's comment, then its INSERT, in one transaction.
    upload = [
        "INSERT INTO users (userid, username) VALUES (123, 'Ada')",
        "INSERT INTO imageuploads (userid, imageid, imagedata, status)"
        " VALUES (123, 'image-uuid-1', NULL, 'PENDING')",
    ]
    assert in_one_transaction(db, upload + dml) == [1, 1, 1]

    receive = (
        "SELECT UserId, ImageId, Payload FROM RECEIVE_ImageProcessingQueue(max_duration=>'20m')"
        if gsql(db)
        else "SELECT userid, imageid, payload FROM spanner.receive_imageprocessingqueue(NULL, NULL, '20m')"
    )
    _, [(user_id, image_id, payload)] = first_rows(db, receive)
    assert (user_id, image_id, payload) == (123, "image-uuid-1", b"")

    def process(txn: txqueue.Transaction) -> None:
        where = f"userid = {user_id} AND imageid = '{image_id}'"
        [(data,)] = list(txn.execute_sql(f"SELECT imagedata FROM imageuploads WHERE {where}"))
        assert data is None
        assert txn.execute_update(f"UPDATE imageuploads SET status = 'DONE' WHERE {where}") == 1
        assert txn.execute_update(f"DELETE FROM imageprocessingqueue WHERE {where}") == 1

    db.run_in_transaction(process)
    assert query(db, "SELECT status FROM imageuploads") == [("DONE",)]
    assert query(db, "SELECT COUNT(*) FROM imageprocessingqueue") == [(0,)]

    # ON DELETE CASCADE: deleting the upload deletes its pending message.
    second = [
        "INSERT INTO imageuploads (userid, imageid, status) VALUES (123, 'image-uuid-2', 'PENDING')",
        "INSERT INTO imageprocessingqueue (userid, imageid, payload)"
        + (
            " VALUES (123, 'image-uuid-2', b'')"
            if gsql(db)
            else " VALUES (123, 'image-uuid-2', '')"
        ),
    ]
    in_one_transaction(db, second)
    assert query(db, "SELECT imageid FROM imageprocessingqueue") == [("image-uuid-2",)]
    in_one_transaction(db, ["DELETE FROM imageuploads WHERE imageid = 'image-uuid-2'"])
    assert query(db, "SELECT COUNT(*) FROM imageprocessingqueue") == [(0,)]

    with pytest.raises(InvalidArgument, match="queues do not support UPDATE"):
        in_one_transaction(db, ["UPDATE imageprocessingqueue SET payload = NULL WHERE true"])


def test_periodic_aggregation_acks_and_schedules_the_next_run(db: txqueue.Database) -> None:
    with db.batch() as batch:
        batch.send("AggregationQueue", ("hourly-aggregator", "current-uuid"), b"")
    before = now()
    assert in_one_transaction(db, GSQL_AGGREGATION if gsql(db) else PG_AGGREGATION) == [1, 1]
    after = now()

    rows = query(db, f"SELECT tasktype, messageid, {deliver(db)} FROM aggregationqueue")
    [(task_type, message_id, next_run)] = rows
    assert (task_type, message_id) == ("hourly-aggregator", "next-uuid")
    assert before + timedelta(hours=1) - SLACK <= next_run <= after + timedelta(hours=1) + SLACK
    assert list(db.receive("AggregationQueue", max_duration=SHORT)) == []


def test_retried_aggregation_fails_with_out_of_range_and_schedules_nothing(
    db: txqueue.Database,
) -> None:
    """The retry after an unknown commit outcome: the ack finds nothing, so nothing commits."""
    block = GSQL_AGGREGATION if gsql(db) else PG_AGGREGATION
    with db.batch() as batch:
        batch.send("AggregationQueue", ("hourly-aggregator", "current-uuid"), b"")
    in_one_transaction(db, block)

    with pytest.raises(OutOfRange, match="ASSERT_ROWS_MODIFIED 1"):
        in_one_transaction(db, block)
    assert query(db, "SELECT messageid FROM aggregationqueue") == [("next-uuid",)]


def test_assert_rows_modified_propagated_rolls_back_the_business_writes(
    db: txqueue.Database,
) -> None:
    """Seed 000: let OUT_OF_RANGE propagate and the transaction's other writes roll back."""
    with db.batch() as batch:
        batch.send("MessageQueue", ("123",), b"charge")

    def process(txn: txqueue.Transaction, attempt: int) -> None:
        txn.execute_update(f"INSERT INTO ledger (entryid, note) VALUES ({attempt}, 'charged')")
        txn.execute_update(ACK_ASSERT_ONE)

    db.run_in_transaction(process, 1)
    with pytest.raises(OutOfRange):
        db.run_in_transaction(process, 2)  # the retry: the message is gone
    assert query(db, "SELECT entryid FROM ledger") == [(1,)]
    assert query(db, "SELECT COUNT(*) FROM messagequeue") == [(0,)]


def test_catching_out_of_range_keeps_the_transaction_open_and_commits_earlier_writes(
    db: txqueue.Database,
) -> None:
    """Seed 000's warning: catch the error and continue, and the duplicate update commits."""
    with db.batch() as batch:
        batch.send("MessageQueue", ("123",), b"charge")
    db.run_in_transaction(lambda txn: txn.execute_update(ACK_ASSERT_ONE))

    def catch_and_continue(txn: txqueue.Transaction) -> str:
        txn.execute_update("INSERT INTO ledger (entryid, note) VALUES (2, 'charged again')")
        try:
            txn.execute_update(ACK_ASSERT_ONE)
        except OutOfRange as error:
            assert error.code == "OUT_OF_RANGE"
        # the transaction is still open: its earlier write is pending and it takes more
        [(pending,)] = list(txn.execute_sql("SELECT COUNT(*) FROM ledger"))
        return f"{pending} pending"

    assert db.run_in_transaction(catch_and_continue) == "1 pending"
    assert query(db, "SELECT entryid, note FROM ledger") == [(2, "charged again")]


def test_long_report_renews_its_lease_with_renewlease(db: txqueue.Database) -> None:
    with db.batch() as batch:
        batch.send("ReportQueue", ("report-1",), b"{}")
    if gsql(db):
        receive, renew = f"SELECT * FROM {GSQL_REPORT_RECEIVE}", GSQL_REPORT_RENEW
    else:
        receive = "SELECT * FROM spanner.receive_reportqueue(NULL, NULL, NULL)"
        renew = "SELECT * FROM spanner.renewlease_reportqueue(ARRAY[$1])"

    def params(token: str) -> Any:
        return {"leaseToken": token} if gsql(db) else [token]

    fields, [row] = first_rows(db, receive)
    received = dict(zip(fields, row))
    token_field = "SpannerLeaseToken" if gsql(db) else "spanner_lease_token"
    expiration_field = (
        "SpannerLeaseExpirationTimestamp" if gsql(db) else "spanner_lease_expiration_timestamp"
    )
    token = received[token_field]
    assert received["SpannerLastBatchMessage" if gsql(db) else "spanner_last_batch_message"]

    with db.snapshot() as snapshot:
        renewed = snapshot.execute_sql(renew, params(token))
        assert renewed.fields == (
            ["SpannerOldLeaseToken", "SpannerNewLeaseToken", "SpannerLeaseExpirationTimestamp"]
            if gsql(db)
            else ["spanner_old_lease_token", "spanner_new_lease_token",
                  "spanner_lease_expiration_timestamp"]
        )  # fmt: skip
        [(old, new, expiration)] = list(renewed)
    assert old == token and isinstance(new, str) and new != token
    assert expiration >= received[expiration_field]

    # The old token is spent: renewing it again gets a row without a new token.
    with db.snapshot() as snapshot:
        again = list(snapshot.execute_sql(renew, params(token)))
    assert again == [(token, None, None)]

    # Report done: ack (only the current lease holder may, with the token fence).
    with db.batch() as batch:
        batch.ack("ReportQueue", ("report-1",), lease_token=new)
    assert query(db, "SELECT COUNT(*) FROM reportqueue") == [(0,)]


def test_texts_are_verbatim() -> None:
    if not SEEDS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"seeds not found (set TXQUEUE_SEEDS); looked last at {SEEDS}")
        pytest.skip(f"seeds not found at {SEEDS}")
    scenarios = (SEEDS / "003_43ea3fe6943cdf64.txt").read_text()
    exactly_once = (SEEDS / "000_ce38c626b706b2e9.txt").read_text()
    for text in (
        GSQL_WELCOME_SEND, PG_WELCOME_SEND, GSQL_WELCOME_RECEIVE_ACK, PG_WELCOME_RECEIVE_ACK,
        GSQL_TRIAL, PG_TRIAL, GSQL_IMAGES, PG_IMAGES, GSQL_AGGREGATION, PG_AGGREGATION,
        GSQL_REPORT_RECEIVE, GSQL_REPORT_RENEW,
    ):  # fmt: skip
        assert text in scenarios, text[:60]
    assert ACK_ASSERT_ONE in exactly_once
