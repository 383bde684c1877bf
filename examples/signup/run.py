"""The sign-up service end to end: web.py and worker.py as their own processes.

    python examples/signup/run.py                     # SQLite, in a temporary directory
    python examples/signup/run.py --database postgresql://localhost/scratch

Signs up two users over HTTP, shows that a second sign-up with the same email is refused with
nothing sent, waits until the worker has sent both welcome emails, stops both processes and
exits 0.
"""

from __future__ import annotations

import argparse
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

import httpx

HERE = Path(__file__).parent
USERS = ["alice@example.com", "bob@example.com"]


def pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    """Hand a process's output to ``lines``, line by line."""
    for line in stream:
        lines.put(line.rstrip())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(script: str, *arguments: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / script), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=pump, args=(stdout, lines), daemon=True).start()
    return process, lines


def wait_for_http(url: str, web: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if web.poll() is not None:
            raise SystemExit(f"web.py exited with status {web.returncode}")
        try:
            httpx.get(url)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("web.py did not start listening")


def stop(process: subprocess.Popen[str], name: str) -> None:
    process.send_signal(signal.SIGINT)
    status = process.wait(timeout=30)
    print(f"{name} stopped (exit status {status})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="an empty database (default: a temporary SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        url = args.database or f"sqlite:///{Path(directory) / 'signup.db'}"
        port = free_port()
        web, _ = start("web.py", "--database", url, "--port", str(port))
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for_http(base, web)
            for email in USERS:
                response = httpx.post(f"{base}/signup", json={"email": email})
                print(f"POST /signup {email}: {response.status_code} {response.json()}")
                assert response.status_code == 201
            again = httpx.post(f"{base}/signup", json={"email": USERS[0]})
            print(f"POST /signup {USERS[0]} again: {again.status_code} {again.json()}")
            assert again.status_code == 409
        finally:
            stop(web, "web.py")

        worker, lines = start("worker.py", "--database", url)
        sent: list[str] = []
        try:
            while len(sent) < len(USERS):
                line = lines.get(timeout=30)
                if line.startswith("welcome email sent to"):
                    print("worker.py:", line)
                    sent.append(line.split()[4])
        finally:
            stop(worker, "worker.py")
        assert sorted(sent) == sorted(USERS), sent
        assert worker.returncode == 0
    print("done: two users signed up, two welcome emails sent, the duplicate sent nothing")


if __name__ == "__main__":
    main()
