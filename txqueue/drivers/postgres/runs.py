"""The statements that apply runs of buffered sends and acks on PostgreSQL, and their
arguments: pure functions, shared by both faces of the transaction."""

from __future__ import annotations

from typing import Any

from txqueue.core.schema import ColumnType, Table
from txqueue.drivers.base import AckParams, SendParams
from txqueue.drivers.postgres.codec import (
    checked_token_parts,
    encode,
    stored_token_array,
    tid_array,
)
from txqueue.drivers.postgres.statements import queue_statements

__all__ = ["commit_statement", "encoded_key", "run_statement"]


def encoded_key(table: Table, key: tuple[Any, ...]) -> list[Any]:
    """A checked key as psycopg sends it: as it is (key columns are never JSON; DDL refuses)."""
    return list(key)


def run_statement(items: list[Any], deliver: str, refusing: bool) -> tuple[str, list[Any]]:
    """The statement of a run and its array arguments; ``refusing``: the form that fails
    inside the server when an item cannot apply (for the commit's pipeline; see
    ``commit_statement`` for its trailing arguments)."""
    statements = queue_statements(items[0].queue, deliver)
    if refusing and len(items) == 1:
        return one_statement(items[0], statements)
    if isinstance(items[0], SendParams):
        deliver_times = [item.deliver_time for item in items]
        if deliver_times.count(None) == len(items):  # each is delivered at the commit's now
            sql = statements.send_now_refusing if refusing else statements.send_many_now
            return sql, send_arrays(items)
        sql = statements.send_refusing if refusing else statements.send_many
        return sql, [*send_arrays(items), deliver_times]
    keys = key_arrays(items[0].queue, [item.key for item in items])
    tokens = [item.lease_token for item in items]
    now = items[0].now
    if None in tokens:  # an ack without a token: its row is found by key
        stored, locations = token_arrays(tokens)
        sql = statements.ack_refusing if refusing else statements.ack_many
        return sql, [*keys, stored, locations, keys[0], now]
    # Tokens were checked by ``prepare_ack`` (one not of ours became "", which matches none).
    sql = statements.ack_leased_refusing if refusing else statements.ack_leased
    return sql, [*keys, stored_token_array(tokens), tid_array(tokens), now]


def commit_statement(items: list[Any], deliver: str, place: int) -> tuple[str, list[Any]]:
    """A run's statement for the commit's pipeline, with all its arguments. A run of acks
    fails through ``txqueue_refuse`` when it deleted fewer rows than it holds (its last two
    arguments: that count and the run's ``place``, which the error names); a run of sends is
    a plain INSERT, which a taken key fails with unique_violation."""
    sql, arguments = run_statement(items, deliver, refusing=True)
    if isinstance(items[0], SendParams):
        return sql, arguments
    return sql, [*arguments, len(items), place]


def one_statement(item: SendParams | AckParams, statements: Any) -> tuple[str, list[Any]]:
    """The refusing statement of a run of one item, with plain parameters."""
    if isinstance(item, SendParams):
        return statements.send_one_refusing, send_row(item)
    key = encoded_key(item.queue, item.key)
    if item.lease_token is None:
        return statements.ack_one_refusing, key
    stored, location = checked_token_parts(item.lease_token)
    return statements.ack_one_leased_refusing, [*key, stored, location, item.now]


def send_arrays(items: list[Any]) -> list[Any]:
    """Key columns and payloads of a run of sends, as arrays."""
    table = items[0].queue
    arrays = key_arrays(table, [item.key for item in items])
    column = table.payload_column
    if column.type is ColumnType.JSON:
        arrays.append([encode(column, item.payload) for item in items])
    else:
        arrays.append([item.payload for item in items])
    return arrays


def token_arrays(tokens: list[str | None]) -> tuple[list[str | None], list[str | None]]:
    """Stored tokens and row locations (``(page,item)`` text) of acks, some without one."""
    stored: list[str | None] = []
    locations: list[str | None] = []
    for token in tokens:
        part, location = (None, None) if token is None else checked_token_parts(token)
        stored.append(part)
        locations.append(location)
    return stored, locations


def key_arrays(table: Table, keys: list[tuple[Any, ...]]) -> list[list[Any]]:
    """One list per key column (see ``encoded_key``: values go as they are)."""
    if not keys:
        return [[] for _ in table.primary_key]
    return [list(values) for values in zip(*keys)]


def send_row(item: SendParams) -> list[Any]:
    table = item.queue
    return [
        *encoded_key(table, item.key),
        encode(table.payload_column, item.payload),
        item.deliver_time,
    ]
