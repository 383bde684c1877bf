"""Buses, pipelines and enrollments: the event layer's configuration, checked and serialised.

Resources are frozen dataclasses, stored as JSON in one internal table so that every process
(publishers, dispatchers, the CLI) sees the same configuration. Everything that can be checked
without a database is checked here; the facade checks references (an enrollment's bus and
pipeline, a queue destination's schema).

Names follow Eventarc resource IDs: a lowercase letter, then lowercase letters, digits and
hyphens, not ending with a hyphen, at most 63 characters. They are stored as values, never
spliced into SQL.
"""

from __future__ import annotations

import copy as copy_module
import enum
import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from txqueue.core.durations import to_duration
from txqueue.core.retry import RetryPolicy
from txqueue.errors import InvalidArgument
from txqueue.events.destinations import check_destination, private_allowed
from txqueue.events.matching import Condition, compile_condition

__all__ = [
    "BUS",
    "ENROLLMENT",
    "PIPELINE",
    "UNCHANGED",
    "Bus",
    "Destination",
    "Enrollment",
    "Pipeline",
    "Resource",
    "Unchanged",
    "check_resource_name",
    "decode_resource",
    "encode_resource",
    "parse_destination",
    "recorded_private",
]

BUS, PIPELINE, ENROLLMENT = "bus", "pipeline", "enrollment"
DEFAULT_RETENTION = timedelta(days=30)
_NAME = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
_FORMATS = ("json",)


class Unchanged(enum.Enum):
    """The default of an update argument: keep the current value (None may mean "remove")."""

    UNCHANGED = "unchanged"


UNCHANGED = Unchanged.UNCHANGED


def check_resource_name(name: object, what: str) -> str:
    """Return ``name`` if it is a valid resource name, else raise InvalidArgument."""
    if not isinstance(name, str):
        raise InvalidArgument(f"{what} name must be a string, got {type(name).__name__}")
    if not _NAME.match(name):
        raise InvalidArgument(
            f"{what} name {name!r} is invalid: use a lowercase letter, then lowercase letters, "
            "digits or hyphens (not ending with a hyphen), at most 63 characters"
        )
    return name


@dataclass(frozen=True)
class Destination:
    """Where a pipeline delivers: an HTTP endpoint, another bus, or a txqueue queue."""

    kind: str  # "http", "bus" or "queue"
    target: str  # the URL, the bus name or the queue name

    def __str__(self) -> str:
        return self.target if self.kind == "http" else f"{self.kind}:{self.target}"


def parse_destination(
    text: object, allow_private: bool = False, *, environment: bool = True
) -> Destination:
    """Parse ``https://...``, ``bus:NAME`` or ``queue:NAME``; URLs pass `check_destination`
    (``environment``: whether the environment variable may allow a private host) and are kept
    with their scheme and host in lower case."""
    if not isinstance(text, str) or not text:
        raise InvalidArgument("destination must be a non-empty string")
    kind, _, target = text.partition(":")
    if kind.lower() in ("http", "https"):
        return Destination("http", check_destination(text, allow_private, environment=environment))
    if kind == "bus" and target:
        return Destination("bus", check_resource_name(target, "destination bus"))
    if kind == "queue" and target:
        return Destination("queue", target)
    raise InvalidArgument(
        f"destination {text!r} is invalid: use an http(s) URL, 'bus:NAME' or 'queue:NAME'"
    )


def recorded_private(
    destination: Destination, allow_private: bool, *, environment: bool = True
) -> bool:
    """The ``allow_private`` a pipeline records with ``destination``: also true when the
    environment variable (if ``environment`` lets it count) let its URL be private when it was
    checked. Deliveries follow the recorded value, whatever the dispatcher's environment."""
    if allow_private:
        return True
    return environment and destination.kind == "http" and private_allowed(False)


@dataclass(frozen=True)
class Bus:
    """A bus receives published events; with ``archive`` it keeps each one for ``retention``.

    ``retention`` None keeps archived messages and attempt logs until purged by hand.
    """

    name: str
    archive: bool = True
    retention: timedelta | None = DEFAULT_RETENTION
    create_time: datetime | None = field(default=None, compare=False)
    update_time: datetime | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_resource_name(self.name, "bus")
        if not isinstance(self.archive, bool):
            raise InvalidArgument("archive must be a bool")
        if self.retention is not None and (
            not isinstance(self.retention, timedelta) or self.retention <= timedelta(0)
        ):
            raise InvalidArgument("retention must be a positive datetime.timedelta or None")
        if self.retention is not None:  # at most 100 years: "now - retention" is a time
            to_duration(self.retention, "retention")


@dataclass(frozen=True)
class Pipeline:
    """A pipeline delivers to one destination with a retry policy.

    ``input_payload_format="json"`` (implied by ``json_schema``) makes an event whose data is
    not JSON, or does not match the schema, fail permanently before delivery. With
    ``signing_secret`` every HTTP delivery carries Standard Webhooks signature headers.
    """

    name: str
    destination: Destination
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    input_payload_format: str | None = None
    json_schema: dict[str, Any] | None = None
    signing_secret: str | None = field(default=None, repr=False)
    allow_private: bool = False
    create_time: datetime | None = field(default=None, compare=False)
    update_time: datetime | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_resource_name(self.name, "pipeline")
        if not isinstance(self.destination, Destination):
            raise InvalidArgument("destination must be parsed with parse_destination")
        if not isinstance(self.retry, RetryPolicy):
            raise InvalidArgument("retry must be a txqueue.RetryPolicy")
        if self.json_schema is not None and self.input_payload_format is None:
            object.__setattr__(self, "input_payload_format", "json")
        if self.input_payload_format is not None and self.input_payload_format not in _FORMATS:
            raise InvalidArgument(
                f"input_payload_format must be one of {', '.join(_FORMATS)} or None, "
                f"got {self.input_payload_format!r}"
            )
        if self.json_schema is not None:
            from txqueue.events.payloads import check_schema

            check_schema(self.json_schema)
        if self.signing_secret is not None:
            from txqueue.events.signing import sign

            if not isinstance(self.signing_secret, str):
                raise InvalidArgument("signing_secret must be a 'whsec_<base64>' string")
            sign(self.signing_secret, "check", 0, b"")  # raises InvalidArgument if malformed
        if not isinstance(self.allow_private, bool):
            raise InvalidArgument("allow_private must be a bool")


@dataclass(frozen=True)
class Enrollment:
    """An enrollment routes the events of ``bus`` that match ``cel_match`` to ``pipeline``."""

    name: str
    bus: str
    pipeline: str
    cel_match: str
    create_time: datetime | None = field(default=None, compare=False)
    update_time: datetime | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_resource_name(self.name, "enrollment")
        check_resource_name(self.bus, "bus")
        check_resource_name(self.pipeline, "pipeline")
        if not isinstance(self.cel_match, str):  # checked before the cache hashes it
            compile_condition(self.cel_match)  # raises InvalidArgument naming the type
        condition(self.cel_match)  # raises InvalidArgument saying what is wrong

    @property
    def condition(self) -> Condition:
        """The compiled ``cel_match`` (cached per expression); a refused `Condition` when the
        stored expression no longer passes the checks (see `decode_resource`)."""
        return stored_condition(self.cel_match)


Resource = Bus | Pipeline | Enrollment


@lru_cache(maxsize=1024)
def condition(expression: str) -> Condition:
    """Compile a CEL condition once per distinct expression."""
    return compile_condition(expression)


@lru_cache(maxsize=1024)
def stored_condition(expression: str) -> Condition:
    """`condition`, or a refused one when ``expression`` fails the checks: a stored condition
    must neither crash nor block publishers, who record why it was not evaluated."""
    try:
        return condition(expression)
    except InvalidArgument as error:
        return Condition.refused(expression, str(error))


def encode_resource(resource: Resource) -> tuple[str, str]:
    """The ``(kind, config JSON)`` stored for ``resource`` (its name and times go in columns)."""
    if isinstance(resource, Bus):
        retention = None if resource.retention is None else resource.retention.total_seconds()
        return BUS, _dump({"archive": resource.archive, "retention_seconds": retention})
    if isinstance(resource, Pipeline):
        retry = resource.retry
        return PIPELINE, _dump(
            {
                "destination": str(resource.destination),
                "retry": {
                    "max_attempts": retry.max_attempts,
                    "min_retry_delay_seconds": retry.min_retry_delay.total_seconds(),
                    "max_retry_delay_seconds": retry.max_retry_delay.total_seconds(),
                    "jitter": retry.jitter,
                },
                "input_payload_format": resource.input_payload_format,
                "json_schema": resource.json_schema,
                "signing_secret": resource.signing_secret,
                "allow_private": resource.allow_private,
            }
        )
    return ENROLLMENT, _dump(
        {"bus": resource.bus, "pipeline": resource.pipeline, "cel_match": resource.cel_match}
    )


def decode_resource(
    kind: str, name: str, config: str, create_time: datetime, update_time: datetime
) -> Resource:
    """The resource stored as ``(kind, name, config)``; parsed once per distinct row."""
    resource, schema = _decode(kind, name, config)
    if isinstance(resource, Enrollment):  # not checked again: its condition may be refused
        resource = _unchecked(resource, create_time=create_time, update_time=update_time)
    else:
        resource = replace(resource, create_time=create_time, update_time=update_time)
    if schema is not None:
        # Checked when it was stored, perhaps under laxer rules: a schema that no longer
        # passes must not hide the whole catalog; its deliveries fail permanently instead.
        object.__setattr__(resource, "json_schema", schema)
    return resource


@lru_cache(maxsize=4096)
def _decode(kind: str, name: str, config: str) -> tuple[Resource, dict[str, Any] | None]:
    """The stored resource (a pipeline without its JSON schema) and the schema."""
    data = json.loads(config)
    if kind == BUS:
        seconds = data["retention_seconds"]
        retention = None if seconds is None else timedelta(seconds=seconds)
        return Bus(name, archive=data["archive"], retention=retention), None
    if kind == PIPELINE:
        retry = data["retry"]
        kind_, _, target = data["destination"].partition(":")
        destination = (
            Destination("http", data["destination"])
            if kind_.lower() in ("http", "https")  # older versions stored "HTTP://" as given
            else Destination(kind_, target)  # checked when it was stored
        )
        pipeline = Pipeline(
            name,
            destination,
            RetryPolicy(
                max_attempts=retry["max_attempts"],
                min_retry_delay=timedelta(seconds=retry["min_retry_delay_seconds"]),
                max_retry_delay=timedelta(seconds=retry["max_retry_delay_seconds"]),
                jitter=retry["jitter"],
            ),
            input_payload_format=data["input_payload_format"],
            signing_secret=data["signing_secret"],
            allow_private=data["allow_private"],
        )
        return pipeline, data["json_schema"]
    if kind == ENROLLMENT:
        # Checked when it was stored, perhaps under laxer rules (or written directly): a
        # condition that no longer passes must not hide the catalog nor stop publishing; it
        # is kept refused, and each event it is not evaluated for records why.
        bus, pipeline, cel_match = data["bus"], data["pipeline"], data["cel_match"]
        try:
            return Enrollment(name, bus, pipeline, cel_match), None
        except InvalidArgument:
            if not isinstance(cel_match, str):
                raise
            check_resource_name(name, "enrollment")
            check_resource_name(bus, "bus")
            check_resource_name(pipeline, "pipeline")
        unchecked = _unchecked(
            object.__new__(Enrollment),
            name=name,
            bus=bus,
            pipeline=pipeline,
            cel_match=cel_match,
            create_time=None,
            update_time=None,
        )
        return unchecked, None
    raise InvalidArgument(f"unknown event resource kind {kind!r}")


def _unchecked(enrollment: Enrollment, **changes: Any) -> Enrollment:
    """A copy of ``enrollment`` with ``changes``, without the checks of its constructor."""
    copy = copy_module.copy(enrollment)
    for name, value in changes.items():
        object.__setattr__(copy, name, value)
    return copy


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
