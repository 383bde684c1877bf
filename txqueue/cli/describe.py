"""``\\d`` and ``\\d NAME`` of ``txqueue sql``: the schema as spanner-cli and psql show it.

Read through the public API: the tables and indexes from Spanner's INFORMATION_SCHEMA views
(which txqueue answers from its catalog), one table's key and interleaving from
``Database.table``.
"""

from __future__ import annotations

from typing import Any

import txqueue
from txqueue.cli.listing import emit
from txqueue.cli.text import Column, console, print_table, text
from txqueue.core.schema import ApplicationTable, ColumnType
from txqueue.core.schema import Column as SchemaColumn
from txqueue.errors import TxqueueError
from txqueue.sql.information_schema import queue_state_columns, spanner_type

__all__ = ["describe", "list_tables"]


def _rows(db: txqueue.Database, view: str) -> list[tuple[Any, ...]]:
    with db.snapshot() as snapshot:
        return list(snapshot.execute_sql(f"SELECT * FROM INFORMATION_SCHEMA.{view}"))


def _created_by_txqueue(db: txqueue.Database, name: str) -> bool:
    """Whether txqueue made ``name`` (a name it would refuse is the application's)."""
    try:
        return not isinstance(db.table(name), ApplicationTable)
    except TxqueueError:
        return False


def list_tables(db: txqueue.Database, output_format: str) -> None:
    """Every table and queue: name, kind, the parent it is interleaved in, and whether
    txqueue created it (the application's own tables are listed too)."""
    records = []
    for row in _rows(db, "TABLES"):  # reads the application's tables: db.table has them now
        kind = {"QUEUE": "queue", "VIEW": "view"}.get(row[3], "table")
        records.append(
            {
                "name": row[2],
                "kind": kind,
                "parent": row[4],
                "created_by_txqueue": _created_by_txqueue(db, row[2]),
            }
        )
    emit(
        output_format,
        records,
        lambda: print_table(
            ["name", "kind", "interleaved in", ""],
            (
                (
                    r["name"],
                    r["kind"],
                    r["parent"] or "",
                    "" if r["created_by_txqueue"] else "not created by txqueue",
                )
                for r in records
            ),
            title="tables and queues",
            empty="no tables or queues",
        ),
        ["name", "kind", "parent", "created_by_txqueue"],
    )


def describe(db: txqueue.Database, name: str, output_format: str) -> None:
    """One table or queue: its columns (a queue's hidden ones too), key, interleaving and
    indexes; NotFound when there is none."""
    table = db.table(name)
    key = [k.lower() for k in table.primary_key]
    visible = {c.name.lower() for c in table.columns}
    application = isinstance(table, ApplicationTable)
    engine_types = table.engine_types if isinstance(table, ApplicationTable) else ()
    records: list[dict[str, Any]] = []
    for position, column in enumerate(table.columns):
        record: dict[str, Any] = {"column": column.name, "type": spanner_type(column, db.dialect)}
        if application:  # what the engine itself says, beside the type queries read it as
            record["engine_type"] = engine_types[position]
        record["nullable"] = column.nullable
        record["key"] = key.index(column.name.lower()) + 1 if column.name.lower() in key else None
        record["note"] = ""
        records.append(record)
    if table.is_queue:
        deliver_time = "deliver_time" if db.dialect == "postgresql" else "DeliverTime"
        if deliver_time.lower() not in visible:
            records.append(
                {
                    "column": deliver_time,
                    "type": spanner_type(
                        SchemaColumn(deliver_time, ColumnType.TIMESTAMP), db.dialect
                    ),
                    "nullable": False,
                    "key": None,
                    "note": "when the message is delivered (set by send)",
                }
            )
        for hidden, kind, meaning in queue_state_columns(db.dialect):
            records.append(
                {
                    "column": hidden,
                    "type": kind,
                    "nullable": "never NULL" not in meaning,
                    "key": None,
                    "note": f"hidden: {meaning}",
                }
            )
    indexes = [
        row for row in _rows(db, "INDEX_COLUMNS") if str(row[2]).lower() == table.name.lower()
    ]
    by_index: dict[str, list[str]] = {}
    for row in indexes:
        if row[4] == "INDEX":
            by_index.setdefault(row[3], []).append(row[5] + (" DESC" if row[7] == "DESC" else ""))
    kind = "queue" if table.is_queue else "table"
    details = [f"primary key ({', '.join(table.primary_key)})"] if table.primary_key else []
    if isinstance(table, ApplicationTable):
        kind = "view" if table.is_view else "table"
        details.insert(
            0,
            "not created by txqueue: read from the engine's catalog, its types mapped to "
            "Spanner's (see docs/sql.md)",
        )
    if table.parent is not None:
        action = "CASCADE" if table.on_delete_cascade else "NO ACTION"
        details.append(f"interleaved in parent {table.parent} on delete {action}")
    details += [f"index {index} ({', '.join(cols)})" for index, cols in by_index.items()]

    engine_column = [Column(f"{db.traits.display_name} type")] if application else []

    def show() -> None:
        output = console()
        output.print(text(f"{kind} {table.name}"))
        for line in details:
            output.print(text(f"  {line}"))
        print_table(
            [
                Column("column"),
                Column("type"),
                *engine_column,
                Column("nullable"),
                Column("key", justify="right"),
                Column("", style="dim"),
            ],
            (
                (
                    r["column"],
                    r["type"],
                    *([r["engine_type"] or "(none)"] if application else []),
                    "yes" if r["nullable"] else "no",
                    r["key"] or "",
                    r["note"],
                )
                for r in records
            ),
            empty="",
        )

    fields = ["column", "type", *(["engine_type"] if application else []), "nullable", "key"]
    emit(output_format, records, show, [*fields, "note"])
