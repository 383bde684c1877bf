"""Unmatched messages: what a bus archived that no enrollment of it matched when it was published.

Publish records such a message in the attempt log as one row with an empty pipeline (only on a
bus that archives: without the archive there is no message to show). It is not a failed
delivery: ``undelivered`` leaves it out and ``unmatched`` lists it. A replay of the pipeline
``""`` routes it afresh (after an enrollment was added, say), which marks it replayed.

The query is GoogleSQL, run through the faces (``execute_internal_sql``) on every engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from txqueue.events.cloudevent import CloudEvent, from_json
from txqueue.events.records import ATTEMPTS, MESSAGES

__all__ = ["UnmatchedMessage", "unmatched_query"]


@dataclass(frozen=True)
class UnmatchedMessage:
    """An archived message that no enrollment of its bus matched when it was published."""

    message_uid: str
    bus: str
    event: CloudEvent
    publish_time: datetime

    @classmethod
    def from_row(cls, row: Any) -> UnmatchedMessage:
        """From a row of `unmatched_query`."""
        return cls(row[0], row[1], from_json(json.loads(row[2])), row[3])


_UNMATCHED = (
    "SELECT m.message_uid, m.bus, m.event, m.publish_time"
    f" FROM {ATTEMPTS} a JOIN {MESSAGES} m ON m.message_uid = a.message_uid"
    " WHERE a.pipeline = '' AND a.state = 'failed' AND NOT EXISTS ("
    f"SELECT 1 FROM {ATTEMPTS} r WHERE r.message_uid = a.message_uid"
    " AND r.pipeline = '' AND r.state = 'replayed')"
)


def unmatched_query(
    bus: str | None, since: datetime | None, limit: int
) -> tuple[str, dict[str, Any]]:
    """The query listing unmatched messages, oldest first, and its parameters."""
    sql, params = _UNMATCHED, dict[str, Any](limit=limit)
    if bus is not None:
        sql, params["bus"] = sql + " AND m.bus = @bus", bus
    if since is not None:
        sql, params["since"] = sql + " AND m.publish_time >= @since", since
    return sql + " ORDER BY m.publish_time, m.message_uid LIMIT @limit", params
