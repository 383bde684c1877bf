"""The dashboard's HTTP API (/api/v1) on both engines: every resource, paging, filters,
validation (400 and nothing saved), and the error statuses. The app runs in-process through
httpx's ASGI transport over a real database."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

import txqueue
from txqueue import errors
from txqueue.web import create_app
from txqueue.web.api import ENDPOINTS, error_response
from txqueue.worker.observe import Stats
from txqueue.worker.outcomes import Outcome, OutcomeKind
from txqueue.worker.registry import Registration

JOBS = (
    "CREATE QUEUE jobs (tenant STRING(MAX) NOT NULL, id INT64 NOT NULL, payload JSON NOT NULL)"
    " PRIMARY KEY (tenant, id)"
)
PG_JOBS = (
    "CREATE QUEUE jobs (tenant varchar NOT NULL, id bigint NOT NULL, payload jsonb NOT NULL,"
    " PRIMARY KEY (tenant, id))"
)
MAIL = "CREATE QUEUE mail (id STRING(MAX) NOT NULL, payload BYTES(MAX) NOT NULL) PRIMARY KEY (id)"
PG_MAIL = "CREATE QUEUE mail (id varchar NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))"
STRUCTURED = {"content-type": "application/cloudevents+json"}
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TOKEN = "api-test-token-5d1e"


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as database:
        postgres = database.dialect == "postgresql"
        database.update_ddl([PG_JOBS, PG_MAIL] if postgres else [JOBS, MAIL])
        yield database


@pytest.fixture
async def client(db: txqueue.Database) -> AsyncIterator[httpx.AsyncClient]:
    # The operator's switch: the pipeline tests deliver to a local hook (allow_private).
    app = create_app(db, token=TOKEN, allow_private_destinations=True)
    transport = httpx.ASGITransport(app=app)
    bearer = {"authorization": f"Bearer {TOKEN}"}  # as a script calls the API
    async with httpx.AsyncClient(
        transport=transport, base_url="http://dashboard", headers=bearer
    ) as http:
        yield http


def send(db: txqueue.Database, queue: str, *messages: tuple[Any, Any]) -> None:
    db.run_in_transaction(lambda txn: [txn.send(queue, key, payload) for key, payload in messages])


def dead_letters(db: txqueue.Database, *ids: str) -> None:
    """Mail messages with these ids, each dead-lettered with the error "boom <id>"."""
    send(db, "mail", *((id, f"mail {id}".encode()) for id in ids))
    leased = db.receive_now("mail", max_batch_size=len(ids))
    assert len(leased) == len(ids)
    for message in leased:
        db.dead_letter("mail", message.key, message.lease_token, f"boom {message.key[0]}")


def assert_error(response: httpx.Response, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    for word in words:
        assert word in error["message"]


async def test_queues_are_listed_with_their_counts(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    send(db, "jobs", (("a", 1), {"n": 1}), (("a", 2), {"n": 2}))
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    db.run_in_transaction(lambda txn: txn.send("jobs", ("a", 3), {"n": 3}, later))
    dead_letters(db, "x")

    listed = (await client.get("/api/v1/queues")).json()["queues"]
    by_name = {queue["name"]: queue for queue in listed}
    assert sorted(by_name) == ["jobs", "mail"]
    jobs = by_name["jobs"]
    assert (jobs["ready"], jobs["leased"], jobs["scheduled"], jobs["dead_letters"]) == (2, 0, 1, 0)
    assert jobs["estimated"] is False and jobs["oldest_ready_age_seconds"] >= 0
    assert by_name["mail"]["dead_letters"] == 1

    one = (await client.get("/api/v1/queues/jobs")).json()
    assert one == {**jobs, "oldest_ready_age_seconds": one["oldest_ready_age_seconds"]}
    assert_error(await client.get("/api/v1/queues/nope"), 404, "NotFound", "nope")


async def test_messages_page_by_key_with_prefix_and_state_filters(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    keys = [("a", 1), ("a", 2), ("a", 3), ("ab", 1), ("b", 1)]
    send(db, "jobs", *((key, {"key": list(key)}) for key in keys))

    seen, after, pages = [], None, 0
    while True:
        params = {"limit": "2", **({"after": json.dumps(after)} if after else {})}
        page = (await client.get("/api/v1/queues/jobs/messages", params=params)).json()
        seen += [tuple(message["key"]) for message in page["messages"]]
        pages += 1
        after = page["next_after"]
        if after is None:
            break
    assert seen == keys and pages == 3  # 2 + 2 + 1, the last page says there is no next

    async def keys_of(**params: str) -> list[tuple[Any, ...]]:
        answer = await client.get("/api/v1/queues/jobs/messages", params=params)
        assert answer.status_code == 200, answer.text
        return [tuple(message["key"]) for message in answer.json()["messages"]]

    assert await keys_of(prefix='["a"]') == keys[:4]  # a final text part: starts with it
    assert await keys_of(prefix="a") == keys[:4]  # plain text: the same
    assert await keys_of(prefix='["a", 2]') == [("a", 2)]  # earlier parts match exactly
    [leased] = db.receive_now("jobs")
    assert await keys_of(state="leased") == [tuple(leased.key)]
    assert len(await keys_of(state="ready")) == 4

    messages = "/api/v1/queues/jobs/messages"
    assert_error(await client.get(messages, params={"state": "gone"}), 400, "InvalidArgument")
    assert_error(
        await client.get(messages, params={"after": "[1,"}), 400, "InvalidArgument", "after"
    )
    assert_error(
        await client.get(messages, params={"after": '["a"]'}), 400, "InvalidArgument", "after"
    )
    assert_error(await client.get(messages, params={"limit": "0"}), 400, "InvalidArgument", "limit")


async def test_a_message_is_shown_with_its_payload_and_delivery_state(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    send(db, "jobs", (("a", 1), {"total": 12.5}))
    send(db, "mail", ("m1", b"\x00\xffbinary"))
    [leased] = db.receive_now("mail")
    db.release_lease("mail", [leased.lease_token], error="smtp down")

    detail = (await client.get("/api/v1/queues/jobs/message", params={"key": '["a", 1]'})).json()
    assert detail["key"] == ["a", 1] and detail["state"] == "ready"
    assert detail["payload"] == {"encoding": "json", "value": {"total": 12.5}}
    assert detail["deliver_time"].endswith("Z") and detail["delivery_count"] == 0

    mail = (await client.get("/api/v1/queues/mail/message", params={"key": '["m1"]'})).json()
    assert mail["payload"] == {"encoding": "base64", "value": "AP9iaW5hcnk="}
    assert mail["delivery_count"] == 1 and mail["last_error"] == "smtp down"

    url = "/api/v1/queues/jobs/message"
    assert_error(await client.get(url, params={"key": '["a", 9]'}), 404, "NotFound")
    assert_error(await client.get(url, params={"key": '["a"]'}), 400, "InvalidArgument", "key")
    assert_error(await client.get(url), 400, "InvalidArgument", "key")


async def test_dead_letters_are_replayed_one_selected_or_all_and_purged(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    dead_letters(db, "d1", "d2", "d3", "d4")
    url = "/api/v1/queues/mail/dead-letters"
    listed = (await client.get(url)).json()["dead_letters"]
    assert sorted(letter["key"][0] for letter in listed) == ["d1", "d2", "d3", "d4"]
    first = next(letter for letter in listed if letter["key"] == ["d1"])
    assert first["last_error"] == "boom d1" and first["attempts"] == 1
    assert first["payload"] == {"encoding": "base64", "value": "bWFpbCBkMQ=="}

    one = await client.post(f"{url}/replay", json={"keys": [["d1"]]})
    assert one.json() == {"replayed": 1}
    selected = await client.post(f"{url}/replay", json={"keys": [["d2"], ["d3"]]})
    assert selected.json() == {"replayed": 2}
    assert sorted(m.key[0] for m in db.receive_now("mail", max_batch_size=10)) == [
        "d1",
        "d2",
        "d3",
    ]
    assert (await client.post(f"{url}/purge", json={"all": True})).json() == {"purged": 1}
    assert db.dead_letters("mail") == []

    dead_letters(db, "d5", "d6")
    assert (await client.post(f"{url}/replay", json={"all": True})).json() == {"replayed": 2}
    assert db.dead_letters("mail") == []

    dead_letters(db, "d7")
    for body in ({}, {"keys": [["d7"]], "all": True}, {"keys": []}, {"all": False}):
        assert_error(await client.post(f"{url}/purge", json=body), 400, "InvalidArgument")
    assert_error(
        await client.post(f"{url}/purge", json={"keys": [[7]]}), 400, "InvalidArgument", "keys[0]"
    )
    assert_error(
        await client.post(f"{url}/purge", json={"key": [["d7"]]}), 400, "InvalidArgument", "key"
    )
    malformed = await client.post(
        f"{url}/purge", content=b'{"keys": [', headers={"content-type": "application/json"}
    )
    assert_error(malformed, 400, "InvalidArgument", "not JSON")
    assert len(db.dead_letters("mail")) == 1  # every refusal left it alone


async def test_workers_and_their_throughput_are_listed(
    database_url: str, client: httpx.AsyncClient
) -> None:
    assert (await client.get("/api/v1/workers")).json() == {"workers": []}
    stats = Stats()
    stats.started(["mail"], 4)
    stats.running("mail", 2)
    now = datetime.now(timezone.utc)
    for kind in (OutcomeKind.ACKED, OutcomeKind.ACKED, OutcomeKind.DEAD_LETTERED):
        stats.outcome(Outcome("mail", ("m",), 1, kind, now))
    async with await txqueue.connect_async(database_url) as database:
        registration = Registration(database, stats, ["mail"], 4)
        await registration.beat()

    [worker] = (await client.get("/api/v1/workers")).json()["workers"]
    assert worker["id"] == registration.id and worker["pid"] == registration.pid
    assert (worker["host"], worker["queues"], worker["concurrency"], worker["in_flight"]) == (
        registration.host,
        ["mail"],
        4,
        2,
    )
    assert worker["started"].endswith("Z") and worker["last_seen"] >= worker["started"]

    series = (await client.get("/api/v1/throughput", params={"queue": "mail"})).json()
    assert len(series["minutes"]) == len(series["handled"]) == 60
    assert (sum(series["handled"]), sum(series["dead_lettered"])) == (2, 1)
    other = (await client.get("/api/v1/throughput", params={"queue": "jobs"})).json()
    assert sum(other["handled"]) == 0
    assert_error(
        await client.get("/api/v1/throughput", params={"minutes": "0"}),
        400,
        "InvalidArgument",
        "minutes",
    )


async def test_buses_pipelines_and_enrollments_are_created_changed_and_deleted(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    api = "/api/v1"
    created = await client.post(f"{api}/buses", json={"name": "orders", "retention": 3600})
    assert created.status_code == 201 and created.json()["retention"] == 3600
    assert_error(await client.post(f"{api}/buses", json={"name": "orders"}), 409, "AlreadyExists")
    changed = await client.patch(f"{api}/buses/orders", json={"archive": False})
    assert changed.json()["archive"] is False

    pipeline = {
        "name": "mailer",
        "destination": "http://127.0.0.1:9/hook",
        "allow_private": True,
        "max_attempts": 3,
        "min_retry_delay": 2,
        "max_retry_delay": 30,
        "signing_secret": SECRET,
    }
    for wrong, word in (
        ({"max_retry_delay": 100000}, "max_retry_delay"),
        ({"min_retry_delay": "soon"}, "min_retry_delay"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"destination": "ftp://example.com"}, "destination"),
        ({"colour": "red"}, "colour"),
    ):
        refused = await client.post(f"{api}/pipelines", json={**pipeline, **wrong})
        assert_error(refused, 400, "InvalidArgument", word)
    assert (await client.get(f"{api}/pipelines")).json() == {"pipelines": []}

    made = await client.post(f"{api}/pipelines", json=pipeline)
    assert made.status_code == 201, made.text
    assert made.json()["signing_secret_set"] is True and SECRET not in made.text
    assert (made.json()["max_attempts"], made.json()["max_retry_delay"]) == (3, 30)

    for wrong in ({"max_attempts": "x"}, {"min_retry_delay": -1}, {"max_retry_delay": 10**6}):
        refused = await client.patch(f"{api}/pipelines/mailer", json=wrong)
        assert_error(refused, 400, "InvalidArgument", next(iter(wrong)))
    unchanged = (await client.get(f"{api}/pipelines/mailer")).json()
    assert unchanged == made.json()
    patched = await client.patch(
        f"{api}/pipelines/mailer", json={"max_attempts": 7, "min_retry_delay": 5}
    )
    assert (patched.json()["max_attempts"], patched.json()["min_retry_delay"]) == (7, 5)
    assert txqueue.Events(db).get_pipeline("mailer").retry.max_attempts == 7

    enrollment = {"name": "paid", "bus": "orders", "pipeline": "mailer", "cel_match": "true"}
    bad_cel = await client.post(f"{api}/enrollments", json={**enrollment, "cel_match": "(("})
    assert_error(bad_cel, 400, "InvalidArgument")
    no_bus = await client.post(f"{api}/enrollments", json={**enrollment, "bus": "nope"})
    assert no_bus.status_code in (400, 404)
    assert (await client.get(f"{api}/enrollments")).json() == {"enrollments": []}
    assert (await client.post(f"{api}/enrollments", json=enrollment)).status_code == 201
    cel = 'message.type == "paid"'
    assert (await client.patch(f"{api}/enrollments/paid", json={"cel_match": cel})).json()[
        "cel_match"
    ] == cel
    listed = (await client.get(f"{api}/enrollments", params={"bus": "orders"})).json()
    assert [item["name"] for item in listed["enrollments"]] == ["paid"]

    assert_error(await client.delete(f"{api}/buses/orders"), 412, "FailedPrecondition")
    assert_error(await client.delete(f"{api}/pipelines/mailer"), 412, "FailedPrecondition")
    assert (await client.delete(f"{api}/enrollments/paid")).status_code == 204
    assert (await client.delete(f"{api}/pipelines/mailer")).status_code == 204
    assert (await client.delete(f"{api}/buses/orders")).status_code == 204
    assert_error(await client.get(f"{api}/buses/orders"), 404, "NotFound")
    assert_error(await client.get(f"{api}/pipelines/mailer"), 404, "NotFound")
    assert_error(await client.get(f"{api}/enrollments/paid"), 404, "NotFound")


async def test_events_are_published_in_structured_and_binary_mode(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    assert (await client.post("/api/v1/buses", json={"name": "orders"})).status_code == 201
    url = "/api/v1/buses/orders/events"
    structured = {
        "specversion": "1.0",
        "id": "e1",
        "source": "//shop",
        "type": "com.shop.paid",
        "data": {"order": 1},
    }
    one = await client.post(url, content=json.dumps(structured), headers=STRUCTURED)
    assert one.status_code == 201, one.text
    binary = {
        "content-type": "text/plain",
        "ce-specversion": "1.0",
        "ce-id": "e2",
        "ce-source": "//shop",
        "ce-type": "com.shop.note",
    }
    two = await client.post(url, content=b"hello", headers=binary)
    assert two.status_code == 201, two.text

    archived = {m.message_uid: m.event for m in txqueue.Events(db).messages(bus="orders")}
    first, second = archived[one.json()["message_uid"]], archived[two.json()["message_uid"]]
    assert (first.get_id(), first.get_type(), first.get_data()) == (
        "e1",
        "com.shop.paid",
        {"order": 1},
    )
    assert (second.get_id(), second.get_data()) == ("e2", "hello")  # text/plain: kept as text

    missing = {key: value for key, value in binary.items() if key != "ce-source"}
    assert_error(await client.post(url, content=b"x", headers=missing), 400, "InvalidArgument")
    plain = await client.post(
        url, content=json.dumps(structured), headers={"content-type": "text/plain"}
    )
    assert_error(plain, 400, "InvalidArgument", "cloudevents+json")
    garbage = await client.post(url, content=b"{nope", headers=STRUCTURED)
    assert_error(garbage, 400, "InvalidArgument", "not JSON")
    listed = await client.post(url, content=b"[]", headers=STRUCTURED)
    assert_error(listed, 400, "InvalidArgument", "JSON object")
    nowhere = await client.post(
        "/api/v1/buses/nobus/events", content=json.dumps(structured), headers=STRUCTURED
    )
    assert_error(nowhere, 404, "NotFound")
    assert len(txqueue.Events(db).messages(bus="orders")) == 2


async def test_undelivered_messages_are_listed_with_their_attempts_and_replayed(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    events = txqueue.Events(db)
    events.create_bus("orders")
    event = {"specversion": "1.0", "id": "lost", "source": "//shop", "type": "t"}
    published = await client.post(
        "/api/v1/buses/orders/events", content=json.dumps(event), headers=STRUCTURED
    )
    uid = published.json()["message_uid"]

    # No enrollment matched: not a failure (listed by /unmatched), unless asked for by name.
    assert (await client.get("/api/v1/undelivered")).json() == {"undelivered": []}
    unrouted = {"pipeline": ""}
    [item] = (await client.get("/api/v1/undelivered", params=unrouted)).json()["undelivered"]
    assert item["message_uid"] == uid and item["pipeline"] == "" and item["event"]["id"] == "lost"
    assert [attempt["state"] for attempt in item["attempts"]] == ["failed"]
    assert "no enrollment" in item["error"]
    log = (await client.get(f"/api/v1/messages/{uid}/attempts")).json()["attempts"]
    assert len(log) == 1 and log[0]["message_uid"] == uid

    assert_error(
        await client.post("/api/v1/undelivered/replay", json={"message_uids": []}),
        400,
        "InvalidArgument",
    )
    replayed = await client.post("/api/v1/undelivered/replay", json={"message_uids": [uid]})
    [new_uid] = replayed.json()["replayed"]
    remaining = (await client.get("/api/v1/undelivered", params=unrouted)).json()["undelivered"]
    assert [row["message_uid"] for row in remaining] == [new_uid]  # routed afresh, unmatched again
    again = await client.post("/api/v1/undelivered/replay", json={"all": True})
    assert len(again.json()["replayed"]) == 1


def test_every_txqueue_error_has_its_status() -> None:
    expected = {
        errors.InvalidArgument: 400,
        errors.NotFound: 404,
        errors.AlreadyExists: 409,
        errors.FailedPrecondition: 412,
        errors.OutOfRange: 400,
        errors.Aborted: 409,
        errors.DeadlineExceeded: 504,
        errors.Unavailable: 503,
        errors.CommitOutcomeUnknown: 500,
    }
    for kind, status in expected.items():
        response = error_response(kind("why <b>"))
        assert response.status_code == status
        assert json.loads(response.body) == {"error": {"code": kind.__name__, "message": "why <b>"}}


async def test_the_openapi_document_is_valid_and_lists_every_route(
    db: txqueue.Database, client: httpx.AsyncClient
) -> None:
    from starlette.routing import Mount, Route

    document = (await client.get("/api/v1/openapi.json")).json()
    validate(document)  # against the OpenAPI 3.1 schema
    assert document["openapi"].startswith("3.1")
    listed = {(path, method.upper()) for path, item in document["paths"].items() for method in item}

    [mount] = [
        r
        for r in create_app(db, token=TOKEN).routes
        if isinstance(r, Mount) and r.path == "/api/v1"
    ]
    served = set()
    for route in mount.routes:
        assert isinstance(route, Route)
        served |= {(route.path, method) for method in route.methods or () if method != "HEAD"}
    assert len(served) >= 25 and served == listed
    assert {(endpoint.path, endpoint.method) for endpoint in ENDPOINTS} == listed
