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
from txqueue.sql.information_schema import QUEUE_STATE_COLUMNS, spanner_type

__all__ = ["describe", "list_tables"]


def _rows(db: txqueue.Database, view: str) -> list[tuple[Any, ...]]:
    with db.snapshot() as snapshot:
        return list(snapshot.execute_sql(f"SELECT * FROM INFORMATION_SCHEMA.{view}"))


def list_tables(db: txqueue.Database, output_format: str) -> None:
    """Every table and queue: name, kind, and the parent it is interleaved in."""
    records = [
        {"name": row[2], "kind": "queue" if row[3] == "QUEUE" else "table", "parent": row[4]}
        for row in _rows(db, "TABLES")
    ]
    emit(
        output_format,
        records,
        lambda: print_table(
            ["name", "kind", "interleaved in"],
            ((r["name"], r["kind"], r["parent"] or "") for r in records),
            title="tables and queues",
            empty="no tables or queues",
        ),
        ["name", "kind", "parent"],
    )


def describe(db: txqueue.Database, name: str, output_format: str) -> None:
    """One table or queue: its columns (a queue's hidden ones too), key, interleaving and
    indexes; NotFound when there is none."""
    table = db.table(name)
    key = [k.lower() for k in table.primary_key]
    visible = {c.name.lower() for c in table.columns}
    records: list[dict[str, Any]] = []
    for column in table.columns:
        records.append(
            {
                "column": column.name,
                "type": spanner_type(column, db.dialect),
                "nullable": column.nullable,
                "key": key.index(column.name.lower()) + 1 if column.name.lower() in key else None,
                "note": "",
            }
        )
    if table.is_queue:
        deliver_time = "deliver_time" if db.dialect == "postgresql" else "DeliverTime"
        if deliver_time.lower() not in visible:
            records.append(
                {
                    "column": deliver_time,
                    "type": "TIMESTAMP",
                    "nullable": False,
                    "key": None,
                    "note": "when the message is delivered (set by send)",
                }
            )
        for hidden, kind, meaning in QUEUE_STATE_COLUMNS:
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
    details = [f"primary key ({', '.join(table.primary_key)})"]
    if table.parent is not None:
        action = "CASCADE" if table.on_delete_cascade else "NO ACTION"
        details.append(f"interleaved in parent {table.parent} on delete {action}")
    details += [f"index {index} ({', '.join(cols)})" for index, cols in by_index.items()]

    def show() -> None:
        output = console()
        output.print(text(f"{kind} {table.name}"))
        for line in details:
            output.print(text(f"  {line}"))
        print_table(
            [
                Column("column"),
                Column("type"),
                Column("nullable"),
                Column("key", justify="right"),
                Column("", style="dim"),
            ],
            (
                (
                    r["column"],
                    r["type"],
                    "yes" if r["nullable"] else "no",
                    r["key"] or "",
                    r["note"],
                )
                for r in records
            ),
            empty="",
        )

    emit(output_format, records, show, ["column", "type", "nullable", "key", "note"])
