# Generated from txqueue/events/_async/archive.py by tools/async_to_sync.py; do not edit.
"""Archive: the archive and the attempt log joined (undelivered messages), replay, purge.

Its SQL is GoogleSQL with ``@name`` parameters, run through the faces'
``execute_internal_sql`` / ``execute_internal_update`` on every engine.

Generated from ``txqueue/events/_async/archive.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from txqueue._sync.database import Transaction
from txqueue.core.durations import require_aware, to_duration
from txqueue.core.values import check_count
from txqueue.errors import AlreadyExists
from txqueue.events._sync.publishing import Publisher
from txqueue.events.cloudevent import from_json
from txqueue.events.records import (
    ATTEMPT_COLUMNS,
    ATTEMPTS,
    MESSAGE_COLUMNS,
    MESSAGES,
    ArchivedMessage,
    DeliveryAttempt,
    UndeliveredMessage,
    read_time,
)
from txqueue.events.unmatched import UnmatchedMessage, unmatched_query

__all__ = ["Archive"]

_UNDELIVERED = (
    "SELECT a.message_uid, a.pipeline, a.attempt, a.status, a.error, a.attempt_time,"
    " m.bus, m.event, m.publish_time, a.error_type, a.traceback"
    f" FROM {ATTEMPTS} a JOIN {MESSAGES} m ON m.message_uid = a.message_uid"
    " WHERE a.state = 'failed' AND NOT EXISTS ("
    f"SELECT 1 FROM {ATTEMPTS} r WHERE r.message_uid = a.message_uid"
    " AND r.pipeline = a.pipeline AND r.state = 'replayed')"
)


class Archive(Publisher):
    """What a bus kept (archive) and what each delivery attempt did (log), and replay."""

    def undelivered(
        self,
        *,
        bus: str | None = None,
        pipeline: str | None = None,
        since: datetime | None = None,
        limit: int = 1000,
    ) -> list[UndeliveredMessage]:
        """Archived messages whose delivery failed for good and that were not replayed yet.

        The archive joined with the attempt log on message_uid (as Eventarc Advanced's BigQuery example does).
        Messages that no enrollment matched are not failures and are left out (`unmatched`
        lists them), unless ``pipeline=""`` asks for them (to replay them).
        """
        sql, params = _UNDELIVERED, dict[str, Any](limit=_limit(limit))
        if bus is not None:
            sql, params["bus"] = sql + " AND m.bus = @bus", bus
        if pipeline is not None:
            sql, params["pipeline"] = sql + " AND a.pipeline = @pipeline", pipeline
        else:  # a message no enrollment matched did not fail: see `unmatched`
            sql += " AND a.pipeline <> ''"
        if since is not None:
            sql += " AND m.publish_time >= @since"
            params["since"] = require_aware(since, "since")
        sql += " ORDER BY m.publish_time, a.message_uid, a.pipeline LIMIT @limit"
        rows = self._query(sql, params)
        return [
            UndeliveredMessage(
                message_uid=row[0],
                bus=row[6],
                pipeline=row[1],
                event=from_json(json.loads(row[7])),
                publish_time=read_time(row[8]),
                attempts=int(row[2]),
                status=None if row[3] is None else int(row[3]),
                error=row[4],
                failure_time=read_time(row[5]),
                error_type=row[9],
                traceback=row[10],
            )
            for row in rows
        ]

    def unmatched(
        self, *, bus: str | None = None, since: datetime | None = None, limit: int = 1000
    ) -> list[UnmatchedMessage]:
        """Archived messages that no enrollment of their bus matched when they were published
        (recorded then, on buses that archive), oldest first; ``replay(pipeline="")`` routes
        them afresh."""
        if since is not None:
            since = require_aware(since, "since")
        sql, params = unmatched_query(bus, since, _limit(limit))
        if not self._exists():
            return []
        with self.database.snapshot() as snapshot:
            rows = snapshot.execute_internal_sql(sql, params)
        return [UnmatchedMessage.from_row(row) for row in rows]

    def replay(
        self,
        *,
        bus: str | None = None,
        pipeline: str | None = None,
        since: datetime | None = None,
        message_uids: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[str]:
        """Republish undelivered messages to their bus, each under a new message_uid.

        A message is sent again only to the pipelines that failed it (one that no enrollment
        matched is routed afresh), and is marked ``replayed`` in the same transaction, so it
        is neither listed nor replayed again. Returns the new message_uids.
        """
        found = self.undelivered(bus=bus, pipeline=pipeline, since=since, limit=limit)
        if pipeline is None:  # and the messages no enrollment matched: routed afresh
            found += self.undelivered(bus=bus, pipeline="", since=since, limit=limit)
        groups: dict[str, list[UndeliveredMessage]] = {}
        for item in found:
            if message_uids is None or item.message_uid in message_uids:
                groups.setdefault(item.message_uid, []).append(item)
        replayed = []
        for items in groups.values():
            new_uid = str(uuid.uuid4())
            try:
                self.database.run_in_transaction(self._replay_one, items, new_uid)
            except AlreadyExists:
                continue  # replayed at the same moment by someone else
            replayed.append(new_uid)
        return replayed

    def _replay_one(self, txn: Transaction, items: list[UndeliveredMessage], new_uid: str) -> None:
        now = self._now()
        note = f"replayed as {new_uid}"
        marks = [
            DeliveryAttempt(
                item.message_uid,
                item.pipeline,
                item.attempts + 1,
                item.bus,
                now,
                "replayed",
                None,
                None,
                note,
                None,
            ).row()
            for item in items
        ]
        txn.insert(ATTEMPTS, ATTEMPT_COLUMNS, marks)
        targets = [item.pipeline for item in items if item.pipeline]
        self.publish_checked(
            txn,
            items[0].bus,
            items[0].event,
            pipelines=targets or None,
            replay_of=items[0].message_uid,
            message_uid=new_uid,
        )

    def attempts(
        self, message_uid: str | None = None, *, pipeline: str | None = None, limit: int = 1000
    ) -> list[DeliveryAttempt]:
        """Rows of the attempt log (of one message and/or pipeline), oldest first."""
        sql, params = (
            f"SELECT {', '.join(ATTEMPT_COLUMNS)} FROM {ATTEMPTS} WHERE TRUE",
            dict[str, Any](limit=_limit(limit)),
        )
        if message_uid is not None:
            sql, params["uid"] = sql + " AND message_uid = @uid", message_uid
        if pipeline is not None:
            sql, params["pipeline"] = sql + " AND pipeline = @pipeline", pipeline
        sql += " ORDER BY attempt_time, message_uid, pipeline, attempt LIMIT @limit"
        rows = self._query(sql, params)
        return [DeliveryAttempt.from_row(row) for row in rows]

    def messages(
        self, *, bus: str | None = None, since: datetime | None = None, limit: int = 1000
    ) -> list[ArchivedMessage]:
        """Archived messages (of ``bus``, published at or after ``since``), oldest first."""
        sql, params = (
            f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM {MESSAGES} WHERE TRUE",
            dict[str, Any](limit=_limit(limit)),
        )
        if bus is not None:
            sql, params["bus"] = sql + " AND bus = @bus", bus
        if since is not None:
            sql += " AND publish_time >= @since"
            params["since"] = require_aware(since, "since")
        sql += " ORDER BY publish_time, message_uid LIMIT @limit"
        rows = self._query(sql, params)
        return [ArchivedMessage.from_row(row) for row in rows]

    def purge(self, older_than: timedelta | None = None) -> tuple[int, int]:
        """Delete archived messages and attempt-log rows past their retention.

        Without ``older_than`` each bus's own ``retention`` applies (dispatchers do this
        periodically); with it, everything older goes, whatever the bus. Returns the number
        of messages and of attempt-log rows deleted.
        """
        if not self._exists():
            return 0, 0
        now = self._now()
        if older_than is not None:
            cutoffs: list[tuple[str | None, datetime]] = [
                (None, now - to_duration(older_than, "older_than"))
            ]
        else:
            buses = (self.catalog()).buses.values()
            cutoffs = [(b.name, now - b.retention) for b in buses if b.retention is not None]
        counts = [0, 0]
        for bus, cutoff in cutoffs:
            for index, (table, column) in enumerate(
                ((MESSAGES, "publish_time"), (ATTEMPTS, "attempt_time"))
            ):
                sql = f"DELETE FROM {table} WHERE {column} < @cutoff"
                params: dict[str, Any] = {"cutoff": cutoff}
                if bus is not None:
                    sql, params["bus"] = sql + " AND bus = @bus", bus
                counts[index] += self.database.run_in_transaction(_execute_update, sql, params)
        return counts[0], counts[1]


def _execute_update(txn: Transaction, sql: str, params: dict[str, Any]) -> int:
    return txn.execute_internal_update(sql, params)


def _limit(limit: int) -> int:
    return check_count(limit, "limit")
