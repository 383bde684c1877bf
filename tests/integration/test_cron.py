"""Cron schedules (``@app.periodic(cron=..., timezone=...)``) on both engines, with a pinned
clock: local times across both daylight-saving changes, one run per slot through a restart
and a second worker, and one late run after downtime."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

import txqueue
from txqueue.errors import InvalidArgument
from txqueue.testing import FakeClock, drain
from txqueue.worker.scenarios import slot_of

BERLIN = ZoneInfo("Europe/Berlin")


def _app(url: str, clock: FakeClock, runs: list[datetime]) -> txqueue.App:
    """A worker's app: one nightly run at 02:30 Berlin time (each call is a new process)."""
    app = txqueue.App(url, clock=clock)

    @app.periodic("Nightly", cron="30 2 * * *", timezone="Europe/Berlin")
    def nightly(message: txqueue.Message) -> None:
        slot = slot_of(table, message.key)
        assert slot is not None
        runs.append(slot.astimezone(BERLIN))

    with txqueue.connect(url, clock=clock) as db:
        table = db.queue("Nightly")
    return app


def _pending(url: str, clock: FakeClock) -> list[datetime]:
    with txqueue.connect(url, clock=clock) as db:
        return [m.deliver_time for m in db.list_messages("Nightly")]


def _run_days(url: str, clock: FakeClock, runs: list[datetime], days: int) -> None:
    """Jump to each pending slot and let a freshly started worker run it."""
    for _ in range(days):
        [due] = _pending(url, clock)  # exactly one chain
        clock.set(due)
        drain(_app(url, clock, runs), "Nightly", advance_clock=False)


@pytest.fixture
def url(database_url: str) -> str:
    with txqueue.connect(database_url) as db:
        db.update_ddl(
            "CREATE QUEUE Nightly (Name STRING(MAX) NOT NULL, Slot STRING(MAX) NOT NULL,"
            " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Name, Slot)"
            if db.dialect == "googlesql"
            else "CREATE QUEUE nightly (name varchar NOT NULL, slot varchar NOT NULL,"
            " payload bytea NOT NULL, PRIMARY KEY (name, slot))"
        )
    return database_url


def test_a_cron_schedule_keeps_local_time_across_spring_forward(url: str) -> None:
    clock = FakeClock(datetime(2026, 3, 27, 12, tzinfo=timezone.utc))
    runs: list[datetime] = []
    drain(_app(url, clock, runs), "Nightly", advance_clock=False)  # a worker starts: seeds
    _run_days(url, clock, runs, 4)
    assert [r.isoformat() for r in runs] == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",  # 02:30 does not exist that night: the end of the gap
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_a_cron_schedule_runs_once_in_the_repeated_autumn_hour(url: str) -> None:
    clock = FakeClock(datetime(2026, 10, 23, 12, tzinfo=timezone.utc))
    runs: list[datetime] = []
    drain(_app(url, clock, runs), "Nightly", advance_clock=False)
    _run_days(url, clock, runs, 4)
    assert [r.isoformat() for r in runs] == [
        "2026-10-24T02:30:00+02:00",
        "2026-10-25T02:30:00+02:00",  # 02:30 happens twice that night: the first one only
        "2026-10-26T02:30:00+01:00",
        "2026-10-27T02:30:00+01:00",
    ]


def test_restarts_and_a_second_worker_keep_one_run_per_slot(url: str) -> None:
    clock = FakeClock(datetime(2026, 6, 1, 12, tzinfo=timezone.utc))
    runs: list[datetime] = []
    for _ in range(3):  # three workers start (or one restarts three times): one chain
        drain(_app(url, clock, runs), "Nightly", advance_clock=False)
    assert len(_pending(url, clock)) == 1
    [due] = _pending(url, clock)
    clock.set(due)
    drain(_app(url, clock, runs), "Nightly", advance_clock=False)
    drain(_app(url, clock, runs), "Nightly", advance_clock=False)  # the second worker: nothing
    assert [r.isoformat() for r in runs] == ["2026-06-02T02:30:00+02:00"]


def test_after_downtime_the_missed_run_happens_once_then_the_next_future_slot(
    url: str,
) -> None:
    clock = FakeClock(datetime(2026, 6, 1, 12, tzinfo=timezone.utc))
    runs: list[datetime] = []
    drain(_app(url, clock, runs), "Nightly", advance_clock=False)
    clock.set(datetime(2026, 6, 5, 9, tzinfo=timezone.utc))  # down for four nights
    drain(_app(url, clock, runs), "Nightly", advance_clock=False)
    assert [r.isoformat() for r in runs] == ["2026-06-02T02:30:00+02:00"]  # once, late
    assert [d.astimezone(BERLIN).isoformat() for d in _pending(url, clock)] == [
        "2026-06-06T02:30:00+02:00"  # the slots in between are skipped
    ]


def test_cron_arguments_are_checked() -> None:
    app = txqueue.App()
    for options, named in [
        ({"cron": "61 * * * *"}, "cron '61 \\* \\* \\* \\*' is not a valid cron expression"),
        ({"cron": "* * * *"}, "Wrong number of fields"),
        ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"}, "not a known IANA zone"),
        ({"every": "1h", "timezone": "UTC"}, "timezone applies to cron= schedules only"),
        ({"every": "1h", "cron": "0 * * * *"}, "exactly one of every= and cron="),
        ({}, "exactly one of every= and cron="),
    ]:
        with pytest.raises(InvalidArgument, match=named):
            app.periodic("Nightly", **options)  # type: ignore[arg-type]
