"""``txqueue dashboard`` end to end on the Cloud Spanner emulator: a real process with a token;
its pages (overview, a queue, a message, dead letters, workers, events) after logging in, and
its HTTP API (queues and counts, messages, a send, a dead-letter replay)."""

from __future__ import annotations

import html
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import txqueue

TOKEN = "spanner-dashboard-token-3f9a"
STARTUP_LIMIT = 60.0
SCHEMA = [
    "CREATE QUEUE Jobs (Tenant STRING(MAX) NOT NULL, Id INT64 NOT NULL, Payload JSON NOT NULL)"
    " PRIMARY KEY (Tenant, Id)",
    "CREATE QUEUE Mail (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def dashboard(spanner_url: str, tmp_path: Path) -> Iterator[str]:
    """The database's queues with messages in every state, and the dashboard serving it."""
    with txqueue.connect(spanner_url) as db:
        db.update_ddl(SCHEMA)
        with db.batch() as batch:
            for n in (1, 2, 3):
                batch.send("Jobs", ("acme", n), {"n": n})
            for id in ("d1", "d2"):
                batch.send("Mail", (id,), f"mail {id}".encode())
        db.receive_now("Jobs")  # ("acme", 1) leased
        for message in db.receive_now("Mail", max_batch_size=2):
            db.dead_letter("Mail", message.key, message.lease_token, f"boom {message.key[0]}")
    port = _free_port()
    log = tmp_path / "dashboard.log"
    command = [sys.executable, "-m", "txqueue.cli.main", "dashboard", "--port", str(port)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "--token", TOKEN, "--database", spanner_url],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_LIMIT
        while True:
            try:
                httpx.get(f"{base}/login", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
            try:
                code = process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"txqueue dashboard exited with {code}:\n{log.read_text()}")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def _keys(page: str) -> list[Any]:
    """The keys of a queue page's message rows (their ``data-key`` attributes)."""
    return [json.loads(html.unescape(k)) for k in re.findall(r'<tr[^>]* data-key="([^"]*)"', page)]


def test_the_pages_after_logging_in(dashboard: str) -> None:
    with httpx.Client(base_url=dashboard, timeout=30) as browser:
        refused = browser.get("/")
        assert refused.status_code in (303, 401) or 'id="login"' in refused.text
        entered = browser.get("/login", params={"token": TOKEN})
        assert entered.status_code == 303 and entered.headers["location"] == "/"

        overview = browser.get("/")
        assert overview.status_code == 200, overview.text
        assert 'data-queue="Jobs"' in overview.text and 'data-queue="Mail"' in overview.text
        fragment = browser.get("/fragments/queues")
        assert fragment.status_code == 200 and 'data-queue="Jobs"' in fragment.text

        queue = browser.get("/queues/Jobs")
        assert queue.status_code == 200, queue.text
        assert _keys(queue.text) == [["acme", 1], ["acme", 2], ["acme", 3]]
        leased = browser.get("/queues/Jobs", params={"state": "leased"})
        assert leased.status_code == 200 and _keys(leased.text) == [["acme", 1]]

        message = browser.get("/queues/Jobs/message", params={"key": json.dumps(["acme", 2])})
        assert message.status_code == 200, message.text
        assert "&#34;n&#34;: 2" in message.text or '"n": 2' in message.text

        letters = browser.get("/queues/Mail/dead-letters")
        assert (
            letters.status_code == 200 and "boom d1" in letters.text and "boom d2" in letters.text
        )
        for page in ("/workers", "/events", "/events/undelivered"):
            answer = browser.get(page)
            assert answer.status_code == 200, (page, answer.text)


def test_the_http_api(dashboard: str, spanner_url: str) -> None:
    bearer = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=f"{dashboard}/api/v1", headers=bearer, timeout=30) as api:
        assert httpx.get(f"{dashboard}/api/v1/queues").status_code == 401  # no token
        listed = api.get("/queues")
        assert listed.status_code == 200, listed.text
        by_name = {q["name"]: q for q in listed.json()["queues"]}
        assert sorted(by_name) == ["Jobs", "Mail"]
        jobs = by_name["Jobs"]
        assert (jobs["ready"], jobs["leased"], jobs["scheduled"], jobs["dead_letters"]) == (
            2,
            1,
            0,
            0,
        )
        assert by_name["Mail"]["dead_letters"] == 2

        page = api.get("/queues/Jobs/messages", params={"limit": "2"}).json()
        assert [m["key"] for m in page["messages"]] == [["acme", 1], ["acme", 2]]
        rest = api.get(
            "/queues/Jobs/messages", params={"after": json.dumps(page["next_after"])}
        ).json()
        assert [m["key"] for m in rest["messages"]] == [["acme", 3]]
        one = api.get("/queues/Jobs/message", params={"key": json.dumps(["acme", 1])}).json()
        assert one["state"] == "leased"

        sent = api.post(
            "/queues/Jobs/messages",
            json={"key": ["acme", 4], "payload": {"encoding": "json", "value": {"n": 4}}},
        )
        assert sent.status_code == 201, sent.text
        again = api.post(
            "/queues/Jobs/messages",
            json={"key": ["acme", 4], "payload": {"encoding": "json", "value": 1}},
        )
        assert again.status_code == 409 and again.json()["error"]["code"] == "AlreadyExists"

        letters = api.get("/queues/Mail/dead-letters").json()["dead_letters"]
        assert sorted(d["last_error"] for d in letters) == ["boom d1", "boom d2"]
        replayed = api.post("/queues/Mail/dead-letters/replay", json={"keys": [["d1"]]})
        assert replayed.json() == {"replayed": 1}
        assert api.get("/queues/Nope").status_code == 404
        assert api.get("/workers").status_code == 200

    with txqueue.connect(spanner_url) as db:
        jobs_info, mail_info = db.queue_info("Jobs"), db.queue_info("Mail")
    assert (jobs_info.ready, jobs_info.leased) == (3, 1)
    assert (mail_info.ready, mail_info.dead_letters) == (1, 1)
