"""``ASSERT_ROWS_MODIFIED`` on a PostgreSQL-dialect Spanner database, which has no such
clause and no savepoints: the rows a DML statement would modify are counted first, in the
same read-write transaction (whose read locks keep the count true until the commit), so a
statement whose count differs fails before it has any effect and the transaction stays open.

DELETE and UPDATE count ``SELECT COUNT(*) FROM t WHERE <the same condition>``; an INSERT …
VALUES counts its rows and an INSERT … SELECT the rows of its query. A statement whose rows
cannot be known beforehand is refused (InvalidArgument, by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RowCount", "rows_modified"]


@dataclass(frozen=True)
class RowCount:
    """The rows a DML statement would modify: known from the statement (``rows``) or counted
    by ``sql``, a query taking the statement's own parameters."""

    rows: int | None = None
    sql: str | None = None

    def __call__(self, transaction: Any, values: Any, types: Any) -> int:
        """The count, read in ``transaction`` (whose read locks keep it true until the DML)."""
        if self.rows is not None:
            return self.rows
        from txqueue.drivers.spanner.engine import query

        assert self.sql is not None
        _, rows = query(transaction, self.sql, values, types)
        return int(rows[0][0])


def rows_modified(sql: str) -> RowCount | None:
    """How to count the rows ``sql`` would modify, or None when they cannot be known
    beforehand (``INSERT … ON CONFLICT``, ``UPDATE … FROM``, ``DELETE … USING``, anything but
    DML)."""
    import sqlglot
    from sqlglot import exp

    try:
        parsed = sqlglot.parse_one(sql, read="postgres")
    except sqlglot.errors.ParseError:
        return None
    count = exp.Count(this=exp.Star())
    if isinstance(parsed, exp.Insert):
        source = parsed.expression
        if parsed.args.get("conflict"):
            return None
        if isinstance(source, exp.Values):
            return RowCount(rows=len(source.expressions))
        if not isinstance(source, exp.Query):
            return None
        alias = exp.TableAlias(this=exp.to_identifier("txqueue_counted"))
        select = exp.select(count).from_(exp.Subquery(this=source.copy(), alias=alias))
    elif isinstance(parsed, (exp.Update, exp.Delete)):
        if parsed.args.get("from_") or parsed.args.get("using"):
            return None
        select = exp.select(count).from_(parsed.this.copy())
        where = parsed.args.get("where")
        if isinstance(where, exp.Where):
            select.set("where", where.copy())
    else:
        return None
    return RowCount(sql=select.sql(dialect="postgres"))
