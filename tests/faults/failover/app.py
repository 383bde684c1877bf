"""The App the failover check's ``txqueue worker`` processes run: a transactional handler
whose effect row and ack commit together (``$TXQ_FAILOVER_WORKER`` names the worker)."""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timedelta, timezone

import txqueue

app = txqueue.App()
WORKER = os.environ.get("TXQ_FAILOVER_WORKER", f"worker-{os.getpid()}")


@app.handler(
    "jobs",
    transactional=True,
    lease_duration=timedelta(seconds=5),
    retry=txqueue.RetryPolicy(
        max_attempts=1000,
        min_retry_delay=timedelta(seconds=1),
        max_retry_delay=timedelta(seconds=2),
    ),
)
def handle(message: txqueue.Message, txn: txqueue.Transaction) -> None:
    txn.insert(
        "effects",
        ("effectid", "msgkey", "worker", "delivery", "appliedat"),
        [
            (
                uuid.uuid4().hex,
                message.key[0],
                WORKER,
                message.delivery_count,
                datetime.now(timezone.utc),
            )
        ],
    )
