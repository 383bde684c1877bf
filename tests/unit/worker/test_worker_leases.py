"""LeaseRenewer: batched renewals, newest token, lost leases; no database, no waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import pytest

from txqueue.errors import Unavailable
from txqueue.models import LeaseRenewal, Message
from txqueue.worker.leases import Lease, LeaseRenewer

NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)


def _message(token: str) -> Message:
    return Message("Q", (token,), b"", NOW, NOW, token, 1)


class FakeRenewals:
    """Renews by appending "+" to each token, unless told a token is gone or the call fails."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.gone: set[str] = set()
        self.expired: set[str] = set()
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def __call__(self, tokens: Sequence[str], extension: timedelta) -> list[LeaseRenewal]:
        self.calls.append(list(tokens))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise Unavailable("database down")
        return [
            LeaseRenewal(t, None if t in self.gone else t + "+", NOW)
            for t in tokens
            if t not in self.expired
        ]


def _due(*leases: Lease) -> None:
    for lease in leases:
        lease.renew_at = 0.0


async def test_due_leases_are_renewed_together_and_keep_the_newest_token() -> None:
    renewals = FakeRenewals()
    renewer = LeaseRenewer("Q", timedelta(seconds=10), renewals)
    a, b, c = (renewer.track(_message(t)) for t in "abc")
    _due(a, b)
    await renewer.renew_due()
    assert renewals.calls == [["a", "b"]]
    assert (a.token, b.token, c.token) == ("a+", "b+", "c")
    _due(a)
    await renewer.renew_due()
    assert renewals.calls[-1] == ["a+"]
    assert await renewer.settle(a) == "a++"
    assert renewer.held == 2


async def test_nothing_due_means_no_call() -> None:
    renewals = FakeRenewals()
    renewer = LeaseRenewer("Q", timedelta(seconds=10), renewals)
    renewer.track(_message("a"))
    await renewer.renew_due()
    assert renewals.calls == []


@pytest.mark.parametrize("how", ["gone", "expired"])
async def test_a_refused_renewal_loses_the_lease(how: str) -> None:
    renewals = FakeRenewals()
    getattr(renewals, how).add("a")
    lost: list[str] = []
    renewer = LeaseRenewer(
        "Q", timedelta(seconds=10), renewals, lost=lambda lease: lost.append(lease.token)
    )
    a, b = renewer.track(_message("a")), renewer.track(_message("b"))
    told: list[bool] = []
    a.on_lost(lambda: told.append(True))
    _due(a, b)
    await renewer.renew_due()
    assert a.lost and not b.lost and told == [True] and lost == ["a"]
    assert await renewer.settle(a) is None, "a lost lease is never acked"
    assert renewer.held == 1


async def test_failed_calls_keep_the_lease_until_it_runs_out() -> None:
    renewals = FakeRenewals()
    renewals.fail = True
    renewer = LeaseRenewer("Q", timedelta(seconds=10), renewals)
    a = renewer.track(_message("a"))
    _due(a)
    await renewer.renew_due()
    assert not a.lost, "one failed call is not a lost lease"
    a.expires_at = 0.0
    await renewer.renew_due()
    assert a.lost


async def test_settle_waits_for_a_renewal_in_flight() -> None:
    renewals = FakeRenewals()
    renewals.gate = asyncio.Event()
    renewer = LeaseRenewer("Q", timedelta(seconds=10), renewals)
    a = renewer.track(_message("a"))
    _due(a)
    renewing = asyncio.create_task(renewer.renew_due())
    while not renewals.calls:
        await asyncio.sleep(0)
    settling = asyncio.create_task(renewer.settle(a))
    await asyncio.sleep(0)
    assert not settling.done()
    renewals.gate.set()
    await renewing
    assert await settling == "a+", "the token the database now holds"


async def test_on_lost_after_the_fact_calls_at_once() -> None:
    lease = Lease(_message("a"), timedelta(seconds=10))
    lease.lose()
    told: list[bool] = []
    lease.on_lost(lambda: told.append(True))
    assert told == [True]


def test_tick_follows_the_lease() -> None:
    renew = FakeRenewals()
    assert LeaseRenewer("Q", timedelta(seconds=4), renew).tick == 1.0
    assert LeaseRenewer("Q", timedelta(seconds=1), renew).tick == 0.25
    assert LeaseRenewer("Q", timedelta(minutes=5), renew).tick == 1.0
