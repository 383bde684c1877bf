"""A Spanner commit whose outcome is unknown is resolved by its commit marker, never guessed.

At the RPC level against the client's own mock server (``tests/spannermock.py``): the
requests show the marker in the commit and the resolver's insert of the same id; a fault
injected at Commit, after it applied or before, gives the right outcome. On the emulator,
through a gRPC proxy that loses the Commit's reply (``tests/spannerproxy.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from conformance.support import Face
from spannermock import MARKER_READ, TARGET, MockServer, inserts, spanner_mock
from spannerproxy import CommitFaultProxy

from txqueue.core.schema import Column, ColumnType, Table
from txqueue.drivers.base import WriteKind, WriteParams
from txqueue.drivers.spanner import outcome
from txqueue.drivers.spanner.engine import SpannerDatabase, query
from txqueue.drivers.spanner.transaction import Work
from txqueue.errors import Aborted, CommitOutcomeUnknown

__all__ = ["spanner_mock"]

DEADLINE = grpc.StatusCode.DEADLINE_EXCEEDED
USERS = Table(
    "Users",
    (Column("UserId", ColumnType.INT64, nullable=False), Column("UserName", ColumnType.STRING)),
    ("UserId",),
)


@pytest.fixture
def database(spanner_mock: MockServer) -> Iterator[SpannerDatabase]:
    database = SpannerDatabase(TARGET)
    try:
        yield database
    finally:
        database.close()


def _write_and_commit(database: SpannerDatabase) -> None:
    """One transaction of the driver writing one row (a mutation, no read), committed."""
    work = Work(database, "DeliverTime")
    work.write(WriteParams(USERS, WriteKind.INSERT_OR_UPDATE, ("UserId", "UserName"), [(1, "a")]))
    work.commit()


def _markers(request: Any) -> list[tuple[list[str], list[Any]]]:
    return inserts(request.mutations, "txqueue_commits")


def test_a_commit_carries_one_marker_mutation_and_no_write_carries_none(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    _write_and_commit(database)
    database.read_write(lambda transaction: None)  # an empty receive: reads only
    [writes, empty] = spanner_mock.requests("CommitRequest")
    assert len(writes.mutations) == 2  # the row, then the marker
    [(columns, [marker, _])] = _markers(writes)
    assert columns == ["id", "committed_at"] and len(marker) == 36
    assert list(empty.mutations) == []
    assert not spanner_mock.requests("ExecuteSqlRequest")  # the marker costs no read


def test_a_commit_whose_reply_is_lost_after_it_applied_returns(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    spanner_mock.fail_commits((DEADLINE, True))
    _write_and_commit(database)  # resolved: committed, no error
    [original, resolver] = spanner_mock.requests("CommitRequest")
    [(_, [marker, _])] = _markers(original)
    # the resolver inserts the same marker in a new transaction: ALREADY_EXISTS = committed
    assert _markers(resolver) == [
        (["id", "committed_at", "resolved"], [marker, "spanner.commit_timestamp()", True])
    ]
    assert resolver.transaction_id != original.transaction_id
    assert spanner_mock.servicer.markers == {marker: False}  # the original's, unresolved


def test_a_commit_that_did_not_apply_is_aborted_and_fenced(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    spanner_mock.fail_commits((DEADLINE, False))
    with pytest.raises(Aborted, match="did not take effect"):
        _write_and_commit(database)
    [original, resolver] = spanner_mock.requests("CommitRequest")
    [(_, [marker, _])] = _markers(original)
    assert [values[0] for _, values in _markers(resolver)] == [marker]
    # the resolver's row stays: a late commit of the original would now fail on it
    assert spanner_mock.servicer.markers == {marker: True}


@pytest.mark.parametrize(
    ("original_applied", "committed"), [(True, True), (False, False)], ids=["applied", "not"]
)
def test_the_resolver_reads_the_marker_after_its_own_commit_was_lost(
    spanner_mock: MockServer,
    database: SpannerDatabase,
    original_applied: bool,
    committed: bool,
) -> None:
    # the resolver's first commit ends unknown too: applied when the original was not
    # (its fence is there), not applied when the original was (the marker is the original's)
    spanner_mock.fail_commits((DEADLINE, original_applied), (DEADLINE, not original_applied))
    if committed:
        _write_and_commit(database)
    else:
        with pytest.raises(Aborted):
            _write_and_commit(database)
    commits = [c for c in spanner_mock.requests("CommitRequest") if _markers(c)]
    assert len(commits) == 2  # the original and one resolver insert; then a read decides
    [read] = [r for r in spanner_mock.servicer.requests if getattr(r, "sql", "") == MARKER_READ]
    [(_, [marker, _])] = _markers(commits[0])
    assert read.params["id"] == marker


def test_an_unreachable_database_leaves_the_outcome_unknown(
    spanner_mock: MockServer, database: SpannerDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outcome, "RESOLVE_TIMEOUT", 0.3)
    spanner_mock.fail_commits((DEADLINE, True))
    spanner_mock.servicer.down_after_commit = True
    with pytest.raises(CommitOutcomeUnknown, match="could not be determined"):
        _write_and_commit(database)
    assert len(spanner_mock.requests("CommitRequest")) == 1


def test_txqueue_own_transaction_runs_again_only_when_it_did_not_commit(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    runs: list[int] = []

    def lease(transaction: Any) -> int:  # as a receive does: mutations, then the commit
        runs.append(1)
        transaction.insert_or_update("Users", columns=("UserId",), values=[(len(runs),)])
        return len(runs)

    spanner_mock.fail_commits((DEADLINE, True))
    assert database.read_write(lease) == 1  # committed: its result, no second run
    spanner_mock.fail_commits((DEADLINE, False))
    assert database.read_write(lease) == 3  # not committed: run again, with a new marker
    markers = [_markers(c) for c in spanner_mock.requests("CommitRequest")]
    originals = [m[0][1][0] for m in markers if m and len(m[0][0]) == 2]
    assert len(originals) == 3 and len(set(originals)) == 3


# ---- on the emulator, through a proxy that loses the Commit ---------------------------------


@pytest.fixture
def proxy(spanner_emulator: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[CommitFaultProxy]:
    """A fault proxy in front of the emulator; the client talks to it."""
    running = CommitFaultProxy(spanner_emulator.host).start()
    monkeypatch.setenv("SPANNER_EMULATOR_HOST", running.host)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def proxied(proxy: CommitFaultProxy, face: Face, spanner_url: str) -> Iterator[Any]:
    database = face.connect(spanner_url)
    try:
        database.update_ddl(
            [
                "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX))"
                " PRIMARY KEY (UserId)",
                "CREATE QUEUE Tasks (Id STRING(36) NOT NULL, Payload STRING(MAX) NOT NULL)"
                " PRIMARY KEY (Id)",
            ]
        )
        yield database
    finally:
        database.close()


def _user_and_task(batch: Any, user: int) -> None:
    batch.insert("Users", columns=("UserId", "UserName"), values=[(user, "u")])
    batch.send(queue="Tasks", key=(f"task-{user}",), payload="p")


def _stored(db: Any) -> tuple[list[Any], list[Any]]:
    with db.snapshot() as snapshot:
        users = list(snapshot.execute_sql("SELECT UserId FROM Users ORDER BY UserId"))
        tasks = list(snapshot.execute_sql("SELECT Id FROM Tasks ORDER BY Id"))
    return [tuple(r) for r in users], [tuple(r) for r in tasks]


@pytest.mark.parametrize(
    ("mode", "code"),
    [("after", DEADLINE), ("after", grpc.StatusCode.UNAVAILABLE)],
    ids=["deadline", "unavailable"],
)
def test_a_commit_lost_after_it_was_sent_is_resolved_as_committed(
    proxied: Any, proxy: CommitFaultProxy, mode: str, code: grpc.StatusCode
) -> None:
    proxy.arm(mode, code)
    with proxied.batch() as batch:  # returns: committed, once
        _user_and_task(batch, 1)
    assert proxy.drops == [(mode, "/google.spanner.v1.Spanner/Commit")]
    assert _stored(proxied) == ([(1,)], [("task-1",)])


def test_a_commit_lost_before_it_arrived_is_proven_aborted_and_runs_again(
    proxied: Any, proxy: CommitFaultProxy
) -> None:
    runs: list[int] = []

    def work(transaction: Any) -> None:
        runs.append(1)
        _user_and_task(transaction, 1)

    proxy.arm("before", DEADLINE)
    proxied.run_in_transaction(work)  # Aborted (resolved: not committed), so run again
    assert len(runs) == 2 and proxy.drops == [("before", "/google.spanner.v1.Spanner/Commit")]
    assert _stored(proxied) == ([(1,)], [("task-1",)])


def test_spanner_forgets_markers_a_day_old(face: Face, spanner_url: str) -> None:
    face.connect(spanner_url).close()  # makes the catalog
    database = SpannerDatabase(spanner_url.removeprefix("spanner://"))
    try:
        _, rows = database.read(
            query,
            "SELECT row_deletion_policy_expression FROM INFORMATION_SCHEMA.TABLES"
            " WHERE table_schema = '' AND table_name = 'txqueue_commits'",
        )
    finally:
        database.close()
    assert rows == [("OLDER_THAN(committed_at, INTERVAL 1 DAY)",)]
