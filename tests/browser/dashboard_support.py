"""The database the dashboard's browser tests look at, seeded through the public API."""

from __future__ import annotations

import base64
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import txqueue


@dataclass
class Dashboard:
    """A running ``txqueue dashboard`` process."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    token: str | None = None
    #: the login URL (path and query) the command printed, when it generated the token
    login_path: str = ""


@dataclass
class Seeded:
    """What the seeded database holds, as the tests expect to see it."""

    url: str
    #: queue -> {"ready"|"leased"|"scheduled"|"dead_letters": count}, queues no test changes
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: (queue, key) of dead letters a test may replay
    replayable: tuple[str, tuple[Any, ...]] = ("", ())
    #: (queue, key, payload) of a message whose payload is markup
    markup: tuple[str, tuple[Any, ...], str] = ("", (), "")
    pipeline: str = ""
    bus: str = ""
    enrollment: str = ""
    #: the queue of the tests that pause it and delete its messages (in no ``counts``)
    changeable: str = ""


MARKUP_PAYLOAD = '<script>alert("payload")</script><img src=x onerror="alert(1)">'
MARKUP_ERROR = '<script>alert("error")</script>'

SCHEMA = [
    "CREATE QUEUE Orders (OrderId STRING(36) NOT NULL, Payload JSON NOT NULL)"
    " PRIMARY KEY (OrderId)",
    "CREATE QUEUE Payments (PaymentId STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (PaymentId)",
    "CREATE QUEUE Notes (NoteId STRING(36) NOT NULL, Payload STRING(MAX) NOT NULL)"
    " PRIMARY KEY (NoteId)",
    "CREATE QUEUE Chores (ChoreId STRING(36) NOT NULL, Payload STRING(MAX) NOT NULL)"
    " PRIMARY KEY (ChoreId)",
]


def lease(db: txqueue.Database, queue: str, count: int) -> list[txqueue.Message]:
    """Receive ``count`` messages of ``queue`` under an hour-long lease (kept leased)."""
    received: list[txqueue.Message] = []
    for message in db.receive(
        queue,
        max_duration=timedelta(seconds=5),
        max_batch_size=1,
        lease_duration=timedelta(hours=1),
    ):
        received.append(message)
        if len(received) == count:
            break
    assert len(received) == count, f"received {len(received)} of {count} from {queue}"
    return received


def seed(url: str) -> Seeded:
    """Fill the empty SQLite database at ``url``: three queues with messages in every state and
    dead letters, a bus, a pipeline and an enrollment."""
    db = txqueue.connect(url, dialect="googlesql")
    try:
        db.update_ddl(SCHEMA)
        later = datetime.now(timezone.utc) + timedelta(days=1)
        with db.batch() as batch:
            for number in range(1, 8):
                batch.send("Orders", (f"o-{number}",), {"order": number})
            batch.send("Orders", ("o-later",), {"order": 0}, deliver_time=later)
            for number in range(1, 4):
                batch.send("Payments", (f"p-{number}",), f"payment {number}".encode())
            batch.send("Notes", ("n-1",), MARKUP_PAYLOAD)
            batch.send("Notes", ("n-2",), "plain")
            batch.send("Chores", ("c-leased",), "to be leased")
        # Orders: 7 due -> 3 leased, of which 1 dead-lettered: 4 ready, 2 leased, 1 scheduled
        failed, *_ = lease(db, "Orders", 3)
        db.dead_letter("Orders", failed.key, failed.lease_token, "HTTP 500 from the warehouse")
        # Payments: one of three dead-lettered, for the replay test
        (payment,) = lease(db, "Payments", 1)
        db.dead_letter("Payments", payment.key, payment.lease_token, "card declined")
        # Notes: a dead letter whose error is markup
        note = next(m for m in lease(db, "Notes", 2) if m.key != ("n-1",))
        db.dead_letter("Notes", note.key, note.lease_token, MARKUP_ERROR)
        # Chores: one leased, then one waiting
        lease(db, "Chores", 1)
        with db.batch() as batch:
            batch.send("Chores", ("c-waiting",), "waiting")

        events = txqueue.Events(db)
        events.create_bus("orders")
        events.create_pipeline(
            "notify-shipping",
            destination="http://127.0.0.1:9/hooks/orders",
            retry=txqueue.RetryPolicy(
                max_attempts=5,
                min_retry_delay=timedelta(seconds=2),
                max_retry_delay=timedelta(seconds=30),
            ),
            signing_secret="whsec_" + base64.b64encode(b"not shown anywhere").decode(),
            allow_private=True,
        )
        events.create_enrollment(
            "paid-orders",
            bus="orders",
            pipeline="notify-shipping",
            cel_match='message.type == "com.shop.order.paid"',
        )
        seeded = Seeded(
            url=url,
            counts={
                "Orders": {"ready": 4, "leased": 2, "scheduled": 1, "dead_letters": 1},
                "Notes": {"ready": 0, "leased": 1, "scheduled": 0, "dead_letters": 1},
            },
            replayable=("Payments", payment.key),
            markup=("Notes", ("n-1",), MARKUP_PAYLOAD),
            pipeline="notify-shipping",
            bus="orders",
            enrollment="paid-orders",
            changeable="Chores",
        )
        for queue, expected in seeded.counts.items():  # the seeding did what it says
            info = db.queue_info(queue)
            assert {state: getattr(info, state) for state in expected} == expected, info
    finally:
        db.close()
    return seeded
