"""Wake-up latency: from a send's COMMIT returning to a receiver in another process getting it.

    python benchmarks/wakeup_latency.py --database sqlite:///tmp/wake.db
    python benchmarks/wakeup_latency.py --database postgresql://user@host/db

The receiver waits in ``db.receive`` on an empty queue (so it is woken, not polling); the
sender commits one message at a time, 20 ms apart, and notes when each COMMIT returned.
Prints the median and 99th percentile over ``--messages`` sends.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
import uuid
from datetime import timedelta

import txqueue

DDL = "CREATE QUEUE WakeQ (Id STRING(64) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


def receiver(
    url: str, count: int, ready: multiprocessing.synchronize.Event, out: multiprocessing.Queue
) -> None:  # type: ignore[name-defined]
    db = txqueue.connect(url)
    ready.set()
    got = 0
    while got < count:
        for message in db.receive("WakeQ", max_duration=timedelta(seconds=30)):
            out.put((message.key[0], time.time()))
            db.run_in_transaction(
                lambda t, m=message: t.ack("WakeQ", m.key, lease_token=m.lease_token)
            )
            got += 1
            if got >= count:
                break
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    db = txqueue.connect(args.database, dialect="googlesql")
    if "wakeq" not in {t.name.lower() for t in db.queues()}:
        db.update_ddl([DDL])
    db.run_in_transaction(lambda t: t.delete("WakeQ", None))
    context = multiprocessing.get_context("spawn")
    ready, out = context.Event(), context.Queue()
    process = context.Process(target=receiver, args=(args.database, args.messages, ready, out))
    process.start()
    ready.wait()
    time.sleep(1.0)  # let the receiver reach its wait
    committed: dict[str, float] = {}
    for _ in range(args.messages):
        key = uuid.uuid4().hex
        with db.batch() as batch:
            batch.send("WakeQ", (key,), b"x")
        committed[key] = time.time()
        time.sleep(0.02)
    latencies = []
    for _ in range(args.messages):
        key, received = out.get(timeout=60)
        latencies.append((received - committed[key]) * 1000)
    process.join(30)
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"{args.database.split('?')[0]}: wake-up latency over {len(latencies)} sends: "
        f"median {statistics.median(latencies):.2f} ms, p99 {p99:.2f} ms"
    )
    db.close()


if __name__ == "__main__":
    main()
