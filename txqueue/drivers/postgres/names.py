"""The names PostgreSQL keeps for itself, shared by its traits and its driver's DDL check."""

__all__ = ["DISPLAY_NAME", "RESERVED_PREFIX"]

DISPLAY_NAME = "PostgreSQL"
#: PostgreSQL looks unqualified names up in ``pg_catalog`` first, so a ``pg_…`` table
#: could be hidden by a system one of that name.
RESERVED_PREFIX = "pg_"
