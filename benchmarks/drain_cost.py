"""Instructions per message of a send, a batched drain and a worker drain, counted by callgrind.

    python benchmarks/drain_cost.py URL            # the txqueue that python imports
    PYTHONPATH=/path/to/other/checkout python benchmarks/drain_cost.py URL

Rates and CPU seconds on a shared 2-core machine move by ±30 % from one run to the next; the
instructions a process executes move by well under 1 %, so a per-message difference of a few
percent between two versions of the code shows here and nowhere else. Each figure comes from
runs of 1,000 and 5,000 messages, so start-up and import cancel out: a send costs
(S5000 - S1000) / 4000 instructions, and a drain (T5000 - S5000 - (T1000 - S1000)) / 4000,
where S is a run that only sends (preloads) and T one that sends and then drains. The drains
are those of the peer harness's txqueue adapters: ``receive_now`` of 100 acked in one batch
with their lease tokens, and the worker runtime with a no-op handler (16 in flight). Every
thread of the process is counted (the worker's and the drivers' included). Needs valgrind.

One run of the process (``--run MODE N``) preloads N messages into a new queue, then drains
them (``batched``, ``worker``) or not (``send``), then drops the queue.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import uuid

SIZES = (1000, 5000)
MODES = ("send", "batched", "worker")


def _run(url: str, mode: str, count: int) -> None:
    import txqueue

    database = txqueue.connect(url, dialect="googlesql")
    name = "Cost" + uuid.uuid4().hex[:8]
    database.update_ddl(
        [
            f"CREATE QUEUE {name} (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
            " PRIMARY KEY (Id)"
        ]
    )
    payload = os.urandom(64)
    for start in range(0, count, 1000):
        with database.batch() as batch:
            for _ in range(start, min(count, start + 1000)):
                batch.send(queue=name, key=(os.urandom(16).hex(),), payload=payload)
    if mode == "batched":
        done = 0
        while done < count:
            messages = database.receive_now(name, max_batch_size=100)
            with database.batch() as batch:
                for message in messages:
                    batch.ack(queue=name, key=message.key, lease_token=message.lease_token)
            done += len(messages)
    elif mode == "worker":
        asyncio.run(_work(url, name, count))
    database.update_ddl([f"DROP QUEUE {name}"])
    database.close()


async def _work(url: str, name: str, count: int) -> None:
    import txqueue
    from txqueue.worker.runtime import Worker

    app = txqueue.App(url)
    handled = 0
    finished = asyncio.Event()

    @app.handler(name)
    async def handle(message: txqueue.Message) -> None:
        nonlocal handled
        handled += 1
        if handled >= count:
            finished.set()

    worker = Worker(app, concurrency=16)
    task = asyncio.create_task(worker.run())
    await finished.wait()
    worker.stop()
    await asyncio.wait_for(task, 30)


def _instructions(url: str, mode: str, count: int) -> int:
    with tempfile.TemporaryDirectory() as directory:
        output = os.path.join(directory, "callgrind.out")
        result = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--cache-sim=no",
                f"--callgrind-out-file={output}",
                sys.executable,
                __file__,
                url,
                "--run",
                mode,
                str(count),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind:\n{result.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--run", nargs=2, metavar=("MODE", "N"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.run:
        _run(arguments.url, arguments.run[0], int(arguments.run[1]))
        return
    counts = {(m, n): _instructions(arguments.url, m, n) for m in MODES for n in SIZES}
    low, high = SIZES
    send = (counts["send", high] - counts["send", low]) / (high - low)
    print(f"send            {send / 1000:8.1f} thousand instructions per message")
    for mode in ("batched", "worker"):
        drain = (counts[mode, high] - counts[mode, low]) / (high - low) - send
        print(f"{mode + ' drain':15} {drain / 1000:8.1f} thousand instructions per message")


if __name__ == "__main__":
    main()
