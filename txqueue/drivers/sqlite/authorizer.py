"""SQLite's authorizer for the statements txqueue translated from a caller's SQL.

SQLite checks a statement as it compiles it, asking the authorizer about every table,
column and function it touches. For a ``TranslatedSql`` statement the guard allows reading
and writing tables and the functions on `ALLOWED_FUNCTIONS` (Spanner's functions as sqlglot
renders them on SQLite, and the translator's helpers), and refuses everything else:
``fts3_tokenizer`` (it returns a heap pointer, and takes one), ``load_extension``, the shell's
``readfile`` / ``writefile`` / ``edit``, ATTACH, DETACH and PRAGMA. Code of the schema's own
triggers and views is allowed: whoever wrote the DDL wrote it.

The authorizer runs only while a statement compiles, and sqlite3 keeps compiled statements,
so it costs txqueue's own statements nothing once they are cached. On txqueue's pooled
connections it stays set and lets everything pass unless a translated statement is running
(a text the connection compiled before as plain SQL, through ``execute_engine_sql``, is
reused as compiled); on the application's own connection it is set around that statement
alone (and cleared after it: an authorizer the application had set is replaced).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from txqueue.errors import InvalidArgument

__all__ = ["ALLOWED_FUNCTIONS", "Guard", "guarded"]

T = TypeVar("T")


def _words(text: str) -> list[str]:
    """The whitespace-separated words of ``text``: long lists of names, kept readable."""
    return text.split()


#: The functions a translated statement may call on SQLite, by lower-case name.
ALLOWED_FUNCTIONS = frozenset(
    _words(
        """
    abs acos acosh asin asinh atan atan2 atanh avg ceil ceiling char coalesce cos cosh count
    cume_dist current_date current_time current_timestamp date datetime degrees dense_rank
    exp first_value floor format glob group_concat hex ifnull iif instr julianday json
    json_array json_array_length json_each json_extract json_group_array json_group_object
    json_insert json_object json_quote json_remove json_replace json_set json_type
    json_valid lag last_value lead length like likelihood likely ln log log10 log2 lower
    ltrim max min mod nth_value ntile nullif percent_rank pi pow power printf quote radians
    random randomblob rank replace round row_number rtrim sign sin sinh soundex sqrt strftime
    substr substring sum tan tanh time total trim trunc typeof unhex unicode unixepoch
    unlikely upper -> ->>
    """
    )
)

_ALLOWED_ACTIONS = frozenset(
    {
        sqlite3.SQLITE_SELECT,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_INSERT,
        sqlite3.SQLITE_UPDATE,
        sqlite3.SQLITE_DELETE,
        sqlite3.SQLITE_RECURSIVE,
    }
)
#: The authorizer's action codes, by number, for the message of a refusal.
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{name}"): name
    for name in _words(
        """
    CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER
    CREATE_TEMP_VIEW CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX
    DROP_TEMP_TABLE DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT PRAGMA READ
    SELECT TRANSACTION UPDATE ATTACH DETACH ALTER_TABLE REINDEX ANALYZE CREATE_VTABLE
    DROP_VTABLE FUNCTION SAVEPOINT RECURSIVE
    """
    )
    if hasattr(sqlite3, f"SQLITE_{name}")
}


class Guard:
    """A connection's authorizer: passes everything unless ``active``; then it allows what a
    translated statement may do and records what it refused."""

    __slots__ = ("active", "refused")

    def __init__(self) -> None:
        self.active = False
        self.refused: str | None = None

    def __call__(
        self,
        action: int,
        first: str | None,
        second: str | None,
        database: str | None,
        source: str | None,
    ) -> int:
        if not self.active or source is not None:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if second is not None and second.lower() in ALLOWED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            self.refused = f"function {second}()"
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        self.refused = " ".join(
            part for part in (_ACTION_NAMES.get(action, str(action)), first, second) if part
        )
        return sqlite3.SQLITE_DENY


def install(connection: sqlite3.Connection) -> Guard:
    """Set a guard on one of txqueue's own connections, for its whole life."""
    guard = Guard()
    connection.set_authorizer(guard)
    return guard


def guarded(connection: sqlite3.Connection, guard: Guard | None, run: Callable[[], T]) -> T:
    """``run()`` (which compiles and runs a translated statement) under the guard; a refusal
    is an InvalidArgument naming what was refused. ``guard``: the connection's own, or None
    on the application's connection (then one is set for this statement alone)."""
    own = guard is None
    if guard is None:
        guard = Guard()
        connection.set_authorizer(guard)
    guard.active, guard.refused = True, None
    try:
        return run()
    except sqlite3.DatabaseError as error:
        if guard.refused is None:
            raise
        raise InvalidArgument(
            f"{guard.refused} is not supported in txqueue's SQL: it runs Spanner SQL's "
            "functions only (see docs/sql.md, 'What execute_sql is and is not')"
        ) from error
    finally:
        guard.active = False
        if own:
            connection.set_authorizer(None)
