# Generated from txqueue/events/_async/publishing.py by tools/async_to_sync.py; do not edit.
"""Publisher: the event layer's storage and publishing, under Archive and Events.

Generated from ``txqueue/events/_async/publishing.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

import contextlib
import json
import uuid
import weakref
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from txqueue import telemetry
from txqueue._sync.database import Database, Transaction
from txqueue.drivers._sync_compat import Lock
from txqueue.errors import InvalidArgument, NotFound
from txqueue.events.cloudevent import (
    CloudEvent,
    attributes_of,
    coerce_event,
    to_binary_http,
    to_json,
)
from txqueue.events.records import (
    ATTEMPT_COLUMNS,
    ATTEMPTS,
    CONFIG,
    CONFIG_QUERY,
    DELIVERIES,
    MESSAGE_COLUMNS,
    MESSAGES,
    REFUSED,
    TABLES,
    Catalog,
    Delivery,
    DeliveryAttempt,
)
from txqueue.events.resources import Enrollment, check_resource_name

__all__ = ["Publisher"]


class Publisher:
    """Reads the configuration and publishes: what both Events and the dispatcher need."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._ready = False
        self._lock = Lock()
        # One configuration read per transaction, however many events it publishes.
        self._catalogs: weakref.WeakKeyDictionary[Transaction, Catalog]
        self._catalogs = weakref.WeakKeyDictionary()

    def _now(self) -> datetime:
        return self.database.now() or datetime.now(timezone.utc)

    def ensure_tables(self) -> None:
        """Create the event layer's tables when missing (done by every create_* call)."""
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                self.database.ensure_internal_tables(TABLES)
                self._ready = True

    def _exists(self) -> bool:
        if self._ready:
            return True
        try:
            self.database.table(CONFIG)
        except (NotFound, InvalidArgument):  # a txqueue_ name not created yet: InvalidArgument
            return False
        return True

    def _query(
        self, sql: str, params: dict[str, Any], transaction: Transaction | None = None
    ) -> list[Any]:
        """Rows of a query of the event tables (GoogleSQL, ``@name`` parameters), read in
        ``transaction`` or in a snapshot of their own; none before the tables exist."""
        if not self._exists():
            return []
        if transaction is not None:
            return (transaction.execute_internal_sql(sql, params)).rows
        with self.database.snapshot() as snapshot:
            return (snapshot.execute_internal_sql(sql, params)).rows

    def catalog(self, transaction: Transaction | None = None) -> Catalog:
        """Every bus, pipeline and enrollment, read now (inside ``transaction`` if given)."""
        return Catalog.from_rows(self._query(CONFIG_QUERY, {}, transaction))

    # ---- publishing --------------------------------------------------------------------------

    def publish(self, bus: str, event: Any, *, txn: Transaction | None = None) -> str:
        """Publish a CloudEvent (SDK object or JSON-form mapping) to ``bus``; return its message_uid.

        With ``txn`` the event is stored and routed inside that transaction, so it exists
        exactly when the caller's writes commit; without, it commits on its own. Each publish
        gets a new message_uid, even of the same event. An invalid event (InvalidArgument) or
        an unknown bus (NotFound) fails here, before anything is stored.
        """
        checked = coerce_event(event)
        check_resource_name(bus, "bus")
        if not self._exists():
            raise NotFound(f"bus {bus!r} does not exist")
        span = telemetry.start_publish(bus, checked)
        with telemetry.ending(span) if span is not None else contextlib.nullcontext():
            if txn is not None:
                return self.publish_checked(txn, bus, checked)
            return self.database.run_in_transaction(self.publish_checked, bus, checked)

    def publish_checked(
        self,
        txn: Transaction,
        bus: str,
        event: CloudEvent,
        *,
        hops: int = 0,
        pipelines: Sequence[str] | None = None,
        replay_of: str | None = None,
        message_uid: str | None = None,
    ) -> str:
        """Store and route a checked event in ``txn`` (for the dispatcher and replay).

        ``pipelines`` bypasses the enrollments and routes to exactly those pipelines. The
        configuration is read once per transaction: its later events route the same way.
        """
        catalog = self._catalogs.get(txn)
        if catalog is None:
            catalog = self._catalogs[txn] = self.catalog(txn)
        config = catalog.buses.get(bus)
        if config is None:
            raise NotFound(f"bus {bus!r} does not exist")
        uid = message_uid or str(uuid.uuid4())
        now = self._now()
        refused: list[tuple[Enrollment, str]] = []
        if pipelines is None:
            routes, refused = catalog.routing(bus, attributes_of(event))
        else:
            routes = sorted(set(pipelines))
        document = to_json(event)
        if config.archive:
            text = json.dumps(document, separators=(",", ":"))
            row = (uid, bus, event.get_id(), event.get_source(), event.get_type(), text, now)
            txn.insert(MESSAGES, MESSAGE_COLUMNS, [(*row, replay_of)])
            if not routes and not refused:
                error = f"no enrollment of bus {bus!r} matched"
                attempt = DeliveryAttempt(
                    uid, "", 1, bus, now, "failed", "permanent", None, error, None
                )
                txn.insert(ATTEMPTS, ATTEMPT_COLUMNS, [attempt.row()])
        failures = _unevaluated(uid, bus, now, routes, refused)
        if failures:
            txn.insert(ATTEMPTS, ATTEMPT_COLUMNS, failures)
        if not routes:
            return uid
        http = None
        if any(_over_http(catalog, pipeline) for pipeline in routes):
            http = to_binary_http(event, uid)  # once for every route, not once per attempt
        payload = Delivery(bus, document, 0, hops, http).encode()
        for pipeline in routes:
            txn.send(DELIVERIES, (pipeline, uid), payload)
        return uid


def _unevaluated(
    uid: str,
    bus: str,
    now: datetime,
    routes: Sequence[str],
    refused: Sequence[tuple[Enrollment, str]],
) -> list[tuple[Any, ...]]:
    """Attempt-log rows for the pipelines an event was not routed to because an enrollment's
    condition was not evaluated (a permanent failure before routing; replay delivers it)."""
    rows: dict[str, tuple[Any, ...]] = {}
    for enrollment, reason in refused:
        if enrollment.pipeline in routes or enrollment.pipeline in rows:
            continue  # routed anyway, or already recorded: one row per (message, pipeline)
        error = f"enrollment {enrollment.name!r} was not evaluated: {reason}"
        attempt = DeliveryAttempt(
            uid, enrollment.pipeline, 1, bus, now, "failed", "permanent", None, error, None,
            None, REFUSED,
        )  # fmt: skip
        rows[enrollment.pipeline] = attempt.row()
    return list(rows.values())


def _over_http(catalog: Catalog, name: str) -> bool:
    """True unless pipeline ``name`` delivers to a bus or a queue (a missing one may be
    created as an HTTP pipeline before its delivery is attempted)."""
    pipeline = catalog.pipelines.get(name)
    return pipeline is None or pipeline.destination.kind == "http"
