"""The dashboard in a real browser: what a user sees and does, checked against the library."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from dashboard_support import Dashboard, Seeded

import txqueue

pytestmark = pytest.mark.browser


def key_json(key: tuple[Any, ...]) -> str:
    return json.dumps(list(key))


def path_of(page: Any) -> str:
    return urlsplit(page.url).path


def test_overview_lists_each_queue_with_its_counts(page: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    page.goto("/")
    for queue, counts in seeded.counts.items():
        row = page.locator(f'table#queues tr[data-queue="{queue}"]')
        expect(row).to_have_count(1)
        for state, count in counts.items():
            cell = row.locator(f'td[data-count="{state}"]')
            expect(cell).to_have_text(str(count))
            expect(cell).not_to_have_attribute("data-estimated", re.compile(".*"))


def test_dead_letter_replayed_from_the_page_is_back_in_its_queue(
    page: Any, seeded: Seeded, db: txqueue.Database
) -> None:
    from playwright.sync_api import expect

    queue, key = seeded.replayable
    ready_before = db.queue_info(queue).ready
    assert key in [letter.key for letter in db.dead_letters(queue)]

    page.goto(f"/queues/{queue}/dead-letters")
    row = page.locator(f"table#dead-letters tr[data-key='{key_json(key)}']")
    expect(row).to_have_count(1)
    row.locator("button[data-action=replay-one]").click()
    expect(page.locator("[role=status]")).to_be_visible()
    expect(page.locator(f"table#dead-letters tr[data-key='{key_json(key)}']")).to_have_count(0)

    assert key not in [letter.key for letter in db.dead_letters(queue)]
    message = db.get_message(queue, key)
    assert message.state == "ready"
    assert db.queue_info(queue).ready == ready_before + 1


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("min_retry_delay", "0.5", "between 1 s and 600 s"),
        ("max_retry_delay", "601", "between 1 s and 600 s"),
    ],
)
def test_pipeline_edit_with_a_retry_delay_out_of_range_saves_nothing(
    page: Any, seeded: Seeded, db: txqueue.Database, field: str, value: str, rule: str
) -> None:
    from playwright.sync_api import expect

    events = txqueue.Events(db)
    before = events.get_pipeline(seeded.pipeline)

    page.goto(f"/events/pipelines/{seeded.pipeline}")
    form = page.locator("form#pipeline-edit")
    form.locator("[name=max_attempts]").fill("7")  # valid on its own: must not be saved either
    form.locator(f"[name={field}]").fill(value)
    # The server's check is the one under test: the browser's own (min/max) is turned off.
    form.evaluate("form => { form.noValidate = true; }")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        form.locator("button[type=submit]").click()
    assert answer.value.status == 400

    alert = page.locator("[role=alert]")
    expect(alert).to_contain_text(field)
    expect(alert).to_contain_text(rule)
    assert events.get_pipeline(seeded.pipeline) == before


def test_markup_in_payloads_and_errors_shows_as_text(page: Any, seeded: Seeded) -> None:
    from playwright.sync_api import expect

    dialogs: list[str] = []

    def record(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    queue, key, payload = seeded.markup
    for view in ("text", "json", "hex"):
        page.goto(f"/queues/{queue}/message?key={quote(key_json(key))}&view={view}")
        expect(page.locator("pre#payload")).to_be_visible()
        if view == "text":
            expect(page.locator("pre#payload")).to_have_text(payload)
        assert page.locator('main script, img[src="x"]').count() == 0
    page.goto(f"/queues/{queue}")
    expect(page.locator(f"table#messages tr[data-key='{key_json(key)}']")).to_have_count(1)
    assert page.locator('main script, img[src="x"]').count() == 0
    page.goto(f"/queues/{queue}/dead-letters")
    expect(page.locator("table#dead-letters")).to_contain_text('<script>alert("error")</script>')
    assert page.locator('main script, img[src="x"]').count() == 0
    assert dialogs == []


def guarded_paths(seeded: Seeded) -> list[str]:
    queue, key, _ = seeded.markup
    return [
        "/",
        f"/queues/{queue}",
        f"/queues/{queue}/message?key={quote(key_json(key))}",
        f"/queues/{queue}/dead-letters",
        "/workers",
        "/events",
        f"/events/pipelines/{seeded.pipeline}",
        "/events/undelivered",
    ]


def test_with_a_token_every_page_asks_to_log_in(
    guarded_page: Any, guarded_dashboard: Dashboard, seeded: Seeded
) -> None:
    from playwright.sync_api import expect

    page = guarded_page
    paths = guarded_paths(seeded)
    for path in paths:
        page.goto(path)
        assert path_of(page) == "/login", f"{path} showed {page.url} before logging in"
        expect(page.locator("form#login")).to_be_visible()
    assert page.request.get("/api/v1/queues").status == 401

    page.locator("form#login input[name=token]").fill("not-the-token")
    page.locator("form#login [type=submit]").click()
    page.goto("/")
    assert path_of(page) == "/login", "a wrong token logged in"

    page.locator("form#login input[name=token]").fill(str(guarded_dashboard.token))
    page.locator("form#login [type=submit]").click()
    expect(page.locator("form#login")).to_have_count(0)
    for path in paths:
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        assert path_of(page) == urlsplit(path).path
        expect(page.locator("main")).to_be_visible()


def test_queue_paused_from_the_page_leases_nothing_until_resumed(
    page: Any, seeded: Seeded, db: txqueue.Database
) -> None:
    from playwright.sync_api import expect

    queue = seeded.changeable
    page.goto(f"/queues/{queue}")
    expect(page.locator("[data-paused]")).to_have_count(0)
    page.locator("button[data-action=pause]").click()
    expect(page.locator("[role=status]")).to_be_visible()
    expect(page.locator("[data-paused]")).to_be_visible()
    assert db.queue_info(queue).paused
    assert db.receive_now(queue) == []  # a waiting message, and nothing leases it
    page.goto("/")
    expect(page.locator(f'table#queues tr[data-queue="{queue}"] [data-paused]')).to_have_count(1)

    page.goto(f"/queues/{queue}")
    page.locator("button[data-action=resume]").click()
    expect(page.locator("[role=status]")).to_be_visible()
    expect(page.locator("[data-paused]")).to_have_count(0)
    assert not db.queue_info(queue).paused


def test_message_deleted_from_the_page_is_gone_and_a_leased_one_needs_force(
    page: Any, seeded: Seeded, db: txqueue.Database
) -> None:
    from playwright.sync_api import expect

    queue = seeded.changeable
    for key, leased in ((("c-waiting",), False), (("c-leased",), True)):
        assert db.get_message(queue, key).state == ("leased" if leased else "ready")
        page.goto(f"/queues/{queue}/message?key={quote(key_json(key))}")
        page.locator("button[data-action=delete]").click()
        confirm = page.locator("button[data-action=confirm-delete]")
        expect(confirm).to_be_visible()
        if leased:
            confirm.click()  # without force: refused, and the message stays
            expect(page.locator("[role=alert]")).to_contain_text("lease")
            assert db.get_message(queue, key).state == "leased"
            page.locator("[data-field=force]").check()
            page.locator("button[data-action=delete]").click()
            page.locator("[data-field=force]").check()
            page.locator("button[data-action=confirm-delete]").click()
        else:
            confirm.click()
        expect(page.locator("[role=status]")).to_be_visible()
        with pytest.raises(txqueue.errors.NotFound):
            db.get_message(queue, key)
