"""A message's failure history: what each failed attempt raised, bounded, as stored JSON.

A failure is recorded only when an attempt fails (a release with an error, a dead-letter
move), so messages that never fail cost nothing. The history lives in the queue row's hidden
``_txq_last_error`` column and moves with the message into its dead letter's ``last_error``
column, as one JSON object: the last error text (``DeadLetter.last_error``, unchanged) and the
newest ``MAX_FAILURES`` attempts. Each traceback keeps its end (the innermost frames and the
exception) within ``MAX_TRACEBACK`` characters, and the whole record stays within
``MAX_HISTORY``: older tracebacks go first, then older attempts. A value written before
histories existed (plain text) reads as a one-entry history.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from txqueue.models import Failure

__all__ = [
    "MAX_FAILURES",
    "MAX_HISTORY",
    "MAX_MESSAGE",
    "MAX_TRACEBACK",
    "Raised",
    "cap_traceback",
    "read_history",
    "record_failure",
]

#: How many failed attempts a history keeps (the newest).
MAX_FAILURES = 10
#: The longest traceback kept, in characters: its end (innermost frames) is kept.
MAX_TRACEBACK = 8 * 1024
#: The longest error message kept, in characters: its start is kept.
MAX_MESSAGE = 2 * 1024
#: The longest stored history, in characters of JSON.
MAX_HISTORY = 64 * 1024

_CUT_FRAMES = "[… {count} characters of outer frames cut …]\n"
_CUT_MESSAGE = " […{count} characters cut]"
_LONG_AGO = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class Raised:
    """What one failed attempt raised, before the driver stamps its attempt number and time."""

    error_type: str
    message: str
    traceback: str | None = None

    @classmethod
    def of(cls, error: BaseException) -> Raised:
        """The qualified type, message and capped traceback of ``error``."""
        kind = type(error)
        module = kind.__module__
        name = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
        try:
            message = str(error)
        except Exception:  # a broken __str__ must not lose the failure
            message = repr(error)
        text = None
        if error.__traceback__ is not None:
            text = cap_traceback("".join(traceback.format_exception(error)))
        return cls(name, _cap_message(message), text)


def cap_traceback(text: str, limit: int = MAX_TRACEBACK) -> str:
    """``text`` within ``limit`` characters, keeping its end, with a marker when cut."""
    if len(text) <= limit:
        return text
    kept = text[len(text) - limit :]
    return _CUT_FRAMES.format(count=len(text) - limit) + kept


def _cap_message(text: str) -> str:
    if len(text) <= MAX_MESSAGE:
        return text
    return text[:MAX_MESSAGE] + _CUT_MESSAGE.format(count=len(text) - MAX_MESSAGE)


def record_failure(
    stored: str | None, last_error: str, raised: Raised | None, attempt: int, failed_at: datetime
) -> str:
    """The stored history ``stored`` with one more failed attempt, as JSON to store.

    ``raised`` None records ``last_error`` alone (a release or dead letter given only a text).
    Plain text stored before histories existed becomes the entry of the attempt before
    (its own time is not known: it gets this one's).
    """
    _, earlier = read_history(stored, max(attempt - 1, 1), failed_at)
    if raised is None:
        raised = Raised("", _cap_message(last_error))
    entry = Failure(attempt, failed_at, raised.error_type, raised.message, raised.traceback)
    entries = [_entry(f) for f in (*earlier, entry)[-MAX_FAILURES:]]
    record = {"last_error": last_error, "failures": entries}
    text = _dump(record)
    for item in entries[:-1]:  # oldest first: drop tracebacks until it fits
        if len(text) <= MAX_HISTORY:
            return text
        if item["traceback"] is not None:
            item["traceback"] = None
            text = _dump(record)
    while len(text) > MAX_HISTORY and len(entries) > 1:  # then whole attempts
        del entries[0]
        text = _dump(record)
    return text


def read_history(
    stored: str | None, attempt: int, failed_at: datetime | None
) -> tuple[str | None, tuple[Failure, ...]]:
    """The last error text and the failures of a stored history, oldest first.

    Plain text stored before histories existed reads as one failure of ``attempt`` at
    ``failed_at`` (the row's delivery count or attempts, and its last failure time).
    """
    if stored is None:
        return None, ()
    record = _load(stored)
    if record is None:
        moment = failed_at or _LONG_AGO
        return stored, (Failure(attempt, moment, "", stored, None),)
    failures = []
    for item in record["failures"]:
        try:
            failures.append(
                Failure(
                    int(item["attempt"]),
                    datetime.fromisoformat(item["failed_at"]),
                    str(item["error_type"]),
                    str(item["message"]),
                    None if item.get("traceback") is None else str(item["traceback"]),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue  # an entry edited by hand: the rest still reads
    return str(record["last_error"]), tuple(failures)


def _load(stored: str) -> dict[str, Any] | None:
    if not stored.startswith("{"):
        return None
    try:
        record = json.loads(stored)
    except ValueError:
        return None
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("failures"), list)
        or "last_error" not in record
    ):
        return None
    record["failures"] = [item for item in record["failures"] if isinstance(item, dict)]
    return record


def _entry(failure: Failure) -> dict[str, Any]:
    return {
        "attempt": failure.attempt,
        "failed_at": failure.failed_at.astimezone(timezone.utc).isoformat(),
        "error_type": failure.error_type,
        "message": failure.message,
        "traceback": failure.traceback,
    }


def _dump(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
