"""Where a pipeline's signing secret comes from: given, read from a file, or from a variable.

A secret passed on a command line is visible to every user of the host (``/proc/*/cmdline``)
and stays in shell histories; a file or an environment variable is not. Either is read once,
when the pipeline is created or updated: the database stores the secret itself.
"""

from __future__ import annotations

import os
from typing import Any

from txqueue.errors import InvalidArgument
from txqueue.events.signing import sign

__all__ = ["choose_secret", "secret_from_environment", "secret_from_file"]


def choose_secret(
    secret: Any,
    file: str | os.PathLike[str] | None,
    variable: str | None,
    *,
    unset: Any,
) -> Any:
    """The secret from the one source given: ``secret`` (``unset`` when not given), the file
    ``file`` or the environment variable ``variable``.

    InvalidArgument naming the arguments when more than one is given, or naming the argument
    when its file or variable yields no usable secret.
    """
    names = ("signing_secret", "signing_secret_file", "signing_secret_env")
    chosen = (secret is not unset, file is not None, variable is not None)
    given = [name for name, value in zip(names, chosen) if value]
    if len(given) > 1:
        raise InvalidArgument(f"{', '.join(given)} are mutually exclusive: give one of them")
    try:
        if file is not None:
            return secret_from_file(file)
        if variable is not None:
            return secret_from_environment(variable)
    except InvalidArgument as error:
        raise InvalidArgument(f"{given[0]}: {error}") from error
    return secret


def secret_from_file(path: str | os.PathLike[str]) -> str:
    """The secret in file ``path``, without one trailing newline, checked."""
    source = f"file {os.fspath(path)!r}"
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise InvalidArgument(f"{source} cannot be read: {reason}") from error
    return _checked(text.removesuffix("\n").removesuffix("\r"), source)


def secret_from_environment(name: str) -> str:
    """The secret in environment variable ``name``, checked."""
    if not isinstance(name, str) or not name:
        raise InvalidArgument("the name of an environment variable is needed")
    value = os.environ.get(name)
    if value is None:
        raise InvalidArgument(f"environment variable {name} is not set")
    return _checked(value, f"environment variable {name}")


def _checked(secret: str, source: str) -> str:
    """``secret`` if it is a usable signing secret; errors name ``source``, never the value."""
    if not secret:
        raise InvalidArgument(f"{source} is empty")
    try:
        sign(secret, "check", 0, b"")
    except InvalidArgument as error:
        raise InvalidArgument(f"{source}: {error}") from error
    return secret
