"""Bounded CEL conditions end to end, on SQLite and PostgreSQL, from both faces.

A condition over the static bounds is an InvalidArgument from every door (Python API, CLI,
HTTP API) and nothing is stored. A condition that cannot be evaluated for an event (stored by
an older version past today's bounds, or over its cost budget for that event) never fails or
stalls the publish: the event goes to the pipelines the other enrollments route it to, and
the attempt log records a permanent failure for the enrollment's pipeline.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main
from txqueue.errors import InvalidArgument
from txqueue.events.records import CONFIG, DELIVERIES
from txqueue.events.resources import encode_resource
from txqueue.web import create_app

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "cel-budget-token-7c2a"
LEVELS = "abcdefg"
# Seven nested comprehensions over ten-element lists: 10**7 evaluations of the innermost test.
SEVEN_NESTED = (
    "".join(f"[1,2,3,4,5,6,7,8,9,10].all({name}, " for name in LEVELS)
    + " + ".join(LEVELS)
    + " > 0"
    + ")" * len(LEVELS)
)
EVENT = {"id": "1", "source": "//shop", "type": "com.shop.order.paid"}
FACES = ["sync", "asyncio"]


@pytest.fixture
def events(database_url: str) -> Iterator[txqueue.Events]:
    """Bus ``orders``; pipelines ``fast`` and ``slow`` (to the bus ``audit``); enrollment
    ``fast`` routes every event to ``fast``."""
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        for bus in ("orders", "audit"):
            events.create_bus(bus)
        for pipeline in ("fast", "slow"):
            events.create_pipeline(pipeline, "bus:audit")
        events.create_enrollment("fast", bus="orders", pipeline="fast", cel_match="true")
        yield events


def store_condition(events: txqueue.Events, name: str, cel_match: str) -> None:
    """Write enrollment ``name`` (to pipeline ``slow``) straight into the configuration table,
    as an older version or a hand-written row could: no check runs."""
    events.create_enrollment(name, bus="orders", pipeline="slow", cel_match="true")
    _, config = encode_resource(events.get_enrollment(name))
    stored = {**json.loads(config), "cel_match": cel_match}
    with events.database.batch() as batch:
        batch.update(CONFIG, ("kind", "name", "config"), [("enrollment", name, json.dumps(stored))])


def publish(database_url: str, face: str, event: dict[str, Any]) -> str:
    """Publish ``event`` to ``orders`` through the ``face`` API, on a connection of its own."""
    if face == "sync":
        with txqueue.connect(database_url) as db:
            return txqueue.Events(db).publish("orders", event)

    async def run() -> str:
        adb = await txqueue.connect_async(database_url)
        try:
            return await txqueue.AsyncEvents(adb).publish("orders", event)
        finally:
            await adb.close()

    return asyncio.run(run())


def pipelines_routed(events: txqueue.Events, uid: str) -> list[str]:
    """The pipelines ``uid`` was routed to (its deliveries, none attempted yet)."""
    stored = events.database.list_messages(DELIVERIES, limit=1000)
    return sorted(message.key[0] for message in stored if message.key[1] == uid)


def failure_of(events: txqueue.Events, uid: str, pipeline: str) -> txqueue.DeliveryAttempt:
    (attempt,) = [a for a in events.attempts(uid) if a.pipeline == pipeline]
    assert (attempt.attempt, attempt.state, attempt.outcome) == (1, "failed", "permanent")
    return attempt


@pytest.mark.parametrize("face", FACES)
def test_a_stored_condition_past_the_bounds_is_a_recorded_failure_at_publish(
    events: txqueue.Events, database_url: str, face: str
) -> None:
    store_condition(events, "slow", SEVEN_NESTED)  # took seconds per publish (GIL held)
    assert events.get_enrollment("slow").cel_match == SEVEN_NESTED  # the catalog still reads

    started = time.monotonic()
    uid = publish(database_url, face, EVENT)
    assert time.monotonic() - started < 5  # not evaluated

    assert pipelines_routed(events, uid) == ["fast"]
    error = failure_of(events, uid, "slow").error
    assert error is not None
    assert error.startswith("enrollment 'slow' was not evaluated: its condition is refused: ")
    assert "nests comprehensions (all inside another) more than 2 deep" in error
    (undelivered,) = events.undelivered(pipeline="slow")
    assert undelivered.message_uid == uid


@pytest.mark.parametrize("face", FACES)
def test_a_stored_operator_chain_never_crashes_the_publisher(database_url: str, face: str) -> None:
    """20,000 terms crashed the process (SIGSEGV) at every publish to the bus."""
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        events.create_bus("orders")
        events.create_bus("audit")
        events.create_pipeline("slow", "bus:audit")
        store_condition(events, "chain", " + ".join(["1"] * 20_000) + " > 0")
    script = f"""
        import asyncio, sys
        import txqueue
        sys.path.insert(0, {str(ROOT / "tests" / "integration")!r})
        from test_events_cel_budget import publish
        uid = publish({database_url!r}, {face!r}, {{"id": "1", "source": "s", "type": "t"}})
        with txqueue.connect({database_url!r}) as db:
            print([a.error for a in txqueue.Events(db).attempts(uid)])
        """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, f"publisher died: rc {result.returncode} {result.stderr}"
    assert "enrollment 'chain' was not evaluated: its condition is refused: " in result.stdout
    assert "80,001 characters long" in result.stdout


@pytest.mark.parametrize("face", FACES)
def test_an_event_that_puts_a_condition_over_budget_is_a_recorded_failure(
    events: txqueue.Events, database_url: str, face: str
) -> None:
    events.create_enrollment(
        "pairs", bus="orders", pipeline="slow", cel_match='message.exists(a, ["x1", "x2"].exists(b, a == b))'
    )  # fmt: skip
    routed = publish(database_url, face, {**EVENT, "x1": "v"})
    assert pipelines_routed(events, routed) == ["fast", "slow"]

    crowded = {**EVENT, **{f"x{number}": "v" for number in range(20_000)}}
    started = time.monotonic()
    uid = publish(database_url, face, crowded)
    assert time.monotonic() - started < 5

    assert pipelines_routed(events, uid) == ["fast"]
    error = failure_of(events, uid, "slow").error
    assert error is not None
    assert error.startswith("enrollment 'pairs' was not evaluated: its estimated evaluation cost")
    assert "over the budget of 100,000 for an event with 20005 attributes" in error, error


@pytest.mark.parametrize("face", FACES)
def test_a_condition_past_the_bounds_is_refused_by_the_api_and_nothing_is_stored(
    events: txqueue.Events, database_url: str, face: str
) -> None:
    async def asyncio_face() -> None:
        adb = await txqueue.connect_async(database_url)
        try:
            async_events = txqueue.AsyncEvents(adb)
            with pytest.raises(InvalidArgument, match="nests comprehensions"):
                await async_events.create_enrollment(
                    "deep", bus="orders", pipeline="slow", cel_match=SEVEN_NESTED
                )
            with pytest.raises(InvalidArgument, match="nests comprehensions"):
                await async_events.update_enrollment("fast", cel_match=SEVEN_NESTED)
        finally:
            await adb.close()

    if face == "sync":
        with pytest.raises(InvalidArgument, match="nests comprehensions"):
            events.create_enrollment("deep", bus="orders", pipeline="slow", cel_match=SEVEN_NESTED)
        with pytest.raises(InvalidArgument, match="nests comprehensions"):
            events.update_enrollment("fast", cel_match=SEVEN_NESTED)
    else:
        asyncio.run(asyncio_face())
    assert [e.name for e in events.list_enrollments()] == ["fast"]
    assert events.get_enrollment("fast").cel_match == "true"


def test_the_cli_refuses_a_condition_past_the_bounds(
    events: txqueue.Events, database_url: str
) -> None:
    create = ["enrollments", "create", "deep", "--bus", "orders", "--pipeline", "slow"]
    result = CliRunner().invoke(
        main, [*create, "--cel-match", SEVEN_NESTED, "--database", database_url]
    )
    assert result.exit_code == 1, result.output
    assert "InvalidArgument: condition nests comprehensions" in result.output
    update = ["enrollments", "update", "fast", "--cel-match", SEVEN_NESTED]
    result = CliRunner().invoke(main, [*update, "--database", database_url])
    assert result.exit_code == 1, result.output
    # 30,000 terms crashed the command while it compiled the condition
    chain = " + ".join(["1"] * 30_000) + " > 0"
    crashed = subprocess.run(
        [sys.executable, "-m", "txqueue.cli.main", *create, "--cel-match", chain,
         "--database", database_url],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert crashed.returncode == 1, f"rc {crashed.returncode}: {crashed.stderr}"
    assert "condition is 120,001 characters long" in crashed.stdout + crashed.stderr
    assert [e.name for e in events.list_enrollments()] == ["fast"]


async def test_the_http_api_answers_400_to_a_condition_past_the_bounds(
    events: txqueue.Events,
) -> None:
    transport = httpx.ASGITransport(app=create_app(events.database, token=TOKEN))
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://dashboard", headers=bearer
    ) as http:
        enrollment = {"name": "deep", "bus": "orders", "pipeline": "slow"}
        made = await http.post(
            "/api/v1/enrollments", json={**enrollment, "cel_match": SEVEN_NESTED}
        )
        assert made.status_code == 400, made.text
        assert "nests comprehensions" in made.text
        changed = await http.patch("/api/v1/enrollments/fast", json={"cel_match": SEVEN_NESTED})
        assert changed.status_code == 400, changed.text
    assert [e.name for e in events.list_enrollments()] == ["fast"]
