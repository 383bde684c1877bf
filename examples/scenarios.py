"""The messaging scenarios of the Spanner queue documentation, run end to end by a worker.

    python examples/scenarios.py                              # SQLite, in a temporary directory
    python examples/scenarios.py --database postgresql://localhost/scratch

Each scenario prints what happened. The schemas are GoogleSQL on either engine. Use an empty
database: the scenarios create their tables and send fixed keys.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import txqueue
from txqueue.worker import Worker

SCHEMA = [
    "CREATE TABLE Users (UserId INT64 NOT NULL, Email STRING(MAX)) PRIMARY KEY (UserId)",
    "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId),"
    " INTERLEAVE IN PARENT Users ON DELETE CASCADE",
    "CREATE TABLE ImageUploads (UserId INT64 NOT NULL, ImageId STRING(36) NOT NULL,"
    " ImageData BYTES(MAX), Status STRING(MAX)) PRIMARY KEY (UserId, ImageId),"
    " INTERLEAVE IN PARENT Users",
    "CREATE QUEUE ImageProcessingQueue (UserId INT64 NOT NULL, ImageId STRING(36) NOT NULL,"
    " Payload BYTES(1) NOT NULL) PRIMARY KEY (UserId, ImageId),"
    " INTERLEAVE IN PARENT ImageUploads ON DELETE CASCADE",
    "CREATE TABLE Aggregates (Slot STRING(MAX) NOT NULL, RunAt TIMESTAMP) PRIMARY KEY (Slot)",
    "CREATE QUEUE AggregationQueue (TaskType STRING(MAX) NOT NULL,"
    " MessageId STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (TaskType, MessageId)",
    "CREATE TABLE Reports (ReportId INT64 NOT NULL, Chunks INT64) PRIMARY KEY (ReportId)",
    "CREATE QUEUE ReportQueue (ReportId INT64 NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (ReportId)",
]

REPORT_LEASE = timedelta(seconds=2)  # short, so that the 3-second report outlives it

app = txqueue.App()
sent_mail: list[str] = []
report_tokens: list[str] = []


@app.handler("UserTasks")
def send_welcome(message: txqueue.Message) -> None:
    body = json.loads(message.payload)
    sent_mail.append(body["email"])  # a real handler calls its mail service here


@app.handler("ImageProcessingQueue", transactional=True)
def process_image(message: txqueue.Message, txn: txqueue.Transaction) -> None:
    user_id, image_id = message.key
    [(data,)] = txn.execute_sql(
        "SELECT ImageData FROM ImageUploads WHERE UserId = @user AND ImageId = @image",
        {"user": user_id, "image": image_id},
    ).rows
    thumbnail = data[:4]  # a real handler makes a thumbnail here
    txn.update(
        "ImageUploads",
        ("UserId", "ImageId", "ImageData", "Status"),
        [(user_id, image_id, thumbnail, "DONE")],
    )


@app.periodic("AggregationQueue", every=timedelta(hours=1), name="hourly-aggregator")
def aggregate(message: txqueue.Message) -> None:
    db = txqueue.connect(app_url)
    with db:
        db.run_in_transaction(
            lambda txn: txn.insert_or_update(
                "Aggregates", ("Slot", "RunAt"), [(str(message.key[1]), datetime.now(timezone.utc))]
            )
        )


@app.handler("ReportQueue", lease_duration=REPORT_LEASE)
def build_report(message: txqueue.Message) -> None:
    chunks = 0
    for _ in range(6):  # 3 seconds of work against a 2-second lease
        if txqueue.worker.lease_lost():
            return  # someone else has it now: stop, do not write
        time.sleep(0.5)
        chunks += 1
        delivery = txqueue.worker.current_delivery()
        if delivery is not None and delivery.lease is not None:
            report_tokens.append(delivery.lease.token)  # the newest, after each renewal
    db = txqueue.connect(app_url)
    with db:
        db.run_in_transaction(
            lambda txn: txn.insert("Reports", ("ReportId", "Chunks"), [(message.key[0], chunks)])
        )


app_url = ""


def run_worker_until(url: str, done: Callable[[], bool], timeout: float = 30.0) -> None:
    """Run a worker for ``app`` until ``done()`` is true (checked every 50 ms)."""

    async def main() -> None:
        worker = Worker(app, database=url, concurrency=4, grace=timedelta(seconds=5))
        running = asyncio.create_task(worker.run())
        deadline = time.monotonic() + timeout
        while not done():
            if running.done():
                await running  # the worker stopped: raise its error
            if time.monotonic() > deadline:
                raise SystemExit("the worker did not finish in time")
            await asyncio.sleep(0.05)
        worker.stop()
        await running

    asyncio.run(main())


def welcome_email(db: txqueue.Database, url: str) -> None:
    with db.batch() as b:  # the sign-up: the user and the welcome message commit together
        b.insert("Users", ("UserId", "Email"), [(124, "user@example.com")])
        b.send("UserTasks", (124, "welcome-email-id"), b'{"email": "user@example.com"}')
    run_worker_until(url, lambda: bool(sent_mail))
    print(f"welcome email: sent to {sent_mail[0]}, message acked")


def trial_reminder(db: txqueue.Database) -> None:
    due = datetime.now(timezone.utc) + timedelta(days=29)
    with db.batch() as b:
        b.insert("Users", ("UserId", "Email"), [(125, "trial@example.com")])
        b.send("UserTasks", (125, "trial-expire-reminder"), b"{}", deliver_time=due)
    info = db.queue_info("UserTasks")
    assert info.scheduled == 1 and db.receive_now("UserTasks") == []
    print(f"trial reminder: scheduled for {due:%Y-%m-%d}, not receivable before then")


def image_processing(db: txqueue.Database, url: str) -> None:
    with db.batch() as b:
        for image_id in ("image-uuid-1", "image-uuid-2"):
            b.insert(
                "ImageUploads",
                ("UserId", "ImageId", "ImageData", "Status"),
                [(124, image_id, b"\x89PNG-image-data", "PENDING")],
            )
            b.send("ImageProcessingQueue", (124, image_id), b"")
    # The user deletes the second upload before it is processed: its message goes with it.
    db.run_in_transaction(lambda txn: txn.delete("ImageUploads", [(124, "image-uuid-2")]))
    assert db.queue_info("ImageProcessingQueue").ready == 1

    def processed() -> bool:
        with db.snapshot() as snapshot:
            rows = snapshot.execute_sql("SELECT Status FROM ImageUploads").rows
        return rows == [("DONE",)]

    run_worker_until(url, processed)
    print("image processing: image-uuid-1 DONE; image-uuid-2 deleted with its pending message")


def hourly_aggregation(db: txqueue.Database, url: str) -> None:
    # A starting worker seeds the chain with the next hour's run. So as not to wait for it,
    # send this hour's run as the previous run would have: key (name, slot), due now.
    now = datetime.now(timezone.utc)
    slot = now.replace(minute=0, second=0, microsecond=0).isoformat().replace("+00:00", "Z")
    with db.batch() as b:
        b.send("AggregationQueue", ("hourly-aggregator", slot), b"")

    def ran() -> bool:
        with db.snapshot() as snapshot:
            return bool(snapshot.execute_sql("SELECT Slot FROM Aggregates").rows)

    run_worker_until(url, ran)
    with db.snapshot() as snapshot:
        [(ran_for,)] = snapshot.execute_sql("SELECT Slot FROM Aggregates").rows
        [(upcoming,)] = snapshot.execute_sql("SELECT MessageId FROM AggregationQueue").rows
    print(f"hourly aggregation: ran for slot {ran_for}; the next run is queued for {upcoming}")


def long_report(db: txqueue.Database, url: str) -> None:
    with db.batch() as b:
        b.send("ReportQueue", (7,), b"")

    def written() -> bool:
        with db.snapshot() as snapshot:
            return bool(snapshot.execute_sql("SELECT Chunks FROM Reports").rows)

    run_worker_until(url, written)
    renewals = len(set(report_tokens)) - 1
    assert renewals >= 1, "the lease should have been renewed while the report ran"
    assert db.queue_info("ReportQueue").ready == 0
    print(
        f"long report: 3 s of work under a {REPORT_LEASE.total_seconds():.0f} s lease,"
        f" renewed {renewals} time(s), written once and acked"
    )


def main() -> None:
    global app_url
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="an empty database (default: a temporary SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        app_url = args.database or f"sqlite:///{Path(directory) / 'scenarios.db'}"
        with txqueue.connect(app_url, dialect="googlesql") as db:
            db.update_ddl(SCHEMA)
            welcome_email(db, app_url)
            trial_reminder(db)
            image_processing(db, app_url)
            hourly_aggregation(db, app_url)
            long_report(db, app_url)
    print("all scenarios done")


if __name__ == "__main__":
    main()
