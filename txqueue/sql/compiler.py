"""Resolve a parsed query or DML statement against the catalog and rewrite it for an engine.

The walk is scope by scope (CTEs, FROM sources, subqueries): ``*`` is expanded from the
catalog, so a queue's hidden state columns never show and its DeliverTime does; each output
column keeps its declared type so results come back as Python values of that type; names are
quoted (folded to lower case on PostgreSQL, where txqueue stores them so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from txqueue.core.schema import DELIVER_TIME, ApplicationTable, Column, ColumnType, Dialect, Table
from txqueue.errors import InvalidArgument, NotFound
from txqueue.sql.rewrite import Rewriter
from txqueue.sql.values import type_of, typed

__all__ = ["EXACT_NAME", "Compiler", "Output"]

#: Meta key of an identifier that names an application's table or column as the engine spells
#: it (mixed case on PostgreSQL): not folded to lower case when the SQL is generated.
EXACT_NAME = "txq_exact_name"

_QUEUE_UPDATE = "queues do not support UPDATE; ack and send instead"


@dataclass(frozen=True)
class Output:
    """One result column: its name (None: the engine's) and declared type (None: unknown);
    ``exact``: a column of an application's table, named as the engine spells it."""

    name: str | None
    column: Column | None
    exact: bool = False


@dataclass
class _Source:
    outputs: list[Output] | None
    table: Table | None = None


@dataclass
class _Scope:
    outer: _Scope | None
    ctes: dict[str, list[Output] | None]
    sources: dict[str, _Source] = field(default_factory=dict)

    def find(self, name: str, qualifier: str | None) -> Output | None:
        scope: _Scope | None = self
        while scope is not None:
            candidates = (
                [scope.sources[qualifier.lower()]]
                if qualifier is not None and qualifier.lower() in scope.sources
                else []
                if qualifier is not None
                else list(scope.sources.values())
            )
            for source in candidates:
                for output in source.outputs or ():
                    if output.name is not None and output.name.lower() == name.lower():
                        return output
            scope = scope.outer
        return None


class Compiler:
    """Walks one statement; ``tables`` are the catalog entries it names (lower-cased keys)."""

    def __init__(self, tables: Mapping[str, Table], dialect: Dialect, rewriter: Rewriter) -> None:
        self.tables = tables
        self.dialect = dialect
        self.rw = rewriter
        self.deliver = DELIVER_TIME[dialect]
        self._derived = 0

    # ---- catalog -------------------------------------------------------------------------------

    def table(self, node: exp.Table) -> Table:
        found = self.tables.get(node.name.lower())
        if found is None:
            raise NotFound(f"no table or queue named {node.name!r}{self.rw.where(node)}")
        return found

    def visible(self, table: Table) -> list[Output]:
        """What ``SELECT *`` shows: declared columns, then DeliverTime for a queue."""
        exact = isinstance(table, ApplicationTable)
        outputs = [Output(c.name, c, exact) for c in table.columns]
        if table.is_queue:
            deliver = Column(self.deliver, ColumnType.TIMESTAMP, nullable=False)
            outputs.append(Output(self.deliver, deliver))
        return outputs

    def exact(self, identifier: object, name: str) -> None:
        """Name ``identifier`` as the engine spells an application's table or column."""
        if isinstance(identifier, exp.Identifier) and name != name.lower():
            identifier.set("this", name)
            identifier.meta[EXACT_NAME] = True

    def exact_table(self, node: exp.Table, table: Table, alias: bool) -> None:
        """Name an application's table exactly; with ``alias``, give it its lower-cased name
        as an alias (where names fold) so that qualified column names still find it."""
        if not isinstance(table, ApplicationTable) or table.name == table.name.lower():
            return
        self.exact(node.this, table.name)
        if alias and self.rw.folds_names and not node.alias:
            node.set("alias", exp.TableAlias(this=exp.to_identifier(table.name.lower())))

    def column_of(self, table: Table, name: str, node: exp.Expression) -> Column:
        for output in self.visible(table):
            if output.name is not None and output.name.lower() == name.lower():
                assert output.column is not None
                return output.column
        raise InvalidArgument(
            f"{_kind(table)} {table.name} has no column {name}{self.rw.where(node)}"
        )

    # ---- queries -------------------------------------------------------------------------------

    def query(
        self, node: exp.Expression, outer: _Scope | None, ctes: dict[str, list[Output] | None]
    ) -> list[Output] | None:
        """Resolve and rewrite a query; returns its output columns (None: not known)."""
        if isinstance(node, exp.Subquery):
            return self.query(node.this, outer, self.with_(node, outer, ctes))
        if isinstance(node, exp.SetOperation):
            ctes = self.with_(node, outer, ctes)
            left = self.query(node.this, outer, ctes)
            self.query(node.expression, outer, ctes)
            self.clauses(node, _Scope(outer, ctes), {"this", "expression", "with_"})
            return left
        if isinstance(node, exp.Select):
            return self.select(node, outer, ctes)
        raise InvalidArgument(f"unsupported query ({node.key.upper()}){self.rw.where(node)}")

    def with_(
        self, node: exp.Expression, outer: _Scope | None, ctes: dict[str, list[Output] | None]
    ) -> dict[str, list[Output] | None]:
        clause = node.args.get("with_")
        if not isinstance(clause, exp.With):
            return ctes
        ctes = dict(ctes)
        for cte in clause.expressions:
            name = cte.alias.lower()
            if clause.args.get("recursive"):
                ctes[name] = None
            outputs = self.query(cte.this, outer, ctes)
            columns = cte.args["alias"].columns if cte.args.get("alias") else []
            if columns and outputs is not None and len(columns) == len(outputs):
                outputs = [Output(c.name, o.column) for c, o in zip(columns, outputs)]
            ctes[name] = outputs
        return ctes

    def select(
        self, node: exp.Select, outer: _Scope | None, ctes: dict[str, list[Output] | None]
    ) -> list[Output] | None:
        scope = _Scope(outer, self.with_(node, outer, ctes))
        from_ = node.args.get("from_")
        if isinstance(from_, exp.From):
            self.add_source(from_.this, scope)
        for join in node.args.get("joins") or []:
            self.add_source(join.this, scope)
        outputs = self.projections(node, scope)
        for join in node.args.get("joins") or []:
            self.clauses(join, scope, {"this"})
        self.clauses(node, scope, {"expressions", "from_", "joins", "with_"})
        return outputs

    def add_source(self, node: exp.Expression, scope: _Scope) -> None:
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            name = node.name.lower()
            key = (node.alias or node.name).lower()
            if not node.args.get("db") and name in scope.ctes:
                scope.sources[key] = _Source(scope.ctes[name])
            else:
                table = self.table(node)
                self.exact_table(node, table, alias=True)
                scope.sources[key] = _Source(self.visible(table), table)
            return
        if isinstance(node, exp.Table):
            raise InvalidArgument(
                f"table function {node.this.sql()!r} is not supported here{self.rw.where(node)}: "
                "RECEIVE_/RENEWLEASE_ must be the only source of their query"
            )
        if isinstance(node, exp.Unnest) and self.rw.emulated:
            raise InvalidArgument(
                f"FROM UNNEST(...) is not supported on SQLite{self.rw.where(node)}"
            )
        if isinstance(node, exp.Subquery):
            outputs = self.query(node.this, scope.outer, self.with_(node, scope.outer, scope.ctes))
        else:
            self.expr(node, scope)
            outputs = None
        if not node.alias:
            self._derived += 1
            node.set("alias", exp.TableAlias(this=exp.to_identifier(f"_txq_d{self._derived}")))
        scope.sources[node.alias.lower()] = _Source(outputs)

    def projections(self, node: exp.Select, scope: _Scope) -> list[Output] | None:
        projections: list[exp.Expression] = []
        outputs: list[Output] = []
        known = True
        for item in list(node.expressions):
            star = item if isinstance(item, exp.Star) else None
            if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                star = item.this
            if star is not None:
                qualifier = item.table if isinstance(item, exp.Column) else None
                expanded, more = self.expand(star, qualifier or None, scope, item)
                projections += expanded
                known = known and more is not None
                outputs += more or []
                continue
            name = self.field_name(item)
            new = self.expr(item, scope)
            outputs.append(Output(name, type_of(new)))
            if name is not None and isinstance(new, exp.Column) and _is_exact(new.this):
                new = _aliased(new, name)  # found by that name from an enclosing query
            projections.append(new)
        node.set("expressions", projections)
        return outputs if known else None

    def field_name(self, node: exp.Expression) -> str | None:
        identifier = node.args.get("alias") if isinstance(node, exp.Alias) else None
        if isinstance(node, exp.Column):
            identifier = node.this
        if not isinstance(identifier, exp.Identifier):
            return None
        if self.dialect is Dialect.POSTGRESQL and not identifier.quoted:
            return str(identifier.this).lower()
        return str(identifier.this)

    def expand(
        self, star: exp.Star, qualifier: str | None, scope: _Scope, item: exp.Expression
    ) -> tuple[list[exp.Expression], list[Output] | None]:
        if any(star.args.get(k) for k in ("replace", "rename", "ilike")):
            raise InvalidArgument(f"SELECT * REPLACE/RENAME is not supported{self.rw.where(item)}")
        excluded = {c.name.lower() for c in star.args.get("except_") or []}
        if qualifier is not None:
            if qualifier.lower() not in scope.sources:
                raise InvalidArgument(f"unknown table or alias {qualifier}{self.rw.where(item)}")
            chosen = [(qualifier.lower(), scope.sources[qualifier.lower()])]
        else:
            chosen = list(scope.sources.items())
        if not chosen:
            raise InvalidArgument(f"SELECT * needs a FROM clause{self.rw.where(item)}")
        expressions: list[exp.Expression] = []
        outputs: list[Output] | None = []
        for key, source in chosen:
            if source.table is None and not excluded:
                expressions.append(exp.Column(this=exp.Star(), table=exp.to_identifier(key)))
                if source.outputs is None or outputs is None:
                    outputs = None
                else:
                    outputs += source.outputs
                continue
            if source.outputs is None or any(o.name is None for o in source.outputs):
                raise InvalidArgument(f"SELECT * EXCEPT needs known columns{self.rw.where(item)}")
            for output in source.outputs:
                if output.name is not None and output.name.lower() not in excluded:
                    column = exp.column(output.name, table=key)
                    if output.exact and output.name != output.name.lower():
                        self.exact(column.this, output.name)
                        expressions.append(_aliased(column, output.name))
                    else:
                        expressions.append(column)
                    if outputs is not None:
                        outputs.append(Output(output.name, output.column))
        return expressions, outputs

    def clauses(self, node: exp.Expression, scope: _Scope, skip: set[str]) -> None:
        for key, value in list(node.args.items()):
            if key in skip:
                continue
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, exp.Expression):
                    self.expr(item, scope)

    def expr(self, node: exp.Expression, scope: _Scope) -> exp.Expression:
        """Resolve and rewrite one expression; returns what stands in its place."""
        if isinstance(node, (exp.Select, exp.SetOperation, exp.Subquery)):
            outputs = self.query(node, scope, scope.ctes)
            column = outputs[0].column if outputs and len(outputs) == 1 else None
            return typed(node, column)
        self.clauses(node, scope, set())
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                return node
            found = scope.find(node.name, node.table or None)
            if found is not None and found.exact and found.name is not None:
                self.exact(node.this, found.name)
            return typed(node, found.column if found else None)
        return self.rw.node(node)

    # ---- DML -------------------------------------------------------------------------------------

    def insert(self, node: exp.Insert) -> Table:
        target = node.this
        table_node = target.this if isinstance(target, exp.Schema) else target
        if not isinstance(table_node, exp.Table) or not isinstance(table_node.this, exp.Identifier):
            raise InvalidArgument(f"INSERT needs a table name{self.rw.where(node)}")
        table = self.table(table_node)
        self.exact_table(table_node, table, alias=False)
        if isinstance(target, exp.Schema):
            names = [(i.name, i) for i in target.expressions]
        else:
            names = [(c.name, table_node) for c in table.columns]
            node.set(
                "this",
                exp.Schema(this=table_node, expressions=[exp.to_identifier(n) for n, _ in names]),
            )
        columns = [self.column_of(table, name, where) for name, where in names]
        if isinstance(table, ApplicationTable):
            for identifier, column in zip(node.this.expressions, columns):
                self.exact(identifier, column.name)
        for option in ("returning", "alternative", "overwrite"):
            if node.args.get(option):
                raise InvalidArgument(
                    f"INSERT ... {option.upper()} is not supported{self.rw.where(node)}"
                )
        conflict = node.args.get("conflict")
        if isinstance(conflict, exp.OnConflict) and conflict.expressions and table.is_queue:
            raise InvalidArgument(_QUEUE_UPDATE)
        scope = _Scope(None, {})
        source = node.expression
        if isinstance(source, exp.Values):
            for row in source.expressions:
                values = row.expressions if isinstance(row, exp.Tuple) else [row]
                if len(values) != len(columns):
                    raise InvalidArgument(
                        f"INSERT has {len(values)} value(s) for {len(columns)} column(s)"
                        f"{self.rw.where(row)}"
                    )
                for value, column in zip(list(values), columns):
                    self.rw.coerce(self.expr(value, scope), column)
        elif source is not None:
            self.query(source, None, {})
        if isinstance(conflict, exp.OnConflict):
            target_scope = _Scope(
                None, {}, {table.name.lower(): _Source(self.visible(table), table)}
            )
            self.clauses(conflict, target_scope, set())
        return table

    def update(self, node: exp.Update) -> Table:
        table = self.table(node.this)
        if table.is_queue:
            raise InvalidArgument(_QUEUE_UPDATE)
        self.require_where(node, "UPDATE")
        scope = _Scope(None, {})
        self.add_source(node.this, scope)
        from_ = node.args.get("from_")
        if isinstance(from_, exp.From):
            self.add_source(from_.this, scope)
        for assignment in node.expressions:
            target = assignment.this
            if not isinstance(target, exp.Column):
                raise InvalidArgument(f"UPDATE SET needs a column name{self.rw.where(assignment)}")
            column = self.column_of(table, target.name, target)
            if isinstance(table, ApplicationTable):
                self.exact(target.this, column.name)
            self.rw.coerce(self.expr(assignment.expression, scope), column)
        self.clauses(node, scope, {"this", "expressions", "from_"})
        return table

    def delete(self, node: exp.Delete) -> Table:
        if node.args.get("tables"):
            raise InvalidArgument("DELETE of several tables is not supported")
        table = self.table(node.this)
        self.require_where(node, "DELETE")
        scope = _Scope(None, {})
        self.add_source(node.this, scope)
        for using in node.args.get("using") or []:
            self.add_source(using, scope)
        self.clauses(node, scope, {"this", "using"})
        return table

    def require_where(self, node: exp.Expression, verb: str) -> None:
        if node.args.get("returning"):
            raise InvalidArgument(f"{verb} ... RETURNING is not supported{self.rw.where(node)}")
        if self.dialect is Dialect.GOOGLESQL and not node.args.get("where"):
            raise InvalidArgument(
                f"{verb} needs a WHERE clause in GoogleSQL (write WHERE true for every row)"
            )


def _aliased(node: exp.Expression, name: str) -> exp.Expression:
    return exp.Alias(this=node, alias=exp.to_identifier(name))


def _is_exact(identifier: object) -> bool:
    return isinstance(identifier, exp.Identifier) and bool(
        identifier._meta and identifier._meta.get(EXACT_NAME)
    )


def _kind(table: Table) -> str:
    return "queue" if table.is_queue else "table"
