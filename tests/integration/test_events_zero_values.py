"""Zero and empty values given to an update are values, not "unset": a zero retry delay, an
empty destination or an empty pipeline name is refused, naming the field, and nothing
changes. From Python and from the CLI, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from click.testing import CliRunner
from events_receiver import Receiver

import txqueue
from txqueue.cli.main import main
from txqueue.errors import InvalidArgument

SECOND = timedelta(seconds=1)
DELAY_RANGE = r"must be between 1 s and 600 s, got 0 s"


@pytest.fixture
def events(database_url: str, receiver: Receiver) -> Iterator[txqueue.Events]:
    with txqueue.connect(database_url) as db:
        events = txqueue.Events(db)
        events.create_bus("orders")
        policy = txqueue.RetryPolicy(min_retry_delay=4 * SECOND, max_retry_delay=8 * SECOND)
        events.create_pipeline("p", receiver.url("/p"), retry=policy, allow_private=True)
        events.create_pipeline("q", receiver.url("/q"), allow_private=True)
        events.create_enrollment("e", bus="orders", pipeline="p", cel_match="true")
        yield events


def cli(database: str, *args: str, code: int) -> str:
    result = CliRunner().invoke(main, [*args, "--database", database])
    assert result.exit_code == code, result.output
    return result.output


def test_a_zero_retry_delay_is_refused_not_ignored(
    database_url: str, events: txqueue.Events
) -> None:
    before = events.get_pipeline("p")
    for field in ("min_retry_delay", "max_retry_delay"):
        with pytest.raises(InvalidArgument, match=f"{field} {DELAY_RANGE}"):
            events.update_pipeline("p", **{field: timedelta(0)})  # type: ignore[arg-type]
        option = "--" + field.replace("_", "-")
        out = cli(database_url, "pipelines", "update", "p", f"{option}=0", code=1)
        assert f"InvalidArgument: {option} must be between 1 s and 600 s, got 0 s" in out
        out = cli(database_url, "pipelines", "create", "r", "--destination", "bus:orders",
                  f"{option}=0", code=1)  # fmt: skip
        assert f"{option} must be between 1 s and 600 s" in out
    assert events.get_pipeline("p") == before


def test_an_empty_destination_or_pipeline_is_refused_not_ignored(
    database_url: str, events: txqueue.Events
) -> None:
    before = (events.get_pipeline("p"), events.get_enrollment("e"))
    with pytest.raises(InvalidArgument, match="destination must be a non-empty string"):
        events.update_pipeline("p", destination="")
    out = cli(database_url, "pipelines", "update", "p", "--destination", "", code=1)
    assert "InvalidArgument: destination must be a non-empty string" in out
    with pytest.raises(InvalidArgument, match="pipeline name '' is invalid"):
        events.update_enrollment("e", pipeline="")
    out = cli(database_url, "enrollments", "update", "e", "--pipeline", "", code=1)
    assert "InvalidArgument: pipeline name '' is invalid" in out
    assert (events.get_pipeline("p"), events.get_enrollment("e")) == before
    # A value given is applied, as before.
    assert events.update_enrollment("e", pipeline="q").pipeline == "q"
    changed = events.update_pipeline("p", min_retry_delay=SECOND, max_retry_delay=SECOND)
    assert (changed.retry.min_retry_delay, changed.retry.max_retry_delay) == (SECOND, SECOND)


async def test_the_asyncio_face_refuses_zero_too(database_url: str) -> None:
    adb = await txqueue.connect_async(database_url)
    try:
        events = txqueue.AsyncEvents(adb)
        await events.create_bus("orders")
        await events.create_pipeline("p", "bus:orders")
        with pytest.raises(InvalidArgument, match=f"min_retry_delay {DELAY_RANGE}"):
            await events.update_pipeline("p", min_retry_delay=timedelta(0))
        with pytest.raises(InvalidArgument, match="destination must be a non-empty string"):
            await events.update_pipeline("p", destination="")
        assert (await events.get_pipeline("p")).retry == txqueue.RetryPolicy()
    finally:
        await adb.close()
