"""SQL for Spanner's write mutations on PostgreSQL (insert, update, upsert, replace, delete)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from txqueue.core.schema import Table
from txqueue.drivers.postgres.statements import ident

__all__ = ["delete_sql", "insert_sql", "key_positions", "update_sql", "upsert_sql"]


@lru_cache(maxsize=1024)
def insert_sql(table: Table, columns: tuple[str, ...]) -> str:
    names = ", ".join(ident(c) for c in columns)
    return f"INSERT INTO {ident(table.name)} ({names}) VALUES ({', '.join(['%s'] * len(columns))})"


@lru_cache(maxsize=1024)
def upsert_sql(table: Table, columns: tuple[str, ...]) -> str:
    keys = {k.lower() for k in table.primary_key}
    others = [c for c in columns if c.lower() not in keys]
    conflict = ", ".join(ident(k) for k in table.primary_key)
    action = (
        "DO UPDATE SET " + ", ".join(f"{ident(c)} = EXCLUDED.{ident(c)}" for c in others)
        if others
        else "DO NOTHING"
    )
    return f"{insert_sql(table, columns)} ON CONFLICT ({conflict}) {action}"


@lru_cache(maxsize=1024)
def update_sql(table: Table, columns: tuple[str, ...]) -> str | None:
    """UPDATE by key; parameters are the non-key values, then the key values."""
    keys = {k.lower() for k in table.primary_key}
    others = [c for c in columns if c.lower() not in keys]
    if not others:
        return None
    assignments = ", ".join(f"{ident(c)} = %s" for c in others)
    return f"UPDATE {ident(table.name)} SET {assignments} WHERE {_match(table)}"


@lru_cache(maxsize=1024)
def delete_sql(table: Table) -> str:
    return f"DELETE FROM {ident(table.name)} WHERE {_match(table)}"


def _match(table: Table) -> str:
    return " AND ".join(f"{ident(k)} = %s" for k in table.primary_key)


def key_positions(table: Table, columns: Sequence[str]) -> list[int]:
    """Where each primary-key column sits in ``columns``."""
    lowered = [c.lower() for c in columns]
    return [lowered.index(k.lower()) for k in table.primary_key]
