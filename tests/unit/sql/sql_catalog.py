"""A small catalog in both dialects for translator tests (no database needed)."""

from __future__ import annotations

from typing import Any

from txqueue.core.schema import CreateTable, Dialect, Table
from txqueue.sql import Plan, parse_sql
from txqueue.sql.ddl import parse_ddl

DDL = {
    Dialect.GOOGLESQL: [
        "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX), Active BOOL,"
        " Joined TIMESTAMP, Birthday DATE, Profile JSON, Tags ARRAY<STRING(MAX)>)"
        " PRIMARY KEY (UserId)",
        "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
        " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId),"
        " INTERLEAVE IN PARENT Users ON DELETE CASCADE",
    ],
    Dialect.POSTGRESQL: [
        "CREATE TABLE users (userid bigint NOT NULL, username varchar, active boolean,"
        " joined timestamptz, birthday date, profile jsonb, tags varchar[],"
        " PRIMARY KEY (userid))",
        "CREATE QUEUE usertasks (userid bigint NOT NULL, messageid varchar(36) NOT NULL,"
        " payload bytea NOT NULL, PRIMARY KEY (userid, messageid))"
        " INTERLEAVE IN PARENT users ON DELETE CASCADE",
    ],
}


def tables(dialect: Dialect) -> dict[str, Table]:
    out: dict[str, Table] = {}
    for text in DDL[dialect]:
        statement = parse_ddl(text, dialect)
        assert isinstance(statement, CreateTable)
        out[statement.table.name.lower()] = statement.table
    return out


CATALOG = {dialect: tables(dialect) for dialect in Dialect}


def plan(
    sql: str,
    dialect: Dialect = Dialect.GOOGLESQL,
    engine: str = "sqlite",
    params: Any = None,
    **kwargs: Any,
) -> Plan:
    """Translate ``sql`` against the test catalog."""
    statement = parse_sql(sql, dialect)
    catalog = CATALOG[dialect]
    found = {
        name.lower(): catalog[name.lower()] for name in statement.tables if name.lower() in catalog
    }
    return statement.plan(found, engine, params, **kwargs)
