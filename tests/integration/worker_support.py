"""Running ``txqueue worker tests.integration.worker_app:app`` as subprocesses, and reading
what its handlers recorded. Waiting is polling against a deadline, never a fixed sleep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import txqueue

REPO = Path(__file__).resolve().parents[2]
QUEUES = ("Jobs", "Failing", "Long", "Bulk")


def create_queues(url: str) -> None:
    """The worker app's queues, in the database's dialect (``Ticks`` keyed by name and slot)."""
    with txqueue.connect(url) as db:
        if db.dialect == "postgresql":
            ddl = [
                f"CREATE QUEUE {q} (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"
                for q in QUEUES
            ]
            ddl.append(
                "CREATE QUEUE Ticks (name varchar NOT NULL, slot varchar NOT NULL,"
                " payload bytea NOT NULL, PRIMARY KEY (name, slot))"
            )
        else:
            ddl = [
                f"CREATE QUEUE {q} (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL)"
                " PRIMARY KEY (Id)"
                for q in QUEUES
            ]
            ddl.append(
                "CREATE QUEUE Ticks (Name STRING(MAX) NOT NULL, Slot STRING(MAX) NOT NULL,"
                " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Name, Slot)"
            )
        db.update_ddl(ddl)


def send(
    url: str, queue: str, keys: range | list[int], payload: dict[str, Any] | None = None
) -> None:
    """Send one message per key, 500 to a transaction."""
    body = json.dumps(payload or {}).encode()
    keys = list(keys)
    with txqueue.connect(url) as db:
        for start in range(0, len(keys), 500):
            with db.batch() as batch:
                for key in keys[start : start + 500]:
                    batch.send(queue, (key,), body)


#: Every worker started and not yet reaped: ``reap()`` kills what a failed test left behind.
STARTED: list[WorkerProcess] = []
#: Starting Python and connecting can be slow on a loaded machine; the behaviour under test
#: is timed from the "worker started" log line instead.
STARTUP_SECONDS = 90


def reap() -> None:
    """Kill (SIGKILL) and wait for every worker still running."""
    while STARTED:
        worker = STARTED.pop()
        if worker.process.poll() is None:
            worker.process.kill()
        worker.process.wait()


class WorkerProcess:
    """One ``txqueue worker`` subprocess; its output goes to files next to the records.

    The constructor returns once the worker logged that it started (it fails after
    ``STARTUP_SECONDS``).
    """

    def __init__(
        self,
        url: str,
        records: Path,
        *options: str,
        wait: bool = True,
        app: str = "tests.integration.worker_app:app",
    ) -> None:
        self.records = records
        index = len(list(records.glob("worker-*.log")))
        self.log = records / f"worker-{index}.log"
        env = dict(
            os.environ,
            TXQUEUE_TEST_RECORD_DIR=str(records),
            PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            PYTHONUNBUFFERED="1",
            PYTHONFAULTHANDLER="1",  # SIGABRT prints every thread's stack (see ``wait``)
        )
        command = [
            sys.executable,
            "-m",
            "txqueue.cli.main",
            "worker",
            app,
            "--database",
            url,
            *options,
        ]
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(
                command, cwd=str(REPO), env=env, stdout=out, stderr=subprocess.STDOUT
            )
        STARTED.append(self)
        if wait:
            wait_for(
                lambda: "worker started" in self.log.read_text(), STARTUP_SECONDS, "startup", self
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGINT, then wait for the exit status (SIGKILL and fail after ``timeout``)."""
        if self.process.poll() is None:
            self.signal(signal.SIGINT)
        return self.wait(timeout)

    def wait(self, timeout: float = 30.0) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGUSR1)  # its asyncio tasks' stacks (worker_app)
            time.sleep(1)
            self.process.send_signal(signal.SIGABRT)  # and its threads', into its log
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            raise AssertionError(f"worker did not exit in {timeout} s:\n{self.output()}") from None
        if self in STARTED:
            STARTED.remove(self)
        return code

    def output(self) -> str:
        """The end of the worker's log, then the events recorded so far (to diagnose a wait)."""
        events = "\n".join(json.dumps(event) for event in records(self.records)[-20:])
        return f"{self.log.read_text()[-12000:]}\n-- recorded events (last 20):\n{events}"


def stop_all(workers: list[WorkerProcess], timeout: float = 30.0) -> list[int]:
    """SIGINT to every worker at once, then their exit statuses. One by one, a worker that
    stops releases the leases of the messages it had prefetched and not started, and one
    still running takes them as their second delivery."""
    for worker in workers:
        if worker.process.poll() is None:
            worker.signal(signal.SIGINT)
    return [worker.wait(timeout) for worker in workers]


def records(directory: Path, **match: Any) -> list[dict[str, Any]]:
    """Every recorded event (all processes), oldest first, filtered by field values."""
    found = []
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                event = json.loads(line)
                if all(event.get(k) == v for k, v in match.items()):
                    found.append(event)
    return sorted(found, key=lambda event: event["time"])


def wait_for(
    condition: Callable[[], Any], timeout: float, what: str, *workers: WorkerProcess
) -> Any:
    """Poll ``condition`` until it is truthy; fail with ``what`` and the workers' output."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            logs = "\n".join(w.output() for w in workers)
            raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs}")
        for worker in workers:
            if worker.process.poll() is not None:
                raise AssertionError(
                    f"worker exited {worker.process.returncode}:\n{worker.output()}"
                )
        time.sleep(0.05)


def queue_info(url: str, queue: str) -> txqueue.QueueInfo:
    with txqueue.connect(url) as db:
        return db.queue_info(queue)
