"""``ASSERT_ROWS_MODIFIED`` on a PostgreSQL-dialect Spanner database, which has no such
clause and no savepoints: the rows a DML statement would modify are counted first, in the
same read-write transaction (whose read locks keep the count true until the commit), so a
statement whose count differs fails before it has any effect and the transaction stays open.

DELETE and UPDATE count ``SELECT COUNT(*) FROM t WHERE <the same condition>``; an INSERT …
VALUES counts its rows. Other statements (INSERT … SELECT, say) are not counted here: the SQL
front end checks them (it derives the count from the statement it parsed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["rows_modified"]

Counter = Callable[[Any, Any, Any], int]


def rows_modified(sql: str) -> Counter | None:
    """A function of (transaction, values, types) counting the rows ``sql`` would modify,
    or None when ``sql`` is not a statement counted here."""
    import sqlglot
    from sqlglot import exp

    try:
        parsed = sqlglot.parse_one(sql, read="postgres")
    except sqlglot.errors.ParseError:
        return None
    if isinstance(parsed, exp.Insert):
        values = parsed.expression
        if not isinstance(values, exp.Values):
            return None
        rows = len(values.expressions)
        return lambda transaction, values, types: rows
    if not isinstance(parsed, (exp.Update, exp.Delete)) or parsed.args.get("from"):
        return None
    if parsed.args.get("using"):
        return None
    table = parsed.this
    where = parsed.args.get("where")
    select = exp.select("COUNT(*)").from_(table.copy())
    if where is not None:
        select = select.where(where.this.copy())
    count_sql = select.sql(dialect="postgres")

    def count(transaction: Any, values: Any, types: Any) -> int:
        from txqueue.drivers.spanner.engine import query

        _, rows = query(transaction, count_sql, values, types)
        return int(rows[0][0])

    return count
