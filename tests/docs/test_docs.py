"""Every ```python and ```sql block of README.md and docs/*.md runs as written (conftest.py).

One test per document and engine: the document's blocks run in order in one namespace, in a
fresh temporary directory (so ``sqlite:///app.db`` is a new file) and, on PostgreSQL, with a
fresh database in place of the SQLite URL. A block marked with a ``skip`` comment is not run
on the engine it names.
"""

from __future__ import annotations

import socket
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import SkipTest

import pytest
from pgserver import create_database, drop_database
from sybil import Sybil

import txqueue


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
    ]
)
def engine(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    return str(request.param)


def googlesql(url: str) -> None:
    """Record the GoogleSQL dialect in a new PostgreSQL database (the docs' schemas use it)."""
    with txqueue.connect(url, dialect="googlesql") as db:
        db.update_ddl(["CREATE TABLE DialectMark (Id INT64 NOT NULL) PRIMARY KEY (Id)"])
        db.update_ddl(["DROP TABLE DialectMark"])


@pytest.fixture
def namespace(request: pytest.FixtureRequest, engine: str) -> Iterator[dict[str, object]]:
    """The document's namespace: its engine and, on PostgreSQL, ``__docs_database_for__``,
    which gives each SQLite URL of the document a fresh PostgreSQL database of its own."""
    names: dict[str, object] = {"engine": engine}
    created: dict[str, tuple[str, str]] = {}  # SQLite URL -> (database name, URL)
    server = ""
    if engine == "postgresql":
        server = str(request.getfixturevalue("postgres_url"))

        def database_for(sqlite_url: str, dialect: str) -> str:
            if sqlite_url not in created:
                name = f"docs_{uuid.uuid4().hex[:12]}"
                created[sqlite_url] = (name, create_database(server, name))
                if dialect == "googlesql":
                    googlesql(created[sqlite_url][1])
            return created[sqlite_url][1]

        names["__docs_database_for__"] = database_for
    yield names
    for value in names.values():
        if isinstance(value, txqueue.Database):
            value.close()
    for name, _ in created.values():
        drop_database(server, name)


# A public address (not private, loopback, reserved or documentation-only) the docs' example
# hosts resolve to: pipelines check their destination's addresses when created, and this
# machine may have no DNS. Nothing is delivered to it (no dispatcher runs in the docs).
EXAMPLE_ADDRESS = "93.184.215.14"


@pytest.fixture
def example_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """``*.example.com`` resolves to EXAMPLE_ADDRESS; every other name as usual."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith(".example.com"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (EXAMPLE_ADDRESS, port or 443))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.usefixtures("example_hosts")
def test_document(
    runnable_document: str,
    namespace: dict[str, object],
    sybil_docs: Sybil,
    repository_root: Path,
    executed_blocks: Counter[str],
) -> None:
    document, executed = runnable_document, executed_blocks
    parsed = sybil_docs.parse(repository_root / document)
    parsed.namespace.update(namespace)
    ran = sum(executed.values())
    for example in parsed.examples():
        try:
            example.evaluate()
        except SkipTest:
            continue
    namespace.update(parsed.namespace)
    assert sum(executed.values()) > ran, f"{document} ran no block on {namespace['engine']}"
