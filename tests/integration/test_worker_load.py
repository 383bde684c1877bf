"""10,000 messages through 4 worker processes with 8 handlers each: every message is handled
exactly once (SPEC §7), the work is shared, and the queue ends empty.

Handlers record one line per run into their process's file; the test counts them per key.
Acks are group-committed by each worker, so SQLite's single writer keeps up.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from worker_support import WorkerProcess, create_queues, reap, records, send, stop_all, wait_for

import txqueue

MESSAGES = 10_000
WORKERS = 4


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ten_thousand_messages_four_workers(database_url: str, tmp_path: Path) -> None:
    create_queues(database_url)
    send(database_url, "Bulk", range(MESSAGES))
    started = time.monotonic()
    workers = [
        WorkerProcess(database_url, tmp_path, "--queue", "Bulk", "--concurrency", "8", wait=False)
        for _ in range(WORKERS)
    ]
    try:
        with txqueue.connect(database_url) as db:

            def drained() -> bool:
                info = db.queue_info("Bulk")
                return info.ready + info.leased + info.scheduled == 0

            wait_for(drained, 240, "the queue to drain", *workers)
    finally:
        codes = stop_all(workers)
        reap()
    elapsed = time.monotonic() - started
    assert codes == [0] * WORKERS, [w.output() for w in workers]

    done = records(tmp_path, event="done")
    runs = Counter(event["key"][0] for event in done)
    assert sorted(runs) == list(range(MESSAGES)), "a message was never handled"
    twice = {key: count for key, count in runs.items() if count != 1}
    assert not twice, f"handled more than once: {dict(list(twice.items())[:10])}"
    assert all(event["delivery"] == 1 for event in done), "a lease expired during the drain"
    per_worker = Counter(event["pid"] for event in done)
    assert len(per_worker) >= 2, f"the work was not shared: {per_worker}"
    print(f"\n{MESSAGES} messages in {elapsed:.1f} s; per worker: {sorted(per_worker.values())}")
