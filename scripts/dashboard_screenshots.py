"""Screenshots of the dashboard for docs/dashboard.md (run by scripts/dashboard-screenshots).

Seeds a demo SQLite database through the public API (queues with varied counts, dead
letters, a real ``txqueue worker`` with handlers in flight, a bus whose shipping pipeline
fails so that events end up undelivered), starts ``txqueue dashboard`` on it and saves a
1280x800 PNG of each page to ``docs/images/dashboard-<page>.png`` with Debian's Chromium.
"""

from __future__ import annotations

import argparse
import base64
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import httpx
from playwright.sync_api import Page, sync_playwright

import txqueue

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCHEMA = [
    "CREATE QUEUE Orders (OrderId STRING(36) NOT NULL, Payload JSON NOT NULL)"
    " PRIMARY KEY (OrderId)",
    "CREATE QUEUE Emails (EmailId STRING(36) NOT NULL, Payload JSON NOT NULL)"
    " PRIMARY KEY (EmailId)",
    "CREATE QUEUE Thumbnails (ImageId STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (ImageId)",
    "CREATE QUEUE Invoices (CustomerId INT64 NOT NULL, InvoiceId STRING(36) NOT NULL,"
    " Payload JSON NOT NULL) PRIMARY KEY (CustomerId, InvoiceId)",
    "CREATE QUEUE AuditLog (MessageUid STRING(64) NOT NULL, Payload JSON NOT NULL)"
    " PRIMARY KEY (MessageUid)",
]
WORKER_APP = """
import os, time
from datetime import timedelta
import txqueue

app = txqueue.App(os.environ["DEMO_DATABASE_URL"])

@app.handler("Emails")
def send_email(message):
    time.sleep(3600)  # in flight while the screenshots are taken

@app.handler("Thumbnails", retry=txqueue.RetryPolicy(max_attempts=1))
def resize(message):
    if message.key[0].endswith("7"):
        raise ValueError(f"image {message.key[0]} is 48 MB, over the 20 MB limit")
    time.sleep(0.005)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(what: str, check: object, limit: float = 60.0) -> None:
    """Poll ``check()`` until it is true; fail after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"dashboard-screenshots: gave up waiting for {what}")
        time.sleep(0.2)


@contextmanager
def failing_receiver() -> Iterator[str]:
    """A local webhook receiver that answers 503, as a shipping service in maintenance."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b"shipping service in maintenance until 12:00 UTC"
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/shipping"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def process(
    arguments: list[str], log: Path, **options: object
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as output:
        running = subprocess.Popen(arguments, stdout=output, stderr=subprocess.STDOUT, **options)  # type: ignore[call-overload]
    try:
        yield running
    finally:
        running.terminate()
        try:
            running.wait(timeout=15)
        except subprocess.TimeoutExpired:
            running.kill()
            running.wait()


def seed_queues(db: txqueue.Database) -> tuple[object, ...]:
    """Orders with a backlog, leases, retries and dead letters; scheduled invoices; emails and
    thumbnails for the worker. Returns the key of an order that failed once."""
    now = datetime.now(timezone.utc)
    customers = [1042, 1187, 2290, 3071, 4410]
    with db.batch() as batch:
        for number in range(1, 1241):
            order = f"ORD-{10000 + number}"
            payload = {
                "order_id": order,
                "customer": customers[number % len(customers)],
                "total": round(19.9 + (number * 7.3) % 400, 2),
                "currency": "EUR",
                "items": 1 + number % 4,
            }
            # due over the last hour in a shuffled order (so receives take scattered keys),
            # every 25th one tomorrow
            due = now - timedelta(seconds=(number * 7919) % 3600)
            if number % 25 == 0:
                due = now + timedelta(days=1)
            batch.send("Orders", (order,), payload, deliver_time=due)
        for number in range(1, 49):
            customer = customers[number % len(customers)]
            batch.send(
                "Invoices",
                (customer, f"INV-{2027_0000 + number}"),
                {"customer": customer, "period": "2026-12"},
                deliver_time=now + timedelta(days=1 + number % 28, hours=number % 24),
            )
        for number, address in enumerate(
            ["ada@example.com", "grace@example.com", "alan@example.com"]
        ):
            batch.send(
                "Emails", (f"welcome-{number + 1:04d}",), {"to": address, "template": "welcome"}
            )
        for number in range(1, 341):
            batch.send("Thumbnails", (f"img-{number:05d}",), bytes(range(64)) * 4)
    received = []
    for message in db.receive(
        "Orders",
        max_duration=timedelta(seconds=5),
        max_batch_size=20,
        lease_duration=timedelta(hours=2),
    ):
        received.append(message)
        if len(received) == 17:
            break
    errors = [
        "HTTP 503 from inventory service: upstream connect error",
        "payment declined: card expired (2026-11)",
        "KeyError: 'shipping_address'",
    ]
    for message, error in zip(received[:3], errors):
        db.dead_letter("Orders", message.key, message.lease_token, error)
    retried = received[3:5]
    db.release_lease(
        "Orders",
        [message.lease_token for message in retried],
        delay=timedelta(minutes=4),
        error="TimeoutError: warehouse API did not answer within 10 s",
    )
    return retried[0].key


def seed_events(db: txqueue.Database, destination: str) -> int:
    """A bus with two pipelines, one of them failing; returns how many events it will fail."""
    events = txqueue.Events(db)
    events.create_bus("orders")
    events.create_pipeline(
        "notify-shipping",
        destination=destination,
        retry=txqueue.RetryPolicy(
            max_attempts=2,
            min_retry_delay=timedelta(seconds=1),
            max_retry_delay=timedelta(seconds=1),
        ),
        signing_secret="whsec_" + base64.b64encode(b"demo signing secret 2026").decode(),
        allow_private=True,
    )
    events.create_pipeline("audit", destination="queue:AuditLog")
    events.create_enrollment(
        "paid-orders",
        bus="orders",
        pipeline="notify-shipping",
        cel_match='message.type == "com.shop.order.paid" && message.source == "//shop/checkout"',
    )
    events.create_enrollment("all-orders", bus="orders", pipeline="audit", cel_match="true")
    failing = 0

    def publish(transaction: txqueue.Transaction) -> None:
        nonlocal failing
        for number in range(1, 9):
            total = 20 + number * 15
            kind = "paid" if number % 3 else "cancelled"
            event = {
                "type": f"com.shop.order.{kind}",
                "source": "//shop/checkout",
                "id": f"order-{number:04d}-{kind}",
                "data": {"order_id": f"ORD-{10000 + number}", "total": total},
            }
            events.publish("orders", event, txn=transaction)
            failing += kind == "paid"

    db.run_in_transaction(publish)
    return failing


def shoot(page: Page, path: str, name: str, output: Path) -> None:
    page.goto(path)
    page.wait_for_load_state("networkidle")
    target = output / f"dashboard-{name}.png"
    page.screenshot(path=str(target))
    print(f"dashboard-screenshots: wrote {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "images")
    arguments = parser.parse_args()
    arguments.output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="txqueue-screenshots-") as directory:
        work = Path(directory)
        url = f"sqlite:///{work}/shop.db"
        db = txqueue.connect(url, dialect="googlesql")
        db.update_ddl(SCHEMA)
        retried = seed_queues(db)
        (work / "demo_worker.py").write_text(WORKER_APP)
        environment = {**os.environ, "DEMO_DATABASE_URL": url, "PYTHONPATH": str(work)}
        worker = [str(BIN / "txqueue"), "worker", "demo_worker:app", "--concurrency", "8"]
        dispatcher = [str(BIN / "txqueue"), "dispatcher", "--database", url]
        with failing_receiver() as destination:
            failing = seed_events(db, destination)
            events = txqueue.Events(db)
            with (
                process([*worker, "--grace", "1s"], work / "worker.log", env=environment, cwd=work),
                process(dispatcher, work / "dispatcher.log"),
            ):
                wait_for("the worker to drain Thumbnails", lambda: _drained(db, "Thumbnails"))
                wait_for("the emails to be in flight", lambda: db.queue_info("Emails").leased == 3)
                wait_for("the undelivered events", lambda: len(events.undelivered()) == failing)
                screenshots(url, retried, work, arguments.output)
        db.close()


def _drained(db: txqueue.Database, queue: str) -> bool:
    info = db.queue_info(queue)
    return info.ready == 0 and info.leased == 0


def screenshots(url: str, message: tuple[object, ...], work: Path, output: Path) -> None:
    """Start the dashboard on ``url`` and take a screenshot of each page."""
    port = free_port()
    token = secrets.token_urlsafe(32)
    token_file = work / "dashboard.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    command = [str(BIN / "txqueue"), "dashboard", "--database", url, "--port", str(port)]
    with process([*command, "--token-file", str(token_file)], work / "dashboard.log"):
        base = f"http://127.0.0.1:{port}"
        wait_for("the dashboard", lambda: _answers(base))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.goto(f"/login?token={token}")  # the session cookie, then every page
            shoot(page, "/", "overview", output)
            shoot(page, "/queues/Orders", "queue", output)
            key = quote(json.dumps(list(message)))
            shoot(page, f"/queues/Orders/message?key={key}", "message", output)
            shoot(page, "/queues/Orders/dead-letters", "dead-letters", output)
            shoot(page, "/workers", "workers", output)
            shoot(page, "/events", "events", output)
            shoot(page, "/events/undelivered", "undelivered", output)
            browser.close()


def _answers(base: str) -> bool:
    try:
        httpx.get(f"{base}/login", timeout=1.0)
    except httpx.TransportError:
        return False
    return True


if __name__ == "__main__":
    main()
