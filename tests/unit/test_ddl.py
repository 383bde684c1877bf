"""The Spanner DDL front end: seed 003 and SPEC §2 schemas, every rule, positions, fuzzing."""

from __future__ import annotations

import contextlib
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txqueue.core.schema import (
    Column,
    ColumnType,
    CreateIndex,
    CreateTable,
    Dialect,
    DropIndex,
    DropTable,
    Index,
    Table,
)
from txqueue.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from txqueue.sql.ddl import check_against_catalog, parse_ddl, split_statements

G = Dialect.GOOGLESQL
P = Dialect.POSTGRESQL
T = ColumnType


def table(text: str, dialect: Dialect = G) -> Table:
    statement = parse_ddl(text, dialect)
    assert isinstance(statement, CreateTable)
    return statement.table


def refused(text: str, dialect: Dialect, *fragments: str) -> str:
    with pytest.raises(InvalidArgument) as info:
        parse_ddl(text, dialect)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message
    return message


def apply(*texts: str, dialect: Dialect = G) -> tuple[dict[str, Table], dict[str, Index]]:
    """Build a catalog by checking and applying statements in order."""
    tables: dict[str, Table] = {}
    indexes: dict[str, Index] = {}
    for text in texts:
        statement = parse_ddl(text, dialect)
        check_against_catalog(statement, tables, indexes)
        if isinstance(statement, CreateTable):
            tables[statement.table.name.lower()] = statement.table
        elif isinstance(statement, CreateIndex):
            indexes[statement.index.name.lower()] = statement.index
        elif isinstance(statement, DropTable):
            tables.pop(statement.name.lower(), None)
        else:
            indexes.pop(statement.name.lower(), None)
    return tables, indexes


# -- seed 003: out-of-band payload schema, both dialects -----------------------------------------

SEED_GOOGLESQL = """
-- Schema
CREATE TABLE ImageUploads (
  UserId    INT64 NOT NULL,
  ImageId   STRING(36) NOT NULL,
  ImageData BYTES(MAX),
  Status    STRING(MAX) -- PENDING, PROCESSING, DONE
) PRIMARY KEY (UserId, ImageId),
  INTERLEAVE IN PARENT Users;

CREATE QUEUE ImageProcessingQueue (
  UserId    INT64 NOT NULL,
  ImageId   STRING(36) NOT NULL,
  Payload   BYTES(1) NOT NULL -- Payload can be minimal
) PRIMARY KEY (UserId, ImageId),
  INTERLEAVE IN PARENT ImageUploads ON DELETE CASCADE;
"""

SEED_POSTGRESQL = """
-- Schema
CREATE TABLE imageuploads (
  userid    bigint NOT NULL,
  imageid   varchar(36) NOT NULL,
  imagedata bytea,
  status    varchar, -- PENDING, PROCESSING, DONE
  PRIMARY KEY (userid, imageid)
) INTERLEAVE IN PARENT users;

CREATE QUEUE imageprocessingqueue (
  userid    bigint NOT NULL,
  imageid   varchar(36) NOT NULL,
  payload   bytea NOT NULL, -- Payload can be minimal
  PRIMARY KEY (userid, imageid)
) INTERLEAVE IN PARENT imageuploads ON DELETE CASCADE;
"""


def test_seed_googlesql_schema() -> None:
    uploads, queue = [table(s) for s in split_statements(SEED_GOOGLESQL)]
    assert uploads == Table(
        name="ImageUploads",
        columns=(
            Column("UserId", T.INT64, nullable=False),
            Column("ImageId", T.STRING, nullable=False, length=36),
            Column("ImageData", T.BYTES),
            Column("Status", T.STRING),
        ),
        primary_key=("UserId", "ImageId"),
        is_queue=False,
        parent="Users",
        on_delete_cascade=False,
    )
    assert queue == Table(
        name="ImageProcessingQueue",
        columns=(
            Column("UserId", T.INT64, nullable=False),
            Column("ImageId", T.STRING, nullable=False, length=36),
            Column("Payload", T.BYTES, nullable=False, length=1),
        ),
        primary_key=("UserId", "ImageId"),
        is_queue=True,
        parent="ImageUploads",
        on_delete_cascade=True,
    )


def test_seed_postgresql_schema() -> None:
    uploads, queue = [table(s, P) for s in split_statements(SEED_POSTGRESQL, P)]
    assert uploads == Table(
        name="imageuploads",
        columns=(
            Column("userid", T.INT64, nullable=False),
            Column("imageid", T.STRING, nullable=False, length=36),
            Column("imagedata", T.BYTES),
            Column("status", T.STRING),
        ),
        primary_key=("userid", "imageid"),
        is_queue=False,
        parent="users",
        on_delete_cascade=False,
    )
    assert queue == Table(
        name="imageprocessingqueue",
        columns=(
            Column("userid", T.INT64, nullable=False),
            Column("imageid", T.STRING, nullable=False, length=36),
            Column("payload", T.BYTES, nullable=False),
        ),
        primary_key=("userid", "imageid"),
        is_queue=True,
        parent="imageuploads",
        on_delete_cascade=True,
    )


USERS_GOOGLESQL = [
    "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX)) PRIMARY KEY (UserId)",
    """CREATE QUEUE UserTasks (
         UserId INT64 NOT NULL, MessageId STRING(MAX) NOT NULL, Payload BYTES(MAX) NOT NULL
       ) PRIMARY KEY (UserId, MessageId), INTERLEAVE IN PARENT Users ON DELETE CASCADE""",
    "CREATE QUEUE AggregationQueue (TaskType STRING(64) NOT NULL, MessageId STRING(36) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (TaskType, MessageId)",
]
USERS_POSTGRESQL = [
    "create table users (userid bigint not null primary key, username varchar)",
    """CREATE QUEUE usertasks (userid bigint NOT NULL, messageid varchar NOT NULL,
         payload bytea NOT NULL, PRIMARY KEY (userid, messageid))
       INTERLEAVE IN PARENT users ON DELETE CASCADE""",
    "CREATE QUEUE aggregationqueue (tasktype varchar(64) NOT NULL, messageid varchar(36) NOT NULL,"
    " payload bytea NOT NULL, PRIMARY KEY (tasktype, messageid))",
]


def test_users_and_user_tasks_googlesql() -> None:
    tables, _ = apply(*USERS_GOOGLESQL, *split_statements(SEED_GOOGLESQL))
    assert tables["users"] == Table(
        "Users", (Column("UserId", T.INT64, False), Column("UserName", T.STRING)), ("UserId",)
    )
    assert tables["usertasks"] == Table(
        "UserTasks",
        (
            Column("UserId", T.INT64, False),
            Column("MessageId", T.STRING, False),
            Column("Payload", T.BYTES, False),
        ),
        ("UserId", "MessageId"),
        is_queue=True,
        parent="Users",
        on_delete_cascade=True,
    )
    assert tables["aggregationqueue"].primary_key == ("TaskType", "MessageId")
    assert tables["aggregationqueue"].column("tasktype").length == 64
    assert set(tables) == {
        "users",
        "usertasks",
        "aggregationqueue",
        "imageuploads",
        "imageprocessingqueue",
    }


def test_users_and_user_tasks_postgresql() -> None:
    tables, _ = apply(*USERS_POSTGRESQL, *split_statements(SEED_POSTGRESQL, P), dialect=P)
    assert tables["users"] == Table(
        "users", (Column("userid", T.INT64, False), Column("username", T.STRING)), ("userid",)
    )
    assert tables["usertasks"] == Table(
        "usertasks",
        (
            Column("userid", T.INT64, False),
            Column("messageid", T.STRING, False),
            Column("payload", T.BYTES, False),
        ),
        ("userid", "messageid"),
        is_queue=True,
        parent="users",
        on_delete_cascade=True,
    )
    assert tables["imageprocessingqueue"].parent == "imageuploads"


def test_spec_section_2_examples() -> None:
    gsql = table(
        """CREATE QUEUE ImageProcessingQueue (
      UserId INT64 NOT NULL, ImageId STRING(36) NOT NULL, Payload BYTES(1) NOT NULL
    ) PRIMARY KEY (UserId, ImageId), INTERLEAVE IN PARENT ImageUploads ON DELETE CASCADE;"""
    )
    pg = table(
        """CREATE QUEUE imageprocessingqueue (userid bigint NOT NULL, imageid varchar(36) NOT NULL,
      payload bytea NOT NULL, PRIMARY KEY (userid, imageid))
      INTERLEAVE IN PARENT imageuploads ON DELETE CASCADE;""",
        P,
    )
    assert gsql.is_queue and pg.is_queue and gsql.on_delete_cascade and pg.on_delete_cascade
    assert gsql.payload_column == Column("Payload", T.BYTES, False, 1)
    assert pg.payload_column == Column("payload", T.BYTES, False)
    assert [c.name.lower() for c in gsql.columns] == [c.name for c in pg.columns]
    assert gsql.primary_key == ("UserId", "ImageId") and pg.primary_key == ("userid", "imageid")


# -- types ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ("INT64", (T.INT64, None, False)),
        ("float64", (T.FLOAT64, None, False)),
        ("FLOAT32", (T.FLOAT32, None, False)),
        ("BOOL", (T.BOOL, None, False)),
        ("STRING(10)", (T.STRING, 10, False)),
        ("STRING(max)", (T.STRING, None, False)),
        ("BYTES(10485760)", (T.BYTES, 10485760, False)),
        ("TIMESTAMP", (T.TIMESTAMP, None, False)),
        ("DATE", (T.DATE, None, False)),
        ("JSON", (T.JSON, None, False)),
        ("NUMERIC", (T.NUMERIC, None, False)),
        ("ARRAY<STRING(MAX)>", (T.STRING, None, True)),
        ("ARRAY<INT64>", (T.INT64, None, True)),
    ],
)
def test_googlesql_types(declared: str, expected: tuple[ColumnType, int | None, bool]) -> None:
    column = table(f"CREATE TABLE t (k INT64, c {declared} NOT NULL) PRIMARY KEY (k)").columns[1]
    assert (column.type, column.length, column.array, column.nullable) == (*expected, False)


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ("bigint", (T.INT64, None, False)),
        ("int8", (T.INT64, None, False)),
        ("integer", (T.INT64, None, False)),
        ("int", (T.INT64, None, False)),
        ("int4", (T.INT64, None, False)),
        ("varchar(20)", (T.STRING, 20, False)),
        ("varchar", (T.STRING, None, False)),
        ("character varying", (T.STRING, None, False)),
        ("CHARACTER  VARYING(7)", (T.STRING, 7, False)),
        ("text", (T.STRING, None, False)),
        ("bytea", (T.BYTES, None, False)),
        ("boolean", (T.BOOL, None, False)),
        ("bool", (T.BOOL, None, False)),
        ("double precision", (T.FLOAT64, None, False)),
        ("float8", (T.FLOAT64, None, False)),
        ("real", (T.FLOAT32, None, False)),
        ("float4", (T.FLOAT32, None, False)),
        ("timestamptz", (T.TIMESTAMP, None, False)),
        ("timestamp with time zone", (T.TIMESTAMP, None, False)),
        ("date", (T.DATE, None, False)),
        ("jsonb", (T.JSON, None, False)),
        ("numeric", (T.NUMERIC, None, False)),
        ("bigint[]", (T.INT64, None, True)),
        ("varchar(5)[]", (T.STRING, 5, True)),
        ("text []", (T.STRING, None, True)),
    ],
)
def test_postgresql_types(declared: str, expected: tuple[ColumnType, int | None, bool]) -> None:
    column = table(f"CREATE TABLE t (k bigint PRIMARY KEY, c {declared})", P).columns[1]
    assert (column.type, column.length, column.array, column.nullable) == (*expected, True)


# A type of the other dialect names the database's dialect and how to choose the other.
OTHER_DIALECT_TYPE = {
    "bigint": [
        "bigint (column c) is a PostgreSQL type",
        "uses the googlesql dialect",
        'dialect="postgresql"',
    ],
    "INT64": [
        "INT64 (column c) is a GoogleSQL type",
        "uses the postgresql dialect",
        'dialect="googlesql"',
    ],
}


@pytest.mark.parametrize(
    ("text", "dialect", "fragments"),
    [
        ("CREATE TABLE t (k INT64, c INT32) PRIMARY KEY (k)", G, ["unknown column type 'INT32'"]),
        ("CREATE TABLE t (k INT64, c bigint) PRIMARY KEY (k)", G, OTHER_DIALECT_TYPE["bigint"]),
        ("CREATE TABLE t (k INT64, c PROTO) PRIMARY KEY (k)", G, ["'PROTO'", "column c"]),
        ("CREATE TABLE t (k bigint PRIMARY KEY, c INT64)", P, OTHER_DIALECT_TYPE["INT64"]),
        ("CREATE TABLE t (k bigint PRIMARY KEY, c json)", P, ["unknown column type 'json'"]),
        ("CREATE TABLE t (k bigint PRIMARY KEY, c timestamp)", P, ["'timestamp'", "timestamptz"]),
        ("CREATE TABLE t (k bigint PRIMARY KEY, c character(3))", P, ["'character'"]),
        ("CREATE TABLE t (k INT64, c STRING) PRIMARY KEY (k)", G, ["STRING", "needs a length"]),
        ("CREATE TABLE t (k INT64, c BYTES) PRIMARY KEY (k)", G, ["BYTES", "needs a length"]),
        ("CREATE TABLE t (k INT64, c ARRAY<ARRAY<INT64>>) PRIMARY KEY (k)", G, ["nested ARRAY"]),
        ("CREATE TABLE t (k bigint PRIMARY KEY, c bigint[][])", P, ["nested array"]),
        ("CREATE TABLE t (k INT64, c `INT64`) PRIMARY KEY (k)", G, ["expected column type"]),
    ],
)
def test_unknown_types_are_refused_by_name(
    text: str, dialect: Dialect, fragments: list[str]
) -> None:
    refused(text, dialect, *fragments)


@pytest.mark.parametrize("length", ["0", "10485761", "1.5", "99999999999999999999"])
def test_bad_lengths(length: str) -> None:
    refused(f"CREATE TABLE t (k STRING({length})) PRIMARY KEY (k)", G, "invalid length", length)
    refused(f"CREATE TABLE t (k varchar({length}) PRIMARY KEY)", P, "invalid length", length)


def test_negative_and_max_lengths() -> None:
    refused("CREATE TABLE t (k STRING(-1)) PRIMARY KEY (k)", G, "invalid length '-'")
    refused("CREATE TABLE t (k varchar(MAX) PRIMARY KEY)", P, "invalid length 'MAX'")
    assert table("CREATE TABLE t (k BYTES(1)) PRIMARY KEY (k)").columns[0].length == 1


# -- names and syntax -----------------------------------------------------------------------------


def test_postgresql_folds_unquoted_and_keeps_quoted_names() -> None:
    t = table('CREATE TABLE MyTable ("UserId" bigint, Name text, PRIMARY KEY ("UserId"))', P)
    assert t.name == "mytable"
    assert [c.name for c in t.columns] == ["UserId", "name"]
    assert t.primary_key == ("UserId",)
    assert table('CREATE TABLE "Mixed" (a bigint PRIMARY KEY)', P).name == "Mixed"


def test_googlesql_keeps_case_and_allows_backquotes() -> None:
    t = table("create TABLE `Orders` (`OrderId` int64 not null) primary KEY (orderid)")
    assert t.name == "Orders"
    assert t.columns == (Column("OrderId", T.INT64, False),)
    assert t.primary_key == ("OrderId",)  # the declared spelling, found case-insensitively


@pytest.mark.parametrize(
    ("text", "dialect", "fragment"),
    [
        ("CREATE TABLE `my table` (a INT64) PRIMARY KEY (a)", G, "table name 'my table'"),
        ("CREATE TABLE txqueue_x (a INT64) PRIMARY KEY (a)", G, "reserved prefix"),
        ("CREATE TABLE t (_txq_a INT64) PRIMARY KEY (_txq_a)", G, "column name '_txq_a'"),
        ('CREATE TABLE t ("a-b" bigint PRIMARY KEY)', P, "column name 'a-b'"),
        ("CREATE TABLE t (a INT64) PRIMARY KEY (a), INTERLEAVE IN PARENT `1p`", G, "parent table"),
        ("CREATE INDEX `ix 1` ON t (a)", G, "index name 'ix 1'"),
        ("CREATE TABLE " + "x" * 64 + " (a INT64) PRIMARY KEY (a)", G, "longer than 63 bytes"),
    ],
)
def test_every_name_is_validated(text: str, dialect: Dialect, fragment: str) -> None:
    message = refused(text, dialect, fragment)
    assert "line 1, column" in message


def test_syntax_errors_name_position_and_token() -> None:
    text = "CREATE TABLE T (\n  a INT64,\n  b INT64 PRIMARY KEY (a)"
    assert refused(text, G) == "expected ')' at line 3, column 11, found 'PRIMARY'"
    assert refused("CREATE TABLE T (a INT64", G) == (
        "expected ')' at line 1, column 24, found end of statement"
    )
    refused("CREATE TABLE (a INT64) PRIMARY KEY (a)", G, "expected table name", "column 14", "'('")
    refused(
        "CREATE QUEUE Q (a INT64) PRIMARY KEY (a) INTERLEAVE IN PARENT P",
        G,
        "expected ',' or end of statement",
        "line 1, column 42",
        "'INTERLEAVE'",
    )
    refused("DROP TABLE t extra", G, "expected end of statement", "column 14", "'extra'")
    refused("CREATE TABLE t (a INT64) PRIMARY KEY (a);;", G, "found ';'")
    refused("CREATE TABLE t (a bigint PRIMARY KEY), INTERLEAVE IN PARENT p", P, "found ','")
    refused(
        "CREATE TABLE t (a INT64) PRIMARY KEY (a), INTERLEAVE IN PARENT p ON DELETE RESTRICT",
        G,
        "expected CASCADE or NO ACTION",
        "'RESTRICT'",
    )
    refused("CREATE TABLE t (a STRING(10) 'x", G, "cannot tokenize DDL")
    refused(
        "CREATE TABLE t (a INT64) PRIMARY KEY (a),",
        G,
        "expected INTERLEAVE IN PARENT at line 1, column 42, found end of statement",
    )


def test_keywords_any_case_comments_anywhere_and_trailing_semicolon() -> None:
    text = """/* lead */ create /* a */ Queue -- b
      IF not EXISTS q ( k int64 # hash comment
      , payload json ) primary /* c */ key ( k desc ) ;  -- tail"""
    statement = parse_ddl(text, G)
    assert statement == CreateTable(
        Table("q", (Column("k", T.INT64), Column("payload", T.JSON)), ("k",), is_queue=True),
        if_not_exists=True,
    )


def test_table_constraints_and_misplaced_primary_key() -> None:
    refused("CREATE TABLE t (a INT64, PRIMARY KEY (a))", G, "PRIMARY KEY (...) follows the column")
    refused("CREATE TABLE t (a bigint PRIMARY KEY, CHECK (a > 0))", P, "CHECK is not supported")
    refused("CREATE TABLE t (a bigint, UNIQUE (a), PRIMARY KEY (a))", P, "UNIQUE is not supported")
    refused("CREATE TABLE t (a bigint, FOREIGN KEY (a) REFERENCES u (a))", P, "FOREIGN KEY is not")
    t = table("CREATE TABLE t (Unique INT64, Check BOOL, `Foreign` STRING(1)) PRIMARY KEY (Unique)")
    assert [c.name for c in t.columns] == ["Unique", "Check", "Foreign"]


def test_column_options_and_explicit_null() -> None:
    t = table(
        "CREATE TABLE t (k INT64 NOT NULL, at TIMESTAMP OPTIONS (allow_commit_timestamp = true))"
        " PRIMARY KEY (k)"
    )
    assert t.columns[1] == Column("at", T.TIMESTAMP)
    refused(
        "CREATE TABLE t (k INT64 OPTIONS (foo = 1)) PRIMARY KEY (k)", G, "'foo'", "not supported"
    )
    assert table("CREATE TABLE t (k bigint NULL PRIMARY KEY)", P).columns[0].nullable


def test_drop_and_index_statements() -> None:
    assert parse_ddl("DROP TABLE Users", G) == DropTable("Users", is_queue=False)
    assert parse_ddl("drop queue if exists UserTasks;", G) == DropTable("UserTasks", True, True)
    assert parse_ddl("DROP QUEUE UserTasks", P) == DropTable("usertasks", True)
    assert parse_ddl("DROP INDEX IF EXISTS ix", G) == DropIndex("ix", if_exists=True)
    assert parse_ddl(
        "CREATE UNIQUE NULL_FILTERED INDEX IF NOT EXISTS ByName ON Users "
        "(UserName DESC, UserId ASC)",
        G,
    ) == CreateIndex(
        Index("ByName", "Users", ("UserName", "UserId"), True, (True, False)), if_not_exists=True
    )
    assert parse_ddl("CREATE INDEX by_name ON Users (UserName)", P) == CreateIndex(
        Index("by_name", "users", ("username",), False, (False,))
    )
    refused("CREATE NULL_FILTERED INDEX ix ON t (a)", P, "unsupported DDL statement")
    refused("CREATE INDEX ix ON t ()", G, "index ix needs at least one column")
    refused("CREATE INDEX ix ON t (a, A)", G, "column A is repeated in index ix")
    refused("CREATE INDEX ix ON t (a) STORING (b)", G, "STORING is not supported")
    refused("CREATE INDEX ix ON t (a), INTERLEAVE IN p", G, "expected end of statement")
    refused("CREATE UNIQUE TABLE t (a INT64) PRIMARY KEY (a)", G, "expected INDEX", "'TABLE'")


# -- rules ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "dialect", "fragments"),
    [
        # queues: Payload
        ("CREATE QUEUE q (k INT64) PRIMARY KEY (k)", G, ["queue q needs a Payload column"]),
        ("CREATE QUEUE q (k bigint PRIMARY KEY, body bytea)", P, ["needs a Payload column"]),
        (
            "CREATE QUEUE q (k INT64, Payload INT64) PRIMARY KEY (k)",
            G,
            ["Payload column of queue q must be BYTES, STRING or JSON", "not INT64"],
        ),
        (
            "CREATE QUEUE q (k INT64, Payload ARRAY<BYTES(MAX)>) PRIMARY KEY (k)",
            G,
            ["not ARRAY<BYTES(MAX)>"],
        ),
        (
            "CREATE QUEUE q (k bigint, payload bytea, PRIMARY KEY (k, payload))",
            P,
            ["Payload column of queue q must not be in the primary key"],
        ),
        (
            "CREATE QUEUE q (Payload BYTES(MAX)) PRIMARY KEY (Payload)",
            G,
            ["must not be in the primary key"],
        ),
        # queues: DeliverTime is implicit
        (
            "CREATE QUEUE q (k INT64, Payload BYTES(MAX), DeliverTime TIMESTAMP) PRIMARY KEY (k)",
            G,
            ["must not declare column DeliverTime", "added automatically", "line 1, column 46"],
        ),
        (
            "CREATE QUEUE q (k bigint PRIMARY KEY, payload text, deliver_time timestamptz)",
            P,
            ["must not declare column deliver_time", "added automatically"],
        ),
        (
            "CREATE QUEUE q (k INT64, Payload BYTES(MAX), deliver_time TIMESTAMP) PRIMARY KEY (k)",
            G,
            ["must not declare column deliver_time"],
        ),
        # primary keys
        (
            "CREATE TABLE t (k INT64) PRIMARY KEY ()",
            G,
            ["table t needs a PRIMARY KEY with at least one column"],
        ),
        (
            "CREATE QUEUE q (k INT64, Payload BYTES(MAX))",
            G,
            ["queue q needs a PRIMARY KEY", "found end of statement"],
        ),
        ("CREATE TABLE t (k bigint)", P, ["table t needs a PRIMARY KEY"]),
        (
            "CREATE TABLE t (k INT64) PRIMARY KEY (j)",
            G,
            ["primary key column j of table t is not declared", "column 39"],
        ),
        ("CREATE TABLE t (k INT64) PRIMARY KEY (k, K)", G, ["primary key column K", "repeated"]),
        (
            "CREATE TABLE t (k JSON) PRIMARY KEY (k)",
            G,
            ["column k of type JSON cannot be in the primary key"],
        ),
        ("CREATE TABLE t (k FLOAT32) PRIMARY KEY (k)", G, ["FLOAT32 cannot be in the primary key"]),
        ("CREATE TABLE t (k bigint[] PRIMARY KEY)", P, ["ARRAY<INT64> cannot be in the primary"]),
        ("CREATE TABLE t (a bigint PRIMARY KEY, b bigint PRIMARY KEY)", P, ["two primary keys"]),
        ("CREATE TABLE t (a bigint PRIMARY KEY, PRIMARY KEY (a))", P, ["two primary keys"]),
        # columns
        (
            "CREATE TABLE t (k INT64, K STRING(1)) PRIMARY KEY (k)",
            G,
            ["duplicate column name K in table t"],
        ),
        ('CREATE TABLE t (k bigint PRIMARY KEY, "K" text)', P, ["duplicate column name K"]),
        # ON DELETE without INTERLEAVE, unsupported clauses
        (
            "CREATE TABLE t (k INT64) PRIMARY KEY (k) ON DELETE CASCADE",
            G,
            ["ON DELETE needs INTERLEAVE IN PARENT", "table t is not interleaved"],
        ),
        (
            "CREATE TABLE t (k INT64) PRIMARY KEY (k), ON DELETE CASCADE",
            G,
            ["ON DELETE needs INTERLEAVE IN PARENT"],
        ),
        (
            "CREATE TABLE t (k bigint PRIMARY KEY) ON DELETE CASCADE",
            P,
            ["ON DELETE needs INTERLEAVE IN PARENT"],
        ),
        (
            "CREATE TABLE t (k INT64, ts TIMESTAMP) PRIMARY KEY (k),"
            " ROW DELETION POLICY (OLDER_THAN(ts, INTERVAL 1 DAY))",
            G,
            ["ROW DELETION POLICY is not supported", "table t"],
        ),
        (
            "CREATE TABLE t (k bigint PRIMARY KEY, ts timestamptz) TTL INTERVAL '1 day' ON ts",
            P,
            ["TTL INTERVAL is not supported"],
        ),
        (
            "CREATE TABLE t (k INT64) PRIMARY KEY (k), INTERLEAVE IN PARENT p,"
            " INTERLEAVE IN PARENT q",
            G,
            ["two INTERLEAVE clauses"],
        ),
        (
            "CREATE TABLE t (k INT64 DEFAULT (1)) PRIMARY KEY (k)",
            G,
            ["DEFAULT is not supported", "column k of table t"],
        ),
        (
            "CREATE TABLE t (k bigint PRIMARY KEY, c bigint GENERATED ALWAYS AS (k) STORED)",
            P,
            ["GENERATED ALWAYS AS is not supported"],
        ),
        (
            "CREATE TABLE t (k INT64, CONSTRAINT fk FOREIGN KEY (k) REFERENCES u (k))"
            " PRIMARY KEY (k)",
            G,
            ["CONSTRAINT FK FOREIGN is not supported"],
        ),
    ],
)
def test_rules(text: str, dialect: Dialect, fragments: list[str]) -> None:
    refused(text, dialect, *fragments)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   -- only a comment\n /* and another */ ",
        ";",
        "SELECT 1",
        "ALTER TABLE Users ADD COLUMN Age INT64",
        "CREATE VIEW v AS SELECT 1",
        "DROP VIEW v",
        "INSERT INTO Users (UserId) VALUES (1)",
        "garbage !!! here",
        "'just a string'",
    ],
)
@pytest.mark.parametrize("dialect", [G, P])
def test_unsupported_statements(text: str, dialect: Dialect) -> None:
    refused(text, dialect, "unsupported DDL statement")


def test_unsupported_statement_message_names_it() -> None:
    message = refused("ALTER TABLE Users ADD COLUMN Age INT64", G)
    assert message.startswith("unsupported DDL statement 'ALTER TABLE' at line 1, column 1")


def test_interleave_without_on_delete_is_no_action() -> None:
    t = table("CREATE TABLE c (a INT64, b INT64) PRIMARY KEY (a, b), INTERLEAVE IN PARENT p")
    assert (t.parent, t.on_delete_cascade) == ("p", False)
    t = table(
        "CREATE TABLE c (a INT64) PRIMARY KEY (a), INTERLEAVE IN PARENT p ON DELETE NO ACTION"
    )
    assert (t.parent, t.on_delete_cascade) == ("p", False)
    t = table("CREATE TABLE c (a bigint PRIMARY KEY) INTERLEAVE IN PARENT P ON DELETE NO ACTION", P)
    assert (t.parent, t.on_delete_cascade) == ("p", False)


# -- check_against_catalog ------------------------------------------------------------------------

USERS = "CREATE TABLE Users (UserId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (UserId)"
TASKS = (
    "CREATE QUEUE UserTasks (UserId INT64, MessageId STRING(MAX), Payload BYTES(MAX))"
    " PRIMARY KEY (UserId, MessageId), INTERLEAVE IN PARENT Users ON DELETE CASCADE"
)


def test_catalog_create_existing_name() -> None:
    tables, indexes = apply(USERS, TASKS, "CREATE INDEX ByName ON Users (Name)")
    with pytest.raises(AlreadyExists, match="table Users already exists"):
        check_against_catalog(
            parse_ddl("CREATE TABLE users (a INT64) PRIMARY KEY (a)", G), tables, indexes
        )
    with pytest.raises(AlreadyExists, match="table Users already exists"):  # one namespace
        check_against_catalog(
            parse_ddl("CREATE QUEUE USERS (a INT64, Payload JSON) PRIMARY KEY (a)", G),
            tables,
            indexes,
        )
    with pytest.raises(AlreadyExists, match="queue UserTasks already exists"):
        check_against_catalog(parse_ddl(TASKS, G), tables, indexes)
    with pytest.raises(AlreadyExists, match="index ByName already exists"):
        check_against_catalog(
            parse_ddl("CREATE INDEX byname ON Users (UserId)", G), tables, indexes
        )
    for text in [
        "CREATE TABLE IF NOT EXISTS Users (a INT64) PRIMARY KEY (a)",
        "CREATE INDEX IF NOT EXISTS ByName ON Users (UserId)",
        "CREATE INDEX Users ON UserTasks (MessageId)",  # indexes have their own namespace
        "CREATE TABLE ByName (a INT64) PRIMARY KEY (a)",
    ]:
        check_against_catalog(parse_ddl(text, G), tables, indexes)


def test_catalog_interleave_parent_and_key_prefix() -> None:
    tables, indexes = apply(USERS, TASKS)
    with pytest.raises(NotFound, match="parent table Nope of table c does not exist"):
        check_against_catalog(
            parse_ddl("CREATE TABLE c (a INT64) PRIMARY KEY (a), INTERLEAVE IN PARENT Nope", G),
            tables,
            indexes,
        )
    cases = [
        ("(a INT64) PRIMARY KEY (a)", "Users", "key column 1 is a, expected UserId"),
        (
            "(UserId STRING(MAX)) PRIMARY KEY (UserId)",
            "Users",
            "key column UserId is STRING(MAX), the parent's is INT64",
        ),
        ("(UserId INT64, b INT64) PRIMARY KEY (b)", "users", "key column 1 is b, expected UserId"),
        ("(x INT64) PRIMARY KEY (x)", "UserTasks", "cannot be interleaved in queue UserTasks"),
    ]
    for body, parent, fragment in cases:
        text = f"CREATE TABLE c {body}, INTERLEAVE IN PARENT {parent}"
        with pytest.raises(InvalidArgument, match=re.escape(fragment)):
            check_against_catalog(parse_ddl(text, G), tables, indexes)
    two_level, _ = apply(
        "CREATE TABLE A (x INT64, y INT64) PRIMARY KEY (x, y)",
        "CREATE TABLE B (x INT64, y INT64, z INT64) PRIMARY KEY (x, y, z), INTERLEAVE IN PARENT A",
    )
    with pytest.raises(InvalidArgument, match="key column y is missing"):
        check_against_catalog(
            parse_ddl("CREATE TABLE C (X INT64) PRIMARY KEY (X), INTERLEAVE IN PARENT a", G),
            two_level,
            {},
        )
    # case-insensitive names, same types: accepted (PG lower-case child of GoogleSQL-ish parent)
    check_against_catalog(
        parse_ddl(
            "CREATE TABLE c (userid bigint, n bigint,"
            " PRIMARY KEY (userid, n)) INTERLEAVE IN PARENT USERS",
            P,
        ),
        tables,
        indexes,
    )


def test_catalog_drop() -> None:
    tables, indexes = apply(USERS, TASKS, "CREATE INDEX ByName ON Users (Name)")
    with pytest.raises(NotFound, match="table Nope does not exist"):
        check_against_catalog(parse_ddl("DROP TABLE Nope", G), tables, indexes)
    with pytest.raises(NotFound, match="index Nope does not exist"):
        check_against_catalog(parse_ddl("DROP INDEX Nope", G), tables, indexes)
    check_against_catalog(parse_ddl("DROP TABLE IF EXISTS Nope", G), tables, indexes)
    check_against_catalog(parse_ddl("DROP INDEX IF EXISTS Nope", G), tables, indexes)
    with pytest.raises(InvalidArgument, match="UserTasks is a queue, not a table: use DROP QUEUE"):
        check_against_catalog(parse_ddl("DROP TABLE usertasks", G), tables, indexes)
    with pytest.raises(InvalidArgument, match="Users is a table, not a queue: use DROP TABLE"):
        check_against_catalog(parse_ddl("DROP QUEUE IF EXISTS Users", G), tables, indexes)
    with pytest.raises(FailedPrecondition, match="UserTasks is interleaved in it"):
        check_against_catalog(parse_ddl("DROP TABLE Users", G), tables, indexes)
    tables, indexes = apply(
        USERS, TASKS, "CREATE INDEX ByName ON Users (Name)", "DROP QUEUE UserTasks"
    )
    with pytest.raises(FailedPrecondition, match="index ByName is defined on it"):
        check_against_catalog(parse_ddl("DROP TABLE Users", G), tables, indexes)
    tables, indexes = apply(
        USERS, "CREATE INDEX ByName ON Users (Name)", "DROP INDEX byname", "DROP TABLE users"
    )
    assert tables == {} and indexes == {}


def test_catalog_create_index() -> None:
    tables, indexes = apply(USERS, TASKS)
    with pytest.raises(NotFound, match="table Nope of index ix does not exist"):
        check_against_catalog(parse_ddl("CREATE INDEX ix ON Nope (a)", G), tables, indexes)
    with pytest.raises(InvalidArgument, match="index ix: table Users has no column Age"):
        check_against_catalog(parse_ddl("CREATE INDEX ix ON Users (Name, Age)", G), tables, indexes)
    check_against_catalog(parse_ddl("CREATE INDEX ix ON usertasks (messageid)", P), tables, indexes)


# -- split_statements -----------------------------------------------------------------------------


def test_split_statements() -> None:
    script = """
    -- header; with a semicolon
    CREATE TABLE a (s STRING(MAX) OPTIONS (allow_commit_timestamp = null)) PRIMARY KEY (s);
    /* block; comment */ ;;
    CREATE INDEX `i;x` ON a (s); -- trailing; comment
    INSERT INTO a (s) VALUES ('x;y'), ("p;q"), (b'z;'), (r'\\;'), (''';''')
    ;   -- nothing after
    """
    assert split_statements(script) == [
        "CREATE TABLE a (s STRING(MAX) OPTIONS (allow_commit_timestamp = null)) PRIMARY KEY (s)",
        "CREATE INDEX `i;x` ON a (s)",
        "INSERT INTO a (s) VALUES ('x;y'), (\"p;q\"), (b'z;'), (r'\\;'), (''';''')",
    ]
    assert split_statements("") == []
    assert split_statements(" -- only\n/* comments */ ; ;") == []
    assert split_statements("DROP TABLE a") == ["DROP TABLE a"]
    assert split_statements("DROP TABLE a /* x; */ -- y;\n;DROP TABLE b") == [
        "DROP TABLE a",
        "DROP TABLE b",
    ]


def test_split_statements_postgresql() -> None:
    script = """CREATE TABLE "a;b" (c text PRIMARY KEY); SELECT 'it''s;', $$x;y$$, E'\\';'"""
    assert split_statements(script, P) == [
        'CREATE TABLE "a;b" (c text PRIMARY KEY)',
        "SELECT 'it''s;', $$x;y$$, E'\\';'",
    ]
    with pytest.raises(InvalidArgument, match="cannot tokenize"):
        split_statements("DROP TABLE a; SELECT 'unterminated;", P)


# -- never anything but InvalidArgument -----------------------------------------------------------

VALID = [
    *USERS_GOOGLESQL,
    *split_statements(SEED_GOOGLESQL),
    "CREATE UNIQUE NULL_FILTERED INDEX IF NOT EXISTS ix ON t (a DESC, b)",
    "DROP QUEUE IF EXISTS q",
    "CREATE TABLE t (k INT64, a ARRAY<STRING(10)>, o TIMESTAMP OPTIONS (allow_commit_timestamp"
    " = true)) PRIMARY KEY (k DESC), INTERLEAVE IN PARENT p ON DELETE NO ACTION",
]
VALID_PG = [
    *USERS_POSTGRESQL,
    *split_statements(SEED_POSTGRESQL, P),
    'CREATE TABLE "T" (k bigint[] , d double precision, t timestamp with time zone,'
    " c character varying(3) NOT NULL PRIMARY KEY)",
    "DROP INDEX IF EXISTS ix",
]
ALPHABET = st.sampled_from(list("()<>[],;'\"`-/*#$=. \n\tabcKPQ0129_é\\")) | st.characters()


def only_invalid_argument(text: str, dialect: Dialect) -> None:
    with contextlib.suppress(InvalidArgument):
        parse_ddl(text, dialect)
    with contextlib.suppress(InvalidArgument):
        split_statements(text, dialect)


@settings(max_examples=300, deadline=None)
@given(text=st.text(ALPHABET, max_size=80), dialect=st.sampled_from([G, P]))
def test_random_text_raises_only_invalid_argument(text: str, dialect: Dialect) -> None:
    only_invalid_argument(text, dialect)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), dialect=st.sampled_from([G, P]))
def test_mutated_statements_raise_only_invalid_argument(
    data: st.DataObject, dialect: Dialect
) -> None:
    text = data.draw(st.sampled_from(VALID if dialect is G else VALID_PG))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["delete", "insert", "replace", "word"]))
        if op == "delete":
            text = text[:at] + text[at + data.draw(st.integers(1, 12)) :]
        elif op == "insert":
            text = text[:at] + data.draw(st.text(ALPHABET, min_size=1, max_size=4)) + text[at:]
        elif op == "replace":
            text = text[:at] + data.draw(st.text(ALPHABET, max_size=3)) + text[at + 1 :]
        else:
            words = text.split()
            word = data.draw(st.sampled_from(words)) if words else ""
            text = text[:at] + f" {word} " + text[at:]
    only_invalid_argument(text, dialect)


def test_non_string_input_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgument):
        parse_ddl(b"DROP TABLE t", G)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        parse_ddl("DROP TABLE t", "mysql")  # type: ignore[arg-type]
