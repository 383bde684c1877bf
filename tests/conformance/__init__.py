"""The conformance suite: one set of tests run against every engine (SQLite, PostgreSQL)."""
