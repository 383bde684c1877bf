"""Spanner DDL front end: CREATE/DROP TABLE, QUEUE and INDEX in both Spanner dialects.

sqlglot lexes (BigQuery's tokenizer for GoogleSQL, Postgres's for the PostgreSQL dialect) but
cannot parse Spanner DDL (CREATE QUEUE, INTERLEAVE), so a small recursive-descent parser sits
on its tokens and produces the engine-independent model of ``txqueue.core.schema``. Every
problem is an ``InvalidArgument`` naming the rule and the offending token;
``check_against_catalog`` (``txqueue.sql.catalog_checks``, re-exported here) then checks a
parsed statement against the existing schema.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import takewhile
from typing import NoReturn

from sqlglot import TokenType
from sqlglot.dialects.bigquery import BigQuery
from sqlglot.dialects.postgres import Postgres

from txqueue.core.schema import (
    KEY_TYPES,
    PAYLOAD_TYPES,
    Column,
    ColumnType,
    CreateIndex,
    CreateTable,
    DdlStatement,
    Dialect,
    DropIndex,
    DropTable,
    Index,
    Table,
    validate_name,
)
from txqueue.errors import InvalidArgument
from txqueue.sql.catalog_checks import check_against_catalog, type_name

__all__ = ["MAX_LENGTH", "check_against_catalog", "parse_ddl", "simulate", "split_statements"]

MAX_LENGTH = 10_485_760
"""Largest declared STRING/BYTES length (Spanner's BYTES limit, 10 MiB)."""

_TOKENIZERS = {
    Dialect.GOOGLESQL: BigQuery.tokenizer_class,
    Dialect.POSTGRESQL: Postgres.tokenizer_class,
}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\s+[A-Za-z_][A-Za-z0-9_]*)*\Z")
_DIGITS = re.compile(r"[0-9]{1,12}\Z")

_GSQL_TYPES = {t.value: t for t in ColumnType}
_PG_TYPES = {
    name: ctype
    for names, ctype in (
        ("bigint int8 integer int int4", ColumnType.INT64),
        ("text", ColumnType.STRING),
        ("bytea", ColumnType.BYTES),
        ("boolean bool", ColumnType.BOOL),
        ("float8", ColumnType.FLOAT64),
        ("real float4", ColumnType.FLOAT32),
        ("timestamptz", ColumnType.TIMESTAMP),
        ("date", ColumnType.DATE),
        ("jsonb", ColumnType.JSON),
        ("numeric", ColumnType.NUMERIC),
    )
    for name in names.split()
}
# PostgreSQL type words that are not GoogleSQL types (nor in _PG_TYPES): a hint, not a type.
_PG_ONLY_WORDS = frozenset({"double", "varchar", "character"})
_DIALECT_NAMES = {Dialect.GOOGLESQL: "GoogleSQL", Dialect.POSTGRESQL: "PostgreSQL"}


def _other_dialect(word: str, dialect: Dialect, column: str) -> str:
    """Why ``word``, a type of ``dialect``, is refused here, and how to choose ``dialect``."""
    here = Dialect.POSTGRESQL if dialect is Dialect.GOOGLESQL else Dialect.GOOGLESQL
    return (
        f"{word} (column {column}) is a {_DIALECT_NAMES[dialect]} type; this database uses the "
        f"{here.value} dialect (write {_DIALECT_NAMES[here]} DDL, or connect(url, "
        f'dialect="{dialect.value}") to a database with no update_ddl yet)'
    )


# Clauses Spanner has but txqueue does not: named in the error rather than a syntax error.
_UNSUPPORTED_COLUMN_CLAUSES = {"DEFAULT", "AS", "HIDDEN", "GENERATED", "REFERENCES", "COLLATE"}
_UNSUPPORTED_COLUMN_CLAUSES |= {"CONSTRAINT", "CHECK", "UNIQUE", "IDENTITY", "AUTO_INCREMENT"}
_TABLE_CONSTRAINTS = [("CONSTRAINT",), ("FOREIGN", "KEY"), ("CHECK", "("), ("UNIQUE", "(")]
_DELIVER_TIME_NAMES = frozenset({"delivertime", "deliver_time"})


@dataclass(frozen=True)
class _Tok:
    """One lexical token: ``word`` (unquoted), ``quoted`` identifier, ``number``, ``other``
    (punctuation, literals) or the ``end`` sentinel. ``start``/``end`` index the source."""

    kind: str
    text: str
    raw: str
    start: int
    end: int

    def is_(self, text: str) -> bool:
        """Is this the keyword (any case, unquoted) or punctuation ``text``?"""
        if self.kind == "word":
            return self.text.upper() == text
        return self.kind == "other" and self.raw == text


def _tokenize(text: str, dialect: Dialect) -> list[_Tok]:
    """Lex with sqlglot, splitting its merged keywords (``PRIMARY KEY``) into single words."""
    try:
        tokens = _TOKENIZERS[dialect]().tokenize(text)
    except Exception as exc:  # sqlglot raises TokenError for unterminated strings/comments
        detail = exc.__cause__ or exc
        raise InvalidArgument(
            f"cannot tokenize DDL (unterminated string or comment?): {detail}"
        ) from exc
    out: list[_Tok] = []
    for token in tokens:
        start, end = token.start, token.end + 1
        raw = text[start:end]
        if token.token_type == TokenType.IDENTIFIER:
            out.append(_Tok("quoted", token.text, raw, start, end))
        elif _WORDS.match(raw):
            for m in _WORD.finditer(raw):
                out.append(_Tok("word", m.group(), m.group(), start + m.start(), start + m.end()))
        elif token.token_type == TokenType.NUMBER:
            out.append(_Tok("number", raw, raw, start, end))
        else:
            out.append(_Tok("other", raw, raw, start, end))
    tail = out[-1].end if out else 0
    out.append(_Tok("end", "", "", tail, tail))
    return out


def split_statements(text: str, dialect: Dialect = Dialect.GOOGLESQL) -> list[str]:
    """Split a DDL script on top-level ``;`` (not inside strings, identifiers or comments).

    Pieces holding only comments or whitespace are dropped; each piece runs from its first
    token to its last, so comments before or after it are left out.
    """
    pieces: list[str] = []
    first: _Tok | None = None
    last: _Tok | None = None
    for tok in _tokenize(text, dialect):
        if tok.kind == "end" or (tok.kind == "other" and tok.raw == ";"):
            if first is not None and last is not None:
                pieces.append(text[first.start : last.end])
            first = last = None
        else:
            first = first or tok
            last = tok
    return pieces


def parse_ddl(statement: str, dialect: Dialect) -> DdlStatement:
    """Parse one DDL statement of ``dialect``; raises only InvalidArgument, whatever the input."""
    if not isinstance(statement, str) or dialect not in tuple(Dialect):
        raise InvalidArgument(
            f"parse_ddl needs a str and a Dialect, got {statement!r:.40}, {dialect!r}"
        )
    return _Parser(statement, Dialect(dialect)).statement()


class _Parser:
    """Recursive descent over the tokens of one statement."""

    def __init__(self, text: str, dialect: Dialect) -> None:
        self.pg = dialect is Dialect.POSTGRESQL
        self.toks = _tokenize(text, dialect)
        if len(self.toks) > 1 and self.toks[-2].raw == ";":
            del self.toks[-2]
        self.i = 0
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    # -- token helpers ---------------------------------------------------------------------

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def where(self, tok: _Tok) -> str:
        line = bisect.bisect_right(self._line_starts, tok.start)
        return f"line {line}, column {tok.start - self._line_starts[line - 1] + 1}"

    @staticmethod
    def found(tok: _Tok) -> str:
        if tok.kind == "end":
            return "end of statement"
        raw = tok.raw if len(tok.raw) <= 40 else tok.raw[:37] + "..."
        return f'"{raw}"' if "'" in raw else f"'{raw}'"

    def err(self, message: str, tok: _Tok | None = None) -> NoReturn:
        """Refuse with ``message``, pointing at ``tok`` (default: the current token)."""
        raise InvalidArgument(f"{message} (at {self.where(tok or self.tok)})")

    def fail(self, expected: str) -> NoReturn:
        tok = self.tok
        hint = " (one statement per call: see split_statements)" if tok.raw == ";" else ""
        raise InvalidArgument(
            f"expected {expected} at {self.where(tok)}, found {self.found(tok)}{hint}"
        )

    def at(self, *words: str) -> bool:
        last = len(self.toks) - 1
        return all(self.toks[min(self.i + k, last)].is_(w) for k, w in enumerate(words))

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        for word in words:
            if not self.accept(word):
                self.fail(word if word[0].isalpha() else f"'{word}'")

    def name(self, what: str) -> tuple[str, _Tok]:
        """An identifier: unquoted ones fold to lower case in the PostgreSQL dialect."""
        tok = self.tok
        if tok.kind == "word":
            name = tok.text.lower() if self.pg else tok.text
        elif tok.kind == "quoted":
            name = tok.text
        else:
            self.fail(what)
        try:
            validate_name(name, what)
        except InvalidArgument as exc:
            self.err(str(exc))
        self.i += 1
        return name, tok

    def unsupported_clause(self, owner: str, expected: str = "end of statement") -> NoReturn:
        """Name a clause we do not implement (e.g. ROW DELETION POLICY); else a syntax error."""
        tok = self.tok
        if tok.kind != "word":
            self.fail(expected)
        words = takewhile(lambda t: t.kind == "word", self.toks[self.i : self.i + 3])
        self.err(f"{' '.join(t.raw.upper() for t in words)} is not supported ({owner})")

    # -- statements ----------------------------------------------------------------------------

    def statement(self) -> DdlStatement:
        first = self.tok
        result: DdlStatement
        if first.kind == "end":
            raise InvalidArgument("unsupported DDL statement: the statement is empty")
        if self.accept("CREATE"):
            unique = self.accept("UNIQUE")
            null_filtered = not self.pg and self.accept("NULL_FILTERED")
            if unique or null_filtered:
                self.expect("INDEX")
                result = self.create_index(unique)
            elif self.accept("INDEX"):
                result = self.create_index(False)
            elif self.accept("TABLE"):
                result = self.create_table(is_queue=False)
            elif self.accept("QUEUE"):
                result = self.create_table(is_queue=True)
            else:
                self.unsupported_statement(first)
        elif self.accept("DROP"):
            if self.accept("INDEX"):
                if_exists = self.accept("IF", "EXISTS")
                result = DropIndex(self.name("index name")[0], if_exists)
            elif self.at("TABLE") or self.at("QUEUE"):
                is_queue = self.tok.is_("QUEUE")
                self.i += 1
                if_exists = self.accept("IF", "EXISTS")
                name = self.name("queue name" if is_queue else "table name")[0]
                result = DropTable(name, is_queue, if_exists)
            else:
                self.unsupported_statement(first)
        else:
            self.unsupported_statement(first)
        if self.tok.kind != "end":
            self.fail("end of statement")
        return result

    def unsupported_statement(self, first: _Tok) -> NoReturn:
        start = self.toks.index(first)
        shown = " ".join(t.raw for t in self.toks[start : start + 2] if t.kind != "end")
        if len(shown) > 40:
            shown = shown[:37] + "..."
        raise InvalidArgument(
            f"unsupported DDL statement '{shown}' at {self.where(first)}: txqueue accepts "
            "CREATE/DROP TABLE, CREATE/DROP QUEUE and CREATE/DROP INDEX"
        )

    def create_table(self, is_queue: bool) -> CreateTable:
        kind = "queue" if is_queue else "table"
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name, _ = self.name(f"{kind} name")
        owner = f"{kind} {name}"
        columns: list[tuple[Column, _Tok]] = []
        key: list[tuple[str, _Tok]] | None = None

        def element() -> None:
            nonlocal key
            tok = self.tok
            if self.accept("PRIMARY", "KEY"):
                if not self.pg:
                    self.err("in GoogleSQL, PRIMARY KEY (...) follows the column list", tok)
                if key is not None:
                    self.err(f"{owner} has two primary keys", tok)
                key = [(n, t) for n, _, t in self.key_parts("primary key column")]
            elif any(self.at(*constraint) for constraint in _TABLE_CONSTRAINTS):
                self.unsupported_clause(owner)
            else:
                column, inline_key = self.column(owner)
                columns.append((column, tok))
                if inline_key:
                    if key is not None:
                        self.err(f"{owner} has two primary keys", tok)
                    key = [(column.name, tok)]

        self.parenthesized(element)
        if not self.pg:
            if not self.at("PRIMARY"):
                tok = self.tok
                raise InvalidArgument(
                    f"{owner} needs a PRIMARY KEY: expected PRIMARY KEY at {self.where(tok)}, "
                    f"found {self.found(tok)}"
                )
            self.expect("PRIMARY", "KEY")
            key = [(n, t) for n, _, t in self.key_parts("primary key column")]
        parent, cascade = self.interleave(owner)
        table = self.build_table(name, columns, key or [], is_queue)
        return CreateTable(replace(table, parent=parent, on_delete_cascade=cascade), if_not_exists)

    def interleave(self, owner: str) -> tuple[str | None, bool]:
        """Trailing clauses: ``[,] INTERLEAVE IN PARENT p [ON DELETE CASCADE|NO ACTION]``."""
        parent: str | None = None
        cascade = False
        end = "end of statement" if self.pg else "',' or end of statement"
        while self.tok.kind != "end":
            self.check_stray_on_delete(owner, parent, end)
            if not self.pg and not self.accept(","):
                self.fail(end)
            self.check_stray_on_delete(owner, parent, end)
            tok = self.tok
            if not self.accept("INTERLEAVE"):
                self.unsupported_clause(owner, "INTERLEAVE IN PARENT")
            if parent is not None:
                self.err(f"{owner} has two INTERLEAVE clauses", tok)
            self.expect("IN", "PARENT")
            parent, _ = self.name("parent table name")
            if self.accept("ON", "DELETE"):
                cascade = self.accept("CASCADE")
                if not cascade and not self.accept("NO", "ACTION"):
                    self.fail("CASCADE or NO ACTION")
        return parent, cascade

    def check_stray_on_delete(self, owner: str, parent: str | None, end: str) -> None:
        """ON DELETE only belongs to INTERLEAVE IN PARENT; refuse it anywhere else."""
        if not self.at("ON"):
            return
        if parent is not None:
            self.fail(end)
        self.err(f"ON DELETE needs INTERLEAVE IN PARENT: {owner} is not interleaved")

    def parenthesized(self, element: Callable[[], None]) -> None:
        """``( [element {, element}] )``: ``element`` parses one item."""
        self.expect("(")
        if self.accept(")"):
            return
        while True:
            element()
            if not self.accept(","):
                self.expect(")")
                return

    def key_parts(self, what: str) -> list[tuple[str, bool, _Tok]]:
        """``( name [ASC|DESC], ... )`` → (name, descending, token) triples; may be empty."""
        parts: list[tuple[str, bool, _Tok]] = []

        def part() -> None:
            name, tok = self.name(what)
            descending = self.accept("DESC")
            if not descending:
                self.accept("ASC")
            parts.append((name, descending, tok))

        self.parenthesized(part)
        return parts

    def column(self, owner: str) -> tuple[Column, bool]:
        """``name type [NOT NULL] [OPTIONS (...)]`` (GoogleSQL) or ``[NULL] [PRIMARY KEY]`` (PG)."""
        name, _ = self.name("column name")
        ctype, length, array = self.pg_type(name) if self.pg else self.googlesql_type(name, False)
        nullable, inline_key = True, False
        while True:
            tok = self.tok
            if self.accept("NOT", "NULL"):
                nullable = False
            elif self.pg and self.accept("NULL"):
                nullable = True
            elif self.pg and self.accept("PRIMARY", "KEY"):
                inline_key = True
            elif not self.pg and self.accept("OPTIONS"):
                self.column_options(name)
            elif tok.kind == "word" and tok.text.upper() in _UNSUPPORTED_COLUMN_CLAUSES:
                self.unsupported_clause(f"column {name} of {owner}")
            else:
                break
        return Column(name, ctype, nullable, length, array), inline_key

    def column_options(self, column: str) -> None:
        """``OPTIONS (allow_commit_timestamp = true|false|null, ...)``; nothing else exists."""

        def option() -> None:
            tok = self.tok
            if not self.accept("ALLOW_COMMIT_TIMESTAMP"):
                if tok.kind != "word":
                    self.fail("option name")
                self.err(f"column option '{tok.raw}' is not supported (column {column})")
            self.expect("=")
            if not any(self.accept(value) for value in ("TRUE", "FALSE", "NULL")):
                self.fail("TRUE, FALSE or NULL")

        self.parenthesized(option)

    def length(self, column: str) -> int | None:
        """A declared length: 1..MAX_LENGTH, or MAX (GoogleSQL) meaning no limit."""
        tok = self.tok
        if not self.pg and self.accept("MAX"):
            return None
        if tok.kind == "number" and _DIGITS.match(tok.raw) and 0 < int(tok.raw) <= MAX_LENGTH:
            self.i += 1
            return int(tok.raw)
        maximum = f"{MAX_LENGTH}" if self.pg else f"{MAX_LENGTH} or MAX"
        self.err(f"invalid length {self.found(tok)} for column {column}: use 1..{maximum}")

    def unknown_type(self, tok: _Tok, column: str, hint: str = "") -> NoReturn:
        """Refuse a type; one of the other dialect says so and how to choose that dialect."""
        word = tok.text.lower()
        if not hint and self.pg and word.upper() in _GSQL_TYPES and word != "json":
            self.err(_other_dialect(tok.raw, Dialect.GOOGLESQL, column), tok)
        if not hint and not self.pg and (word in _PG_TYPES or word in _PG_ONLY_WORDS):
            self.err(_other_dialect(tok.raw, Dialect.POSTGRESQL, column), tok)
        self.err(f"unknown column type '{tok.raw}' for column {column}{hint}", tok)

    def googlesql_type(self, column: str, in_array: bool) -> tuple[ColumnType, int | None, bool]:
        tok = self.tok
        if tok.kind != "word":
            self.fail("column type")
        self.i += 1
        word = tok.text.upper()
        if word == "ARRAY":
            if in_array:
                self.err(f"nested ARRAY is not supported (column {column})", tok)
            self.expect("<")
            ctype, length, _ = self.googlesql_type(column, True)
            self.expect(">")
            return ctype, length, True
        if word not in _GSQL_TYPES:
            self.unknown_type(tok, column)
        ctype = _GSQL_TYPES[word]
        length = None
        if ctype in (ColumnType.STRING, ColumnType.BYTES):
            if not self.accept("("):
                self.err(f"type {word} of column {column} needs a length, e.g. {word}(MAX)")
            length = self.length(column)
            self.expect(")")
        return ctype, length, False

    def pg_type(self, column: str) -> tuple[ColumnType, int | None, bool]:
        tok = self.tok
        if tok.kind != "word":
            self.fail("column type")
        self.i += 1
        word = tok.text.lower()
        length = None
        if word in _PG_TYPES:
            ctype = _PG_TYPES[word]
        elif word == "double" and self.accept("PRECISION"):
            ctype = ColumnType.FLOAT64
        elif word == "timestamp":
            if not self.accept("WITH", "TIME", "ZONE"):
                self.unknown_type(tok, column, ": only timestamptz (timestamp with time zone)")
            ctype = ColumnType.TIMESTAMP
        elif word == "varchar" or (word == "character" and self.accept("VARYING")):
            ctype = ColumnType.STRING
            if self.accept("("):
                length = self.length(column)
                self.expect(")")
        else:
            self.unknown_type(tok, column)
        array = self.accept("[")
        if array:
            self.expect("]")
            if self.at("["):
                self.err(f"nested array is not supported (column {column})")
        return ctype, length, array

    def build_table(
        self,
        name: str,
        columns: list[tuple[Column, _Tok]],
        key: list[tuple[str, _Tok]],
        is_queue: bool,
    ) -> Table:
        """Check the column, key and queue rules; the caller adds the INTERLEAVE parent."""
        owner = f"{'queue' if is_queue else 'table'} {name}"
        by_name: dict[str, Column] = {}
        for column, tok in columns:
            if column.name.lower() in by_name:
                self.err(f"duplicate column name {column.name} in {owner}", tok)
            by_name[column.name.lower()] = column
        if not key:
            raise InvalidArgument(f"{owner} needs a PRIMARY KEY with at least one column")
        key_names: list[str] = []
        for key_name, tok in key:
            found = by_name.get(key_name.lower())
            if found is None:
                self.err(f"primary key column {key_name} of {owner} is not declared", tok)
            if found.name in key_names:
                self.err(f"primary key column {key_name} of {owner} is repeated", tok)
            if found.array or found.type not in KEY_TYPES:
                allowed = ", ".join(t.value for t in KEY_TYPES)
                self.err(
                    f"column {found.name} of type {type_name(found)} cannot be in the primary "
                    f"key of {owner} (allowed: {allowed})",
                    tok,
                )
            key_names.append(found.name)
        if is_queue:
            for column, tok in columns:
                if column.name.lower() in _DELIVER_TIME_NAMES:
                    self.err(
                        f"{owner} must not declare column {column.name}: "
                        "DeliverTime/deliver_time is added automatically",
                        tok,
                    )
            payload = by_name.get("payload")
            if payload is None:
                raise InvalidArgument(f"{owner} needs a Payload column (BYTES, STRING or JSON)")
            if payload.array or payload.type not in PAYLOAD_TYPES:
                raise InvalidArgument(
                    f"the Payload column of {owner} must be BYTES, STRING or JSON, "
                    f"not {type_name(payload)}"
                )
            if payload.name in key_names:
                raise InvalidArgument(
                    f"the Payload column of {owner} must not be in the primary key"
                )
        return Table(name, tuple(c for c, _ in columns), tuple(key_names), is_queue)

    def create_index(self, unique: bool) -> CreateIndex:
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name, _ = self.name("index name")
        self.expect("ON")
        table, _ = self.name("table name")
        parts = self.key_parts("index column")
        if not parts:
            self.err(f"index {name} needs at least one column", self.toks[self.i - 1])
        seen: set[str] = set()
        for column, _, tok in parts:
            if column.lower() in seen:
                self.err(f"column {column} is repeated in index {name}", tok)
            seen.add(column.lower())
        if self.tok.kind != "end":
            self.unsupported_clause(f"index {name}")
        columns, descending = tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        return CreateIndex(Index(name, table, columns, unique, descending), if_not_exists)


def simulate(statement: DdlStatement, tables: dict[str, Table], indexes: dict[str, Index]) -> None:
    """Apply a checked statement to a working copy of the catalog (to check the next one)."""
    if isinstance(statement, CreateTable):
        tables.setdefault(statement.table.name.lower(), statement.table)
    elif isinstance(statement, DropTable):
        tables.pop(statement.name.lower(), None)
    elif isinstance(statement, CreateIndex):
        indexes.setdefault(statement.index.name.lower(), statement.index)
    elif isinstance(statement, DropIndex):
        indexes.pop(statement.name.lower(), None)
