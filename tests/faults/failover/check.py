"""The failover check: senders, ``txqueue worker`` processes and a commit-drop proxy run on a
Patroni cluster while its primary is switched over, crashed and frozen, N times in turn.

Run through ``scripts/failover-check [--failovers N] [--asynchronous]``. The last line:

    failovers=N lost=L duplicated=D wrong=W unknown=U recovery_p50_s=… recovery_max_s=…

``lost``        acknowledged sends with no effect at the end (the queue drained meanwhile);
``duplicated``  keys with more than one committed effect (effect and ack share a transaction);
``wrong``       transaction attempts whose reported outcome contradicts the database: a send
                acknowledged (or resolved "committed" after a dropped COMMIT) whose attempt
                row is not there, or one reported rolled back whose row is;
``unknown``     sends that ended in ``CommitOutcomeUnknown``;
``recovery``    per failover, seconds from the fault until sends succeed again for good.

It exits 0 only when lost, duplicated and wrong are all 0. The details (a JSON line before
the last) also count ``vanished`` effects: committed effects seen on a primary during the
run that are gone at the end (an ack undone by a failover; its message came back).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

import txqueue

from ..history import Effect, History, Send, check
from ..proxy import CommitDropProxy, fault_marker
from .cluster import DATABASE, Cluster, Node, wait_for

FAULTS = ("switchover", "freeze", "crash")
SCHEMA = (
    "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))",
    "CREATE TABLE effects (effectid varchar(32) NOT NULL, msgkey bigint NOT NULL,"
    " worker varchar(64) NOT NULL, delivery bigint NOT NULL,"
    " appliedat timestamptz NOT NULL, PRIMARY KEY (effectid))",
    "CREATE TABLE attempts (attempt varchar(32) NOT NULL, msgkey bigint NOT NULL,"
    " PRIMARY KEY (attempt))",
)
#: Shares of sends whose COMMIT the proxy drops: the reply ("after") or the request ("before").
DROP_AFTER, DROP_BEFORE = 0.06, 0.02
ROOT = Path(__file__).resolve().parents[3]


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass
class Operation:
    key: int
    started: float
    attempts: list[str] = field(default_factory=list)
    outcome: str = ""
    ended: float = 0.0
    #: per attempt, the proxy's drop mode ("" none); and the error that ended the send
    modes: list[str] = field(default_factory=list)
    error: str = ""


class Senders:
    """Threads that send one numbered message per transaction, with an attempt row beside it,
    through the proxies; some transactions carry a proxy marker so their COMMIT drops."""

    def __init__(self, url: str, threads: int, rng: random.Random) -> None:
        self.db = txqueue.connect(url + "&pool_size=4")
        self.rng = rng
        self.lock = threading.Lock()
        self.operations: list[Operation] = []
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(threads)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def acknowledged_since(self, moment: float) -> int:
        with self.lock:
            return sum(1 for op in self.operations if op.outcome == "ok" and op.ended > moment)

    def _loop(self) -> None:
        try:
            while not self.stopping.wait(0.02):
                with self.lock:
                    op = Operation(len(self.operations) + 1, time.time())
                    self.operations.append(op)
                self._send(op)
        except BaseException as error:
            self.errors.append(error)

    def _send(self, op: Operation) -> None:
        def work(txn: txqueue.Transaction) -> None:
            attempt = uuid.uuid4().hex
            op.attempts.append(attempt)
            roll = self.rng.random()
            mode = (
                "after"
                if roll < DROP_AFTER
                else "before"
                if roll < DROP_AFTER + DROP_BEFORE
                else ""
            )
            op.modes.append(mode)
            payload = fault_marker(mode, attempt).encode() if mode else b"job"
            txn.insert("attempts", ("attempt", "msgkey"), [(attempt, op.key)])
            txn.send("jobs", (op.key,), payload)

        try:
            self.db.run_in_transaction(work)
            op.outcome = "ok"
        except txqueue.errors.TxqueueError as error:
            op.outcome = type(error).__name__
            cause = error.__cause__
            op.error = f"{error}" + (f" (from {type(cause).__name__}: {cause})" if cause else "")
        op.ended = time.time()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)
        self.db.close()


class Observer:
    """Reads the effects committed on the current primary every quarter second, so that an
    acknowledged effect a failover undoes is noticed (its id is gone at the end)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: dict[str, int] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        connection: Any = None
        while not self.stopping.wait(0.25):
            try:
                if connection is None:
                    connection = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                rows = connection.execute(
                    "SELECT effectid, msgkey FROM effects"
                    " WHERE appliedat > now() - interval '60 seconds'"
                ).fetchall()
                self.seen.update((row[0], int(row[1])) for row in rows)
            except psycopg.Error:
                if connection is not None:
                    connection.close()
                connection = None
        if connection is not None:
            connection.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


class Workers:
    """``txqueue worker`` processes running the transactional handler of ``app.py``. One
    that exits is started again (as a service manager would) and its last error kept."""

    def __init__(self, url: str, count: int, directory: Path) -> None:
        self.url = url
        self.directory = directory
        self.exits: list[str] = []
        self.processes: list[subprocess.Popen[bytes]] = []
        for index in range(count):
            self.processes.append(self._start(index))

    def _start(self, index: int) -> subprocess.Popen[bytes]:
        environment = dict(os.environ)
        environment["PYTHONPATH"] = str(ROOT / "tests")
        environment["TXQ_FAILOVER_WORKER"] = f"worker{index}"
        command = [str(Path(sys.executable).with_name("txqueue"))]
        if os.environ.get("TXQ_FAILOVER_TRACEBACKS"):  # a worker's fatal error, in full
            command = [sys.executable, "-c", _TRACEBACKS]
        with open(self.directory / f"worker{index}.log", "ab") as output:
            return subprocess.Popen(
                [
                    *command,
                    "worker",
                    "faults.failover.app:app",
                    "--database",
                    self.url + "&pool_size=6",
                    "--concurrency",
                    "4",
                    "--grace",
                    "5s",
                    "--no-status",
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=environment,
                start_new_session=True,
            )

    def restart_exited(self) -> None:
        for index, process in enumerate(self.processes):
            if process.poll() is None:
                continue
            text = (self.directory / f"worker{index}.log").read_text(errors="replace")
            lines = [line for line in text.splitlines() if line.startswith("Error:")]
            error = lines[-1] if lines else text[-300:]
            self.exits.append(f"worker{index} exited {process.returncode}: {error}")
            log(self.exits[-1])
            self.processes[index] = self._start(index)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


#: ``txqueue worker`` that prints the traceback of the error it exits with.
_TRACEBACKS = """import sys, traceback, txqueue.cli.common as common
failure = common.failure
def printed(error, *args, **kwargs):
    traceback.print_exception(error)
    return failure(error, *args, **kwargs)
common.failure = printed
sys.argv[0] = "txqueue"
from txqueue.cli.main import main
main()
"""


def multi_host(hosts: list[tuple[str, int]], **options: str) -> str:
    netloc = ",".join(f"{host}:{port}" for host, port in hosts)
    query = "&".join(
        f"{k}={v}" for k, v in {"target_session_attrs": "read-write", **options}.items()
    )
    return f"postgresql://postgres@{netloc}/{DATABASE}?{query}"


def force(cluster: Cluster, kind: str) -> tuple[Node, Node, float]:
    """Force one failover of ``kind``; returns the old and new primary and the fault's time.
    The new primary counts once it leads on a new timeline (its promotion finished): a
    frozen node is thawed only then."""
    old = wait_for(cluster.leader, 60, "a primary")
    timeline = cluster.timeline(old.name)
    started = time.time()
    if kind == "switchover":
        cluster.switchover(old)
    elif kind == "crash":
        cluster.crash(old)
    else:
        cluster.freeze(old)

    def new_leader() -> Node | None:
        leader = cluster.leader()
        if leader is None or leader is old or cluster.timeline(leader.name) <= timeline:
            return None
        return leader

    new = wait_for(new_leader, 120, f"a new primary after the {kind}", interval=0.1)
    log(f"{kind}: {old.name} (timeline {timeline}) -> {new.name} ({cluster.timeline(new.name)})")
    if kind == "crash":
        cluster.start_node(old)  # it rejoins as a replica (pg_rewind)
    elif kind == "freeze":
        cluster.thaw(old)  # its restarted Patroni finds the leader key taken and demotes it
    return old, new, started


def settle(cluster: Cluster) -> None:
    """Wait until the cluster is healthy again; a replica that still cannot follow the new
    leader after a while (it happens to an old primary now and then) is rebuilt."""
    try:
        cluster.wait_healthy(90)
        return
    except TimeoutError as error:
        log(f"{error}; rebuilding {cluster.lagging()}")
    for name in cluster.lagging():
        cluster.reinit(name)
    cluster.wait_healthy(180)


def recovery_seconds(operations: list[Operation], fault: float, until: float) -> float:
    """Seconds from the fault until the first acknowledged send after the last failed one
    (sends that hung through the fault fail when it ends); the longest gap between
    acknowledgements when none failed."""
    window = [op for op in operations if op.ended >= fault and op.started < until]
    failed = [op.ended for op in window if op.outcome != "ok"]
    acks = sorted(op.ended for op in window if op.outcome == "ok")
    if failed:
        last = max(failed)
        after = [t for t in acks if t >= last]
        return (after[0] if after else until) - fault
    gaps = [b - a for a, b in zip([fault, *acks], acks, strict=False)]
    return max(gaps, default=until - fault)


def judge(url: str, operations: list[Operation], observed: dict[str, int]) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as connection:
        attempts = {row[0] for row in connection.execute("SELECT attempt FROM attempts")}
        effects = connection.execute(
            "SELECT effectid, msgkey, worker, extract(epoch FROM appliedat) FROM effects"
        ).fetchall()
        remaining = {int(row[0]) for row in connection.execute("SELECT jobid FROM jobs")}
        dead = {
            row[0]
            for row in connection.execute(
                "SELECT key FROM txqueue_dead_letters WHERE queue = 'jobs'"
            )
        }
    wrong: list[str] = []
    outcomes: Counter[str] = Counter()
    for op in operations:
        outcomes[op.outcome or "unfinished"] += 1
        for index, attempt in enumerate(op.attempts):
            last = index == len(op.attempts) - 1
            claim = "aborted"
            if last and op.outcome == "ok":
                claim = "committed"
            elif last and op.outcome in ("CommitOutcomeUnknown", ""):
                continue
            truth = "committed" if attempt in attempts else "aborted"
            if claim != truth:
                wrong.append(
                    f"key {op.key} attempt {attempt} ({index + 1} of {len(op.attempts)},"
                    f" drop {op.modes[index] if index < len(op.modes) else '?'!r}, at"
                    f" {op.started:.2f}-{op.ended:.2f}): said {claim}, was {truth};"
                    f" {op.outcome or 'unfinished'} {op.error}".rstrip()
                )
    history = History(
        sends=[Send(op.key, op.outcome == "ok") for op in operations],
        effects=[Effect(int(k), e, float(t), w) for e, k, w, t in effects],
        remaining=remaining,
    )
    report = check(history, lease=5.0, drained=True)
    final_ids = {row[0] for row in effects}
    vanished = {e: k for e, k in observed.items() if e not in final_ids}
    effect_keys = {int(row[1]) for row in effects}
    return {
        "lost": report.lost,
        "duplicated": report.duplicated,
        "wrong": len(wrong),
        "unknown": outcomes["CommitOutcomeUnknown"],
        "outcomes": dict(outcomes),
        "sends": len(operations),
        "effects": len(effects),
        "still_queued": len(remaining),
        "dead_letters": len(dead),
        "ghosts": report.ghost,
        "vanished_effects": len(vanished),
        "resurrected": len({k for k in vanished.values() if k in effect_keys}),
        "wrong_details": wrong[:10],
        "lost_details": report.details.get("lost", [])[:10],
        "duplicated_details": report.details.get("duplicated", [])[:10],
    }


def run(failovers: int, synchronous: bool, seed: int) -> int:
    rng = random.Random(seed)
    cluster = Cluster(synchronous=synchronous)
    # Every connection made here or by the workers started here reads the password there.
    os.environ["PGPASSFILE"] = str(cluster.client_passfile)
    proxies: list[CommitDropProxy] = []
    senders: Senders | None = None
    workers: Workers | None = None
    observer: Observer | None = None
    try:
        log(f"starting etcd and 3 Patroni nodes in {cluster.directory}")
        cluster.start()
        direct = multi_host(cluster.urls(), connect_timeout="2")
        db = txqueue.connect(direct)
        db.update_ddl(list(SCHEMA))
        db.close()
        proxies = [CommitDropProxy(host, port).start() for host, port in cluster.urls()]
        through = multi_host(
            [("127.0.0.1", p.port) for p in proxies],
            connect_timeout="2",
            sslmode="disable",
            gssencmode="disable",
        )
        log(f"cluster up: {cluster.members()}")
        senders = Senders(through, threads=2, rng=rng)
        workers = Workers(through, count=2, directory=cluster.directory)
        observer = Observer(direct)
        senders.start()
        observer.start()
        settled = time.time()
        wait_for(lambda: senders.acknowledged_since(settled) >= 50, 120, "the first sends")
        faults: list[dict[str, Any]] = []
        for number in range(failovers):
            kind = FAULTS[number % len(FAULTS)]
            old, new, started = force(cluster, kind)
            promoted = time.time()
            settle(cluster)
            healthy = time.time()
            leader = cluster.leader()
            if leader is not new:  # the promoted node's timeline was given up again
                log(f"{kind}: {new.name} was promoted, but {leader and leader.name} leads now")
            wait_for(
                lambda healthy=healthy: senders.acknowledged_since(healthy) >= 30,
                120,
                "sends to go on",
            )
            faults.append(
                {
                    "kind": kind,
                    "old": old.name,
                    "new": new.name,
                    "at": started,
                    "promoted_after_s": round(promoted - started, 2),
                    "leader_after": leader.name if leader is not None else None,
                    "healthy_after_s": round(healthy - started, 2),
                }
            )
            log(
                f"failover {number + 1}/{failovers}: {kind} {old.name} -> {new.name}, "
                f"new primary after {promoted - started:.1f}s, healthy after {healthy - started:.1f}s"
            )
            workers.restart_exited()
        senders.stop()
        if senders.errors:
            raise senders.errors[0]
        end = time.time()
        for index, fault in enumerate(faults):
            until = faults[index + 1]["at"] if index + 1 < len(faults) else end
            fault["recovery_s"] = round(recovery_seconds(senders.operations, fault["at"], until), 2)

        def drained() -> bool:
            with psycopg.connect(direct, autocommit=True, connect_timeout=2) as connection:
                row = connection.execute("SELECT count(*) FROM jobs").fetchone()
                return row is not None and row[0] == 0

        def drained_by_workers() -> bool:
            workers.restart_exited()
            return _quiet(drained)

        with contextlib.suppress(TimeoutError):
            wait_for(drained_by_workers, 180, "the queue to drain", interval=0.5)
        workers.stop()
        observer.stop()
        figures = judge(direct, senders.operations, observer.seen)
        recoveries = [fault["recovery_s"] for fault in faults]
        figures["commit_drops"] = sum(len(proxy.drops) for proxy in proxies)
        figures["worker_exits"] = workers.exits
        figures["faults"] = faults
        figures["replication"] = "synchronous" if synchronous else "asynchronous"
        print(json.dumps(figures), flush=True)
        p50 = statistics.median(recoveries) if recoveries else 0.0
        print(
            f"failovers={failovers} lost={figures['lost']} duplicated={figures['duplicated']}"
            f" wrong={figures['wrong']} unknown={figures['unknown']}"
            f" recovery_p50_s={p50:.1f} recovery_max_s={max(recoveries, default=0.0):.1f}",
            flush=True,
        )
        return 0 if figures["lost"] == figures["duplicated"] == figures["wrong"] == 0 else 1
    finally:
        if senders is not None:
            senders.stopping.set()
        if workers is not None:
            workers.stop()
        if observer is not None:
            observer.stop()
        for proxy in proxies:
            proxy.stop()
        log("stopping the cluster and removing its files")
        cluster.close()


def _quiet(condition: Any) -> bool:
    try:
        return bool(condition())
    except psycopg.Error:
        return False


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/failover-check", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--failovers", type=int, default=3, help="failovers to force (default 3)")
    parser.add_argument(
        "--asynchronous",
        action="store_true",
        help="asynchronous replication (Patroni's synchronous_mode off): measures what is lost",
    )
    parser.add_argument("--seed", type=int, default=None)
    arguments = parser.parse_args(argv)
    if arguments.failovers < 1:
        parser.error("--failovers must be at least 1")
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupted)
    # The pools' and the notifier's reconnect warnings are expected here.
    for name in ("psycopg", "txqueue"):
        logging.getLogger(name).setLevel(logging.ERROR)
    seed = arguments.seed if arguments.seed is not None else random.randrange(1 << 30)
    log(f"seed {seed}")
    try:
        return run(arguments.failovers, not arguments.asynchronous, seed)
    except KeyboardInterrupt:
        log("interrupted: cleaned up")
        return 130


if __name__ == "__main__":
    sys.exit(main())
