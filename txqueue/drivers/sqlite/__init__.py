"""The SQLite driver: WAL, BEGIN IMMEDIATE for writes, timestamps as integer microseconds."""
