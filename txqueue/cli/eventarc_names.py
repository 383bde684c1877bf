"""Eventarc's spellings on the command line: resource names, ``--project``, ``--location``,
``--destinations``, so that a ``gcloud eventarc`` command runs with the program name changed.

One database is one project and one location: a fully qualified name
(``projects/P/locations/L/pipelines/N``) names the resource ``N`` of this database, whatever
``P`` and ``L`` are. They are checked for their shape (a typo is caught, not kept), never
recorded, and never make two resources of one name. What has no meaning here (a Workflows
destination, a network attachment, authentication for Google's services) is refused with
the part named.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = [
    "COLLECTIONS",
    "check_location",
    "check_project",
    "destinations_value",
    "placement_options",
    "resource_id",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The collection of each resource kind in a fully qualified name, and how errors call it.
COLLECTIONS = {"pipeline": "pipelines", "enrollment": "enrollments", "bus": "messageBuses"}

# Google Cloud project IDs: 6-30 lowercase letters, digits and hyphens, starting with a
# letter, not ending with a hyphen; optionally domain-scoped (example.com:name); or a number.
_PROJECT = re.compile(r"(?:[a-z][a-z0-9.-]{0,61}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]\Z|[0-9]{1,20}\Z")
_LOCATION = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
_QUALIFIED = re.compile(r"projects/(?P<project>[^/]*)(?:/locations/(?P<location>[^/]*))?/")

#: ``--destinations`` keys that name where a pipeline delivers, and txqueue's destination.
_TARGETS = {"http_endpoint_uri": "http", "message_bus": "bus", "pubsub_topic": "bus"}
#: Keys with no meaning for a local database, and why.
_NO_MEANING = {
    "workflow": "txqueue has no Workflows; deliver to http_endpoint_uri= instead",
    "network_attachment": "a dispatcher connects from its own host; leave it out",
    "http_endpoint_message_binding_template": "deliveries are CloudEvents in binary mode",
    "google_oidc_authentication_service_account": "use a signing secret (--signing-secret-file)",
    "google_oidc_authentication_audience": "use a signing secret (--signing-secret-file)",
    "oauth_token_authentication_service_account": "use a signing secret (--signing-secret-file)",
    "oauth_token_authentication_scope": "use a signing secret (--signing-secret-file)",
    "output_payload_format_json": "deliveries carry the event's data as it was published",
    "output_payload_format_avro_schema_definition": "txqueue converts no payload formats",
    "output_payload_format_protobuf_schema_definition": "txqueue converts no payload formats",
}


def check_project(value: str | None, hint: str) -> None:
    """A usage error naming ``hint`` unless ``value`` is None or shaped as a project ID."""
    if value is not None and not _PROJECT.match(value):
        raise click.BadParameter(
            f"project {value!r} is not a Google Cloud project ID (6-30 lowercase letters, "
            "digits and hyphens, starting with a letter) or number",
            param_hint=hint,
        )


def check_location(value: str | None, hint: str) -> None:
    """A usage error naming ``hint`` unless ``value`` is None or shaped as a location."""
    if value is not None and not _LOCATION.match(value):
        raise click.BadParameter(
            f"location {value!r} is not a location such as us-central1 or global",
            param_hint=hint,
        )


def placement_options(function: F) -> F:
    """``--project`` and ``--location``: accepted as gcloud takes them, checked, and
    otherwise without effect (one database is one project and one location)."""
    function = click.option(
        "--location",
        help="Eventarc location (us-central1, ...): checked, no effect; a database is one.",
    )(function)
    return click.option(
        "--project", help="Google Cloud project: checked, no effect; a database is one."
    )(function)


def resource_id(
    value: str,
    kind: str,
    hint: str,
    project: str | None = None,
    location: str | None = None,
) -> str:
    """The resource ID in ``value``, given as an ID or as Eventarc's fully qualified name
    of a ``kind`` (``projects/P/locations/L/pipelines/N``). A project or location in the
    name that contradicts ``--project`` / ``--location`` is a usage error, as is a name of
    another collection or a malformed one; each names ``hint``."""
    check_project(project, "--project")
    check_location(location, "--location")
    if not value.startswith("projects/"):
        return value  # an ID: the API checks it (exit 1, as every refusal of a value)
    found = _QUALIFIED.match(value)
    if found is None:
        raise click.BadParameter(
            f"{value!r} is not a {kind} name of the form "
            f"projects/PROJECT/locations/LOCATION/{COLLECTIONS[kind]}/ID",
            param_hint=hint,
        )
    rest = value[found.end() :]
    collection, _, name = rest.partition("/")
    if found["location"] is None or collection != COLLECTIONS[kind] or not name:
        raise click.BadParameter(
            f"{value!r} is not a {kind} name: expected "
            f"projects/PROJECT/locations/LOCATION/{COLLECTIONS[kind]}/ID",
            param_hint=hint,
        )
    _placed(found["project"], found["location"], project, location, hint)
    return name


def _placed(
    project: str, location: str, given_project: str | None, given_location: str | None, hint: str
) -> None:
    check_project(project, hint)
    check_location(location, hint)
    for what, named, given in (
        ("project", project, given_project),
        ("location", location, given_location),
    ):
        if given is not None and given != named:
            raise click.BadParameter(
                f"{what} {named!r} in the name differs from --{what} {given!r}",
                param_hint=hint,
            )


def destinations_value(text: str, project: str | None, location: str | None) -> str:
    """gcloud's ``--destinations=KEY=VALUE,...`` as txqueue's destination (an http(s) URL or
    ``bus:NAME``). ``pubsub_topic=T`` delivers to the bus ``T``: a bus here is what a topic
    is there, a named stream whose archive keeps every message it receives. ``project=`` and
    ``location=`` are checked and without effect; a key with no local meaning is refused,
    named, as is a second destination."""
    hint = "--destinations"
    if "#" in text or "|" in text:
        raise click.BadParameter("a pipeline has one destination here", param_hint=hint)
    pairs: dict[str, str] = {}
    for item in text.split(","):
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=hint)
        if key in _NO_MEANING:
            raise click.BadParameter(
                f"{key}= has no meaning for a local database: {_NO_MEANING[key]}",
                param_hint=hint,
            )
        if key not in (*_TARGETS, "project", "location"):
            known = ", ".join(f"{k}=" for k in (*_TARGETS, "project", "location"))
            raise click.BadParameter(f"unknown key {key}= (known: {known})", param_hint=hint)
        if key in pairs:
            raise click.BadParameter(f"{key}= is given twice", param_hint=hint)
        pairs[key] = value
    check_project(pairs.get("project"), hint)
    check_location(pairs.get("location"), hint)
    targets = [key for key in _TARGETS if key in pairs]
    if len(targets) != 1:
        raise click.BadParameter(
            "give exactly one of http_endpoint_uri=, message_bus= or pubsub_topic=",
            param_hint=hint,
        )
    key = targets[0]
    value = pairs[key]
    if _TARGETS[key] == "http":
        return value
    if key == "pubsub_topic" and value.startswith("projects/"):
        topic = re.fullmatch(r"projects/([^/]*)/topics/([^/]+)", value)
        if topic is None:
            raise click.BadParameter(
                f"pubsub_topic {value!r} is not projects/PROJECT/topics/TOPIC", param_hint=hint
            )
        check_project(topic[1], hint)
        value = topic[2]
    elif key == "message_bus":
        value = resource_id(value, "bus", hint, project, location)
    return f"bus:{value}"  # the API checks the name
