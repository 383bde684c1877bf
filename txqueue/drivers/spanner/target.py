"""The name of a Cloud Spanner database, as a ``spanner://`` URL gives it (no client needed)."""

from __future__ import annotations

import re

from txqueue.errors import InvalidArgument

__all__ = ["check_target"]

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
