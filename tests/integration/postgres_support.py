"""What the PostgreSQL driver's integration tests share: the ``jobs`` queue they use and a
reading of the scans a statement's plan makes over it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg

#: The queue these tests use (``db`` in conftest.py creates it).
JOBS_QUEUE = (
    "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))"
)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def scans_of_jobs(connection: psycopg.Connection[Any], sql: str, arguments: Any) -> list[str]:
    """The scan node types the planner picks over ``jobs`` for ``sql`` (a custom plan)."""
    [[document]] = connection.execute("EXPLAIN (FORMAT JSON) " + sql, arguments).fetchall()
    plans = document if isinstance(document, list) else json.loads(document)
    return [
        node["Node Type"]
        for node in _nodes(plans[0]["Plan"])
        if node.get("Relation Name") == "jobs" and node["Node Type"] != "ModifyTable"
    ]
