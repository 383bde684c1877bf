"""Spanner SQL on SQLite and PostgreSQL: DDL (``ddl``) and queries/DML (``statement``).

``parse_sql(text, dialect).plan(tables, engine, params)`` turns a GoogleSQL or PostgreSQL-
dialect statement into what to run on the engine; ``split_script`` cuts a script into
statements.
"""

from txqueue.sql.results import AsyncStreamingResultSet, QueryPlan, StreamingResultSet
from txqueue.sql.source import is_complete, split_script, statement_kind
from txqueue.sql.statement import DmlPlan, Plan, Statement, parse_sql
from txqueue.sql.tvf import ReceivePlan, RenewPlan

__all__ = [
    "AsyncStreamingResultSet",
    "DmlPlan",
    "Plan",
    "QueryPlan",
    "ReceivePlan",
    "RenewPlan",
    "Statement",
    "StreamingResultSet",
    "is_complete",
    "parse_sql",
    "split_script",
    "statement_kind",
]
