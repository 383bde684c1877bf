"""Property: whatever a client sends to the dashboard's HTTP API and pages — any method, path,
query parameters, headers and body — the answer is a 2xx, 3xx or 4xx, never a 5xx (nor an
exception out of the app), and it comes in bounded time; on SQLite and PostgreSQL.

Hypothesis draws paths from the API's own table with hostile segments, the query parameters
the routes read (keys, prefixes, limits) with deep, huge, non-JSON and control-character
values, and bodies that are JSON objects with the routes' field names, deep JSON, CloudEvents
in both modes, broken forms and random bytes. The examples run per engine are the
``adversarial`` profile's (``TXQUEUE_ADVERSARIAL_EXAMPLES``, default 40) times four.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import txqueue

pytest.importorskip("starlette")

from txqueue.web import create_app
from txqueue.web.api import ENDPOINTS

TOKEN = "adversarial-http-token-3b8e"
EXAMPLES = 4 * int(os.environ.get("TXQUEUE_ADVERSARIAL_EXAMPLES", "40"))
#: The most one request may take, however hostile.
BOUND_SECONDS = 10.0
DDL = {
    "googlesql": "CREATE QUEUE jobs (id STRING(MAX) NOT NULL, payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (id)",
    "postgresql": "CREATE QUEUE jobs (id varchar NOT NULL, payload bytea NOT NULL,"
    " PRIMARY KEY (id))",
}
PAGES = (
    ("GET", "/"),
    ("GET", "/fragments/queues"),
    ("GET", "/fragments/throughput.json"),
    ("GET", "/workers"),
    ("GET", "/events"),
    ("GET", "/events/undelivered"),
    ("POST", "/events/undelivered"),
    ("GET", "/events/pipelines/{name}"),
    ("POST", "/events/pipelines/{name}"),
    ("GET", "/queues/{name}"),
    ("GET", "/queues/{name}/message"),
    ("GET", "/queues/{name}/dead-letters"),
    ("POST", "/queues/{name}/dead-letters"),
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    ("GET", "/static/{name}"),
)
ROUTES = tuple((endpoint.method, f"/api/v1{endpoint.path}") for endpoint in ENDPOINTS) + PAGES
FIELDS = (
    "name", "archive", "retention", "destination", "max_attempts", "min_retry_delay",
    "max_retry_delay", "input_payload_format", "json_schema", "signing_secret", "allow_private",
    "bus", "pipeline", "cel_match", "keys", "all", "message_uids", "action", "replay_one", "key",
    "csrf_token", "token", "next", "specversion", "id", "source", "type", "data", "data_base64",
    "datacontenttype", "time", "subject",
)  # fmt: skip
QUERY = ("key", "after", "prefix", "state", "limit", "minutes", "queue", "bus", "pipeline")
QUERY += ("view", "done", "count", "next", "token")

# ---- what a hostile client sends --------------------------------------------------------------

NAMES = st.sampled_from(["jobs", "b", "p", "e", "missing", "..", "%2F", "dashboard.css"])
TEXT = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(codec="utf-8"), max_size=20),
    st.sampled_from(["\x1b[2J", "\u202e", "\x00", "a\nb", " ", "null", "[]", "{}", "-1", "1e999"]),
)


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


DEEP_TEXT = st.sampled_from([deep(85), deep(1200), '{"a":' * 200 + "1" + "}" * 200])
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([2**64, -(2**63) - 1, 10**30]),
        TEXT,
    ),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)
KEYS = st.lists(st.one_of(TEXT, st.integers(), st.none()), max_size=3).map(json.dumps)
QUERY_VALUES = st.one_of(TEXT, KEYS, JSON_VALUES.map(json.dumps), DEEP_TEXT)
PARAMS = st.dictionaries(st.sampled_from(QUERY) | TEXT, QUERY_VALUES | DEEP_TEXT, max_size=4)
SEGMENTS = st.one_of(NAMES, NAMES, NAMES, TEXT.map(lambda text: quote(text, safe="") or "x"))
METHODS = st.sampled_from(["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD"])


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str]:
    """A route's own method and path (now and then another method), its names filled in."""
    method, template = draw(st.sampled_from(ROUTES))
    if draw(st.integers(0, 4)) == 0:
        method = draw(METHODS)
    return method, re.sub(r"{\w+}", lambda _: draw(SEGMENTS), template)


OBJECTS = st.dictionaries(st.sampled_from(FIELDS) | TEXT, JSON_VALUES, max_size=6)
EVENT = st.fixed_dictionaries(
    {"specversion": st.sampled_from(["1.0", "0.3", "2"]), "id": TEXT, "source": TEXT},
    optional={"type": TEXT, "data": JSON_VALUES, "data_base64": TEXT, "datacontenttype": TEXT},
)
MULTIPART = st.builds(
    lambda name, value: (
        b'--xx\r\nContent-Disposition: form-data; name="' + name + b'"\r\n\r\n' + value + b"\r\n"
    ),
    st.sampled_from([b"csrf_token", b"token", b"action", b"\xff", b""]),
    st.binary(max_size=12),
).map(lambda part: part + b"--xx--\r\n")
BODIES = st.one_of(
    st.just(b""),
    st.binary(max_size=64),
    OBJECTS.map(lambda value: json.dumps(value).encode()),
    JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    EVENT.map(lambda value: json.dumps(value).encode()),
    DEEP_TEXT.map(str.encode),
    DEEP_TEXT.map(
        lambda text: ('{"specversion":"1.0","id":"1","source":"s","data":' + text + "}").encode()
    ),
    MULTIPART,
    st.dictionaries(st.sampled_from(FIELDS), TEXT, max_size=4).map(
        lambda form: "&".join(f"{quote(k)}={quote(v)}" for k, v in form.items()).encode()
    ),
)
CONTENT_TYPES = st.sampled_from(
    [
        None,
        "application/json",
        "application/cloudevents+json",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xx",
        "multipart/form-data",
        "text/plain",
        "application/json; charset=nope",
    ]
)
CE_HEADERS = st.dictionaries(
    st.sampled_from(["ce-specversion", "ce-id", "ce-source", "ce-type", "ce-time", "ce-x"]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12),
    max_size=4,
)


# ---- the app under attack ---------------------------------------------------------------------


Request = Callable[..., httpx.Response]


@pytest.fixture
def client(database_url: str) -> Iterator[Request]:
    """A dashboard over a database holding a queue with a message and a dead letter, a bus,
    a pipeline into the queue and an enrollment."""
    with txqueue.connect(database_url) as db:
        db.update_ddl([DDL[db.dialect]])
        with db.batch() as batch:
            batch.send("jobs", ("a",), b"payload")
            batch.send("jobs", ("b",), b"\x1b[2J")
        [leased] = db.receive_now("jobs")
        db.dead_letter("jobs", leased.key, leased.lease_token, "boom\x1b\n")
        events = txqueue.Events(db)
        events.create_bus("b")
        events.create_pipeline("p", "queue:jobs")
        events.create_enrollment("e", bus="b", pipeline="p", cel_match="true")
        transport = httpx.ASGITransport(app=create_app(db, token=TOKEN))
        http = httpx.AsyncClient(transport=transport, base_url="http://dashboard")
        loop = asyncio.new_event_loop()

        def request(*arguments: Any, **options: Any) -> httpx.Response:
            answer: Awaitable[httpx.Response] = http.request(*arguments, **options)
            return loop.run_until_complete(answer)

        try:
            yield request
        finally:
            loop.run_until_complete(http.aclose())
            loop.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(
    route=requests(),
    params=PARAMS,
    body=BODIES,
    content_type=CONTENT_TYPES,
    ce_headers=CE_HEADERS,
    authorized=st.sampled_from([True, True, True, False]),
)
def test_the_http_api_answers_hostile_requests_with_a_4xx_never_a_5xx(
    client: Request,
    route: tuple[str, str],
    params: dict[str, str],
    body: bytes,
    content_type: str | None,
    ce_headers: dict[str, str],
    authorized: bool,
) -> None:
    method, path = route
    headers: dict[str, Any] = dict(ce_headers) if path.endswith("/events") else {}
    if content_type is not None:
        headers["content-type"] = content_type
    if authorized:
        headers["authorization"] = f"Bearer {TOKEN}"
    started = time.monotonic()
    answer = client(method, path, params=params, content=body, headers=headers)
    took = time.monotonic() - started
    assert answer.status_code < 500, (answer.status_code, answer.text[:500])
    assert took < BOUND_SECONDS, f"{method} {path} took {took:.1f} s"
