"""PostgreSQL crash-restarted under load: nothing acked or committed is lost (SPEC §7).

A dedicated server (the session's shared one must not be crashed under other tests) takes
load from two producer threads — each operation inserts an order row and sends its message
in one transaction — and two consumer threads that receive under a 2 s lease and process with
`process_then_ack` (effect row + token-fenced ack). Meanwhile the test crashes the server
(``pg_ctl stop -m immediate``, i.e. SIGQUIT: no shutdown checkpoint, crash recovery on start)
and starts it again, five times, each time after the clients made progress.

Afterwards, read directly from the server:
- every operation a client was told committed is there (order row; its message processed);
- every operation a client was told failed (a typed error other than CommitOutcomeUnknown)
  is not there — so retrying it would not have applied it twice;
- every ack a consumer was told committed deleted its message and kept its effect; every ack
  that failed left no effect;
- the history checker finds nothing lost, duplicated, ghostly or stale;
- every error the clients saw is a txqueue error an outage explains (Unavailable, Aborted,
  CommitOutcomeUnknown, DeadlineExceeded; for an ack also FailedPrecondition / NotFound, its
  lease having run out while the server was down), and no call hung (each is timed).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pgserver import PostgresServer

import txqueue
from txqueue.errors import TxqueueError
from txqueue.patterns import process_then_ack

from .harness import read_effects, remaining_keys, wait_for
from .history import History, Receive, Send, check

RESTARTS = 5
LEASE = 2.0
OPERATIONS_BETWEEN_RESTARTS = 60
CALL_BOUND = 75.0  # seconds: resolving a dropped COMMIT gives up after 60 s
#: What an outage may cause; an ack may also find its lease lost while the server was down.
OUTAGE = {"Unavailable", "Aborted", "CommitOutcomeUnknown", "DeadlineExceeded"}
LEASE_LOST = {"FailedPrecondition", "NotFound"}
SCHEMA = (
    "CREATE TABLE orders (orderid bigint NOT NULL, PRIMARY KEY (orderid))",
    "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))",
    "CREATE TABLE effects (effectid varchar(32) NOT NULL, msgkey bigint NOT NULL,"
    " token varchar(64) NOT NULL, worker varchar(64) NOT NULL,"
    " appliedat timestamptz NOT NULL, PRIMARY KEY (effectid))",
)


@dataclass
class Load:
    """What the clients did and were told, recorded by the client threads."""

    url: str
    stop: threading.Event = field(default_factory=threading.Event)
    draining: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_order: int = 1
    sends: dict[int, str] = field(default_factory=dict)  # order -> outcome
    receives: list[Receive] = field(default_factory=list)
    acks: dict[str, str] = field(default_factory=dict)  # lease token -> outcome
    errors: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    calls_in_flight: dict[int, float] = field(default_factory=dict)  # call -> started
    longest_call: float = 0.0

    def call(self, function: Any, *args: Any, allowed: set[str] = OUTAGE) -> str:
        """Run one client call, timed; its outcome is "ok" or the error's class name."""
        me = object()
        started = time.monotonic()
        self.calls_in_flight[id(me)] = started
        try:
            function(*args)
            return "ok"
        except TxqueueError as error:
            name = type(error).__name__
            self.errors[name] += 1
            if name not in allowed:
                self.unexpected.append(f"{name}: {error}")
            return name
        except Exception as error:  # a driver error leaking past the boundary: a bug
            self.unexpected.append(f"{type(error).__module__}.{type(error).__name__}: {error}")
            return "untyped"
        finally:
            del self.calls_in_flight[id(me)]
            self.longest_call = max(self.longest_call, time.monotonic() - started)

    def committed_sends(self) -> int:
        return sum(1 for outcome in self.sends.values() if outcome == "ok")


def producer(db: txqueue.Database, load: Load) -> None:
    while not load.stop.is_set() and not load.draining.is_set():
        with load.lock:
            order = load.next_order
            load.next_order += 1

        def work(txn: txqueue.Transaction, order: int = order) -> None:
            txn.insert("orders", ("orderid",), [(order,)])
            txn.send("jobs", (order,), b"order")

        load.sends[order] = load.call(db.run_in_transaction, work)


def consumer(db: txqueue.Database, load: Load, name: str) -> None:
    def handle(message: txqueue.Message) -> None:
        key = message.key[0]
        load.receives.append(
            Receive(
                key,
                message.lease_token,
                time.time(),
                message.lease_expiration.timestamp(),
                message.delivery_count,
                name,
            )
        )

        def effect(txn: txqueue.Transaction) -> None:
            row = (uuid.uuid4().hex, key, message.lease_token, name, datetime.now(timezone.utc))
            txn.insert("effects", ("effectid", "msgkey", "token", "worker", "appliedat"), [row])

        load.acks[message.lease_token] = load.call(
            process_then_ack, db, message, effect, allowed=OUTAGE | LEASE_LOST
        )

    def stream() -> None:
        receive = db.receive("jobs", timedelta(seconds=1), lease_duration=timedelta(seconds=LEASE))
        for message in receive:
            handle(message)

    while not load.stop.is_set():
        load.call(stream)


@pytest.mark.timeout(240)
def test_crash_restarts_under_load_lose_nothing(
    private_postgres: Callable[..., PostgresServer], fault_figures: dict[str, Any]
) -> None:
    crashable_server = private_postgres()
    url = crashable_server.create_database("restarts")
    with txqueue.connect(url) as db:
        db.update_ddl(list(SCHEMA))
    load = Load(url)
    started = time.monotonic()
    downtime: list[float] = []
    clients = [txqueue.connect(url) for _ in range(4)]
    threads = [
        threading.Thread(target=producer, args=(clients[0], load)),
        threading.Thread(target=producer, args=(clients[1], load)),
        threading.Thread(target=consumer, args=(clients[2], load, "c1")),
        threading.Thread(target=consumer, args=(clients[3], load, "c2")),
    ]
    try:
        for thread in threads:
            thread.start()
        for _ in range(RESTARTS):
            goal = load.committed_sends() + OPERATIONS_BETWEEN_RESTARTS
            wait_for(lambda goal=goal: load.committed_sends() >= goal, 60, "client progress")
            down = time.monotonic()
            crashable_server.restart(mode="immediate")
            downtime.append(time.monotonic() - down)
            _assert_no_call_hangs(load)
        goal = load.committed_sends() + OPERATIONS_BETWEEN_RESTARTS
        wait_for(lambda: load.committed_sends() >= goal, 60, "progress after the last restart")
        load.draining.set()
        for thread in threads[:2]:  # a producer's last send may still be committing
            thread.join(CALL_BOUND + 15)
        with txqueue.connect(url) as db:
            wait_for(
                lambda: _assert_no_call_hangs(load) or _pending(db) == 0, 60, "the queue to drain"
            )
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(CALL_BOUND + 15)
        for client in clients:
            client.close()
    assert not any(thread.is_alive() for thread in threads), "a client call hung"

    with txqueue.connect(url) as db:
        with db.snapshot() as snapshot:
            orders = {row[0] for row in snapshot.execute_sql("SELECT orderid FROM orders")}
        effects = read_effects(db)
        remaining = remaining_keys(db)
    unknown = {o for o, outcome in load.sends.items() if outcome == "CommitOutcomeUnknown"}
    believed = {o for o, outcome in load.sends.items() if outcome == "ok"}
    failed = set(load.sends) - believed - unknown
    effect_tokens = {e.token for e in effects}
    acked = {t for t, outcome in load.acks.items() if outcome == "ok"}
    ack_failed = {
        t for t, outcome in load.acks.items() if outcome not in ("ok", "CommitOutcomeUnknown")
    }
    history = History(
        sends=[Send(o, o in orders) for o in load.sends],
        receives=list(load.receives),
        effects=effects,
        remaining=remaining,
    )
    # After a restart the pool reconnects with its own backoff, which psycopg_pool doubles
    # without a cap (1, 2, 4, 8, 16 s): a consumer caught in it waits, and one CI run saw
    # three redeliveries 25-27 s past the lease rules. That says nothing about the lease
    # rules (test_kill checks those), so the tolerance covers the backoff's 16 s step.
    report = check(history, lease=LEASE, tolerance=35.0)
    figures = {
        "restarts": RESTARTS,
        "downtime_seconds": [round(d, 2) for d in downtime],
        "sends": len(load.sends),
        "sends_committed": len(believed),
        "sends_failed": len(failed),
        "sends_unknown": len(unknown),
        "acks": len(load.acks),
        "acks_committed": len(acked),
        "errors": dict(load.errors),
        "unexpected_errors": load.unexpected[:5],
        "longest_call_seconds": round(load.longest_call, 2),
        "lost_committed_sends": len(believed - orders),
        "phantom_failed_sends": len(failed & orders),
        "lost_acks": len(acked - effect_tokens),
        "phantom_failed_acks": len(ack_failed & effect_tokens),
        "seconds": round(time.monotonic() - started, 1),
        "checker": report.figures(),
    }
    fault_figures.update(figures)

    assert figures["lost_committed_sends"] == 0, figures
    assert figures["phantom_failed_sends"] == 0, figures
    assert figures["lost_acks"] == 0, figures
    assert figures["phantom_failed_acks"] == 0, figures
    assert not load.unexpected, load.unexpected
    assert load.longest_call < CALL_BOUND
    assert report.lost == report.duplicated == report.ghost == report.stale_ack == 0, report
    assert report.late_redeliveries == 0, report
    assert not remaining
    assert load.errors["Unavailable"] >= 1, "the restarts were not felt: the test proves nothing"
    assert len(believed) >= (RESTARTS + 1) * OPERATIONS_BETWEEN_RESTARTS


def _pending(db: txqueue.Database) -> int:
    info = db.queue_info("jobs")
    return info.ready + info.leased + info.scheduled


def _assert_no_call_hangs(load: Load) -> None:
    now = time.monotonic()
    for started in list(load.calls_in_flight.values()):
        assert now - started < CALL_BOUND, f"a client call has run for {now - started:.0f}s"
