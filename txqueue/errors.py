"""The one error tree of txqueue, named after Spanner's gRPC status codes.

    TxqueueError                      .code = the gRPC status name
    ├── InvalidArgument               bad name, key, type, duration, SQL or DDL
    ├── NotFound                      unknown queue/table, ack of a missing message
    ├── AlreadyExists                 duplicate key on send/insert, object exists
    ├── OutOfRange                    ASSERT_ROWS_MODIFIED count differs (statement-level)
    ├── FailedPrecondition            lease token no longer holds the lease, FK rules
    ├── Aborted                       serialization failure, deadlock, SQLite busy: retry
    ├── DeadlineExceeded              a statement or wait ran past its deadline
    ├── Unavailable                   the database cannot be reached
    └── CommitOutcomeUnknown          COMMIT was sent and its outcome cannot be determined

Drivers map engine errors to the most specific class at their boundary and keep the
original exception as ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "Aborted",
    "AlreadyExists",
    "CommitOutcomeUnknown",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "TxqueueError",
    "Unavailable",
]


class TxqueueError(Exception):
    """Base class of every error txqueue raises on purpose."""

    code: str = "UNKNOWN"


class InvalidArgument(TxqueueError):
    """The request is malformed: a name, key, type, duration, SQL text or DDL breaks a rule."""

    code = "INVALID_ARGUMENT"


class NotFound(TxqueueError):
    """The named queue, table or message does not exist."""

    code = "NOT_FOUND"


class AlreadyExists(TxqueueError):
    """A row or object with that key or name exists already."""

    code = "ALREADY_EXISTS"


class OutOfRange(TxqueueError):
    """ASSERT_ROWS_MODIFIED saw a different row count; only that statement failed."""

    code = "OUT_OF_RANGE"


class FailedPrecondition(TxqueueError):
    """The operation is refused in the current state, e.g. a lease token that lost its lease."""

    code = "FAILED_PRECONDITION"


class Aborted(TxqueueError):
    """The transaction was aborted by a conflict; running it again may succeed."""

    code = "ABORTED"


class DeadlineExceeded(TxqueueError):
    """The operation did not finish within its deadline."""

    code = "DEADLINE_EXCEEDED"


class Unavailable(TxqueueError):
    """The database could not be reached or dropped the connection."""

    code = "UNAVAILABLE"


class CommitOutcomeUnknown(TxqueueError):
    """COMMIT was sent but whether it took effect could not be determined; do not re-run blindly."""

    code = "UNKNOWN"
