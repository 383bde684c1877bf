"""The App the Spanner worker test runs: ``txqueue worker spanner.worker_app:app``.

``Tasks`` writes its effect row in the handler's transaction (with the ack); ``Failing``
always raises, so it is tried ``FAILING_POLICY.max_attempts`` times and dead-lettered.
Each call appends one JSON line to ``$TXQUEUE_TEST_RECORD_DIR/<pid>.jsonl``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import timedelta
from typing import Any

import txqueue

app = txqueue.App()

SCHEMA = [
    "CREATE TABLE Effects (EffectId STRING(32) NOT NULL, Id INT64 NOT NULL,"
    " Delivery INT64 NOT NULL, Pid INT64 NOT NULL) PRIMARY KEY (EffectId)",
    "CREATE QUEUE Tasks (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
    "CREATE QUEUE Failing (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
]
FAILING_POLICY = txqueue.RetryPolicy(
    max_attempts=3, min_retry_delay=timedelta(seconds=1), max_retry_delay=timedelta(seconds=2)
)


def record(event: str, message: txqueue.Message, **fields: Any) -> None:
    """Append one event about ``message`` to this process's record file."""
    line = {
        "event": event,
        "key": list(message.key),
        "delivery": message.delivery_count,
        "time": time.time(),
        **fields,
    }
    directory = os.environ.get("TXQUEUE_TEST_RECORD_DIR", ".")
    with open(os.path.join(directory, f"{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")


@app.handler("Tasks", transactional=True)
def tasks(message: txqueue.Message, txn: txqueue.Transaction) -> None:
    """The effect row commits with the ack, or not at all (a random id: a second
    commit for one message would show as a second row)."""
    row = (uuid.uuid4().hex, message.key[0], message.delivery_count, os.getpid())
    txn.insert("Effects", ("EffectId", "Id", "Delivery", "Pid"), [row])
    record("effect", message)


@app.handler("Failing", retry=FAILING_POLICY)
def failing(message: txqueue.Message) -> None:
    record("attempt", message)
    raise RuntimeError(f"always fails ({message.delivery_count})")
