"""The tasks a real ``txqueue worker tests.integration.task_app:app`` runs (test_tasks.py).

Each call appends a JSON line to ``$TXQUEUE_TEST_RECORD_DIR/<pid>.jsonl``, as worker_app does.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any

import txqueue
from txqueue.worker import current_delivery

app = txqueue.App()
POLICY = txqueue.RetryPolicy(
    max_attempts=2, min_retry_delay=timedelta(seconds=1), max_retry_delay=timedelta(seconds=1)
)


def _record(task: str, **fields: Any) -> None:
    delivery = current_delivery()
    line = {
        "event": task,
        "key": list(delivery.message.key) if delivery else None,
        "delivery": delivery.message.delivery_count if delivery else None,
        "time": time.time(),
        **fields,
    }
    directory = os.environ.get("TXQUEUE_TEST_RECORD_DIR", ".")
    with open(os.path.join(directory, f"{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")


@app.task(queue="TaskJobs", retry=POLICY)
def add(a: int, b: int, tags: list[str] | None = None) -> None:
    _record("add", total=a + b, tags=tags)


@app.task(queue="TaskJobs", retry=POLICY)
def flaky(label: str) -> None:
    """Fails on its first delivery, succeeds on the second."""
    delivery = current_delivery()
    if delivery is not None and delivery.message.delivery_count < 2:
        _record("flaky-failed", label=label)
        raise ConnectionError("first try fails")
    _record("flaky", label=label)


@app.task(queue="TaskJobs", retry=POLICY)
def broken(label: str) -> None:
    """Always fails: dead-lettered after the policy's two attempts."""
    _record("broken-failed", label=label)
    raise ValueError(f"broken {label}")


@app.task(queue="AsyncTaskJobs", retry=POLICY)
async def shout(word: str) -> None:
    _record("shout", word=word.upper())
