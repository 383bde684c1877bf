# Generated from txqueue/events/_async/events.py by tools/async_to_sync.py; do not edit.
"""Events: the event layer's public face — configuration, publishing, archive, replay.

Generated from ``txqueue/events/_async/events.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, Literal, TypeVar

from txqueue._sync.database import Database, Transaction
from txqueue.core.retry import RetryPolicy
from txqueue.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from txqueue.events._sync.archive import Archive
from txqueue.events.records import CONFIG, Catalog
from txqueue.events.resources import (
    BUS,
    ENROLLMENT,
    PIPELINE,
    UNCHANGED,
    Bus,
    Destination,
    Enrollment,
    Pipeline,
    Resource,
    Unchanged,
    check_resource_name,
    encode_resource,
    parse_destination,
    recorded_private,
)
from txqueue.events.secrets import choose_secret

__all__ = ["Events"]

_CONFIG_COLUMNS = ("kind", "name", "config", "create_time", "update_time")
_KINDS = {BUS: "bus", PIPELINE: "pipeline", ENROLLMENT: "enrollment"}
Keep = Literal[Unchanged.UNCHANGED]
R = TypeVar("R", Bus, Pipeline, Enrollment)


class Events(Archive):
    """The event layer over one database: configuration, publishing, archive and replay.

    Configuration lives in the database, so every process sees the same buses, pipelines and
    enrollments; routing happens at publish time, inside the publishing transaction.

    With ``private_from_environment=False``, ``TXQUEUE_ALLOW_PRIVATE_DESTINATIONS=1`` does not
    count in `create_pipeline` and `update_pipeline`: only ``allow_private=True`` allows a
    private destination. The dashboard's event layer is made so: its API clients must not
    inherit the server process's environment.
    """

    def __init__(self, database: Database, *, private_from_environment: bool = True) -> None:
        super().__init__(database)
        self.private_from_environment = bool(private_from_environment)

    def create_bus(
        self, name: str, *, archive: bool = True, retention: timedelta | None = timedelta(days=30)
    ) -> Bus:
        """Create a bus; with ``archive`` every message it receives is kept for ``retention``."""
        return self._create(Bus(name, archive, retention))

    def update_bus(
        self,
        name: str,
        *,
        archive: bool | None = None,
        retention: timedelta | Keep | None = UNCHANGED,
    ) -> Bus:
        """Change a bus's archive settings (None / UNCHANGED keep the current value)."""

        def change(bus: Bus) -> Bus:
            return replace(
                bus,
                archive=bus.archive if archive is None else archive,
                retention=bus.retention if retention is UNCHANGED else retention,
            )

        return self._update(BUS, name, change)

    def create_pipeline(
        self,
        name: str,
        destination: str,
        *,
        retry: RetryPolicy | None = None,
        input_payload_format: str | None = None,
        json_schema: dict[str, Any] | None = None,
        signing_secret: str | None = None,
        signing_secret_file: str | os.PathLike[str] | None = None,
        signing_secret_env: str | None = None,
        allow_private: bool = False,
    ) -> Pipeline:
        """Create a pipeline delivering to ``destination``: an http(s) URL, ``bus:NAME`` or
        ``queue:NAME`` (a queue with one STRING key column, which receives the message_uid).

        The signing secret is ``signing_secret``, or read now from the file
        ``signing_secret_file`` (without one trailing newline) or the environment variable
        ``signing_secret_env``: at most one of the three.

        ``allow_private`` (or ``TXQUEUE_ALLOW_PRIVATE_DESTINATIONS=1`` here, unless this object
        was made with ``private_from_environment=False``) lets the URL's host be private; the
        pipeline records it and its deliveries are checked against it."""
        secret = choose_secret(signing_secret, signing_secret_file, signing_secret_env, unset=None)
        environment = self.private_from_environment
        target = parse_destination(destination, allow_private, environment=environment)
        self._check_queue(target)
        pipeline = Pipeline(
            name,
            target,
            RetryPolicy() if retry is None else retry,
            input_payload_format,
            json_schema,
            secret,
            recorded_private(target, allow_private, environment=environment),
        )
        return self._create(pipeline)

    def update_pipeline(
        self,
        name: str,
        *,
        destination: str | None = None,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        min_retry_delay: timedelta | None = None,
        max_retry_delay: timedelta | None = None,
        input_payload_format: str | Keep | None = UNCHANGED,
        json_schema: dict[str, Any] | Keep | None = UNCHANGED,
        signing_secret: str | Keep | None = UNCHANGED,
        signing_secret_file: str | os.PathLike[str] | None = None,
        signing_secret_env: str | None = None,
        allow_private: bool | None = None,
    ) -> Pipeline:
        """Change a pipeline; dispatchers use the new settings from their next attempt on.

        ``retry`` replaces the whole policy; ``max_attempts``, ``min_retry_delay`` and
        ``max_retry_delay`` change one field each (as ``gcloud eventarc pipelines update``).
        A new signing secret comes from one of ``signing_secret`` (None: stop signing),
        ``signing_secret_file`` or ``signing_secret_env``, as in `create_pipeline`.
        """
        secret = choose_secret(
            signing_secret, signing_secret_file, signing_secret_env, unset=UNCHANGED
        )
        current = self.get_pipeline(name)
        private = current.allow_private if allow_private is None else allow_private
        target: Destination | None = None
        if destination is not None or allow_private is not None:
            given = str(current.destination) if destination is None else destination
            environment = self.private_from_environment
            target = parse_destination(given, private, environment=environment)
            self._check_queue(target)
            private = recorded_private(target, private, environment=environment)

        def change(pipeline: Pipeline) -> Pipeline:
            policy = pipeline.retry if retry is None else retry
            policy = replace(  # a zero or negative delay is refused here, never ignored
                policy,
                max_attempts=policy.max_attempts if max_attempts is None else max_attempts,
                min_retry_delay=(
                    policy.min_retry_delay if min_retry_delay is None else min_retry_delay
                ),
                max_retry_delay=(
                    policy.max_retry_delay if max_retry_delay is None else max_retry_delay
                ),
            )
            return Pipeline(
                pipeline.name,
                pipeline.destination if target is None else target,
                policy,
                _keep(input_payload_format, pipeline.input_payload_format),
                _keep(json_schema, pipeline.json_schema),
                _keep(secret, pipeline.signing_secret),
                private,
            )

        return self._update(PIPELINE, name, change)

    def create_enrollment(
        self, name: str, *, bus: str, pipeline: str, cel_match: str
    ) -> Enrollment:
        """Route the events of ``bus`` for which ``cel_match`` is true to ``pipeline``."""
        return self._create(Enrollment(name, bus, pipeline, cel_match))

    def update_enrollment(
        self, name: str, *, cel_match: str | None = None, pipeline: str | None = None
    ) -> Enrollment:
        """Change an enrollment's condition or pipeline (its bus is fixed)."""

        def change(enrollment: Enrollment) -> Enrollment:
            return Enrollment(
                enrollment.name,
                enrollment.bus,
                enrollment.pipeline if pipeline is None else pipeline,
                enrollment.cel_match if cel_match is None else cel_match,
            )

        return self._update(ENROLLMENT, name, change)

    def get_bus(self, name: str) -> Bus:
        """The bus named ``name``; NotFound when there is none."""
        return _found(BUS, name, (self.catalog()).buses.get(_named(BUS, name)))

    def get_pipeline(self, name: str) -> Pipeline:
        """The pipeline named ``name``; NotFound when there is none."""
        return _found(PIPELINE, name, (self.catalog()).pipelines.get(_named(PIPELINE, name)))

    def get_enrollment(self, name: str) -> Enrollment:
        """The enrollment named ``name``; NotFound when there is none."""
        return _found(ENROLLMENT, name, (self.catalog()).enrollments.get(_named(ENROLLMENT, name)))

    def list_buses(self) -> list[Bus]:
        """Every bus, by name."""
        return sorted((self.catalog()).buses.values(), key=lambda r: r.name)

    def list_pipelines(self) -> list[Pipeline]:
        """Every pipeline, by name."""
        return sorted((self.catalog()).pipelines.values(), key=lambda r: r.name)

    def list_enrollments(self, bus: str | None = None) -> list[Enrollment]:
        """Every enrollment (of ``bus``, if given), by name."""
        found = (self.catalog()).enrollments.values()
        return sorted((e for e in found if bus in (None, e.bus)), key=lambda r: r.name)

    def delete_bus(self, name: str) -> None:
        """Delete a bus; FailedPrecondition while enrollments or pipelines refer to it."""
        self._delete(BUS, name)

    def delete_pipeline(self, name: str) -> None:
        """Delete a pipeline; FailedPrecondition while enrollments route to it.

        Deliveries still pending for it fail (permanently) when a dispatcher reaches them.
        """
        self._delete(PIPELINE, name)

    def delete_enrollment(self, name: str) -> None:
        """Delete an enrollment; events published afterwards are no longer routed by it."""
        self._delete(ENROLLMENT, name)

    def _check_queue(self, target: Destination) -> None:
        """A queue destination must exist, keyed by one STRING column (the message_uid)."""
        if target.kind != "queue":
            return
        from txqueue.core.schema import ColumnType

        queue = self.database.queue(target.target)
        keys = queue.key_columns
        if len(keys) != 1 or keys[0].type is not ColumnType.STRING or keys[0].array:
            raise InvalidArgument(
                f"destination queue {queue.name} must have exactly one STRING key column "
                "(it receives the message_uid)"
            )
        if keys[0].length is not None and keys[0].length < 36:
            raise InvalidArgument(
                f"destination queue {queue.name}: key column {keys[0].name} must hold at "
                "least 36 characters (a UUID)"
            )

    def _create(self, resource: R) -> R:
        self.ensure_tables()
        kind, config = encode_resource(resource)

        def write(txn: Transaction) -> R:
            catalog = self.catalog(txn)
            if resource.name in catalog.of(kind):
                raise AlreadyExists(f"{_KINDS[kind]} {resource.name!r} already exists")
            _check_references(resource, catalog)
            now = self._now()
            txn.insert(CONFIG, _CONFIG_COLUMNS, [(kind, resource.name, config, now, now)])
            return replace(resource, create_time=now, update_time=now)

        return self.database.run_in_transaction(write)

    def _update(self, kind: str, name: str, change: Callable[[R], R]) -> R:
        self.ensure_tables()

        def write(txn: Transaction) -> R:
            found = (self.catalog(txn)).of(kind).get(_named(kind, name))
            current: R = _found(kind, name, found)
            updated = change(current)
            _check_references(updated, self.catalog(txn))
            now = self._now()
            _, config = encode_resource(updated)
            columns = ("kind", "name", "config", "update_time")
            txn.update(CONFIG, columns, [(kind, name, config, now)])
            return replace(updated, create_time=current.create_time, update_time=now)

        return self.database.run_in_transaction(write)

    def _delete(self, kind: str, name: str) -> None:
        _named(kind, name)

        def write(txn: Transaction) -> None:
            catalog = self.catalog(txn)
            if name not in catalog.of(kind):
                raise NotFound(f"{_KINDS[kind]} {name!r} does not exist")
            users = [
                f"enrollment {e.name!r}"
                for e in catalog.enrollments.values()
                if (kind, name) in ((BUS, e.bus), (PIPELINE, e.pipeline))
            ]
            if kind == BUS:
                users += [
                    f"pipeline {p.name!r}"
                    for p in catalog.pipelines.values()
                    if p.destination == Destination("bus", name)
                ]
            if users:
                raise FailedPrecondition(
                    f"{_KINDS[kind]} {name!r} is in use by {', '.join(users)}: delete or change "
                    "those first"
                )
            txn.delete(CONFIG, [(kind, name)])

        if not self._exists():
            raise NotFound(f"{_KINDS[kind]} {name!r} does not exist")
        self.database.run_in_transaction(write)


def _named(kind: str, name: object) -> str:
    """``name`` if it can name a resource of ``kind``; InvalidArgument (not a TypeError from
    the lookup, or NotFound) for a name that is no string or malformed."""
    return check_resource_name(name, _KINDS[kind])


def _found(kind: str, name: str, value: R | None) -> R:
    if value is None:
        raise NotFound(f"{_KINDS[kind]} {name!r} does not exist")
    return value


def _keep(value: Any, current: Any) -> Any:
    return current if value is UNCHANGED else value


def _check_references(resource: Resource, catalog: Catalog) -> None:
    if isinstance(resource, Enrollment):
        if resource.bus not in catalog.buses:
            raise NotFound(f"bus {resource.bus!r} does not exist")
        if resource.pipeline not in catalog.pipelines:
            raise NotFound(f"pipeline {resource.pipeline!r} does not exist")
    elif (
        isinstance(resource, Pipeline)
        and resource.destination.kind == "bus"
        and resource.destination.target not in catalog.buses
    ):
        raise NotFound(f"destination bus {resource.destination.target!r} does not exist")
