"""Query parameters: ``@name`` (GoogleSQL) and ``$n`` (PostgreSQL) to engine placeholders.

Every value — the caller's parameters and the constants the translator computes (bytes
literals, the statement's ``CURRENT_TIMESTAMP``) — is bound, never spliced into SQL. Values
are encoded as the engine stores them: on SQLite a TIMESTAMP is INTEGER microseconds, JSON
and arrays are text; on PostgreSQL psycopg adapts them (JSON as jsonb).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp

from txqueue.core.durations import require_aware
from txqueue.core.schema import Column, ColumnType, Dialect
from txqueue.core.values import check_value
from txqueue.drivers.engines import traits_named
from txqueue.errors import InvalidArgument

__all__ = ["Binder", "value_type"]

_ARRAY = re.compile(r"ARRAY\s*<\s*(\w+)\s*>\Z", re.IGNORECASE)
_TYPE_ALIASES = {
    "STRING": ColumnType.STRING,
    "TEXT": ColumnType.STRING,
    "VARCHAR": ColumnType.STRING,
    "INT64": ColumnType.INT64,
    "BIGINT": ColumnType.INT64,
    "BOOL": ColumnType.BOOL,
    "BOOLEAN": ColumnType.BOOL,
    "BYTES": ColumnType.BYTES,
    "BYTEA": ColumnType.BYTES,
    "FLOAT64": ColumnType.FLOAT64,
    "FLOAT32": ColumnType.FLOAT32,
    "TIMESTAMP": ColumnType.TIMESTAMP,
    "TIMESTAMPTZ": ColumnType.TIMESTAMP,
    "DATE": ColumnType.DATE,
    "JSON": ColumnType.JSON,
    "JSONB": ColumnType.JSON,
    "NUMERIC": ColumnType.NUMERIC,
}


def value_type(value: Any) -> Column | None:
    """The column type a Python value stands for (None: unknown or NULL)."""
    kinds: list[tuple[type | tuple[type, ...], ColumnType]] = [
        (bool, ColumnType.BOOL),
        (int, ColumnType.INT64),
        (float, ColumnType.FLOAT64),
        (str, ColumnType.STRING),
        ((bytes, bytearray, memoryview), ColumnType.BYTES),
        (_dt.datetime, ColumnType.TIMESTAMP),
        (_dt.date, ColumnType.DATE),
        (decimal.Decimal, ColumnType.NUMERIC),
        (dict, ColumnType.JSON),
    ]
    for python_type, column_type in kinds:
        if isinstance(value, python_type):
            return Column("", column_type)
    return None


class Binder:
    """Hands out placeholders for one statement and keeps their encoded values."""

    def __init__(
        self, engine: str, dialect: Dialect, params: Any = None, param_types: Any = None
    ) -> None:
        self.engine = engine
        self._encode_value = traits_named(engine).encode_parameter
        self.dialect = dialect
        self.values: dict[str, Any] = {}
        self.types: dict[str, Column | None] = {}
        self.prefix = f"txq{secrets.token_hex(4)}_"
        #: where each placeholder's value came from, in order: the caller's parameter (its
        #: reference, and where it stands for errors) or None for a constant (`replay`)
        self.sources: list[tuple[str, str] | None] = []
        self._params = _normalise(params, dialect)
        self._types = _normalise_types(param_types, dialect)

    def signature(self) -> tuple[tuple[str, Column | None, Column | str | None], ...]:
        """What a statement's plan can depend on in these parameters: each one's declared
        type, and the type its value stands for (else the value's Python type). Two calls
        with the same signature get the same SQL; only the values differ."""
        missing = object()
        return tuple(
            (key, self._types.get(key), _kind(self._params.get(key, missing)))
            for key in sorted(self._params.keys() | self._types.keys())
        )

    def replay(
        self,
        prefix: str,
        sources: Sequence[tuple[str, str] | None],
        constants: Mapping[str, Any],
        types: Mapping[str, Column | None],
    ) -> None:
        """Bind what a kept plan bound, under its names: the caller's parameters from this
        binder's values (checked as on a first run), the translator's constants as they were."""
        self.prefix = prefix
        for index, source in enumerate(sources):
            if source is not None:
                self.user(*source)
                continue
            name = f"{prefix}{index}"
            self.values[name] = constants[name]
            self.types[name] = types[name]
            self.sources.append(None)

    # ---- the caller's parameters -----------------------------------------------------------

    def has(self, reference: str) -> bool:
        return _key(reference) in self._params

    def raw(self, reference: str, where: str = "") -> Any:
        """The caller's value for ``@name`` / ``$n``; InvalidArgument when none was given."""
        key = _key(reference)
        if key not in self._params:
            given = ", ".join(sorted(self._display(k) for k in self._params)) or "none"
            raise InvalidArgument(f"no value for parameter {reference}{where} (given: {given})")
        return self._params[key]

    def _display(self, key: str) -> str:
        return f"${key[1:]}" if key.startswith("#") else f"@{key}"

    def user(self, reference: str, where: str = "") -> exp.Placeholder:
        """A placeholder bound to the caller's parameter ``reference``."""
        value = self.raw(reference, where)
        declared = self._types.get(_key(reference))
        if declared is not None:
            value = check_value(declared, value, f"parameter {reference}")
            placeholder = self.bind(value, declared)
        else:
            inferred = value_type(value)
            if inferred is not None:  # its type's rules still hold: INT64's range, UTF-8 text
                value = check_value(inferred, value, f"parameter {reference}")
            elif isinstance(value, (list, tuple)):
                _check_array(value, f"parameter {reference}")
            placeholder = self.bind(value, inferred)
        self.sources[-1] = (reference, where)
        return placeholder

    # ---- binding -------------------------------------------------------------------------------

    def bind(self, value: Any, column: Column | None = None) -> exp.Placeholder:
        """A placeholder for ``value`` (encoded for the engine)."""
        name = f"{self.prefix}{len(self.values)}"
        self.values[name] = self._encode(value, column)
        self.types[name] = column
        self.sources.append(None)
        return exp.Placeholder(this=name)

    def _encode(self, value: Any, column: Column | None) -> Any:
        if value is None:
            return None
        if isinstance(value, _dt.timedelta):
            raise InvalidArgument("a timedelta parameter is only accepted for max_duration")
        if isinstance(value, _dt.datetime):
            value = require_aware(value, "a TIMESTAMP parameter")
        elif isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        is_json = column is not None and column.type is ColumnType.JSON and not column.array
        return self._encode_value(value, is_json)


def _kind(value: Any) -> Column | str | None:
    """The type ``value`` stands for, else its Python type's name (None and arrays too)."""
    return value_type(value) or type(value).__name__


def _check_array(items: Sequence[Any], field: str) -> None:
    """An array parameter's elements: scalars of their type's rules (no arrays of arrays, as
    in Spanner; an engine's driver would recurse into any depth of them)."""
    for index, item in enumerate(items):
        if isinstance(item, (list, tuple)):
            raise InvalidArgument(
                f"{field}[{index}] is an array: an array's elements are scalars (no arrays of "
                "arrays, as in Spanner)"
            )
        column = value_type(item)
        if column is not None:
            check_value(column, item, f"{field}[{index}]")


def _key(reference: str) -> str:
    """``@Name`` → ``name``; ``$3`` → ``#3``."""
    if reference.startswith("$"):
        return "#" + reference[1:]
    return reference.lstrip("@").lower()


def _normalise(params: Any, dialect: Dialect) -> dict[str, Any]:
    if params is None:
        return {}
    if isinstance(params, Mapping):
        out: dict[str, Any] = {}
        for name, value in params.items():
            if not isinstance(name, str):
                raise InvalidArgument("parameter names must be strings")
            match = re.fullmatch(r"\$?p?(\d+)", name) if dialect is Dialect.POSTGRESQL else None
            out["#" + match.group(1) if match else name.lstrip("@").lower()] = value
        return out
    if isinstance(params, Sequence) and not isinstance(params, (str, bytes)):
        if dialect is not Dialect.POSTGRESQL:
            raise InvalidArgument("GoogleSQL parameters are named: pass params={'name': value}")
        return {f"#{i}": value for i, value in enumerate(params, 1)}
    raise InvalidArgument(f"params must be a dict or a list, got {type(params).__name__}")


def _normalise_types(param_types: Any, dialect: Dialect) -> dict[str, Column]:
    if param_types is None:
        return {}
    if not isinstance(param_types, Mapping):
        raise InvalidArgument("param_types must be a dict of parameter name to type")
    return {
        key: _column(kind, name)
        for name, kind in param_types.items()
        for key in _normalise({name: None}, dialect)
    }


def _column(kind: Any, name: str) -> Column:
    if isinstance(kind, Column):
        return Column(name, kind.type, True, None, kind.array)
    if isinstance(kind, ColumnType):
        return Column(name, kind)
    text = str(getattr(kind, "value", kind)).strip().upper()
    array = _ARRAY.match(text)
    element = array.group(1) if array else text.removesuffix("[]")
    column_type = _TYPE_ALIASES.get(element)
    if column_type is None:
        raise InvalidArgument(f"unknown type {kind!r} for parameter {name!r}")
    return Column(name, column_type, True, None, bool(array) or text.endswith("[]"))
