"""One SQL statement in the database's dialect: parsed once, planned for an engine.

``parse_sql`` checks what needs no catalog (syntax, reserved names, statement kind) and names
the tables to look up; ``Statement.plan`` takes those tables and returns what to run: engine
SQL with bound values, or a receive / renew-lease call. Bad input raises only
``InvalidArgument`` (``NotFound`` for an unknown table), never anything else.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

import sqlglot
from sqlglot import ErrorLevel, exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, UnsupportedError

from txqueue.core.schema import Catalog, Column, Dialect, Table
from txqueue.drivers.base import TranslatedSql
from txqueue.drivers.engines import traits_named
from txqueue.drivers.traits import EngineTraits
from txqueue.errors import InvalidArgument, NotFound, TxqueueError
from txqueue.sql import information_schema
from txqueue.sql.compiler import EXACT_NAME, Compiler, Output
from txqueue.sql.functions import check_functions
from txqueue.sql.information_schema import VIEWS, is_view, view_name
from txqueue.sql.params import Binder
from txqueue.sql.results import QueryPlan
from txqueue.sql.rewrite import Rewriter
from txqueue.sql.source import Prepared, Source, prepare
from txqueue.sql.tvf import ReceivePlan, RenewPlan, plan_table_function, table_function

__all__ = ["DmlPlan", "Plan", "QueryPlan", "Statement", "parse_sql"]

T = TypeVar("T")
_READ: dict[Dialect, Any] = {Dialect.GOOGLESQL: "bigquery", Dialect.POSTGRESQL: Postgres}
_RESERVED = ("_txq", "txqueue_")
_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+.*?>")
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+\.(\w+)'>")
#: A bound value's placeholder as the ``?``-marker engines' dialect writes it (``@txq…_n``).
_PLACEHOLDER = re.compile(r"@(txq[0-9a-f]{8}_\d+)\b")


class _NoCommandFallback(logging.Filter):
    """sqlglot logs a warning before parsing unknown statements as commands; we refuse them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_NoCommandFallback())


@dataclass(frozen=True)
class DmlPlan:
    """Engine DML with bound values; ``sends_to`` names the queue an INSERT sends to.
    ``params``: by name, or a list for an engine that takes ``?`` markers in order."""

    sql: str
    params: Any
    expected_rows: int | None
    sends_to: tuple[str, ...]


Plan = QueryPlan | DmlPlan | ReceivePlan | RenewPlan
#: How many plans of one statement are kept (engines × schema versions × parameter types).
_PLANS_KEPT = 8


@dataclass(frozen=True)
class _Kept:
    """A plan kept for reuse: its SQL with named placeholders, and how each placeholder got
    its value (`Binder.replay` binds a later call's parameters the same way)."""

    plan: QueryPlan | DmlPlan
    sql: TranslatedSql
    prefix: str
    sources: tuple[tuple[str, str] | None, ...]
    constants: dict[str, Any]
    types: dict[str, Column | None]


def _guard(function: Callable[[], T]) -> T:
    """Run translator code: txqueue errors pass, anything unexpected becomes InvalidArgument."""
    try:
        return function()
    except TxqueueError:
        raise
    except RecursionError:
        raise InvalidArgument("the SQL statement is nested too deeply") from None
    except Exception as error:
        raise InvalidArgument(f"cannot translate the SQL statement: {error}") from error


def parse_sql(text: str, dialect: Dialect | str, *, internal: bool = False) -> Statement:
    """Parse one statement of ``dialect`` (a trailing ``;`` and comments are fine).

    ``internal``: txqueue's own statement, which may name its reserved ``txqueue_`` tables.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument("sql must be a non-empty string")
    try:
        chosen = Dialect(dialect)
    except ValueError:
        raise InvalidArgument(f"unknown dialect {dialect!r}") from None
    return _parse_cached(text, chosen, internal)


@lru_cache(maxsize=256)
def _parse_cached(text: str, dialect: Dialect, internal: bool = False) -> Statement:
    """Statements are never changed after parsing (``plan`` works on a copy), so reuse them."""
    return _guard(lambda: Statement(text, dialect, internal))


class Statement:
    """A parsed statement: ``kind`` is query, dml, receive or renewlease."""

    def __init__(self, text: str, dialect: Dialect, internal: bool = False) -> None:
        self.text = text
        self.dialect = dialect
        self.source = Source(text)
        self.prepared: Prepared = prepare(text, dialect)
        self.tree = self._parse()
        self.function = table_function(self.tree) if isinstance(self.tree, exp.Select) else None
        if isinstance(self.tree, (exp.Insert, exp.Update, exp.Delete)):
            self.kind = "dml"
        elif self.function is not None:
            self.kind = self.function.kind
        else:
            self.kind = "query"
        if self.prepared.assert_rows is not None and self.kind != "dml":
            raise InvalidArgument(
                "ASSERT_ROWS_MODIFIED applies to INSERT, UPDATE and DELETE statements "
                f"(at {self.source.where(self.prepared.assert_offset)})"
            )
        if not internal:  # txqueue's own statements name its reserved tables
            self._check_names()
        self.tables = self._tables()
        #: Plans kept for reuse, by engine, time, tables read and the parameters' types.
        self._plans: dict[tuple[Any, ...], _Kept] = {}
        #: Whether the statement reads INFORMATION_SCHEMA (its plan needs the whole catalog).
        self.reads_information_schema = any(
            is_view(table) for table in self.tree.find_all(exp.Table)
        )

    def _parse(self) -> exp.Expression:
        try:
            trees = sqlglot.parse(self.prepared.text, read=_READ[self.dialect])
        except ParseError as error:
            raise InvalidArgument(self._syntax_error(error)) from None
        except RecursionError:
            raise InvalidArgument("the SQL statement is nested too deeply") from None
        except Exception as error:  # sqlglot can fail inside on some malformed input
            raise InvalidArgument(
                f"syntax error: the statement cannot be parsed ({error})"
            ) from error
        statements = [t for t in trees if t is not None]
        if len(statements) != 1:
            raise InvalidArgument(
                f"expected one SQL statement, found {len(statements)}: run them one at a time "
                "(batch_update runs several DML statements)"
            )
        tree = statements[0]
        if isinstance(tree, (exp.Select, exp.SetOperation, exp.Subquery)):
            return tree
        if isinstance(tree, (exp.Insert, exp.Update, exp.Delete)):
            return tree
        word = self.text.split()[0].upper() if self.text.split() else "?"
        if isinstance(tree, (exp.Create, exp.Drop, exp.Alter)):
            raise InvalidArgument(f"{word} is DDL: apply it with update_ddl")
        raise InvalidArgument(
            f"unsupported statement {word!r}: queries (SELECT) and INSERT, UPDATE, DELETE are "
            "supported"
        )

    def _syntax_error(self, error: ParseError) -> str:
        detail = error.errors[0] if error.errors else {}
        description = _TOKEN.sub(_token_text, str(detail.get("description") or error))
        description = _MISSING.sub(lambda m: f"incomplete {m.group(1).upper()}", description)
        highlight = str(detail.get("highlight") or "")
        line, column = detail.get("line"), detail.get("col")
        if isinstance(line, int) and isinstance(column, int):
            start = max(column - len(highlight) + 1, 1) if "\n" not in highlight else column
            shown = f" near {highlight!r}" if highlight else ""
            return f"syntax error at line {line}, column {start}{shown}: {description}"
        return f"syntax error: {description}"

    def _check_names(self) -> None:
        if self.function is not None and self.function.queue.lower().startswith(_RESERVED):
            raise InvalidArgument(f"queue name {self.function.queue!r} is reserved for txqueue")
        for identifier in self.tree.find_all(exp.Identifier):
            if str(identifier.this).lower().startswith(_RESERVED):
                raise InvalidArgument(
                    f"name {identifier.this!r} is reserved for txqueue{self._where(identifier)}"
                )
        for table in self.tree.find_all(exp.Table):
            if self.function is not None and table.this is self.function.call:
                continue
            name = view_name(table)
            if name is not None:
                if name not in VIEWS:
                    raise InvalidArgument(
                        f"INFORMATION_SCHEMA.{name} is not supported: "
                        f"{', '.join(VIEWS)} are{self._where(table)}"
                    )
                continue
            if table.args.get("db") or table.args.get("catalog"):
                raise InvalidArgument(
                    f"schema-qualified name {table.sql()!r} is not supported{self._where(table)}"
                )

    def _where(self, node: exp.Expression) -> str:
        start = node.meta.get("start") if node._meta else None
        if not isinstance(start, int) and isinstance(node, exp.Table):
            return self._where(node.this)
        return f" (at {self.source.where(start)})" if isinstance(start, int) else ""

    def _tables(self) -> tuple[str, ...]:
        """The catalog names the statement uses (CTE names left out)."""
        if self.function is not None:
            return (self.function.queue,)
        ctes = {cte.alias.lower() for cte in self.tree.find_all(exp.CTE)}
        names: dict[str, str] = {}
        for table in self.tree.find_all(exp.Table):
            if is_view(table):
                continue
            if isinstance(table.this, exp.Identifier) and table.name.lower() not in ctes:
                names.setdefault(table.name.lower(), table.name)
        return tuple(names.values())

    # ---- planning ----------------------------------------------------------------------------

    def plan(
        self,
        tables: Mapping[str, Table],
        engine: str,
        params: Any = None,
        param_types: Any = None,
        now: datetime | None = None,
        catalog: Catalog | None = None,
    ) -> Plan:
        """What to run on ``engine``; ``tables`` maps lower-cased names to their schema.
        A statement that `reads_information_schema` needs the whole ``catalog``."""
        traits_named(engine)  # InvalidArgument for an engine txqueue does not know
        binder = _guard(lambda: Binder(engine, self.dialect, params, param_types))
        if catalog is not None or self.function is not None:
            plan, _ = _guard(lambda: self._plan(tables, engine, binder, now, catalog))
            return plan
        # The SQL depends only on the engine, the time, the tables read and the parameters'
        # types: reuse it, binding this call's values (copying a tree and generating SQL costs
        # ~1 ms; the event layer reads its configuration so at every publish). Not a plan that
        # bound the clock's time (CURRENT_TIMESTAMP on SQLite, with no pinned time).
        key = (
            engine,
            now,
            tuple(tables.get(name.lower()) for name in self.tables),
            binder.signature(),
        )
        kept = self._plans.get(key)
        if kept is not None:
            return _guard(lambda: self._rebind(kept, binder, engine))
        plan, made = _guard(lambda: self._plan(tables, engine, binder, now, catalog))
        if made is not None:
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.clear()
            self._plans[key] = made
        return plan

    def _rebind(self, kept: _Kept, binder: Binder, engine: str) -> Plan:
        """``kept``'s plan with ``binder``'s parameters (checked as on a first run)."""
        sql: str
        if any(kept.sources):
            binder.replay(kept.prefix, kept.sources, kept.constants, kept.types)
            sql, values = _bound(kept.sql, binder.values, traits_named(engine))
        else:  # constants only: the values are the kept ones
            sql, values = kept.plan.sql, _copied(kept.plan.params)
        if isinstance(kept.plan, DmlPlan):  # ASSERT_ROWS_MODIFIED @n: this call's n
            expected = self._expected_rows(binder)
            return replace(kept.plan, sql=sql, params=values, expected_rows=expected)
        return replace(kept.plan, sql=sql, params=values)

    def _plan(
        self,
        tables: Mapping[str, Table],
        engine: str,
        binder: Binder,
        now: datetime | None,
        catalog: Catalog | None = None,
    ) -> tuple[Plan, _Kept | None]:
        """The plan, and what to keep of it for reuse (None: not reusable, as it bound this
        run's reading of the clock or is a table function's call)."""
        traits = traits_named(engine)
        if self.function is not None:
            queue = tables.get(self.function.queue.lower())
            if queue is None:
                raise NotFound(
                    f"no queue named {self.function.queue!r} ({self.function.call.name}())"
                )
            function_plan = plan_table_function(
                self.function, queue, self.dialect, binder, lambda n: self._where(n)
            )
            return function_plan, None
        tree = self.tree.copy()
        views = self._views(tree) if self.reads_information_schema else {}
        rewriter = Rewriter(engine, self.dialect, binder, now, self.source)
        compiler = Compiler(tables, self.dialect, rewriter)
        plan: QueryPlan | DmlPlan
        if self.kind == "query":
            sources: dict[str, list[Output] | None] = {
                key: [Output(c.name, c) for c in information_schema.columns(name, self.dialect)]
                for key, name in views.items()
            }
            outputs: list[Output] | None = compiler.query(tree, None, sources)
            if views:
                tree = _with_views(tree, views, catalog or (dict(tables), {}), self.dialect)
            check_functions(tree, rewriter.where, _READ[self.dialect])
            named = _generate(tree, traits)
            sql, values = _bound(named, binder.values, traits)
            plan = QueryPlan(sql, values, outputs, engine)
        else:
            if views:
                raise InvalidArgument("INFORMATION_SCHEMA is read by queries only")
            if isinstance(tree, exp.Insert):
                table = compiler.insert(tree)
            elif isinstance(tree, exp.Update):
                table = compiler.update(tree)
            else:
                assert isinstance(tree, exp.Delete)
                table = compiler.delete(tree)
            sends_to = (table.name,) if isinstance(tree, exp.Insert) and table.is_queue else ()
            check_functions(tree, rewriter.where, _READ[self.dialect])
            expected = self._expected_rows(binder)
            named = _generate(tree, traits)
            sql, values = _bound(named, binder.values, traits)
            plan = DmlPlan(sql, values, expected, sends_to)
        if rewriter.read_clock:
            return plan, None
        kept = _Kept(
            replace(plan, params=_copied(plan.params)),
            named,
            binder.prefix,
            tuple(binder.sources),
            dict(binder.values),
            dict(binder.types),
        )
        return plan, kept

    def _views(self, tree: exp.Expression) -> dict[str, str]:
        """Name each INFORMATION_SCHEMA view the statement reads as a CTE of its own (keys:
        CTE names; values: view names); `_with_views` defines them once compiled."""
        views: dict[str, str] = {}
        for table in list(tree.find_all(exp.Table)):
            name = view_name(table)
            if name is not None:
                key = f"_txq_information_schema_{name.lower()}"
                views[key] = name
                alias = exp.TableAlias(this=exp.to_identifier(table.alias or name))
                table.replace(exp.Table(this=exp.to_identifier(key), alias=alias))
        return views

    def _expected_rows(self, binder: Binder) -> int | None:
        count = self.prepared.assert_rows
        if isinstance(count, str):
            count = binder.raw(count, " (ASSERT_ROWS_MODIFIED)")
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise InvalidArgument("ASSERT_ROWS_MODIFIED needs a non-negative integer")
        return count


def _with_views(
    tree: exp.Expression, views: Mapping[str, str], catalog: Catalog, dialect: Dialect
) -> exp.Expression:
    """``tree`` with the INFORMATION_SCHEMA views it reads defined first in its WITH clause,
    their rows taken from ``catalog``."""
    tables, indexes = catalog
    definitions = [
        exp.CTE(
            this=information_schema.view(name, tables, indexes, dialect),
            alias=exp.TableAlias(this=exp.to_identifier(key)),
        )
        for key, name in views.items()
    ]
    clause = tree.args.get("with_")
    if isinstance(clause, exp.With):
        clause.set("expressions", [*definitions, *clause.expressions])
    else:
        tree.set("with_", exp.With(expressions=definitions))
    return tree


def _generate(tree: exp.Expression, traits: EngineTraits) -> TranslatedSql:
    """Engine SQL: every name quoted (lower-cased where the engine folds names)."""
    for identifier in tree.find_all(exp.Identifier):
        identifier.set("quoted", True)
        exact = identifier._meta and identifier._meta.get(EXACT_NAME)
        if traits.lower_case_names and not exact:  # an application's names keep their case
            identifier.set("this", str(identifier.this).lower())
    if traits.emulates_types:  # TIMESTAMP arithmetic is rewritten; no INTERVAL type is left
        leftover = tree.find(exp.Interval)
        if leftover is not None:
            raise InvalidArgument(
                f"INTERVAL is supported on {traits.display_name} only in TIMESTAMP arithmetic "
                "(TIMESTAMP_ADD, timestamp + INTERVAL '...')"
            )
    try:
        sql = tree.sql(
            dialect=traits.sqlglot_dialect(),
            unsupported_level=ErrorLevel.RAISE,
            comments=False,
        )
    except UnsupportedError as error:
        raise InvalidArgument(f"not supported on {traits.display_name}: {error}") from None
    if not traits.escape_percent:
        return TranslatedSql(sql)
    # psycopg reads every % as a placeholder marker: double the ones that are not ours.
    return TranslatedSql(re.sub(r"%(?!\(txq[0-9a-f]{8}_\d+\)s)", "%%", sql))


def _bound(
    sql: TranslatedSql, values: dict[str, Any], traits: EngineTraits
) -> tuple[TranslatedSql, Any]:
    """The SQL and its parameters as ``traits``' driver takes them: by name, or, for an
    engine that takes ``?`` markers, each placeholder a ``?`` and its value in that order."""
    if not traits.positional_markers:
        return sql, values
    ordered: list[Any] = []

    def marker(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            return match.group(0)
        ordered.append(values[match.group(1)])
        return "?"

    return TranslatedSql(_PLACEHOLDER.sub(marker, sql)), ordered


def _copied(params: Any) -> Any:
    return list(params) if isinstance(params, list) else dict(params)


def _token_text(match: re.Match[str]) -> str:
    return "end of statement" if match.group(1) == "SENTINEL" else repr(match.group(2))
