"""A webhook receiver that accepts only deliveries signed with its Standard Webhooks secret.

    WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py --port 8080

Each delivery is a CloudEvent in binary mode (``ce-*`` headers, the data as body) signed by
the pipeline (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``). A valid one is
printed and answered 204; any other is answered 401 and printed as rejected.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import txqueue
from txqueue.errors import InvalidArgument

SECRET = os.environ.get("WEBHOOK_SECRET", "")
printing = threading.Lock()  # requests run on threads of their own: one line at a time


def say(line: str) -> None:
    with printing:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {name: value for name, value in self.headers.items()}
        try:
            txqueue.verify_signature(SECRET, headers, body)
        except InvalidArgument as error:
            say(f"rejected: {error}")
            self.send_response(401)
        else:
            say(
                f"verified {self.headers['ce-type']} {self.headers['ce-id']}"
                f" (webhook-id {self.headers['webhook-id']}): {body.decode()}"
            )
            self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # keep stdout for the events
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080, help="0: any free port")
    args = parser.parse_args()
    if not SECRET:
        sys.exit("set WEBHOOK_SECRET to the pipeline's signing secret (whsec_...)")
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Receiver)
    print(f"listening on http://127.0.0.1:{server.server_port}/hooks", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops it
        server.serve_forever()


if __name__ == "__main__":
    main()
