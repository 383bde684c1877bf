"""``txqueue buses|pipelines|enrollments``: the event layer's configuration from the shell.

Shaped after ``gcloud eventarc`` (``pipelines update NAME --min-retry-delay=4 ...``): its
fully qualified names, ``--project``, ``--location`` and ``--destinations`` are taken as
`eventarc_names` says; thin over `txqueue.Events`. ``txqueue events`` and ``txqueue dispatcher`` are in `event_delivery`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click

import txqueue
from txqueue.cli.common import (
    database_option,
    duration_value,
    open_database,
    run_command,
    seconds_value,
)
from txqueue.cli.eventarc_names import (
    check_location,
    check_project,
    destinations_value,
    placement_options,
    resource_id,
)
from txqueue.cli.listing import emit, format_option
from txqueue.cli.text import Column, print_table
from txqueue.core.durations import parse_duration
from txqueue.errors import InvalidArgument
from txqueue.events.resources import UNCHANGED
from txqueue.events.secrets import secret_from_environment, secret_from_file

__all__ = ["FLAGS", "buses", "call", "enrollments", "json_option", "pipelines", "since"]


#: Python arguments that txqueue's errors name, as this CLI spells them.
FLAGS = {
    "allow_private=True": "--allow-private",
    "max_attempts": "--max-retry-attempts",
    "min_retry_delay": "--min-retry-delay",
    "max_retry_delay": "--max-retry-delay",
    "input_payload_format": "--input-payload-format",
    "json_schema": "--json-schema",
    "cel_match": "--cel-match",
    "older_than": "--older-than",
}


@contextmanager
def _events(database: str, create: bool = False) -> Iterator[txqueue.Events]:
    with open_database(database, create=create) as db:
        yield txqueue.Events(db)


def call(database: str, action: Callable[[txqueue.Events], Any], create: bool = False) -> Any:
    """``action`` on the database's event layer; its errors name CLI flags (`FLAGS`). Only
    ``create`` makes a SQLite database that does not exist yet."""
    with _events(database, create) as events:
        return run_command(lambda: action(events), FLAGS)


def describe(resource: Any) -> dict[str, Any]:
    """A resource as plain JSON values (the signing secret shown only as set or not)."""
    data: dict[str, Any] = {"name": resource.name}
    for key, value in vars(resource).items():
        if key == "name":
            continue
        if key == "signing_secret":
            value = None if value is None else "(set)"
        elif key == "retry":
            value = {
                "max_attempts": value.max_attempts,
                "min_retry_delay_seconds": value.min_retry_delay.total_seconds(),
                "max_retry_delay_seconds": value.max_retry_delay.total_seconds(),
            }
        elif key == "retention":
            key, value = "retention_seconds", None if value is None else value.total_seconds()
        elif isinstance(value, datetime):
            value = value.isoformat()
        elif key == "destination":
            value = str(value)
        data[key] = value
    return data


def _show(resource: Any) -> None:
    click.echo(json.dumps(describe(resource), indent=2))


def _table(title: str, resources: list[Any], columns: list[str], output_format: str) -> None:
    rows = [describe(r) for r in resources]
    emit(
        output_format,
        rows,
        lambda: print_table(
            [Column(column, no_wrap=column == "name") for column in columns],
            ([_cell(row.get(column)) for column in columns] for row in rows),
            title=title,
            empty=f"no {title}",
        ),
    )


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in value.items()
        )
    return "-" if value is None else str(value)


def _seconds(value: float | None, flag: str) -> timedelta | None:
    return None if value is None else seconds_value(value, flag)


def _retention(text: str | None) -> Any:
    if text is None:
        return UNCHANGED
    return None if text == "forever" else duration_value(text, "--retention")


def since(text: str | None) -> datetime | None:
    """``--since``: an ISO 8601 time with zone, or a duration back from now (``2h``)."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            return datetime.now(timezone.utc) - parse_duration(text, "--since")
        except InvalidArgument as error:
            raise click.BadParameter(f"{error} or an ISO 8601 time", param_hint="--since") from None
    if when.tzinfo is None:
        raise click.BadParameter(
            "give a time zone, e.g. 2024-05-06T07:00:00Z", param_hint="--since"
        )
    return when


def json_option(text: str | None, name: str) -> Any:
    """A JSON value given inline or as ``@path``."""
    if text is None:
        return None
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    try:
        return json.loads(text)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON: {error}", param_hint=name) from None


# ---- buses ---------------------------------------------------------------------------------


@click.group()
def buses() -> None:
    """Create, change, list, describe and delete buses."""


_archive = click.option("--archive/--no-archive", default=None, help="Keep every message received.")
_retention_option = click.option(
    "--retention", help="How long archived messages and attempt logs are kept (30d, 12h, forever)."
)


@buses.command("create")
@click.argument("name")
@database_option
@_archive
@_retention_option
@placement_options
def create_bus(
    name: str,
    database: str,
    archive: bool | None,
    retention: str | None,
    project: str | None,
    location: str | None,
) -> None:
    """Create bus NAME (archiving on, 30 days' retention, unless told otherwise)."""
    name = resource_id(name, "bus", "NAME", project, location)
    kept = _retention(retention)
    options: dict[str, Any] = {} if kept is UNCHANGED else {"retention": kept}
    _show(
        call(
            database,
            lambda e: e.create_bus(name, archive=archive is not False, **options),
            create=True,
        )
    )


@buses.command("update")
@click.argument("name")
@database_option
@_archive
@_retention_option
@placement_options
def update_bus(
    name: str,
    database: str,
    archive: bool | None,
    retention: str | None,
    project: str | None,
    location: str | None,
) -> None:
    """Change the archive settings of bus NAME."""
    name = resource_id(name, "bus", "NAME", project, location)
    kept = _retention(retention)
    _show(call(database, lambda e: e.update_bus(name, archive=archive, retention=kept)))


# ---- pipelines -----------------------------------------------------------------------------


@click.group()
def pipelines() -> None:
    """Create, change, list, describe and delete pipelines."""


def _pipeline_options(function: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--max-retry-attempts", type=int, help="Attempts in all (default 5)."),
        click.option(
            "--min-retry-delay", type=float, help="First retry delay, s (1-600, default 1)."
        ),
        click.option(
            "--max-retry-delay", type=float, help="Longest retry delay, s (1-600, default 60)."
        ),
        click.option(
            "--input-payload-format", type=click.Choice(["json"]), help="Require JSON data."
        ),
        click.option("--json-schema", help="JSON Schema the data must match (inline or @file)."),
        click.option(
            "--signing-secret",
            help="Sign deliveries (Standard Webhooks, whsec_...); visible to other users of "
            "the host while the command runs: prefer the two options below.",
        ),
        click.option(
            "--signing-secret-file",
            metavar="PATH",
            help="Read the signing secret from this file (one trailing newline dropped).",
        ),
        click.option(
            "--signing-secret-env",
            metavar="NAME",
            help="Read the signing secret from this environment variable.",
        ),
        click.option(
            "--allow-private/--no-allow-private",
            default=None,
            help="Allow private, loopback and link-local destination hosts.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return placement_options(function)


_DESTINATION_HELP = "http(s) URL, bus:NAME or queue:NAME."
_DESTINATIONS_HELP = (
    "gcloud's spelling: http_endpoint_uri=URL, message_bus=BUS or pubsub_topic=BUS "
    "(a topic is a bus here), with optional project= and location=."
)


def _destination(options: dict[str, Any], required: bool) -> str | None:
    """The one of --destination and --destinations given, as a txqueue destination."""
    plain, gcloud = options.pop("destination"), options.pop("destinations")
    if plain is not None and gcloud is not None:
        raise click.UsageError("--destination and --destinations are mutually exclusive")
    if gcloud is not None:
        return destinations_value(gcloud, options["project"], options["location"])
    if plain is None and required:
        raise click.UsageError("Missing option '--destination' (or gcloud's '--destinations').")
    return plain  # type: ignore[no-any-return]


@pipelines.command("create")
@click.argument("name")
@database_option
@click.option("--destination", help=_DESTINATION_HELP)
@click.option("--destinations", help=_DESTINATIONS_HELP)
@_pipeline_options
def create_pipeline(name: str, database: str, **options: Any) -> None:
    """Create pipeline NAME delivering to --destination (or --destinations)."""
    name = resource_id(name, "pipeline", "NAME", options["project"], options["location"])
    destination = _destination(options, required=True)
    assert destination is not None
    secret = _signing_secret(options, unset=None)
    fields = {
        "max_attempts": options["max_retry_attempts"],
        "min_retry_delay": _seconds(options["min_retry_delay"], "--min-retry-delay"),
        "max_retry_delay": _seconds(options["max_retry_delay"], "--max-retry-delay"),
    }
    given = {key: value for key, value in fields.items() if value is not None}

    def create(events: txqueue.Events) -> Any:
        return events.create_pipeline(
            name,
            destination,
            retry=txqueue.RetryPolicy(**given) if given else None,
            input_payload_format=options["input_payload_format"],
            json_schema=json_option(options["json_schema"], "--json-schema"),
            signing_secret=secret,
            allow_private=bool(options["allow_private"]),
        )

    _show(call(database, create, create=True))


@pipelines.command("update")
@click.argument("name")
@database_option
@click.option("--destination", help=_DESTINATION_HELP)
@click.option("--destinations", help=_DESTINATIONS_HELP)
@_pipeline_options
@click.option("--clear-payload-format", is_flag=True, help="Remove the payload format and schema.")
@click.option("--clear-signing-secret", is_flag=True, help="Stop signing deliveries.")
def update_pipeline(name: str, database: str, **options: Any) -> None:
    """Change pipeline NAME; dispatchers apply it from their next attempt on."""
    name = resource_id(name, "pipeline", "NAME", options["project"], options["location"])
    destination = _destination(options, required=False)
    secret = _signing_secret(options, unset=UNCHANGED)
    changes: dict[str, Any] = {
        "destination": destination,
        "max_attempts": options["max_retry_attempts"],
        "min_retry_delay": _seconds(options["min_retry_delay"], "--min-retry-delay"),
        "max_retry_delay": _seconds(options["max_retry_delay"], "--max-retry-delay"),
        "allow_private": options["allow_private"],
    }
    if options["clear_payload_format"]:
        changes.update(input_payload_format=None, json_schema=None)
    if options["input_payload_format"] is not None:
        changes["input_payload_format"] = options["input_payload_format"]
    if options["json_schema"] is not None:
        changes["json_schema"] = json_option(options["json_schema"], "--json-schema")
    _show(call(database, lambda e: e.update_pipeline(name, signing_secret=secret, **changes)))


def _signing_secret(options: dict[str, Any], unset: Any) -> Any:
    """The secret of the one --signing-secret* option given (``unset`` when none is; None
    for --clear-signing-secret), read now; a usage error (exit 2) naming the option."""
    sources = {
        "--signing-secret": options["signing_secret"],
        "--signing-secret-file": options["signing_secret_file"],
        "--signing-secret-env": options["signing_secret_env"],
    }
    given = [flag for flag, value in sources.items() if value is not None]
    if options.get("clear_signing_secret"):
        if given:
            raise click.UsageError(f"--clear-signing-secret and {given[0]} are mutually exclusive")
        return None
    if len(given) > 1:
        raise click.UsageError(
            "--signing-secret, --signing-secret-file and --signing-secret-env are mutually "
            "exclusive: give one of them"
        )
    if not given:
        return unset
    flag = given[0]
    value = sources[flag]
    try:
        if flag == "--signing-secret-file":
            return secret_from_file(value)
        if flag == "--signing-secret-env":
            return secret_from_environment(value)
    except InvalidArgument as error:
        raise click.BadParameter(str(error), param_hint=f"'{flag}'") from error
    if not value:
        raise click.BadParameter("the secret is empty", param_hint=f"'{flag}'")
    return value


# ---- enrollments ---------------------------------------------------------------------------


@click.group()
def enrollments() -> None:
    """Create, change, list, describe and delete enrollments."""


@enrollments.command("create")
@click.argument("name")
@database_option
@click.option(
    "--bus", "--message-bus", "bus", required=True, help="The bus whose events are matched."
)
@click.option(
    "--pipeline", "--destination-pipeline", "pipeline", required=True, help="Where matches go."
)
@click.option(
    "--cel-match", required=True, help='CEL condition, e.g. message.type == "x" (or "true").'
)
@click.option(
    "--message-bus-project", help="Project of the bus: checked, no effect; a database is one."
)
@placement_options
def create_enrollment(
    name: str,
    database: str,
    bus: str,
    pipeline: str,
    cel_match: str,
    message_bus_project: str | None,
    project: str | None,
    location: str | None,
) -> None:
    """Create enrollment NAME routing matching events of --bus to --pipeline."""
    name = resource_id(name, "enrollment", "NAME", project, location)
    check_project(message_bus_project, "--message-bus-project")
    bus = resource_id(bus, "bus", "--message-bus", message_bus_project or project, location)
    pipeline = resource_id(pipeline, "pipeline", "--destination-pipeline", project, location)
    _show(
        call(
            database,
            lambda e: e.create_enrollment(name, bus=bus, pipeline=pipeline, cel_match=cel_match),
        )
    )


@enrollments.command("update")
@click.argument("name")
@database_option
@click.option(
    "--pipeline", "--destination-pipeline", "pipeline", help="Route matches here instead."
)
@click.option("--cel-match", help="The new CEL condition.")
@placement_options
def update_enrollment(
    name: str,
    database: str,
    pipeline: str | None,
    cel_match: str | None,
    project: str | None,
    location: str | None,
) -> None:
    """Change the condition or pipeline of enrollment NAME."""
    name = resource_id(name, "enrollment", "NAME", project, location)
    if pipeline is not None:
        pipeline = resource_id(pipeline, "pipeline", "--destination-pipeline", project, location)
    _show(
        call(database, lambda e: e.update_enrollment(name, cel_match=cel_match, pipeline=pipeline))
    )


_COLUMNS = {
    "buses": ["name", "archive", "retention_seconds", "update_time"],
    "pipelines": ["name", "destination", "retry", "input_payload_format", "update_time"],
    "enrollments": ["name", "bus", "pipeline", "cel_match", "update_time"],
}


def _add_common(group: click.Group, kind: str) -> None:
    """``list``, ``describe`` and ``delete`` for one resource kind."""
    noun = {"buses": "bus"}.get(kind, kind[:-1])

    @group.command("list")
    @database_option
    @format_option
    @placement_options
    def list_command(
        database: str, output_format: str, project: str | None, location: str | None
    ) -> None:
        check_project(project, "--project")
        check_location(location, "--location")
        found = call(database, lambda e: getattr(e, f"list_{kind}")())
        _table(kind, found, _COLUMNS[kind], output_format)

    @group.command("describe")
    @click.argument("name")
    @database_option
    @placement_options
    def describe_command(
        name: str, database: str, project: str | None, location: str | None
    ) -> None:
        name = resource_id(name, noun, "NAME", project, location)
        _show(call(database, lambda e: getattr(e, f"get_{noun}")(name)))

    @group.command("delete")
    @click.argument("name")
    @database_option
    @placement_options
    def delete_command(name: str, database: str, project: str | None, location: str | None) -> None:
        name = resource_id(name, noun, "NAME", project, location)
        call(database, lambda e: getattr(e, f"delete_{noun}")(name))
        click.echo(f"deleted {noun} {name}")

    list_command.help = f"List {kind}."
    describe_command.help = f"Show one {noun} as JSON."
    delete_command.help = f"Delete one {noun}."


for _group, _kind in ((buses, "buses"), (pipelines, "pipelines"), (enrollments, "enrollments")):
    _add_common(_group, _kind)
