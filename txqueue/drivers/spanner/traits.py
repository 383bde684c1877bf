"""Cloud Spanner's traits: many writers, native TIMESTAMP and JSON, ``@name`` parameters,
GoogleSQL as it is. google-cloud-spanner is imported only when a driver is opened.

`TRAITS_POSTGRESQL` is the target the SQL front end writes for a PostgreSQL-dialect
database (the driver's ``sql_engine``): PostgreSQL as Spanner's PostgreSQL dialect takes it,
``?`` markers that the driver numbers (which also counts the rows of ``ASSERT_ROWS_MODIFIED``
first: the dialect has no such clause and Spanner no savepoints).
No URL chooses it and `Database.engine` stays ``spanner``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult

from txqueue.core.schema import Column
from txqueue.core.url import DatabaseUrl
from txqueue.drivers.spanner.names import DISPLAY_NAME, RESERVED_PREFIX
from txqueue.drivers.traits import Clock, EngineTraits
from txqueue.errors import InvalidArgument

if TYPE_CHECKING:
    from txqueue.drivers._async_protocol import AsyncDriver
    from txqueue.drivers._sync_protocol import Driver

__all__ = ["TRAITS", "TRAITS_POSTGRESQL"]

_NEEDS_CLIENT = "Cloud Spanner support needs google-cloud-spanner: pip install 'txqueue[spanner]'"
#: The hidden columns' prefix (``statements.LAST_ERROR`` is ``txqueue_last_error``).
HIDDEN_COLUMN_PREFIX = "txqueue_"


def _parse(url: str, parts: SplitResult, query: dict[str, str]) -> DatabaseUrl:
    """``spanner://projects/P/instances/I/databases/D``: the target is the database's name."""
    from txqueue.drivers.spanner.target import QUEUES_OPTION, check_target, queues_mode

    unknown = sorted(set(query) - {QUEUES_OPTION})
    if unknown:
        names = ", ".join(unknown)
        raise InvalidArgument(f"unknown Cloud Spanner URL option {names} (it takes queues=)")
    target = f"{parts.netloc}{parts.path}".rstrip("/")
    check_target(target)
    options = {QUEUES_OPTION: queues_mode(query)} if QUEUES_OPTION in query else {}
    return DatabaseUrl(TRAITS.name, target, options)


async def _open_async_driver(url: DatabaseUrl, clock: Clock) -> AsyncDriver:
    try:
        from txqueue.drivers.spanner._async import AsyncSpannerDriver
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise InvalidArgument(_NEEDS_CLIENT) from error
    return AsyncSpannerDriver(url.target, clock, url.options.get("queues", "auto"))


def _open_driver(url: DatabaseUrl, clock: Clock) -> Driver:
    try:
        from txqueue.drivers.spanner._sync import SpannerDriver
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise InvalidArgument(_NEEDS_CLIENT) from error
    return SpannerDriver(url.target, clock, url.options.get("queues", "auto"))


def _dialect() -> Any:
    """GoogleSQL is written as sqlglot's BigQuery: backtick names, ``@name`` parameters."""
    from sqlglot.dialects.bigquery import BigQuery

    return BigQuery


@cache
def _postgresql_dialect() -> Any:
    """Spanner's PostgreSQL dialect, written as sqlglot's PostgreSQL with what Spanner spells
    differently: no INTERVAL type (``spanner.timestamptz_add`` / ``_subtract`` take the interval
    as text), ``spanner.`` functions, JSON paths as ``->`` / ``->>``, ``@name`` placeholders
    (the front end turns them into ``?`` markers in order)."""
    from sqlglot import exp
    from sqlglot.dialects.postgres import Postgres
    from sqlglot.generators.postgres import PostgresGenerator

    def interval_text(generator: Any, amount: exp.Expression, unit: str) -> str:
        """The interval ``amount unit`` as text: a literal, or the amount's text and unit."""
        if isinstance(amount, exp.Literal):
            text = f"{amount.this} {unit}".strip()
            return str(generator.sql(exp.Literal.string(text)))
        if not unit:
            return str(generator.sql(exp.cast(amount.copy(), exp.DataType.build("TEXT"))))
        spelled = exp.DPipe(
            this=exp.cast(amount.copy(), exp.DataType.build("TEXT")),
            expression=exp.Literal.string(f" {unit}"),
        )
        return str(generator.sql(spelled))

    def shift(generator: Any, base: exp.Expression, interval: str, sign: int) -> str:
        name = "spanner.timestamptz_add" if sign > 0 else "spanner.timestamptz_subtract"
        return f"{name}({generator.sql(base)}, {interval})"

    def timestamp_add(sign: int) -> Callable[[Any, exp.Expression], str]:
        def generate(generator: Any, node: exp.Expression) -> str:
            amount = node.expression
            if isinstance(amount, exp.Interval):
                unit = amount.text("unit")
                amount = amount.this
            else:
                unit = node.text("unit")
            return shift(generator, node.this, interval_text(generator, amount, unit), sign)

        return generate

    def json_path(arrow: str) -> Callable[[Any, exp.Expression], str]:
        """JSON_VALUE / JSON_QUERY (and ``->``, ``->>``) as ``j -> 'a' ->> 'b'``."""

        def generate(generator: Any, node: exp.Expression) -> str:
            path = node.expression
            steps = path.expressions if isinstance(path, exp.JSONPath) else [path]
            keys: list[str] = []
            for step in steps:
                if isinstance(step, exp.JSONPathRoot):
                    continue
                if isinstance(step, exp.JSONPathKey) and isinstance(step.this, str):
                    keys.append(str(generator.sql(exp.Literal.string(step.this))))
                elif isinstance(step, exp.JSONPathSubscript) and isinstance(step.this, int):
                    keys.append(str(step.this))
                elif isinstance(step, exp.Expression) and not isinstance(step, exp.JSONPathPart):
                    keys.append(str(generator.sql(step)))
                else:
                    generator.unsupported(f"the JSON path {path.sql()!r}")
                    return "NULL"
            text = str(generator.sql(node.this))
            if not keys:
                if arrow == "->>":
                    generator.unsupported("JSON_VALUE of the whole document")
                return text
            for key in keys[:-1]:
                text = f"{text} -> {key}"
            return f"{text} {arrow} {keys[-1]}"

        return generate

    def refused(what: str) -> Callable[[Any, exp.Expression], str]:
        def generate(generator: Any, node: exp.Expression) -> str:
            generator.unsupported(what)
            return "NULL"

        return generate

    class SpannerPostgresGenerator(PostgresGenerator):
        TRANSFORMS = {
            **PostgresGenerator.TRANSFORMS,
            exp.TimestampAdd: timestamp_add(1),
            exp.TimestampSub: timestamp_add(-1),
            exp.Uuid: lambda *_: "spanner.generate_uuid()",
            exp.FarmFingerprint: lambda g, n: f"spanner.farm_fingerprint({g.expressions(n)})",
            exp.JSONExtract: json_path("->"),
            exp.JSONExtractScalar: json_path("->>"),
            exp.JSONBContainsTopKey: refused("the jsonb ? operator"),
            exp.JSONBContainsAnyTopKeys: refused("the jsonb ?| operator"),
            exp.JSONBContainsAllTopKeys: refused("the jsonb ?& operator"),
        }

        def concat_sql(self, expression: exp.Concat) -> str:
            """PostgreSQL's concat() (NULLs skipped) with its text literals typed: Spanner
            cannot resolve the type of an untyped literal given to a variadic function."""
            if not expression.args.get("coalesce"):
                return str(super().concat_sql(expression))
            text = exp.DataType.build("TEXT")
            arguments = [
                exp.cast(a.copy(), text) if isinstance(a, exp.Literal) and a.is_string else a
                for a in expression.expressions
            ]
            return f"concat({', '.join(self.sql(a) for a in arguments)})"

        def placeholder_sql(self, expression: exp.Placeholder) -> str:
            return f"@{expression.name}"

        def add_sql(self, expression: exp.Add) -> str:
            return self._interval_arithmetic(expression, 1) or str(super().add_sql(expression))

        def sub_sql(self, expression: exp.Sub) -> str:
            return self._interval_arithmetic(expression, -1) or str(super().sub_sql(expression))

        def _interval_arithmetic(self, node: exp.Binary, sign: int) -> str | None:
            """``t + INTERVAL '29 DAY'``: Spanner has no INTERVAL type."""
            interval, base = node.expression, node.this
            if isinstance(base, exp.Interval) and sign > 0:
                interval, base = base, interval
            if not isinstance(interval, exp.Interval):
                return None
            text = interval_text(self, interval.this, interval.text("unit"))
            return shift(self, base, text, sign)

    class SpannerPostgres(Postgres):
        Generator = SpannerPostgresGenerator

    return SpannerPostgres


def _encode_parameter(value: Any, is_json: bool) -> Any:
    """A query parameter as the driver takes it: JSON marked as such, a tuple as a list."""
    if is_json or isinstance(value, dict):
        from txqueue.drivers.spanner.codec import json_parameter

        return json_parameter(value)
    return list(value) if isinstance(value, tuple) else value


def _decoder() -> Callable[[Column, Any], Any] | None:
    return None  # the driver decodes by the result's own column types


TRAITS = EngineTraits(
    name="spanner",
    display_name=DISPLAY_NAME,
    schemes=("spanner",),
    db_system="gcp.spanner",
    marker="?",
    one_writer=False,
    listens=False,
    times_as_micros=False,
    emulates_types=False,
    lower_case_names=False,
    escape_percent=False,
    reserved_prefix=RESERVED_PREFIX,
    file_target=False,
    pool_size_option=None,
    parse=_parse,
    open_async_driver=_open_async_driver,
    open_driver=_open_driver,
    sqlglot_dialect=_dialect,
    hidden_column_prefix=HIDDEN_COLUMN_PREFIX,
    encode_parameter=_encode_parameter,
    decoder=_decoder,
)

#: The same engine writing Spanner's PostgreSQL dialect (what differs from GoogleSQL only).
TRAITS_POSTGRESQL = replace(
    TRAITS,
    name="spanner_postgresql",
    display_name=f"{DISPLAY_NAME} (PostgreSQL dialect)",
    schemes=(),  # no URL chooses it: the driver names it as its sql_engine
    lower_case_names=True,
    sqlglot_dialect=_postgresql_dialect,
    positional_markers=True,
)
