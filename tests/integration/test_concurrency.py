"""Many receiver processes drain one queue: every message acked exactly once, never leased
twice at once (SPEC §3 "Many receivers on many processes/hosts never hold the same message
at once", §7).

5,000 messages are sent first; then 8 worker processes (PostgreSQL) or 4 (one SQLite file)
receive in batches of 10 with 10 s leases and ack each message with its lease token. Every
worker writes one JSON line per received message to its own file; the test reads them all.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import txqueue

MESSAGES = 5_000
SEND_BATCH = 250
LEASE_SECONDS = 10
REPO = Path(__file__).resolve().parents[2]

GOOGLESQL_QUEUE = (
    "CREATE QUEUE Jobs (JobId INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (JobId)"
)
POSTGRESQL_QUEUE = (
    "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))"
)

# A worker: receive streams of 3 s until one yields nothing; ack every message with its token
# right away; retry an ack only on Aborted (a conflict, e.g. SQLite busy).
WORKER = r"""
import json, sys, time
from datetime import timedelta

import txqueue
from txqueue.errors import Aborted, TxqueueError

url, queue, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
lease = timedelta(seconds=float(sys.argv[4]))


def ack(db, message):
    for attempt in range(20):
        try:
            with db.batch() as b:
                b.ack(queue=queue, key=message.key, lease_token=message.lease_token)
            return None
        except Aborted:
            time.sleep(0.01 * (attempt + 1))
        except TxqueueError as exc:
            return f"{type(exc).__name__}: {exc}"
    return "Aborted 20 times"


with txqueue.connect(url) as db, open(out_path, "w") as out:
    while True:
        got = 0
        stream = db.receive(
            queue, max_duration=timedelta(seconds=3), max_batch_size=10, lease_duration=lease
        )
        for message in stream:
            got += 1
            received = time.time()
            error = ack(db, message)
            record = {
                "key": list(message.key),
                "token": message.lease_token,
                "received": received,
                "acked": time.time(),
                "ack_error": error,
                "lease_expiration": message.lease_expiration.timestamp(),
                "delivery_count": message.delivery_count,
                "last_in_batch": message.last_in_batch,
            }
            out.write(json.dumps(record) + "\n")
        out.flush()
        if got == 0:
            break
"""


def _fill_queue(url: str) -> str:
    with txqueue.connect(url) as db:
        postgres_dialect = db.dialect == "postgresql"
        queue = "jobs" if postgres_dialect else "Jobs"
        db.update_ddl([POSTGRESQL_QUEUE if postgres_dialect else GOOGLESQL_QUEUE])
        for start in range(0, MESSAGES, SEND_BATCH):
            with db.batch() as b:
                for job_id in range(start, min(start + SEND_BATCH, MESSAGES)):
                    b.send(queue=queue, key=(job_id,), payload=f"job {job_id}".encode())
        with db.snapshot() as snapshot:
            [(count,)] = [tuple(row) for row in snapshot.execute_sql("SELECT COUNT(*) FROM jobs")]
        assert count == MESSAGES
    return queue


def _run_workers(url: str, queue: str, workers: int, tmp_path: Path) -> list[dict[str, Any]]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    outputs = [tmp_path / f"worker-{i}.jsonl" for i in range(workers)]
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), url, queue, str(out), str(LEASE_SECONDS)],
            env=env,
            cwd=str(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outputs
    ]
    failures = []
    for i, process in enumerate(processes):
        try:
            _, stderr = process.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
            failures.append(f"worker {i} timed out:\n{stderr[-3000:]}")
            continue
        if process.returncode != 0:
            failures.append(f"worker {i} exited {process.returncode}:\n{stderr[-3000:]}")
    assert not failures, "\n\n".join(failures)

    records = []
    for worker, out in enumerate(outputs):
        for line in out.read_text().splitlines():
            record = json.loads(line)
            record["worker"] = worker
            records.append(record)
    return records


def _check(records: list[dict[str, Any]], url: str) -> None:
    by_key: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_key[record["key"][0]].append(record)

    # every message was received, and acked successfully exactly once
    assert sorted(by_key) == list(range(MESSAGES))
    acks = {key: sum(r["ack_error"] is None for r in rs) for key, rs in by_key.items()}
    wrong = {key: n for key, n in acks.items() if n != 1}
    assert not wrong, f"keys not acked exactly once: {dict(list(wrong.items())[:10])}"
    assert len({r["token"] for r in records}) == len(records), "a lease token was reused"

    # a key received more than once: its leases never overlapped in time. A lease lasts from
    # its receipt until its ack, or until it expired when the ack failed.
    for key, rs in by_key.items():
        if len(rs) == 1:
            assert rs[0]["delivery_count"] == 1
            continue
        rs.sort(key=lambda r: r["received"])
        for earlier, later in itertools.pairwise(rs):
            assert earlier["ack_error"] is not None, f"key {key} redelivered after a good ack"
            assert later["received"] >= earlier["lease_expiration"] - 0.05, (
                f"key {key} leased twice at once: {earlier} / {later}"
            )
            assert later["delivery_count"] > earlier["delivery_count"]

    # a fast drain with 10 s leases needs no redelivery; allow only a handful before blaming
    # the library (a worker stalled past its lease on an overloaded machine)
    redelivered = len(records) - MESSAGES
    assert redelivered <= MESSAGES // 100, f"{redelivered} redeliveries"

    # work was actually shared between processes
    busy_workers = {r["worker"] for r in records}
    assert len(busy_workers) >= 2, "only one worker received anything"
    batch_ends = sum(r["last_in_batch"] for r in records)
    assert batch_ends < len(records), "max_batch_size=10 never produced a batch bigger than 1"

    with txqueue.connect(url) as db, db.snapshot() as snapshot:
        [(count,)] = [tuple(row) for row in snapshot.execute_sql("SELECT COUNT(*) FROM jobs")]
    assert count == 0, "the queue is not empty after the drain"


@pytest.mark.timeout(420)
def test_eight_processes_drain_postgresql(pg_database_url: str, tmp_path: Path) -> None:
    queue = _fill_queue(pg_database_url)
    records = _run_workers(pg_database_url, queue, 8, tmp_path)
    _check(records, pg_database_url)


@pytest.mark.timeout(420)
def test_four_processes_drain_one_sqlite_file(sqlite_url: str, tmp_path: Path) -> None:
    queue = _fill_queue(sqlite_url)
    records = _run_workers(sqlite_url, queue, 4, tmp_path)
    _check(records, sqlite_url)


def test_lease_overlap_check_catches_overlaps() -> None:
    """The checker itself must fail on a double lease (a test that cannot fail is a defect)."""
    now = time.time()
    lease = timedelta(seconds=LEASE_SECONDS).total_seconds()
    first = {
        "key": [0],
        "token": "t1",
        "received": now,
        "acked": now + 1,
        "ack_error": "x",
        "lease_expiration": now + lease,
        "delivery_count": 1,
        "last_in_batch": True,
        "worker": 0,
    }
    second = dict(first, token="t2", received=now + 2, ack_error=None, delivery_count=2, worker=1)
    by_key_records = [first, second] + [
        dict(first, key=[k], token=f"k{k}", ack_error=None, worker=k % 2, last_in_batch=False)
        for k in range(1, MESSAGES)
    ]
    with pytest.raises(AssertionError, match="leased twice at once"):
        _check(by_key_records, "unused://")
