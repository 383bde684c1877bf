"""Acting on chosen messages on Spanner: delete (cancel) them, or set when they are ready.

Each call is one read-write transaction: a query reads the messages (and locks what it
read), then mutations change them, so a receive leasing one of them at the same time
conflicts with it instead of crossing it.
"""

from __future__ import annotations

from typing import Any

from google.cloud.spanner_v1 import KeySet, param_types

from txqueue.core.codec import dump_key
from txqueue.drivers.base import (
    DeleteMessagesParams,
    MakeReadyParams,
    messages_leased,
    messages_missing,
)
from txqueue.drivers.spanner.codec import encode_key, key_params, map_errors, utc
from txqueue.drivers.spanner.engine import query
from txqueue.drivers.spanner.spelling import spelling_of
from txqueue.drivers.spanner.statements import (
    LEASE_EXPIRATION,
    LEASE_TOKEN,
    READY_AT,
    messages_by_key,
)

__all__ = ["delete_messages", "make_ready"]

#: Key values one query matches at most: Spanner takes up to 950 parameters and 1000
#: functions (each ``=``, ``AND`` and ``OR``) a statement.
KEY_PARAMETERS = 400


def delete_messages(transaction: Any, params: DeleteMessagesParams, deliver: str) -> int:
    """Delete every message of ``params.keys``, or none (the caller commits)."""
    _check(transaction, params, deliver)
    with map_errors():
        transaction.delete(
            params.queue.name, KeySet(keys=[encode_key(params.queue, k) for k in params.keys])
        )
    return len(params.keys)


def make_ready(transaction: Any, params: MakeReadyParams, deliver: str) -> int:
    """Set the deliver time of every message of ``params.keys``, or of none."""
    table = params.queue
    now = _check(transaction, params, deliver)
    when = utc(params.deliver_time) if params.deliver_time is not None else now
    columns = (*table.primary_key, deliver, READY_AT, LEASE_TOKEN, LEASE_EXPIRATION)
    values = [[*encode_key(table, key), when, None, None, None] for key in params.keys]
    with map_errors():
        transaction.update(table.name, columns=columns, values=values)
    return len(values)


def _check(transaction: Any, params: DeleteMessagesParams | MakeReadyParams, deliver: str) -> Any:
    """Refuse the whole call when a key has no message, or a message is leased (no force);
    returns the time the check used."""
    table = params.queue
    width = len(table.primary_key)
    expirations: dict[str, Any] = {}
    now = params.now
    step = max(1, KEY_PARAMETERS // width)
    for start in range(0, len(params.keys), step):  # one transaction: all are read-locked
        chosen = params.keys[start : start + step]
        values: dict[str, Any] = {"now": params.now}
        types: dict[str, Any] = {"now": param_types.TIMESTAMP}
        for n, key in enumerate(chosen):
            one, kinds = key_params(table, key)
            values.update({f"{name}_{n}": v for name, v in one.items()})
            types.update({f"{name}_{n}": t for name, t in kinds.items()})
        sql = messages_by_key(table, deliver, len(chosen), spelling_of(transaction))
        _, rows = query(transaction, sql, values, types)
        expirations.update({dump_key(table, row[:width]): row[width] for row in rows})
        if rows and now is None:
            now = rows[0][width + 1]
    missing = [k for k in params.keys if dump_key(table, k) not in expirations]
    if missing:
        raise messages_missing(table, missing)
    leased = [
        k
        for k in params.keys
        if (expiration := expirations[dump_key(table, k)]) is not None and expiration > now
    ]
    if leased and not params.force:
        raise messages_leased(table, leased)
    return now
