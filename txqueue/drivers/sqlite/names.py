"""The names SQLite keeps for itself, shared by its traits and its driver's DDL check."""

__all__ = ["DISPLAY_NAME", "RESERVED_PREFIX"]

DISPLAY_NAME = "SQLite"
#: SQLite refuses tables and indexes named ``sqlite_…`` (in any case).
RESERVED_PREFIX = "sqlite_"
