"""Sybil configuration for tests/docs: every ```python and ```sql block of README.md and
docs/*.md runs, in order, one document at a time (see test_docs.py).

- ```python blocks run as written in the document's namespace. On PostgreSQL the one change
  is the URL: each ``sqlite:///<name>.db`` becomes a fresh PostgreSQL database of the
  document, as the README tells users to do. The docs' schemas are GoogleSQL, so that
  database is made a GoogleSQL one first (``connect(url, dialect="googlesql")`` and one
  DDL), unless the block connects with ``dialect="postgresql"``. A block defining ``test_*`` functions (a pytest test shown
  in the docs) has them called afterwards, with a fresh ``tmp_path`` if they take one.
- ```sql blocks run statement by statement on the document's ``db`` (the name the blocks
  before them bind), as ``txqueue sql`` runs a script: DDL through ``update_ddl``, DML in a
  transaction of its own, queries in a snapshot, read to the end.
- ``<!-- skip: next if(engine == "postgresql", reason="...") -->`` before a block marks it
  engine-specific (the namespace's ``engine`` is ``"sqlite"`` or ``"postgresql"``).

The run ends with one line, "docs: N blocks executed (sqlite M, postgresql K)".
"""

from __future__ import annotations

import inspect
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sybil import Example, Sybil
from sybil.evaluators.python import PythonEvaluator, pad
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

import txqueue
from txqueue.sql import StreamingResultSet, split_script, statement_kind

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))]
#: The documents with a block to run (the others would only be skipped).
RUNNABLE = [d for d in DOCUMENTS if re.search(r"^```(python|sql)\b", (ROOT / d).read_text(), re.M)]
#: The documents written for users: all but the log of every measurement round.
USER_DOCUMENTS = [d for d in DOCUMENTS if d != "docs/performance-history.md"]
SQLITE_URL = re.compile(r"sqlite:///[\w.-]+\.db")

# engine -> blocks that ran to the end on it (skipped blocks are not counted)
executed: Counter[str] = Counter()
#: The lines test_site.py leaves for the summary: the site's page and API-name counts.
_site_summary: list[str] = []


@pytest.fixture
def site_summary() -> list[str]:
    """Where a test leaves a line for the end of the run's summary."""
    return _site_summary


def _engine(example: Example) -> str:
    return str(example.namespace["engine"])


def _swap_urls(example: Example, source: str) -> str:
    """On PostgreSQL, each ``sqlite:///<name>.db`` of the block becomes that name's database."""
    database_for = example.namespace.get("__docs_database_for__")
    if database_for is None:
        return source
    dialect = "postgresql" if 'dialect="postgresql"' in source else "googlesql"
    return SQLITE_URL.sub(lambda match: database_for(match.group(0), dialect), source)


class DocsPythonEvaluator(PythonEvaluator):
    """Runs a block as written; on PostgreSQL with the document's database URL swapped in."""

    def __call__(self, example: Example) -> None:
        __tracebackhide__ = True
        source = _swap_urls(example, str(example.parsed))
        before = {name for name in example.namespace if name.startswith("test_")}
        padded = pad(source, example.line + example.parsed.line_offset)
        code = compile(padded, example.path, "exec", flags=self.flags, dont_inherit=True)
        exec(code, example.namespace)
        del example.namespace["__builtins__"]
        for name, function in list(example.namespace.items()):
            if name.startswith("test_") and name not in before and callable(function):
                _call_test(function)
        executed[_engine(example)] += 1


def _call_test(function: Any) -> None:
    """Run a pytest-style test function a document shows, as pytest would."""
    if "tmp_path" in inspect.signature(function).parameters:
        with tempfile.TemporaryDirectory() as directory:
            function(tmp_path=Path(directory))
    else:
        function()


def evaluate_sql(example: Example) -> None:
    """Runs a ```sql block on the document's ``db``, statement by statement."""
    __tracebackhide__ = True
    db = example.namespace.get("db")
    if not isinstance(db, txqueue.Database):
        raise AssertionError("a ```sql block runs on `db`: an earlier block must connect it")
    for statement in split_script(str(example.parsed), db.dialect):
        kind = statement_kind(statement, db.dialect)
        if kind == "ddl":
            db.update_ddl([statement])
        elif kind == "dml":
            db.run_in_transaction(lambda txn, text=statement: txn.execute_update(text))
        else:
            with db.snapshot() as snapshot:
                result = snapshot.execute_sql(statement)
                if isinstance(result, StreamingResultSet):
                    with result:
                        list(result)
                else:
                    list(result)
    executed[_engine(example)] += 1


class SqlCodeBlockParser(CodeBlockParser):
    """```sql blocks, run by ``evaluate_sql``."""

    language = "sql"

    def evaluate(self, example: Example) -> None:
        evaluate_sql(example)


python_blocks = PythonCodeBlockParser()
python_blocks.codeblock_parser = CodeBlockParser("python", DocsPythonEvaluator())

docs = Sybil(
    parsers=[python_blocks, SqlCodeBlockParser(), SkipParser()],
    path="../..",
    patterns=DOCUMENTS,
    name="docs",
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking ``document`` runs once per document (paths relative to the root); one
    that takes ``runnable_document`` once per document with a python or sql block."""
    if "document" in metafunc.fixturenames:
        metafunc.parametrize("document", DOCUMENTS)
    if "runnable_document" in metafunc.fixturenames:
        metafunc.parametrize("runnable_document", RUNNABLE)
    if "user_document" in metafunc.fixturenames:
        metafunc.parametrize("user_document", USER_DOCUMENTS)


@pytest.fixture(scope="session")
def sybil_docs() -> Sybil:
    """The Sybil that parses README.md and docs/*.md (``sybil_docs.parse(path)``)."""
    return docs


@pytest.fixture(scope="session")
def repository_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def executed_blocks() -> Counter[str]:
    """Blocks run to the end so far, by engine."""
    return executed


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if executed:
        total = sum(executed.values())
        sqlite, postgresql = executed["sqlite"], executed["postgresql"]
        terminalreporter.write_line(
            f"docs: {total} blocks executed (sqlite {sqlite}, postgresql {postgresql})"
        )
    for line in _site_summary:
        terminalreporter.write_line(line)
