"""DDL text every engine writes the same way but for how it quotes a name."""

from __future__ import annotations

from collections.abc import Callable

from txqueue.core.schema import Index

__all__ = ["create_index"]


def create_index(index: Index, quote: Callable[[str], str]) -> str:
    """CREATE [UNIQUE] INDEX for a user index, each name quoted by ``quote``."""
    directions = index.descending or (False,) * len(index.columns)
    columns = ", ".join(
        quote(c) + (" DESC" if desc else "") for c, desc in zip(index.columns, directions)
    )
    unique = "UNIQUE " if index.unique else ""
    return f"CREATE {unique}INDEX {quote(index.name)} ON {quote(index.table)} ({columns})"
