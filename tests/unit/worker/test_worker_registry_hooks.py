"""The registry's heartbeat hooks: a kind of registered process that leaves out ``listed`` or
``in_flight`` is refused when it is made, not at its first heartbeat."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

import txqueue
from txqueue.worker import registry


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[txqueue.AsyncDatabase]:
    database = await txqueue.connect_async(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        yield database
    finally:
        await database.close()


class _NoListing(registry._Heartbeat):
    def in_flight(self) -> int:
        return 0


class _NoCount(registry._Heartbeat):
    async def listed(self) -> list[str]:
        return []


@pytest.mark.parametrize(("kind", "missing"), [(_NoListing, "listed"), (_NoCount, "in_flight")])
async def test_a_kind_missing_a_hook_is_refused_when_made(
    database: txqueue.AsyncDatabase, kind: type[registry._Heartbeat], missing: str
) -> None:
    with pytest.raises(TypeError, match=missing):
        kind(database, 1, timedelta(seconds=5))


async def test_the_kinds_give_both_hooks(database: txqueue.AsyncDatabase) -> None:
    async def names() -> list[str]:
        return ["orders"]

    dispatcher = registry.DispatcherRegistration(database, 2, names, lambda: 3)
    assert (await dispatcher.listed(), dispatcher.in_flight()) == (["orders"], 3)
