"""A Spanner commit whose outcome is unknown (DEADLINE_EXCEEDED, a lost connection), resolved.

Every read-write transaction txqueue commits that writes carries a **commit marker**: one
insert mutation of a fresh id into ``txqueue_commits`` (with the commit timestamp), written
in the same transaction, so the marker exists exactly when the transaction committed. It
costs one mutation and no read.

When the commit ends in ``DeadlineExceeded`` or ``Unavailable`` (the client itself resends a
Commit that met UNAVAILABLE for up to an hour; what it gives up on reaches txqueue), the
resolver inserts the same id in a new transaction of its own:

- ``AlreadyExists``: the marker is there, the transaction committed: return normally;
- the insert commits: the transaction had not committed, and now never can (its own insert
  of the marker would fail at its commit, were that commit still under way): ``Aborted``,
  which the caller may retry safely (``run_in_transaction`` re-runs it). The resolver's row
  stays, marked ``resolved``, as that fence; deleting it would let a late commit through.

When the resolver's own commit ends unknown, its next attempt reads the row first (in its
read-write transaction, which locks it): a ``resolved`` row is its own fence (not committed),
any other row the transaction's marker (committed). ``CommitOutcomeUnknown`` only when the
database cannot be reached within ``RESOLVE_TIMEOUT``. Spanner deletes markers a day old
itself (the table's row deletion policy): no commit is still under way by then.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any, Protocol

from txqueue.drivers.spanner.codec import map_errors
from txqueue.errors import (
    Aborted,
    AlreadyExists,
    CommitOutcomeUnknown,
    DeadlineExceeded,
    TxqueueError,
    Unavailable,
)

__all__ = ["COMMITS", "RESOLVE_TIMEOUT", "commit", "mark", "note_writes", "resolve", "writes"]

#: The table of commit markers (created with the catalog, ``statements.CATALOG``).
COMMITS = "txqueue_commits"
#: How long the resolver keeps trying to reach the database before CommitOutcomeUnknown.
RESOLVE_TIMEOUT = 30.0


class Database(Protocol):
    """What the resolver needs of ``engine.SpannerDatabase`` (no import: it imports us)."""

    def read_write(self, function: Any, *args: Any, marked: bool = True) -> Any: ...


def mark(transaction: Any) -> str:
    """Add this transaction's commit marker (one insert mutation); its id."""
    from google.cloud.spanner_v1 import COMMIT_TIMESTAMP

    marker = str(uuid.uuid4())
    with map_errors():
        transaction.insert(
            COMMITS, columns=("id", "committed_at"), values=[(marker, COMMIT_TIMESTAMP)]
        )
    return marker


def note_writes(transaction: Any) -> None:
    """Say that ``transaction`` writes without mutations (DML, or a native queue's RECEIVE_ /
    RENEWLEASE_, which take leases): its commit then carries a marker too."""
    transaction.txqueue_writes = True


def writes(transaction: Any, dml: bool = False) -> bool:
    """Whether committing ``transaction`` would change anything: mutations, DML it ran, or
    writes noted by ``note_writes``."""
    return (
        dml
        or bool(getattr(transaction, "_mutations", None))
        or bool(getattr(transaction, "txqueue_writes", False))
    )


def commit(database: Database, transaction: Any, dml: bool = False) -> None:
    """Commit ``transaction`` (begun, not yet committed) with a marker when it writes; an
    unknown outcome is resolved: returns if it committed, ``Aborted`` if it did not,
    ``CommitOutcomeUnknown`` only when the database cannot be asked."""
    marker = mark(transaction) if writes(transaction, dml) else None
    try:
        with map_errors():
            transaction.commit()
    except (DeadlineExceeded, Unavailable) as error:
        if marker is None:
            return  # it wrote nothing: committed or not, nothing changed
        resolve(database, marker, error)


def resolve(database: Database, marker: str, error: TxqueueError) -> None:
    """Find out whether the commit that carried ``marker`` happened (see the module's doc)."""
    started = time.monotonic()
    blind = True  # until a resolver commit of ours has itself ended unknown
    attempt = 0
    while True:
        attempt += 1
        try:
            committed = database.read_write(_fence, marker, blind, marked=False)
        except AlreadyExists:
            committed = True
        except (DeadlineExceeded, Unavailable) as failure:
            blind = False  # our fence may have committed: read the row before writing again
            if time.monotonic() - started >= RESOLVE_TIMEOUT:
                raise CommitOutcomeUnknown(
                    f"the commit ended with {type(error).__name__} ({error}) and its outcome"
                    f" could not be determined (the database did not answer: {failure});"
                    " txqueue does not guess"
                ) from error
            time.sleep(min(0.05 * 2**attempt, 2.0) * random.uniform(0.5, 1.5))
            continue
        if committed:
            return
        raise Aborted(
            f"the commit ended with {type(error).__name__} ({error}) and did not take effect"
            f" (its marker {marker} was not written; it never will be): run the transaction again"
        ) from error


def _fence(transaction: Any, marker: str, blind: bool) -> bool:
    """Insert the fence for ``marker`` (AlreadyExists at commit: it committed); after an
    unknown outcome of our own, read the row first. True when the transaction committed."""
    if not blind:
        from google.cloud.spanner_v1 import param_types

        from txqueue.drivers.spanner.spelling import bind, spelling_of

        sql, values, types = bind(
            spelling_of(transaction),
            f"SELECT resolved FROM {COMMITS} WHERE id = @id",
            {"id": marker},
            {"id": param_types.STRING},
        )
        with map_errors():
            rows = list(transaction.execute_sql(sql, params=values, param_types=types))
        if rows:
            return rows[0][0] is not True
    from google.cloud.spanner_v1 import COMMIT_TIMESTAMP

    with map_errors():
        transaction.insert(
            COMMITS,
            columns=("id", "committed_at", "resolved"),
            values=[(marker, COMMIT_TIMESTAMP, True)],
        )
    return False
