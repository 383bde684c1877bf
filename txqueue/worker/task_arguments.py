"""What a task's arguments may be: JSON values whose shape its annotations describe.

A task's parameters are checked once, when it is registered (every one annotated with a JSON
shape), and its arguments twice: when a message is sent (before anything is written, so a bad
call changes nothing) and when it is received (a message written by plain SQL, or by an older
version of the task, may not fit). Supported annotations: ``int``, ``float``, ``str``, ``bool``,
``None``, ``list[X]``, ``dict[str, X]``, ``X | Y`` / ``Optional[X]``, ``Literal[...]`` of JSON
scalars, and ``Any`` (any JSON value).
"""

from __future__ import annotations

import inspect
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

from txqueue.errors import InvalidArgument

__all__ = ["RESERVED", "TaskSignature"]

#: Names `Task.send` takes for itself: no task parameter may have them.
RESERVED = frozenset({"key", "deliver_time"})

_SCALARS: tuple[type, ...] = (int, float, str, bool, type(None))


class TaskSignature:
    """A task function's parameters and their JSON shapes, checked at registration."""

    def __init__(self, function: Callable[..., Any], task: str) -> None:
        self.task = task
        try:
            self.signature = inspect.signature(function)
            hints = typing.get_type_hints(function)
        except (TypeError, ValueError, NameError) as error:
            raise InvalidArgument(f"task {task}: cannot read its signature: {error}") from None
        self.shapes: dict[str, Any] = {}
        for name, parameter in self.signature.parameters.items():
            where = f"task {task}, parameter {name!r}"
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise InvalidArgument(f"{where}: *args and **kwargs cannot be sent as JSON")
            if parameter.kind is parameter.POSITIONAL_ONLY:
                raise InvalidArgument(f"{where}: positional-only parameters have no JSON name")
            if name in RESERVED:
                raise InvalidArgument(f"{where}: the name is reserved by Task.send")
            if name not in hints:
                raise InvalidArgument(f"{where}: annotate it with a JSON type (int, str, ...)")
            _check_annotation(hints[name], where)
            self.shapes[name] = hints[name]

    def arguments(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The call's arguments by name, defaults left out; InvalidArgument naming the
        parameter when one is missing, unknown, or not of its annotated JSON shape."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise InvalidArgument(f"task {self.task}: {error}") from None
        for name, value in bound.arguments.items():
            problem = _mismatch(value, self.shapes[name])
            if problem is not None:
                raise InvalidArgument(f"task {self.task}, parameter {name!r}: {problem}")
        arguments = dict(bound.arguments)
        try:  # NaN and infinities are no JSON; a bigger int than JSON readers take is refused
            json.dumps(arguments, allow_nan=False)
        except ValueError as error:
            raise InvalidArgument(f"task {self.task}: arguments are not JSON: {error}") from None
        return arguments


def _check_annotation(shape: Any, where: str) -> None:
    if shape is Any or shape in _SCALARS or shape is None:
        return
    origin, parameters = typing.get_origin(shape), typing.get_args(shape)
    if origin is Literal:
        if all(isinstance(value, (int, str, bool)) or value is None for value in parameters):
            return
    elif origin in (Union, types.UnionType):
        for member in parameters:
            _check_annotation(member, where)
        return
    elif origin is list and len(parameters) == 1:
        _check_annotation(parameters[0], where)
        return
    elif origin is dict and len(parameters) == 2 and parameters[0] is str:
        _check_annotation(parameters[1], where)
        return
    elif shape in (list, dict):
        return
    raise InvalidArgument(
        f"{where}: {shape!r} is not a JSON shape (use int, float, str, bool, None, "
        "list[X], dict[str, X], unions, Literal or Any)"
    )


def _mismatch(value: Any, shape: Any) -> str | None:
    """Why ``value`` does not fit ``shape``, or None when it does."""
    if shape is Any:
        return _not_json(value)
    if shape is None or shape is type(None):
        return None if value is None else f"expected None, got {type(value).__name__}"
    if shape is bool:
        return None if isinstance(value, bool) else f"expected bool, got {type(value).__name__}"
    if shape is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"expected int, got {type(value).__name__}"
    if shape is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and isinstance(value, float) and not math.isfinite(value):
            return f"{value} is not a JSON number"
        return None if ok else f"expected float, got {type(value).__name__}"
    if shape is str:
        return None if isinstance(value, str) else f"expected str, got {type(value).__name__}"
    origin, parameters = typing.get_origin(shape), typing.get_args(shape)
    if origin is Literal:
        fits = any(value == choice and type(value) is type(choice) for choice in parameters)
        return None if fits else f"expected one of {list(parameters)!r}, got {value!r}"
    if origin in (Union, types.UnionType):
        problems = [_mismatch(value, member) for member in parameters]
        return None if None in problems else f"fits none of {shape!r} ({problems[0]})"
    if shape is list or origin is list:
        if not isinstance(value, list):
            return f"expected a list, got {type(value).__name__}"
        item = parameters[0] if parameters else Any
        for index, element in enumerate(value):
            problem = _mismatch(element, item)
            if problem is not None:
                return f"item {index}: {problem}"
        return None
    if shape is dict or origin is dict:
        if not isinstance(value, dict):
            return f"expected a dict, got {type(value).__name__}"
        item = parameters[1] if parameters else Any
        for name, element in value.items():
            if not isinstance(name, str):
                return f"dict keys must be str, got {type(name).__name__}"
            problem = _mismatch(element, item)
            if problem is not None:
                return f"[{name!r}]: {problem}"
        return None
    return f"{shape!r} is not a JSON shape"


def _not_json(value: Any) -> str | None:
    """Why ``value`` is no JSON value (for ``Any``), or None."""
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number"
    if isinstance(value, list):
        return next((p for p in map(_not_json, value) if p is not None), None)
    if isinstance(value, dict):
        if not all(isinstance(name, str) for name in value):
            return "dict keys must be str"
        return next((p for p in map(_not_json, value.values()) if p is not None), None)
    return f"{type(value).__name__} is not a JSON value"
