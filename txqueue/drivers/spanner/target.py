"""The name of a Cloud Spanner database, as a ``spanner://`` URL gives it (no client needed)."""

from __future__ import annotations

import re

from txqueue.errors import InvalidArgument

__all__ = ["QUEUES_MODES", "QUEUES_OPTION", "check_target", "queues_mode"]

_TARGET = re.compile(
    r"projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])"
    r"/instances/(?P<instance>[a-z][a-z0-9-]{0,62}[a-z0-9])"
    r"/databases/(?P<database>[a-z][a-z0-9_-]{0,28}[a-z0-9])\Z"
)


def check_target(target: str) -> tuple[str, str, str]:
    """Project, instance and database of ``projects/P/instances/I/databases/D``;
    InvalidArgument naming the rule otherwise."""
    match = _TARGET.match(target)
    if match is None:
        raise InvalidArgument(
            "Spanner URL must look like spanner://projects/PROJECT/instances/INSTANCE/"
            f"databases/DATABASE (lower-case Spanner IDs), got {target[:160]!r}"
        )
    return match["project"], match["instance"], match["database"]


#: The ``queues`` URL option: ``auto`` (the default) uses Cloud Spanner's own queues when the
#: database accepts ``CREATE QUEUE`` (the emulator does not), else queues emulated on tables.
QUEUES_OPTION = "queues"
QUEUES_MODES = ("auto", "native", "emulated")


def queues_mode(options: dict[str, str]) -> str:
    """The ``queues`` URL option (``auto`` when absent); InvalidArgument naming it otherwise."""
    mode = options.get(QUEUES_OPTION, "auto")
    if mode not in QUEUES_MODES:
        raise InvalidArgument(
            f"URL option queues must be one of {', '.join(QUEUES_MODES)}, got {mode[:40]!r}"
        )
    return mode
