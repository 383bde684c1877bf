"""Measure how soon a waiting receiver gets a message another handle sent, on the emulator.

Run through ``scripts/spanner-wakeup-latency [--messages N]``; see that script.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from datetime import timedelta

from spannerserver import SpannerEmulator

import txqueue


def measure(url: str, messages: int) -> list[float]:
    """Seconds from each send's commit to its arrival on a stream of another handle."""
    receiver = txqueue.connect(url)
    sender = txqueue.connect(url)
    try:
        receiver.update_ddl(
            "CREATE QUEUE Pings (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
        )
        sent: dict[int, float] = {}
        arrived: dict[int, float] = {}
        waiting = threading.Event()

        def receive() -> None:
            stream = receiver.receive("Pings", max_duration=timedelta(seconds=30 + messages))
            waiting.set()
            for message in stream:
                arrived[message.key[0]] = time.monotonic()
                with receiver.batch() as batch:
                    batch.ack("Pings", message.key, lease_token=message.lease_token)
                if len(arrived) == messages:
                    break

        thread = threading.Thread(target=receive)
        thread.start()
        waiting.wait()
        time.sleep(2.0)  # let the receiver settle into its wait, watching the stream
        for n in range(messages):
            with sender.batch() as batch:
                batch.send("Pings", (n,), b"ping")
            sent[n] = time.monotonic()
            deadline = time.monotonic() + 10
            while n not in arrived and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.3)  # the receiver is back to waiting before the next send
        thread.join(30)
        return [arrived[n] - sent[n] for n in sorted(arrived)]
    finally:
        sender.close()
        receiver.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=50)
    options = parser.parse_args()
    with SpannerEmulator.start() as emulator:
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.host
        url = emulator.create_database()
        latencies = sorted(measure(url, options.messages))
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"emulator: correctness only, not a speed figure; commit -> arrival on another handle,"
        f" {len(latencies)} messages: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms,"
        f" max {latencies[-1] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
