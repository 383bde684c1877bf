"""An event pipeline delivering to a webhook receiver that checks each delivery's signature.

    python examples/webhooks.py                                  # SQLite, in a temporary directory
    python examples/webhooks.py --database postgresql://localhost/scratch

It starts examples/webhook_receiver.py on a free local port, configures a bus, a signed
pipeline to the receiver and an enrollment, publishes three orders' events in the orders'
transaction, and runs a dispatcher until the receiver has verified all three. A request with
no signature is then refused by the receiver. Use an empty database.
"""

from __future__ import annotations

import argparse
import base64
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

import httpx

import txqueue

RECEIVER = Path(__file__).with_name("webhook_receiver.py")
ORDERS = [("order-17", 1200), ("order-18", 350), ("order-19", 99)]


def pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    """Hand a process's output to ``lines``, line by line."""
    for line in stream:
        lines.put(line.rstrip())


def start_receiver(secret: str) -> tuple[subprocess.Popen[str], queue.Queue[str], str]:
    """The receiver process, a queue of its output lines, and its hook URL."""
    process = subprocess.Popen(
        [sys.executable, str(RECEIVER), "--port", "0"],
        env={**os.environ, "WEBHOOK_SECRET": secret},
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=pump, args=(stdout, lines), daemon=True).start()
    first = lines.get(timeout=30)  # "listening on http://127.0.0.1:PORT/hooks"
    return process, lines, first.split()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="an empty database (default: a temporary SQLite file)")
    args = parser.parse_args()
    secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    receiver, lines, hook_url = start_receiver(secret)
    try:
        with tempfile.TemporaryDirectory() as directory:
            url = args.database or f"sqlite:///{Path(directory) / 'webhooks.db'}"
            run(url, secret, hook_url, lines)
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    print("done")


def run(url: str, secret: str, hook_url: str, lines: queue.Queue[str]) -> None:
    db = txqueue.connect(url, dialect="googlesql")
    db.update_ddl(
        ["CREATE TABLE Orders (OrderId STRING(36) NOT NULL, Total INT64) PRIMARY KEY (OrderId)"]
    )
    events = txqueue.Events(db)
    events.create_bus("orders")
    os.environ["ORDERS_HOOK_SECRET"] = secret  # e.g. from your secret manager, not a literal
    events.create_pipeline(
        "notify-shipping",
        destination=hook_url,
        signing_secret_env="ORDERS_HOOK_SECRET",
        allow_private=True,  # the receiver is on this host, 127.0.0.1
    )
    events.create_enrollment(
        "paid-orders",
        bus="orders",
        pipeline="notify-shipping",
        cel_match='message.type == "com.shop.order.paid"',
    )
    print(f"pipeline notify-shipping -> {hook_url} (signed)")

    def checkout(txn: txqueue.Transaction) -> None:  # the orders and their events, atomically
        txn.insert("Orders", ("OrderId", "Total"), ORDERS)
        for order_id, total in ORDERS:
            event = {
                "type": "com.shop.order.paid",
                "source": "//shop",
                "id": order_id,
                "data": {"total": total},
            }
            events.publish("orders", event, txn=txn)

    db.run_in_transaction(checkout)
    print(f"published {len(ORDERS)} events with their orders")

    with txqueue.Dispatcher(url):
        for _ in ORDERS:
            line = lines.get(timeout=30)
            print("receiver:", line)
            if not line.startswith("verified"):
                raise SystemExit("the receiver refused a delivery")

    forged = httpx.post(hook_url, content=b'{"total": 0}', headers={"ce-type": "x", "ce-id": "x"})
    print(f"unsigned request: HTTP {forged.status_code}; receiver: {lines.get(timeout=30)}")
    if forged.status_code != 401:
        raise SystemExit("the receiver accepted an unsigned request")
    db.close()


if __name__ == "__main__":
    main()
