"""A queue worker for the fault tests: one process, killed (or frozen) at chosen points.

It receives from a queue under a short lease, writes each step to its journal (JSON lines,
one ``write(2)`` each, so a SIGKILL leaves at most a torn last line), and processes every
message with `txqueue.patterns.process_then_ack`: the effect row and the token-fenced ack
commit in one transaction. The effect row records the lease token it was applied under and
the wall time just before the ack ran, which the history checker uses.

Kill points (``pause_at``; the worker writes ``{"ev": "pause"}`` and blocks until killed):

``receive-commit``  inside receive's transaction, after the leasing UPDATE and before its
                    COMMIT. SQLite: a trace callback blocks the COMMIT statement. Cloud Spanner:
                    a wrapper of the client's commit blocks once it returned. PostgreSQL
                    (receive is one autocommit statement): a test trigger on the queue blocks
                    the UPDATE on an advisory lock the parent holds, chosen by this
                    connection's ``application_name`` ``recv:<lock>``; the parent sees the
                    backend waiting, kills the worker, then releases the lock, so the lease
                    commits for a worker that no longer exists.
``handler``         after the message was received and recorded, before any transaction.
``effect``          inside the transaction, after the effect row and before the ack.
``ack-commit``      during the COMMIT of effect + ack. SQLite: the trace callback blocks the
                    COMMIT statement. Cloud Spanner: the commit wrapper blocks before it.
                    PostgreSQL: a deferred test trigger on the effects table blocks the COMMIT
                    server-side (``application_name`` ``commit:<lock>``).
``after-commit``    after effect + ack committed, before the worker wrote that down.

``hold_at`` names a point where the worker instead waits for a line on the FIFO
``hold_fifo`` (the SIGSTOP test freezes it there and lets it go later). ``sabotage`` breaks
the processing on purpose, for the tests that show the fault tests can fail.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import txqueue
from txqueue.errors import Aborted, FailedPrecondition, NotFound
from txqueue.patterns import process_then_ack, run_once

POINTS = ("receive-commit", "handler", "effect", "ack-commit", "after-commit")
EFFECT_COLUMNS = ("effectid", "msgkey", "token", "worker", "appliedat")


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    url: str
    queue: str
    effects: str
    journal: str
    lease: float
    pause_at: str | None = None
    pause_on: int = 1  # pause while handling the n-th leased message (or a later one)
    hold_at: str | None = None
    hold_fifo: str | None = None
    stop_file: str | None = None
    stream_seconds: float = 0.5
    # Deliberately broken processing, to show that the fault tests catch it:
    # "split": the effect commits in a transaction of its own, the ack in a second one;
    # "unfenced": effect and ack share a transaction, but the ack ignores the lease token.
    sabotage: str | None = None
    # The Cloud Spanner emulator the test's process uses: the forkserver, started by an earlier
    # test, may predate its SPANNER_EMULATOR_HOST.
    spanner_emulator_host: str | None = None


class Journal:
    def __init__(self, path: str, worker: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._worker = worker

    def write(self, event: str, **fields: Any) -> None:
        record = {"ev": event, "worker": self._worker, "t": time.time(), **fields}
        os.write(self._fd, (json.dumps(record) + "\n").encode())


class Gate:
    """Where this worker pauses (until killed) or holds (until told to go on)."""

    def __init__(self, config: WorkerConfig, journal: Journal) -> None:
        self.config = config
        self.journal = journal
        self.leased = 0  # messages leased so far (the current one included)
        self.key: Any = None
        self.in_ack_transaction = False

    def reached(self, point: str) -> None:
        # at the n-th leased message or, when that one never got there (its ack refused,
        # say), at a later one: a victim that passed its point would never be killed
        if self.config.pause_at == point and self.leased >= self.config.pause_on:
            self.journal.write("pause", point=point, key=self.key)
            while True:  # until SIGKILL
                signal.pause()
        if self.config.hold_at == point and self.config.hold_fifo:
            # Read-write: the open never blocks (a blocked open is undone by SIGSTOP), and the
            # read waits for the parent's line.
            fifo = os.open(self.config.hold_fifo, os.O_RDWR)
            try:
                self.journal.write("hold", point=point, key=self.key)
                os.read(fifo, 16)
            finally:
                os.close(fifo)
            self.journal.write("resume", point=point, key=self.key)


def _trace_sqlite_commits(gate: Gate) -> None:
    """Block SQLite COMMITs at the chosen point, via a trace callback on every connection."""
    real_connect = sqlite3.connect
    lock = threading.Lock()

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = real_connect(*args, **kwargs)
        state = {"leasing": False, "changes": 0}

        def trace(statement: str) -> None:
            text = statement.strip()
            if text.upper() == "COMMIT":
                if state["leasing"] and connection.total_changes > state["changes"]:
                    with lock:
                        gate.leased += 1
                        gate.key = None
                    gate.reached("receive-commit")
                    with lock:
                        gate.leased -= 1  # not reached: the receive path counts it again
                elif gate.in_ack_transaction:
                    gate.reached("ack-commit")
            state["leasing"] = "_txq_delivery_count = _txq_delivery_count + 1" in text
            state["changes"] = connection.total_changes

        connection.set_trace_callback(trace)
        return connection

    sqlite3.connect = connect  # type: ignore[assignment]


def _trace_spanner_commits(gate: Gate) -> None:
    """Cloud Spanner: block after a receive's COMMIT returned (the lease is committed for a
    worker that will never hear of it, as the PostgreSQL gate does), or before the COMMIT of
    effect + ack (its lease read holds the emulator's one transaction), by wrapping the
    client's commit."""
    from google.cloud.spanner_v1.transaction import Transaction

    from txqueue.drivers.spanner import leasing

    leasing_now = threading.local()
    real_receive = leasing.receive
    real_commit = Transaction.commit

    def receive(*args: Any, **kwargs: Any) -> Any:
        messages = real_receive(*args, **kwargs)
        leasing_now.leased = bool(messages)
        return messages

    def commit(self: Any, *args: Any, **kwargs: Any) -> Any:
        leased, leasing_now.leased = getattr(leasing_now, "leased", False), False
        if gate.in_ack_transaction:
            gate.reached("ack-commit")
        result = real_commit(self, *args, **kwargs)
        if leased:
            gate.leased += 1
            gate.key = None
            gate.reached("receive-commit")
            gate.leased -= 1  # not reached: the receive path counts it again
        return result

    leasing.receive = receive  # type: ignore[assignment]
    Transaction.commit = commit  # type: ignore[method-assign]


def main(config: WorkerConfig) -> None:
    journal = Journal(config.journal, config.name)
    gate = Gate(config, journal)
    if config.url.startswith("sqlite"):
        _trace_sqlite_commits(gate)
    elif config.url.startswith("spanner"):
        _trace_spanner_commits(gate)
    journal.write("start", pid=os.getpid(), pause_at=config.pause_at, pause_on=config.pause_on)
    lease = timedelta(seconds=config.lease)
    with txqueue.connect(config.url) as db:
        while config.stop_file is None or not os.path.exists(config.stop_file):
            stream = db.receive(
                config.queue,
                max_duration=timedelta(seconds=config.stream_seconds),
                lease_duration=lease,
            )
            for message in stream:
                _handle(db, config, gate, journal, message)
    journal.write("exit")


def _handle(
    db: txqueue.Database,
    config: WorkerConfig,
    gate: Gate,
    journal: Journal,
    message: txqueue.Message,
) -> None:
    gate.leased += 1
    key = message.key[0]
    gate.key = key
    journal.write(
        "receive",
        key=key,
        token=message.lease_token,
        exp=message.lease_expiration.timestamp(),
        count=message.delivery_count,
    )
    gate.reached("handler")
    effect_id = uuid.uuid4().hex

    def effect(txn: txqueue.Transaction) -> None:
        applied = datetime.now(timezone.utc)
        row = (effect_id, key, message.lease_token, config.name, applied)
        txn.insert(config.effects, EFFECT_COLUMNS, [row])
        if config.sabotage != "split":
            gate.reached("effect")
        gate.in_ack_transaction = True

    try:
        if config.sabotage == "split":
            db.run_in_transaction(effect)
            gate.in_ack_transaction = False
            gate.reached("effect")  # between the two commits
            db.run_in_transaction(lambda txn: txn.ack(message.queue, message.key))
        elif config.sabotage == "unfenced":

            def unfenced(txn: txqueue.Transaction) -> None:
                effect(txn)
                txn.ack(message.queue, message.key)

            db.run_in_transaction(unfenced)
        else:
            process_then_ack(db, message, effect)
    except (FailedPrecondition, NotFound, Aborted) as error:  # Aborted: retries ran out
        journal.write("ack_failed", key=key, token=message.lease_token, error=type(error).__name__)
    else:
        gate.reached("after-commit")
        journal.write("acked", key=key, token=message.lease_token, effect=effect_id)
    finally:
        gate.in_ack_transaction = False


def run(config: WorkerConfig, task: str = "queue", argument: str = "") -> None:
    """Process entry point: report an unexpected error in the journal, then exit non-zero.

    ``task``: "queue" (the queue worker), "run_once" (`run_once_main` with ledger key
    ``argument``) or "commits" (`commit_loop_main`).
    """
    if config.spanner_emulator_host:
        os.environ["SPANNER_EMULATOR_HOST"] = config.spanner_emulator_host
    try:
        if task == "queue":
            main(config)
        elif task == "run_once":
            run_once_main(config, argument)
        else:
            commit_loop_main(config)
    except BaseException as error:
        Journal(config.journal, config.name).write("crash", error=repr(error))
        raise


def run_once_main(config: WorkerConfig, key: str) -> None:
    """Apply one effect with `txqueue.patterns.run_once` under ledger ``key``; no queue.

    ``pause_at`` is "ack-commit" (blocked inside the COMMIT, as for the queue worker) or
    "after-commit" (committed, not yet reported): the test kills the process there, so the
    caller never learns the outcome, and then resolves it through the ledger.
    """
    journal = Journal(config.journal, config.name)
    gate = Gate(config, journal)
    gate.leased = config.pause_on  # one unit of work, and it is the one to pause in
    if config.url.startswith("sqlite"):
        _trace_sqlite_commits(gate)
    elif config.url.startswith("spanner"):
        _trace_spanner_commits(gate)
    with txqueue.connect(config.url) as db:

        def effect(txn: txqueue.Transaction) -> None:
            row = (uuid.uuid4().hex, 0, key, config.name, datetime.now(timezone.utc))
            txn.insert(config.effects, EFFECT_COLUMNS, [row])
            gate.in_ack_transaction = True

        applied = run_once(db, key, effect)
        gate.in_ack_transaction = False
        gate.reached("after-commit")
        journal.write("done", applied=applied)


def commit_loop_main(config: WorkerConfig) -> None:
    """Commit effect rows one per transaction, writing each down after COMMIT returned."""
    journal = Journal(config.journal, config.name)
    with txqueue.connect(config.url) as db:
        for n in range(1_000_000):
            row = (f"{config.name}-{n}", n, "", config.name, datetime.now(timezone.utc))
            with db.batch() as batch:
                batch.insert(config.effects, EFFECT_COLUMNS, [row])
            journal.write("committed", n=n)
