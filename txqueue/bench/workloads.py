"""W1 send, W2 drain, W3 latency, each run against one system.

Worker processes are started with ``spawn`` and connect before the clock starts; a drain
ends when every message was handled and the system shows none pending.
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

from txqueue.bench.systems import make_system

PAD = "x" * 60


def payload(sequence: int) -> bytes:
    """A ~100-byte JSON message carrying its sequence number and send time."""
    return json.dumps({"seq": sequence, "ts": time.time(), "pad": PAD}).encode()


def send(kind: str, url: str, messages: int, batch: int, keys: str = "random") -> dict[str, Any]:
    """W1: send ``messages`` in transactions of ``batch``; returns messages per second."""
    system = make_system(kind, url, keys)
    try:
        system.setup()
        payloads = [payload(i) for i in range(messages)]
        started = time.perf_counter()
        system.send(payloads, batch)
        elapsed = time.perf_counter() - started
        stored = system.pending()
    finally:
        system.close()
    return {"rate": round(messages / elapsed, 1), "seconds": round(elapsed, 3), "stored": stored}


def _worker(
    kind: str, url: str, batch: int, ready: Any, go: Any, stop: Any, count: Any, latencies: Any
) -> None:
    system = make_system(kind, url)
    ready.release()
    go.wait()

    def on_message(body: bytes) -> None:
        if latencies is not None:
            latencies.put((json.loads(body)["seq"], time.time()))
        with count.get_lock():
            count.value += 1

    try:
        system.drain_loop(batch, on_message, stop.is_set)
    finally:
        system.close()


def _start_workers(
    kind: str, url: str, workers: int, batch: int, latencies: Any = None
) -> tuple[list[Any], Any, Any, Any]:
    context = multiprocessing.get_context("spawn")
    ready, go, stop = context.Semaphore(0), context.Event(), context.Event()
    count = context.Value("q", 0)
    processes = [
        context.Process(
            target=_worker, args=(kind, url, batch, ready, go, stop, count, latencies), daemon=True
        )
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        ready.acquire()
    return processes, go, stop, count


def drain(
    kind: str,
    url: str,
    messages: int,
    workers: int,
    batch: int,
    progress: Callable[[int], None] | None = None,
    timeout: float = 600,
    keys: str = "random",
) -> dict[str, Any]:
    """W2: preload ``messages``, then drain them with ``workers`` processes."""
    system = make_system(kind, url, keys)
    try:
        system.setup()
        system.send([payload(i) for i in range(messages)], 500)
        processes, go, stop, count = _start_workers(kind, url, workers, batch)
        started = time.perf_counter()
        go.set()
        deadline = time.monotonic() + timeout
        while (count.value < messages or system.pending()) and time.monotonic() < deadline:
            if progress:
                progress(count.value)
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        stop.set()
        for process in processes:
            process.join(10)
        handled = count.value
    finally:
        system.close()
    return {
        "rate": round(handled / elapsed, 1),
        "seconds": round(elapsed, 3),
        "handled": handled,
        "duplicates": max(handled - messages, 0),
    }


def latency(
    kind: str, url: str, messages: int, rate: float, batch: int, keys: str = "random"
) -> dict[str, Any]:
    """W3: one worker consumes while messages are sent one per transaction at ``rate``/s.

    Each latency runs from before the send to the consumer holding the message; it is also
    split at the return of the send's commit: ``commit_*`` is the producer's own statement,
    ``after_commit_*`` the wake-up and the receive (where a consumer that falls behind
    shows)."""
    system = make_system(kind, url, keys)
    context = multiprocessing.get_context("spawn")
    latencies = context.Queue()
    sent: dict[int, tuple[float, float]] = {}
    try:
        system.setup()
        processes, go, stop, count = _start_workers(kind, url, 1, batch, latencies)
        go.set()
        started = time.perf_counter()
        for sequence in range(messages):
            due = started + sequence / rate
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            before = time.time()
            system.send([payload(sequence)], 1)
            sent[sequence] = (before, time.time())
        sent_for = time.perf_counter() - started
        deadline = time.monotonic() + 60
        while count.value < messages and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()
        held = [latencies.get() for _ in range(count.value)]
        for process in processes:
            process.join(10)
    finally:
        system.close()
    if not held:
        return {"p50_ms": None, "p99_ms": None, "achieved_rate": 0.0}
    total = [(at - sent[sequence][0]) * 1000 for sequence, at in held]
    commit = [(sent[sequence][1] - sent[sequence][0]) * 1000 for sequence, _ in held]
    after = [(at - sent[sequence][1]) * 1000 for sequence, at in held]
    return {
        "p50_ms": round(statistics.median(total), 2),
        "p99_ms": _percentile(total, 99),
        "max_ms": round(max(total), 2),
        "commit_p99_ms": _percentile(commit, 99),
        "after_commit_p50_ms": round(statistics.median(after), 2),
        "after_commit_p99_ms": _percentile(after, 99),
        "achieved_rate": round(messages / sent_for, 1),
    }


def _percentile(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))], 2)
