"""Sessions and cross-site requests in a real browser (issue #37, item 5): logging out ends the
session for good, and a page on another port of 127.0.0.1, which may set cookies for the
dashboard's host and whose requests count as same-site, changes nothing."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Iterator
from html import escape
from typing import Any
from urllib.parse import urlsplit

import pytest
from dashboard_support import Dashboard, Seeded

import txqueue

pytestmark = pytest.mark.browser

PLANTED = "A" * 43  # what the other port's page sets as the dashboard's CSRF cookie and sends


def log_in_with_the_form(page: Any, dashboard: Dashboard) -> None:
    from playwright.sync_api import expect

    page.goto("/login")
    page.locator("form#login input[name=token]").fill(str(dashboard.token))
    page.locator("form#login [type=submit]").click()
    expect(page.locator("form#login")).to_have_count(0)


def test_after_logout_the_old_session_cookie_is_refused(
    guarded_page: Any, guarded_dashboard: Dashboard, seeded: Seeded, db: txqueue.Database
) -> None:
    from playwright.sync_api import expect

    page = guarded_page
    events = txqueue.Events(db)
    before = events.get_pipeline(seeded.pipeline)
    try:
        log_in_with_the_form(page, guarded_dashboard)
        page.goto(f"/events/pipelines/{seeded.pipeline}")
        form = page.locator("form#pipeline-edit")
        form.locator("[name=max_attempts]").fill(str(before.retry.max_attempts + 1))
        form.locator("button[type=submit]").click()
        expect(page.locator("[role=status]")).to_be_visible()
        changed = events.get_pipeline(seeded.pipeline)
        assert changed.retry.max_attempts == before.retry.max_attempts + 1

        old = [c for c in page.context.cookies() if c["name"] == "txq_session"]
        assert len(old) == 1 and old[0]["httpOnly"] and old[0]["sameSite"] == "Strict"
        page.locator("button[data-action=logout]").click()
        expect(page.locator("form#login")).to_be_visible()
        assert not [c for c in page.context.cookies() if c["name"] == "txq_session"]

        page.context.add_cookies(old)  # as if it had been copied before the logout
        page.goto("/")
        assert urlsplit(page.url).path == "/login", "the old session still logs in"
        assert page.request.get("/api/v1/queues").status == 401
    finally:
        events.update_pipeline(seeded.pipeline, retry=before.retry)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def other_port_site(pages: dict[str, str]) -> Iterator[str]:
    """A site on another port of 127.0.0.1 serving ``pages`` (path -> HTML); its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, "").encode()
            self.send_response(200 if body else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *arguments: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_form_from_another_local_port_changes_nothing(
    browser: Any, guarded_dashboard: Dashboard, seeded: Seeded, db: txqueue.Database
) -> None:
    """The other port's page plants a CSRF cookie before the user logs in, then, once they
    have, submits a pipeline edit carrying the same value: refused (403), nothing saved."""
    events = txqueue.Events(db)
    before = events.get_pipeline(seeded.pipeline)
    target = f"{guarded_dashboard.url}/events/pipelines/{seeded.pipeline}"
    fields = {
        "csrf_token": PLANTED,
        "destination": "http://127.0.0.1:9/stolen",
        "max_attempts": "9",
        "min_retry_delay": "1",
        "max_retry_delay": "60",
    }
    inputs = "".join(
        f'<input type="hidden" name="{name}" value="{escape(value)}">'
        for name, value in fields.items()
    )
    pages = {
        "/plant": "<!doctype html><title>plant</title><script>"
        f'document.cookie = "txq_csrf={PLANTED}; path=/";'
        'document.title = "planted";</script>',
        "/attack": f'<!doctype html><title>attack</title><form method="post" '
        f'action="{escape(target)}">{inputs}</form>'
        "<script>document.forms[0].submit();</script>",
    }
    context = browser.new_context(base_url=guarded_dashboard.url)
    context.set_default_timeout(10_000)
    try:
        with other_port_site(pages) as site:
            page = context.new_page()
            page.goto(f"{site}/plant")
            assert page.title() == "planted"
            log_in_with_the_form(page, guarded_dashboard)
            with page.expect_response(
                lambda response: (
                    response.request.method == "POST"
                    and response.url.startswith(guarded_dashboard.url)
                )
            ) as answer:
                page.goto(f"{site}/attack")
            assert answer.value.status == 403, answer.value.headers.get("location")
        assert events.get_pipeline(seeded.pipeline) == before
    finally:
        context.close()
        events.update_pipeline(
            seeded.pipeline, destination=before.destination.target, retry=before.retry
        )
