"""The App the worker integration tests run: ``txqueue worker tests.integration.worker_app:app``.

Every handler appends one JSON line per event to ``$TXQUEUE_TEST_RECORD_DIR/<pid>.jsonl``
(one file per process, so lines never interleave); the tests read them all.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from datetime import timedelta
from typing import Any

import txqueue

app = txqueue.App()


def _print_tasks(number: int, frame: Any) -> None:
    """SIGUSR1: every asyncio task's stack to stderr (the log), for a worker that hangs."""
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:  # no running loop
        return
    for task in tasks:
        task.print_stack(file=sys.stderr)


signal.signal(signal.SIGUSR1, _print_tasks)

FAILING_POLICY = txqueue.RetryPolicy(
    max_attempts=4, min_retry_delay=timedelta(seconds=1), max_retry_delay=timedelta(seconds=60)
)


def record(event: str, message: txqueue.Message, **fields: Any) -> None:
    """Append one event about ``message`` to this process's record file."""
    line = {
        "event": event,
        "queue": message.queue.lower(),
        "key": list(message.key),
        "delivery": message.delivery_count,
        "pid": os.getpid(),
        "time": time.time(),
        **fields,
    }
    directory = os.environ.get("TXQUEUE_TEST_RECORD_DIR", ".")
    with open(os.path.join(directory, f"{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")


def _seconds(message: txqueue.Message) -> float:
    return float(json.loads(message.payload or b"{}").get("sleep", 0))


@app.handler("Jobs", lease_duration=timedelta(seconds=4))
def jobs(message: txqueue.Message) -> None:
    """Sleeps as long as the payload says ({"sleep": s}), recording start and end."""
    record("start", message)
    time.sleep(_seconds(message))
    record("end", message)


@app.handler("Failing", retry=FAILING_POLICY)
def failing(message: txqueue.Message) -> None:
    """Always fails: tried max_attempts times, then dead-lettered."""
    record("attempt", message)
    raise RuntimeError("always fails")


@app.handler("Long", lease_duration=timedelta(seconds=4))
async def long(message: txqueue.Message) -> None:
    """Runs for {"sleep": s} seconds (async), far past its 4 s lease, kept alive by renewal."""
    record("start", message)
    await asyncio.sleep(_seconds(message))
    record("end", message)


@app.handler("Bulk")
def bulk(message: txqueue.Message) -> None:
    """Records that it ran; the load test counts the records per key."""
    record("done", message)


@app.periodic("Ticks", every=timedelta(seconds=1))
def tick(message: txqueue.Message) -> None:
    """Records each periodic run; the test checks one run per slot."""
    record("tick", message)
