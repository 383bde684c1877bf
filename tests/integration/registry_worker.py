"""A worker process for the registry tests: serves queue ``jobs`` with a heartbeat of 0.2 s.

    python registry_worker.py DATABASE_URL GATE_FILE

Its handler holds each message until ``GATE_FILE`` exists (so the test can see it in
flight), then acks it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import timedelta
from pathlib import Path

from txqueue.worker import App, Worker

HEARTBEAT = timedelta(seconds=0.2)


def main() -> None:
    url, gate = sys.argv[1], Path(sys.argv[2])
    app = App(url)

    @app.handler("jobs", lease_duration=timedelta(seconds=30))
    def handle(message: object) -> None:
        while not gate.exists():  # the worker waits here; the test decides when it may go on
            time.sleep(0.02)

    asyncio.run(Worker(app, concurrency=3, heartbeat=HEARTBEAT).run())


if __name__ == "__main__":
    main()
