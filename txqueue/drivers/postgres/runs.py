"""The statements that apply runs of buffered sends and acks on PostgreSQL, and their
arguments: pure functions, shared by both faces of the transaction."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from txqueue.core.schema import Table
from txqueue.drivers.base import AckParams, SendParams
from txqueue.drivers.postgres.codec import checked_token_parts, encode
from txqueue.drivers.postgres.statements import queue_statements

__all__ = ["commit_statement", "encoded_key", "run_statement", "runs"]


def encoded_key(table: Table, key: tuple[Any, ...]) -> list[Any]:
    """A checked key as psycopg sends it: as it is (key columns are never JSON; DDL refuses)."""
    return list(key)


def runs(pending: list[SendParams | AckParams]) -> list[list[Any]]:
    """Consecutive sends (or acks) to one queue: each run travels as one statement."""
    return [list(group) for _, group in groupby(pending, key=run_key)]


def run_statement(items: list[Any], deliver: str, refusing: bool) -> tuple[str, list[Any]]:
    """The statement of a run and its array arguments; ``refusing``: the form that fails
    inside the server when an item cannot apply (for the commit's pipeline; see
    ``commit_statement`` for its trailing arguments)."""
    statements = queue_statements(items[0].queue, deliver)
    if refusing and len(items) == 1:
        return one_statement(items[0], statements)
    if isinstance(items[0], SendParams):
        sql = statements.send_refusing if refusing else statements.send_many
        return sql, send_arrays(items)
    *keys, stored, locations, now = ack_arrays(items)
    if None in stored:  # an ack without a token: its row is found by key
        sql = statements.ack_refusing if refusing else statements.ack_many
        return sql, [*keys, stored, locations, keys[0], now]
    sql = statements.ack_leased_refusing if refusing else statements.ack_leased
    return sql, [*keys, stored, locations, now]


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


def run_key(item: SendParams | AckParams) -> tuple[type, str]:
    return type(item), item.queue.name


def columns(rows: list[list[Any]], width: int) -> list[list[Any]]:
    """Rows turned into one list per column (the arrays ``unnest`` takes)."""
    return [[row[i] for row in rows] for i in range(width)] if rows else [[]] * width


def send_arrays(items: list[Any]) -> list[Any]:
    table = items[0].queue
    return columns([send_row(item) for item in items], len(table.primary_key) + 2)


def ack_arrays(items: list[Any]) -> list[Any]:
    """Key columns, stored tokens and row locations of a run of acks (AckParams), as arrays.

    Tokens were checked by ``prepare_ack`` (one not of ours became "", which matches none).
    """
    table = items[0].queue
    columns = key_arrays(table, [item.key for item in items])
    stored: list[str | None] = []
    locations: list[str | None] = []
    for item in items:
        part, location = (
            (None, None) if item.lease_token is None else checked_token_parts(item.lease_token)
        )
        stored.append(part)
        locations.append(location)
    return [*columns, stored, locations, items[0].now]


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
