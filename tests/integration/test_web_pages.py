"""The dashboard's HTML pages through httpx's ASGI transport, on SQLite and PostgreSQL: each
page renders the database's rows, the forms work without JavaScript (POST with the hidden CSRF
field, 303 back with a status), a pipeline edit out of range is refused with nothing saved,
text from the database is escaped, and a read-only dashboard shows no actions and refuses
every POST."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from cloudevents.core.v1.event import CloudEvent
from events_receiver import Receiver, wait_until

import txqueue
from txqueue.web import create_app
from txqueue.worker.observe import Stats
from txqueue.worker.outcomes import Outcome, OutcomeKind
from txqueue.worker.registry import Registration

pytest.importorskip("starlette")

SCRIPT = "<script>alert(1)</script>"
LOCAL_HOOK = "http://127.0.0.1:9/hook"  # never called: no dispatcher runs here
TOKEN = "pages-test-token-8c2f"
DDL = {
    "googlesql": "CREATE QUEUE Jobs (Id STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (Id)",
    "postgresql": "CREATE QUEUE jobs (id varchar NOT NULL, payload bytea NOT NULL,"
    " PRIMARY KEY (id))",
}


# ---- a small DOM, enough for the contract's selectors -------------------------------------------


class Element:
    def __init__(self, tag: str, attributes: dict[str, str | None], parent: Element | None):
        self.tag, self.attributes, self.parent = tag, attributes, parent
        self.children: list[Element | str] = []

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def get(self, name: str) -> str | None:
        return self.attributes.get(name)

    def has(self, name: str) -> bool:
        return name in self.attributes

    def walk(self) -> Iterator[Element]:
        for child in self.children:
            if isinstance(child, Element):
                yield child
                yield from child.walk()

    def find_all(self, tag: str, **attributes: str | bool) -> list[Element]:
        """Elements named ``tag`` ("*": any) whose attributes match (True: present)."""
        found = []
        for element in self.walk():
            if tag not in ("*", element.tag):
                continue
            wanted = (
                (element.has(name.replace("_", "-")) if value is True else False)
                if isinstance(value, bool)
                else element.get(name.replace("_", "-")) == value
                for name, value in attributes.items()
            )
            if all(wanted):
                found.append(element)
        return found

    def find(self, tag: str, **attributes: str | bool) -> Element:
        found = self.find_all(tag, **attributes)
        assert len(found) == 1, f"{len(found)} <{tag} {attributes}> on the page"
        return found[0]


VOID = {"input", "meta", "link", "br", "hr", "img"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs), self.current)
        self.current.children.append(element)
        if tag not in VOID:
            self.current = element

    def handle_endtag(self, tag: str) -> None:
        node: Element | None = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.children.append(data)


def parse(html: str) -> Element:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


def key_json(*parts: Any) -> str:
    return json.dumps(list(parts))


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    database = txqueue.connect(database_url)
    dialect = "postgresql" if database_url.startswith("postgres") else "googlesql"
    database.update_ddl([DDL[dialect]])
    yield database
    database.close()


@pytest.fixture
def queue(db: txqueue.Database) -> str:
    return db.queue("jobs").name


def fill(db: txqueue.Database, queue: str, count: int) -> None:
    with db.batch() as batch:
        for number in range(count):
            batch.send(queue, (f"job-{number:03d}",), json.dumps({"n": number}).encode())


def send(db: txqueue.Database, queue: str, key: str, payload: bytes) -> None:
    with db.batch() as batch:
        batch.send(queue, (key,), payload)


def dead_letter(db: txqueue.Database, queue: str, count: int, error: str = "boom") -> list[str]:
    """Lease the first ``count`` messages and dead-letter them; their keys as JSON."""
    leased = db.receive_now(queue, max_batch_size=count)
    for message in leased:
        db.dead_letter(queue, message.key, message.lease_token, error)
    return [key_json(*message.key) for message in leased]


class Browser:
    """An httpx client on the app that keeps cookies and reads the page's CSRF token."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.csrf = ""

    async def get(self, path: str, status: int = 200) -> Element:
        response = await self.client.get(path)
        assert response.status_code == status, response.text
        page = parse(response.text)
        meta = page.find_all("meta", name="csrf-token")
        if meta:
            self.csrf = meta[0].get("content") or ""
        return page

    async def post(self, path: str, data: dict[str, Any] | list[tuple[str, str]]) -> httpx.Response:
        fields = list(data.items()) if isinstance(data, dict) else list(data)
        body = urlencode([("csrf_token", self.csrf), *fields])
        headers = {
            "content-type": "application/x-www-form-urlencoded",
            "origin": str(self.client.base_url).rstrip("/"),  # as a browser sends it
        }
        return await self.client.post(path, content=body, headers=headers)


async def logged_in(client: httpx.AsyncClient, prefix: str = "") -> Browser:
    """A browser logged in with the login URL ``txqueue dashboard`` prints."""
    answer = await client.get(f"{prefix}/login", params={"token": TOKEN})
    assert answer.status_code == 303, answer.text
    return Browser(client)


@pytest.fixture
async def browser(db: txqueue.Database) -> AsyncIterator[Browser]:
    app = create_app(db, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        yield await logged_in(client)


def status_text(page: Element) -> str:
    return page.find("*", role="status").text.strip()


# ---- pages ------------------------------------------------------------------------------------


async def test_overview_lists_every_queue_with_exact_counts_and_polls_its_table(
    db: txqueue.Database, queue: str, browser: Browser
) -> None:
    fill(db, queue, 12)
    dead_letter(db, queue, 2)
    db.receive_now(queue, max_batch_size=3)

    page = await browser.get("/")

    row = page.find("table", id="queues").find("tr", data_queue=queue)
    counts = {cell.get("data-count"): cell for cell in row.find_all("td", data_count=True)}
    assert {name: cell.text.strip() for name, cell in counts.items()} == {
        "ready": "7",
        "leased": "3",
        "scheduled": "0",
        "dead_letters": "2",
    }
    assert not any(cell.has("data-estimated") for cell in counts.values())
    assert row.find("td", data_age=True).text.strip() != "—"
    body = page.find("table", id="queues").find("tbody")
    assert (body.get("hx-get"), body.get("hx-trigger")) == ("/fragments/queues", "every 5s")
    chart = page.find("div", id="throughput")
    assert chart.get("data-source") == "/fragments/throughput.json"
    for name in ("overview", "workers", "events"):
        page.find("a", data_nav=name)

    fragment = await browser.client.get("/fragments/queues")
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert parse(fragment.text).find("tr", data_queue=queue)
    chart_data = (await browser.client.get("/fragments/throughput.json")).json()
    assert set(chart_data) == {"minutes", "series"}
    assert [series["name"] for series in chart_data["series"]] == [
        "handled",
        "failed",
        "dead_lettered",
    ]


async def test_workers_and_their_throughput_show_on_their_pages(
    database_url: str, db: txqueue.Database, queue: str, browser: Browser
) -> None:
    stats = Stats()
    stats.started([queue], 4)
    stats.running(queue, 2)
    now = datetime.now(timezone.utc)
    for kind in (OutcomeKind.ACKED, OutcomeKind.ACKED, OutcomeKind.ACKED, OutcomeKind.RETRIED):
        stats.outcome(Outcome(queue, ("job",), 1, kind, now))
    async with await txqueue.connect_async(database_url) as database:
        registration = Registration(database, stats, [queue], 4)
        await registration.beat()

    page = await browser.get("/workers")
    row = page.find("table", id="workers").find("tr", data_worker=registration.id)
    cells = [cell.text.strip() for cell in row.find_all("td")]
    assert cells[:6] == [registration.id, registration.host, str(registration.pid), queue, "4", "2"]

    overview = await browser.get("/")
    row = overview.find("tr", data_queue=queue)
    assert row.find("td", data_throughput="handled").text.strip() == "3"
    assert row.find("td", data_throughput="failed").text.strip() == "1"
    chart = (await browser.client.get("/fragments/throughput.json")).json()
    handled = next(series for series in chart["series"] if series["name"] == "handled")
    assert len(chart["minutes"]) == len(handled["values"]) == 60 and sum(handled["values"]) == 3


async def test_the_queue_page_filters_by_prefix_and_state_and_pages_by_key(
    db: txqueue.Database, queue: str, browser: Browser
) -> None:
    fill(db, queue, 60)
    leased = db.receive_now(queue, max_batch_size=2)

    first = await browser.get(f"/queues/{queue}")
    rows = first.find("table", id="messages").find_all("tr", data_key=True)
    assert [row.get("data-key") for row in rows] == [key_json(f"job-{n:03d}") for n in range(50)]
    link = rows[5].find("a")
    assert link.get("href") == f"/queues/{queue}/message?key=" + quote(key_json("job-005"), safe="")
    following = first.find("a", id="next-page").get("href")
    assert following == f"/queues/{queue}?after=" + quote(key_json("job-049"), safe="")

    second = await browser.get(following)
    rows = second.find("table", id="messages").find_all("tr", data_key=True)
    assert [row.get("data-key") for row in rows] == [
        key_json(f"job-{n:03d}") for n in range(50, 60)
    ]
    assert not second.find_all("a", id="next-page")

    filtered = await browser.get(f"/queues/{queue}?prefix=job-00&state=ready")
    form = filtered.find("form", id="message-filter")
    assert form.find("input", name="prefix").get("value") == "job-00"
    options = [
        option.get("value") for option in form.find("select", name="state").find_all("option")
    ]
    assert options == ["", "ready", "leased", "scheduled"]
    keys = [row.get("data-key") for row in filtered.find_all("tr", data_key=True)]
    held = {key_json(*message.key) for message in leased}
    assert keys == [key_json(f"job-00{n}") for n in range(10) if key_json(f"job-00{n}") not in held]

    only_leased = await browser.get(f"/queues/{queue}?state=leased")
    assert {row.get("data-key") for row in only_leased.find_all("tr", data_key=True)} == held

    refused = await browser.get(f"/queues/{queue}?after=not-json", status=400)
    assert "after" in refused.find("*", role="alert").text
    await browser.get("/queues/nothing_here", status=404)


async def test_the_message_page_shows_fields_and_the_payload_as_json_text_and_hex(
    db: txqueue.Database, queue: str, browser: Browser
) -> None:
    send(db, queue, "json", b'{"order": 17, "items": ["a"]}')
    send(db, queue, "binary", bytes(range(20)) + b"\x1b[2J")
    path = f"/queues/{queue}/message?key="

    page = await browser.get(path + quote(key_json("json")))
    fields = {
        dd.get("data-field"): dd.text.strip() for dd in page.find("dl", id="message").find_all("dd")
    }
    assert fields["key"] == key_json("json")
    assert fields["state"] == "ready" and fields["delivery_count"] == "0"
    assert fields["lease_expiration"] == "—" and fields["last_error"] == ""
    assert json.loads(page.find("pre", id="payload").text) == {"order": 17, "items": ["a"]}
    assert [link.get("data-view") for link in page.find_all("a", data_view=True)] == [
        "json",
        "text",
        "hex",
    ]

    hex_page = await browser.get(path + quote(key_json("binary")) + "&view=hex")
    assert hex_page.find("pre", id="payload").text.splitlines() == [
        "00000000  00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  |................|",
        "00000010  10 11 12 13 1b 5b 32 4a                           |.....[2J|",
    ]
    text_page = await browser.get(path + quote(key_json("binary")) + "&view=text")
    shown = text_page.find("pre", id="payload").text
    assert "\x1b" not in shown and "\\x1b[2J" in shown and "\\x00\\x01" in shown

    send(db, queue, "not-utf8", b"\xff\xfe\x00")
    default = await browser.get(path + quote(key_json("not-utf8")))
    assert default.find("a", data_view="hex").get("aria-current") == "true"
    assert default.find("pre", id="payload").text.startswith("00000000  ff fe 00")

    await browser.get(path + quote(key_json("gone")), status=404)


async def test_dead_letter_actions_work_without_javascript(
    db: txqueue.Database, queue: str, browser: Browser
) -> None:
    fill(db, queue, 6)
    keys = dead_letter(db, queue, 6)
    path = f"/queues/{queue}/dead-letters"

    page = await browser.get(path)
    table = page.find("table", id="dead-letters")
    rows = table.find_all("tr", data_key=True)
    assert [row.get("data-key") for row in rows] == keys
    for row in rows:
        assert row.find("input", type="checkbox", name="key").get("value") == row.get("data-key")
        row.find("button", data_action="replay-one")

    one = rows[0].find("button", data_action="replay-one")
    response = await browser.post(path, {one.get("name") or "": one.get("value") or ""})
    assert response.status_code == 303
    page = await browser.get(response.headers["location"])
    assert status_text(page) == "Replayed 1 dead letter to the queue."
    assert len(db.dead_letters(queue)) == 5

    response = await browser.post(
        path, [("key", keys[1]), ("key", keys[2]), ("action", "replay-selected")]
    )
    assert response.status_code == 303
    assert status_text(await browser.get(response.headers["location"])) == (
        "Replayed 2 dead letters to the queue."
    )
    assert [key_json(*letter.key) for letter in db.dead_letters(queue)] == keys[3:]

    nothing = await browser.post(path, {"action": "replay-selected"})
    assert nothing.status_code == 400
    assert "select at least one" in parse(nothing.text).find("*", role="alert").text

    asked = await browser.post(path, {"action": "purge-all"})
    assert asked.status_code == 200
    assert len(db.dead_letters(queue)) == 3  # only asked
    confirm = parse(asked.text).find("button", data_action="confirm-purge")
    response = await browser.post(path, {"action": confirm.get("value") or ""})
    assert response.status_code == 303
    assert status_text(await browser.get(response.headers["location"])) == "Purged 3 dead letters."
    assert db.dead_letters(queue) == []

    dead_letter(db, queue, 2)
    response = await browser.post(path, {"action": "replay-all"})
    assert status_text(await browser.get(response.headers["location"])) == (
        "Replayed 2 dead letters to the queue."
    )
    assert db.dead_letters(queue) == []
    assert db.queue_info(queue).ready == 3


async def test_a_post_without_the_csrf_field_is_refused(
    db: txqueue.Database, queue: str, browser: Browser
) -> None:
    fill(db, queue, 1)
    dead_letter(db, queue, 1)
    await browser.get(f"/queues/{queue}/dead-letters")
    response = await browser.client.post(
        f"/queues/{queue}/dead-letters",
        data={"action": "replay-all"},
        headers={"origin": "http://elsewhere.example"},
    )
    assert response.status_code == 403
    assert len(db.dead_letters(queue)) == 1


@pytest.fixture
def events(db: txqueue.Database) -> txqueue.Events:
    events = txqueue.Events(db)
    events.create_bus("orders")
    events.create_pipeline(
        "notify",
        LOCAL_HOOK,
        retry=txqueue.RetryPolicy(max_attempts=3),
        allow_private=True,
        signing_secret="whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    )
    events.create_pipeline("audit", "queue:jobs")
    events.create_enrollment(
        "paid", bus="orders", pipeline="notify", cel_match=f'message.type == "{SCRIPT}"'
    )
    return events


async def test_the_events_page_shows_buses_pipelines_and_enrollments(
    events: txqueue.Events, browser: Browser
) -> None:
    page = await browser.get("/events")
    assert page.find("table", id="buses").find("tr", data_bus="orders")
    pipelines = page.find("table", id="pipelines")
    notify = pipelines.find("tr", data_pipeline="notify")
    assert notify.find("td", data_secret=True).text == "(set)"
    assert "MfKQ9r8G" not in page.text
    assert pipelines.find("tr", data_pipeline="audit").find("td", data_secret=True).text == ""
    assert LOCAL_HOOK in notify.text
    enrollment = page.find("table", id="enrollments").find("tr", data_enrollment="paid")
    assert f'message.type == "{SCRIPT}"' in enrollment.text


async def test_a_pipeline_edit_out_of_range_shows_the_error_and_saves_nothing(
    events: txqueue.Events, browser: Browser
) -> None:
    path = "/events/pipelines/notify"
    page = await browser.get(path)
    form = page.find("form", id="pipeline-edit")
    values = {
        name: form.find("input", name=name).get("value")
        for name in ("destination", "max_attempts", "min_retry_delay", "max_retry_delay")
    }
    assert values == {
        "destination": LOCAL_HOOK,
        "max_attempts": "3",
        "min_retry_delay": "1",
        "max_retry_delay": "60",
    }
    form.find("button", type="submit")
    before = events.get_pipeline("notify")

    response = await browser.post(path, {**values, "min_retry_delay": "601"})

    assert response.status_code == 400
    refused = parse(response.text)
    alert = refused.find("*", role="alert").text
    assert "min_retry_delay" in alert and "600" in alert
    assert refused.find("input", name="min_retry_delay").get("value") == "601"
    assert events.get_pipeline("notify") == before

    response = await browser.post(path, {**values, "max_attempts": "0"})
    assert response.status_code == 400 and events.get_pipeline("notify") == before

    response = await browser.post(
        path, {**values, "min_retry_delay": "4", "max_retry_delay": "4", "max_attempts": "5"}
    )
    assert response.status_code == 303
    assert status_text(await browser.get(response.headers["location"])) == "Saved the pipeline."
    retry = events.get_pipeline("notify").retry
    assert (retry.max_attempts, retry.min_retry_delay, retry.max_retry_delay) == (
        5,
        timedelta(seconds=4),
        timedelta(seconds=4),
    )
    assert events.get_pipeline("notify").signing_secret == before.signing_secret


async def test_undelivered_messages_show_their_attempts_and_replay(
    database_url: str, events: txqueue.Events, browser: Browser, receiver: Receiver
) -> None:
    receiver.script("/refuses", 400)  # a permanent failure: undelivered after one attempt
    events.create_pipeline("strict", receiver.url("/refuses"), allow_private=True)
    events.create_enrollment("strict-all", bus="orders", pipeline="strict", cel_match="true")
    event = CloudEvent({"type": "com.shop.refund", "source": "//shop", "id": SCRIPT}, {"n": 1})
    uid = events.publish("orders", event)
    with txqueue.Dispatcher(database_url, concurrency=1):
        wait_until(lambda: [m for m in events.undelivered() if m.message_uid == uid])

    page = await browser.get("/events/undelivered")
    row = page.find("table", id="undelivered").find("tr", data_message_uid=uid)
    assert SCRIPT in row.text
    assert row.find_all("details")
    button = row.find("button", data_action="replay")

    form = row.find("form")
    fields = {
        element.get("name") or "": element.get("value") or ""
        for element in form.find_all("input", type="hidden")
    }
    assert button and fields["message_uid"] == uid
    response = await browser.post("/events/undelivered", {"message_uid": uid})
    assert response.status_code == 303
    done = await browser.get(response.headers["location"])
    assert status_text(done).startswith("Replayed 1 undelivered message")
    assert all(item.message_uid != uid for item in events.undelivered())


async def test_an_undelivered_message_names_its_status_once(
    database_url: str, events: txqueue.Events, browser: Browser, receiver: Receiver
) -> None:
    """The last failure reads "HTTP 400 Bad Request: <reply>", not "HTTP 400: HTTP 400 …"."""
    receiver.script("/refuses", 400)
    events.create_pipeline("strict", receiver.url("/refuses"), allow_private=True)
    events.create_enrollment("strict-all", bus="orders", pipeline="strict", cel_match="true")
    event = CloudEvent({"type": "com.shop.paid", "source": "//shop", "id": "o-1"}, {"n": 1})
    uid = events.publish("orders", event)
    with txqueue.Dispatcher(database_url, concurrency=1):
        wait_until(lambda: [m for m in events.undelivered() if m.message_uid == uid])

    page = await browser.get("/events/undelivered")
    row = page.find("table", id="undelivered").find("tr", data_message_uid=uid)
    failure = row.find_all("td", **{"class": "error"})[0].children[0]  # before the time
    assert isinstance(failure, str) and failure.startswith("HTTP 400 Bad Request"), failure
    assert failure.count("400") == 1, failure


async def test_text_from_the_database_is_escaped_everywhere(
    db: txqueue.Database, queue: str, events: txqueue.Events, browser: Browser
) -> None:
    send(db, queue, SCRIPT, SCRIPT.encode())
    send(db, queue, "second", b"x")
    dead_letter(db, queue, 1, error=f"failed: {SCRIPT}")
    events.publish("orders", CloudEvent({"type": SCRIPT, "source": "//s", "id": "1"}, None))
    key = quote(key_json(SCRIPT), safe="")
    paths = [
        "/",
        f"/queues/{queue}",
        f"/queues/{queue}/dead-letters",
        f"/queues/{queue}/message?key={quote(key_json('second'))}",
        "/events",
        "/events/undelivered",
    ]
    for path in paths:
        response = await browser.client.get(path)
        assert response.status_code == 200, path
        assert SCRIPT not in response.text, path
    dead = (await browser.client.get(f"/queues/{queue}/dead-letters")).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dead
    assert "failed: &lt;script&gt;" in dead
    db.replay_dead_letters(queue)
    for view in ("json", "text", "hex"):
        response = await browser.client.get(f"/queues/{queue}/message?key={key}&view={view}")
        assert response.status_code == 200 and SCRIPT not in response.text


async def test_pages_have_no_inline_script_style_or_handlers(
    db: txqueue.Database, queue: str, events: txqueue.Events, browser: Browser
) -> None:
    fill(db, queue, 3)
    dead_letter(db, queue, 1)
    for path in (
        "/",
        f"/queues/{queue}",
        f"/queues/{queue}/dead-letters",
        "/events",
        "/events/pipelines/notify",
        "/events/undelivered",
        "/login",
    ):
        response = await browser.client.get(path)
        assert response.status_code == 200, path
        page = parse(response.text)
        for script in page.find_all("script"):
            assert script.get("src") and not script.text.strip(), path
        assert not page.find_all("style"), path
        for element in page.walk():
            assert "style" not in element.attributes, (path, element.tag)
            assert not [name for name in element.attributes if name.startswith("on")], path
        assert page.find_all("main") and page.find_all("nav")


def actions(page: Element) -> list[Element]:
    """The page's buttons, but for the one that logs out."""
    return [b for b in page.find_all("button") if b.get("data-action") != "logout"]


async def test_a_read_only_dashboard_shows_no_actions_and_refuses_posts(
    db: txqueue.Database, queue: str, events: txqueue.Events
) -> None:
    fill(db, queue, 3)
    dead_letter(db, queue, 2)
    app = create_app(db, read_only=True, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        browser = await logged_in(client)
        page = await browser.get(f"/queues/{queue}/dead-letters")
        assert "read-only" in page.find("p", **{"class": "banner"}).text
        assert len(page.find_all("tr", data_key=True)) == 2
        assert not actions(page)  # logging out is all there is to do
        assert [form.get("action") for form in page.find_all("form", method="post")] == ["/logout"]

        edit = await browser.get("/events/pipelines/notify")
        form = edit.find("form", id="pipeline-edit")
        assert not form.find_all("button", type="submit")
        assert all(field.has("disabled") for field in form.find_all("input", type="number"))

        undelivered = await browser.get("/events/undelivered")
        assert not actions(undelivered)

        for path, data in [
            (f"/queues/{queue}/dead-letters", {"action": "replay-all"}),
            (f"/queues/{queue}/dead-letters", {"action": "confirm-purge"}),
            ("/events/pipelines/notify", {"max_attempts": "9"}),
        ]:
            response = await browser.post(path, data)
            assert response.status_code == 403, path
    assert len(db.dead_letters(queue)) == 2
    assert events.get_pipeline("notify").retry.max_attempts == 3


async def test_links_and_forms_carry_the_base_path(db: txqueue.Database, queue: str) -> None:
    fill(db, queue, 1)
    dead_letter(db, queue, 1)
    app = create_app(db, base_path="/txq", token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        browser = await logged_in(client, "/txq")
        page = await browser.get(f"/txq/queues/{queue}/dead-letters")
        assert page.find("a", data_nav="events").get("href") == "/txq/events"
        page.find("form", method="post", action=f"/txq/queues/{queue}/dead-letters")
        page.find("form", method="post", action="/txq/logout")
        assert all(
            (script.get("src") or "").startswith("/txq/static/")
            for script in page.find_all("script")
        )
        response = await browser.post(f"/txq/queues/{queue}/dead-letters", {"action": "replay-all"})
        assert response.status_code == 303
        assert response.headers["location"].startswith(f"/txq/queues/{queue}/dead-letters?")
        css = await client.get("/txq/static/dashboard.css")
        assert css.status_code == 200 and "font" in css.text


def test_estimated_counts_are_marked_and_shown_with_a_tilde(db: txqueue.Database) -> None:
    """A queue too large to count (more than 100,000 rows) comes back estimated; filling one
    would take longer than the rest of this module, so the row is handed to the template."""
    from txqueue.web import display

    templates = create_app(db, token=TOKEN).state.txqueue.templates
    row = txqueue.QueueInfo("big", 897_000, 52_250, 50_750, 20_000, 3618.4, estimated=True)
    html = templates.get_template("fragments/queues.html").render(
        queues=[row], totals={"big": (10, 1)}, base_path="", age=display.age
    )
    cells = parse(html).find("tr", data_queue="big").find_all("td", data_count=True)
    assert [(cell.text, cell.has("data-estimated")) for cell in cells] == [
        ("~897000", True),
        ("~52250", True),
        ("~50750", True),
        ("~20000", True),
    ]


async def test_with_a_token_pages_ask_to_log_in_and_the_form_logs_in(
    db: txqueue.Database, queue: str
) -> None:
    fill(db, queue, 1)
    app = create_app(db, token="s3cret-token")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
        browser = Browser(client)
        asked = await client.get(f"/queues/{queue}")
        assert asked.status_code == 303 and asked.headers["location"].startswith("/login")
        login = await browser.get(asked.headers["location"])
        form = login.find("form", id="login")
        form.find("input", name="token", type="password")
        assert not form.find_all("input", name="csrf_token")  # no session yet to bind one to
        assert not login.find_all("button", data_action="logout")
        fields = {
            element.get("name") or "": element.get("value") or ""
            for element in form.find_all("input", type="hidden")
        }

        response = await browser.post("/login", {**fields, "token": "s3cret-token"})

        assert response.status_code == 303
        assert response.headers["location"] == f"/queues/{queue}"
        page = await browser.get(response.headers["location"])
        assert page.find("table", id="messages").find_all("tr", data_key=True)
        logout = page.find("button", data_action="logout")
        assert logout.parent is not None and logout.parent.get("action") == "/logout"
        response = await browser.post("/logout", {})
        assert response.status_code == 303
        assert (await client.get(f"/queues/{queue}")).status_code == 303
