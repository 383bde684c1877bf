"""Registering handlers on an App: validation, no global state."""

from __future__ import annotations

from datetime import timedelta

import pytest

import txqueue
from txqueue.errors import InvalidArgument


def test_nothing_is_registered_globally() -> None:
    first, second = txqueue.App(), txqueue.App()

    @first.handler("Jobs")
    def jobs(message: txqueue.Message) -> None: ...

    assert [s.queue for s in first.handlers] == ["Jobs"]
    assert second.handlers == []


def test_handler_options_are_recorded() -> None:
    app = txqueue.App("sqlite:///x.db")
    policy = txqueue.RetryPolicy(max_attempts=2)

    @app.handler("Orders", retry=policy, transactional=True, concurrency=3, lease_duration="30s")
    async def fulfil(message: txqueue.Message, txn: txqueue.AsyncTransaction) -> None: ...

    spec = app.handler_for("orders")
    assert spec.function is fulfil and spec.is_async and spec.transactional
    assert (spec.retry, spec.concurrency, spec.lease_duration) == (policy, 3, timedelta(seconds=30))
    assert spec.name.endswith("fulfil")


def test_default_policy_is_eventarcs() -> None:
    app = txqueue.App()
    app.handler("Q")(lambda message: None)
    assert app.handler_for("Q").retry == txqueue.RetryPolicy()
    assert app.handler_for("Q").retry.max_attempts == 5


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"retry": 5}, "RetryPolicy"),
        ({"concurrency": 0}, "concurrency"),
        ({"lease_duration": timedelta(milliseconds=10)}, "lease_duration"),
        ({"max_batch_size": 0}, "max_batch_size"),
        ({"transactional": "yes"}, "transactional"),
        ({"transactional": True, "resend_after": "1h"}, "resend_after"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], match: str) -> None:
    app = txqueue.App()
    with pytest.raises(InvalidArgument, match=match):
        app.handler("Q", **options)(lambda message, txn=None: None)  # type: ignore[arg-type]


def test_one_handler_per_queue() -> None:
    app = txqueue.App()
    app.handler("Jobs")(lambda message: None)
    with pytest.raises(InvalidArgument, match="already has a handler"):
        app.handler("JOBS")(lambda message: None)


def test_handler_shapes_are_checked() -> None:
    app = txqueue.App()
    with pytest.raises(InvalidArgument, match=r"\(message, txn\)"):
        app.handler("A", transactional=True)(lambda message: None)
    with pytest.raises(InvalidArgument, match=r"\(message\)"):
        app.handler("B")(lambda: None)
    with pytest.raises(InvalidArgument, match="callable"):
        app.handler("C")(42)  # type: ignore[type-var]


def test_periodic_registration() -> None:
    app = txqueue.App()

    @app.periodic("AggregationQueue", every=timedelta(hours=1))
    def aggregate(message: txqueue.Message) -> None: ...

    spec = app.handler_for("AggregationQueue")
    assert spec.schedule is not None
    assert (spec.schedule.name, spec.schedule.every) == ("aggregate", timedelta(hours=1))
    assert spec.concurrency == 1
    with pytest.raises(InvalidArgument, match="every"):
        app.periodic("Other", every=timedelta(milliseconds=100))


def test_unknown_queue_is_named() -> None:
    with pytest.raises(InvalidArgument, match="Nope"):
        txqueue.App().handler_for("Nope")


def test_worker_needs_a_database_and_handlers() -> None:
    from txqueue.worker import Worker

    with pytest.raises(InvalidArgument, match="no database"):
        Worker(txqueue.App())
    with pytest.raises(InvalidArgument, match="no handlers"):
        Worker(txqueue.App("sqlite:///x.db"))
    app = txqueue.App("sqlite:///x.db")
    app.handler("Q")(lambda message: None)
    with pytest.raises(InvalidArgument, match="concurrency"):
        Worker(app, concurrency=0)
