"""Turning public mutation arguments into checked driver parameters (shared by both faces).

All checking happens here, before a driver is called, so bad input is refused with a clear
error and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from txqueue.core.durations import require_aware, to_duration
from txqueue.core.failures import Raised
from txqueue.core.leases import is_token, token_expiration_micros
from txqueue.core.schema import Table
from txqueue.core.values import check_count, check_key, check_payload, check_row
from txqueue.drivers.base import (
    AckParams,
    DeleteMessagesParams,
    DeleteParams,
    MakeReadyParams,
    SendParams,
    WriteKind,
    WriteParams,
)
from txqueue.errors import InvalidArgument
from txqueue.models import Message

__all__ = [
    "checked_exception",
    "checked_keys",
    "checked_tokens",
    "mark_last",
    "prepare_ack",
    "prepare_delete",
    "prepare_delete_messages",
    "prepare_make_ready",
    "prepare_send",
    "prepare_write",
    "receive_arguments",
]


def prepare_write(
    table: Table, kind: WriteKind, columns: Sequence[str], values: Sequence[Sequence[Any]]
) -> WriteParams:
    """Check a write mutation: known columns, every key column present, typed values."""
    if table.is_queue:
        raise InvalidArgument(
            f"{table.name} is a queue: use send to add messages and ack to remove them"
        )
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise InvalidArgument("columns must be a non-empty sequence of column names")
    names = tuple(table.column(c).name for c in columns)
    if len({n.lower() for n in names}) != len(names):
        raise InvalidArgument("columns must not repeat a column")
    missing = [k for k in table.primary_key if k.lower() not in {n.lower() for n in names}]
    if missing:
        raise InvalidArgument(
            f"columns must include the primary-key column(s) {', '.join(missing)}"
        )
    if kind in (WriteKind.INSERT, WriteKind.REPLACE):
        required = [c.name for c in table.columns if not c.nullable and c.name not in names]
        if required:
            raise InvalidArgument(
                f"columns must include the NOT NULL column(s) {', '.join(required)}"
            )
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidArgument("values must be a sequence of rows")
    rows = [check_row(table, names, row, f"values[{i}]") for i, row in enumerate(values)]
    return WriteParams(table, kind, names, rows)


def prepare_delete(table: Table, keys: Sequence[Any] | None) -> DeleteParams:
    """Check the keys of a delete mutation; None deletes every row."""
    if keys is None:
        return DeleteParams(table, None)
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
        raise InvalidArgument("keys must be a sequence of key tuples")
    return DeleteParams(table, [check_key(table, key, f"keys[{i}]") for i, key in enumerate(keys)])


def prepare_send(table: Table, key: Any, payload: Any, deliver_time: datetime | None) -> SendParams:
    """Check a send: the table is a queue, key and payload match its columns, time is aware."""
    _require_queue(table)
    return SendParams(
        table,
        check_key(table, key),
        check_payload(table, payload),
        None if deliver_time is None else require_aware(deliver_time, "deliver_time"),
    )


def prepare_ack(
    table: Table, key: Any, ignore_not_found: bool, lease_token: str | None, now: datetime | None
) -> AckParams:
    """Check an ack: the table is a queue, the key matches, the token is a string."""
    _require_queue(table)
    if lease_token is not None:
        if not isinstance(lease_token, str):
            raise InvalidArgument("lease_token must be a string")
        if not is_token(lease_token):
            lease_token = ""  # not one of ours: it holds no lease (and "" matches none)
    if not isinstance(ignore_not_found, bool):
        raise InvalidArgument("ignore_not_found must be a bool")
    return AckParams(table, check_key(table, key), lease_token, ignore_not_found, now)


def prepare_delete_messages(
    table: Table, keys: Any, force: object, now: datetime | None
) -> DeleteMessagesParams:
    """Check a deletion of chosen messages: a non-empty list of keys, ``force`` a bool."""
    return DeleteMessagesParams(table, _message_keys(table, keys), _force(force), now)


def prepare_make_ready(
    table: Table, keys: Any, deliver_time: object, force: object, now: datetime | None
) -> MakeReadyParams:
    """Check a make-ready: keys as ``prepare_delete_messages``, the time aware (or None)."""
    chosen = _message_keys(table, keys)
    when = None if deliver_time is None else require_aware(deliver_time, "deliver_time")
    return MakeReadyParams(table, chosen, when, _force(force), now)


def _message_keys(table: Table, keys: Any) -> list[tuple[Any, ...]]:
    """The distinct checked keys of ``keys`` (a non-empty list of key tuples), in order."""
    _require_queue(table)
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence) or not keys:
        raise InvalidArgument("keys must be a non-empty list of key tuples")
    checked = [check_key(table, key, f"keys[{i}]") for i, key in enumerate(keys)]
    return list(dict.fromkeys(checked))


def _force(force: object) -> bool:
    if not isinstance(force, bool):
        raise InvalidArgument(f"force must be a bool, got {type(force).__name__}")
    return force


def _require_queue(table: Table) -> None:
    if not table.is_queue:
        raise InvalidArgument(f"{table.name} is a table, not a queue")


def checked_exception(exception: BaseException | None) -> Raised | None:
    """What a failed attempt raised, for its failure history; None when not given."""
    if exception is None:
        return None
    if not isinstance(exception, BaseException):
        raise InvalidArgument(f"exception must be an exception, got {type(exception).__name__}")
    return Raised.of(exception)


def receive_arguments(max_batch_size: int, lease_duration: timedelta | str) -> timedelta:
    """Check a receive's batch size and lease (one rule for ``receive`` and ``receive_now``);
    returns the lease."""
    lease = to_duration(lease_duration, "lease_duration")
    check_count(max_batch_size, "max_batch_size")
    return lease


def mark_last(batch: list[Message]) -> list[Message]:
    return [*batch[:-1], replace(batch[-1], last_in_batch=True)]


def checked_keys(table: Table, keys: Sequence[Any] | None) -> list[tuple[Any, ...]] | None:
    if keys is None:
        return None
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
        raise InvalidArgument("keys must be a list of key tuples")
    return [check_key(table, key, f"keys[{i}]") for i, key in enumerate(keys)]


def checked_tokens(tokens: Sequence[str]) -> list[str]:
    """The well-formed tokens of ``tokens``: one that is not ours can hold no lease."""
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise InvalidArgument("tokens must be a list of lease tokens")
    for token in tokens:
        if not isinstance(token, str):
            raise InvalidArgument("tokens must be a list of lease tokens (strings)")
    return [token for token in tokens if token_expiration_micros(token) is not None]
