"""Event-layer throughput: events delivered per second to a local HTTP endpoint.

    python benchmarks/events_throughput.py                        # SQLite in a temp dir
    python benchmarks/events_throughput.py --database postgresql://user@host/db
    python benchmarks/events_throughput.py --events 5000 --dispatchers 1 4 --concurrency 16

For each dispatcher count, N events are published first (100 per transaction, each routed to
one HTTP pipeline), then that many ``txqueue dispatcher`` processes are started. The rate is
measured at the endpoint, between the first and the last request it receives, so process
start-up is not counted. Every delivery is a real HTTP POST (keep-alive) and a committed
transaction (ack + attempt log). The endpoint is a stdlib ThreadingHTTPServer in this process.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import txqueue


class Endpoint(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.times: dict[str, list[float]] = {}

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # dispatchers stopping drop their keep-alive connections


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Endpoint

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        with self.server.lock:
            self.server.times.setdefault(self.path, []).append(time.monotonic())
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()


def run(url: str, endpoint: Endpoint, count: int, dispatchers: int, concurrency: int) -> float:
    """Publish ``count`` events, deliver them with ``dispatchers`` processes; events/s."""
    tag = uuid.uuid4().hex[:8]
    path = f"/bench-{tag}"
    with txqueue.connect(url) as db:
        events = txqueue.Events(db)
        events.create_bus(f"bench-{tag}", archive=True)
        events.create_pipeline(f"bench-{tag}", endpoint.url(path), allow_private=True)
        events.create_enrollment(
            f"bench-{tag}", bus=f"bench-{tag}", pipeline=f"bench-{tag}", cel_match="true"
        )

        def publish(txn: txqueue.Transaction, first: int) -> None:
            for number in range(first, min(first + 100, count)):
                data = {"order": number, "total": 42.5}
                event = {"type": "com.shop.order.paid", "source": "//bench", "id": str(number)}
                events.publish(f"bench-{tag}", {**event, "data": data}, txn=txn)

        started = time.monotonic()
        for first in range(0, count, 100):
            db.run_in_transaction(publish, first)
        published = time.monotonic() - started
        print(f"  published {count} events in {published:.2f} s ({count / published:.0f}/s)")
    command = [sys.executable, "-m", "txqueue.cli.main", "dispatcher", "--database", url]
    options = ["--concurrency", str(concurrency), "--purge-interval", "never"]
    processes = [
        subprocess.Popen([*command, *options], stderr=subprocess.DEVNULL)
        for _ in range(dispatchers)
    ]
    try:
        deadline = time.monotonic() + 600
        while len(endpoint.times.get(path, ())) < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(endpoint.times.get(path, ()))} of {count} delivered")
            time.sleep(0.05)
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
        for process in processes:
            process.wait(60)
    times = endpoint.times[path]
    return (len(times) - 1) / (max(times) - min(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="Database URL (default: SQLite in a temp dir).")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--dispatchers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    os.environ["TXQUEUE_ALLOW_PRIVATE_DESTINATIONS"] = "1"
    url = args.database or f"sqlite:///{tempfile.mkdtemp(prefix='txqueue-bench-')}/events.db"
    endpoint = Endpoint()
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    engine = "postgres" if url.startswith("postgres") else "sqlite"
    print(f"events throughput on {engine}: {args.events} events, concurrency {args.concurrency}")
    results = []
    for dispatchers in args.dispatchers:
        rate = run(url, endpoint, args.events, dispatchers, args.concurrency)
        results.append((dispatchers, rate))
        print(f"  {dispatchers} dispatcher(s): {rate:.0f} events/s")
    endpoint.shutdown()
    print("\n| engine | dispatchers | concurrency each | events | delivered/s |")
    print("|---|---|---|---|---|")
    for dispatchers, rate in results:
        print(f"| {engine} | {dispatchers} | {args.concurrency} | {args.events} | {rate:.0f} |")


if __name__ == "__main__":
    main()
