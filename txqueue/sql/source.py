"""SQL text before parsing: lexing, splitting scripts, ``ASSERT_ROWS_MODIFIED``, positions.

sqlglot's tokenizers lex (BigQuery's for GoogleSQL, Postgres's for the PostgreSQL dialect);
nothing here parses. Positions are reported as ``line L, column C`` counted from 1.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from sqlglot import TokenType
from sqlglot.dialects.bigquery import BigQuery
from sqlglot.dialects.postgres import Postgres

from txqueue.core.schema import Dialect
from txqueue.errors import InvalidArgument

__all__ = [
    "Prepared",
    "Source",
    "is_complete",
    "prepare",
    "split_script",
    "statement_kind",
    "tokenize",
]

_TOKENIZERS = {
    Dialect.GOOGLESQL: BigQuery.tokenizer_class,
    Dialect.POSTGRESQL: Postgres.tokenizer_class,
}
_DDL_WORDS = {"CREATE", "DROP", "ALTER"}
_DML_WORDS = {"INSERT", "UPDATE", "DELETE"}
_QUERY_WORDS = {"SELECT", "WITH", "(", "FROM"}
_ASSERT = "ASSERT_ROWS_MODIFIED"


class Source:
    """Statement text with a line index, to turn offsets into ``line L, column C``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(self, offset: int) -> str:
        line = bisect.bisect_right(self._starts, offset)
        return f"line {line}, column {offset - self._starts[line - 1] + 1}"


def tokenize(text: str, dialect: Dialect) -> list[Any]:
    """sqlglot's tokens for ``text``; InvalidArgument (with the position) when it cannot lex."""
    try:
        return list(_TOKENIZERS[dialect]().tokenize(text))
    except Exception as error:  # sqlglot raises TokenError: unterminated string/comment, ...
        raise InvalidArgument(
            f"cannot read the SQL text (unterminated string, quoted name or comment?): {error}"
        ) from None


def split_script(text: str, dialect: Dialect | str = Dialect.GOOGLESQL) -> list[str]:
    """Split a script on top-level ``;``; comments stay with their statement.

    Pieces without any token (only blanks or comments) are dropped; the ``;`` is left out.
    """
    tokens = tokenize(text, Dialect(dialect))
    pieces: list[str] = []
    begin, seen = 0, False
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if seen:
                pieces.append(text[begin : token.start].strip())
            begin, seen = token.end + 1, False
        else:
            seen = True
    if seen:
        pieces.append(text[begin:].strip())
    return pieces


def is_complete(text: str, dialect: Dialect | str) -> bool:
    """Does ``text`` end with a top-level ``;`` (outside strings and comments)?"""
    try:
        tokens = tokenize(text, Dialect(dialect))
    except InvalidArgument:
        return False  # an unterminated string or comment: more is coming
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


def statement_kind(text: str, dialect: Dialect | str) -> str:
    """``"query"``, ``"dml"``, ``"ddl"`` or ``"other"`` by the statement's first word."""
    tokens = tokenize(text, Dialect(dialect))
    if not tokens:
        return "other"
    word = tokens[0].text.upper()
    if word in _DDL_WORDS:
        return "ddl"
    if word in _DML_WORDS:
        return "dml"
    return "query" if word in _QUERY_WORDS else "other"


@dataclass(frozen=True)
class Prepared:
    """A statement ready for sqlglot: ``ASSERT_ROWS_MODIFIED n`` blanked out (positions kept).

    ``assert_rows`` is the int, or the parameter (``"@name"``, ``"$1"``) giving it.
    """

    text: str
    assert_rows: int | str | None
    assert_offset: int


def prepare(text: str, dialect: Dialect) -> Prepared:
    """Find a trailing ``ASSERT_ROWS_MODIFIED <int | @param | $n>`` and blank it out."""
    tokens = tokenize(text, dialect)
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    for index, token in enumerate(tokens):
        if token.token_type != TokenType.VAR or token.text.upper() != _ASSERT:
            continue
        tail = tokens[index + 1 :]
        count = _assert_count(tail)
        if count is None:
            found = tail[0].text if tail else "end of statement"
            raise InvalidArgument(
                f"ASSERT_ROWS_MODIFIED needs a row count (an integer or a parameter) as the "
                f"last thing in the statement, at {Source(text).where(token.start)}, "
                f"found {found!r}"
            )
        end = tail[-1].end + 1
        blanked = text[: token.start] + re.sub(r"[^\n]", " ", text[token.start : end])
        return Prepared(blanked + text[end:], count, token.start)
    return Prepared(text, None, -1)


def _assert_count(tail: list[Any]) -> int | str | None:
    kinds = [t.token_type for t in tail]
    if kinds == [TokenType.NUMBER] and tail[0].text.isdigit():
        return int(tail[0].text)
    if len(tail) == 2 and kinds[0] == TokenType.PARAMETER:
        name = str(tail[1].text)
        if tail[0].text == "@" and re.fullmatch(r"[A-Za-z_]\w*", name):
            return "@" + name
        if tail[0].text == "$" and name.isdigit():
            return "$" + name
    return None
