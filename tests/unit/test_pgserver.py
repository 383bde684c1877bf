"""The throw-away PostgreSQL server used by the rest of the suite (tests/pgserver.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pgserver import PostgresServer

pytestmark = pytest.mark.postgres


def _own_server(postgres_server: PostgresServer | None) -> PostgresServer:
    if postgres_server is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but the tests use an external server", pytrace=False)
        pytest.skip("using an external PostgreSQL server; no server of our own to control")
    return postgres_server


def test_server_accepts_connections(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url, connect_timeout=10) as conn:
        row = conn.execute("SELECT current_setting('server_encoding'), 1 + 1").fetchone()
    assert row == ("UTF8", 2)


def test_own_server_settings(postgres_server: PostgresServer | None) -> None:
    import psycopg

    server = _own_server(postgres_server)
    assert server.url == f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
    assert server.log_path.is_file()
    with psycopg.connect(server.url) as conn:
        settings: dict[str, str] = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings"
                " WHERE name IN ('fsync', 'synchronous_commit', 'max_connections', 'port')"
            ).fetchall()
        )
    assert settings == {
        "fsync": "off",
        "synchronous_commit": "on",
        "max_connections": "200",
        "port": str(server.port),
    }


def test_create_database_recreates(postgres_server: PostgresServer | None) -> None:
    import psycopg

    server = _own_server(postgres_server)
    url = server.create_database("pgserver_selftest")
    assert url == server.url.rsplit("/", 1)[0] + "/pgserver_selftest"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("pgserver_selftest",)
            conn.execute("CREATE TABLE leftover (x int)")
        # A second create drops the old database, even with a session still open.
        with psycopg.connect(url, autocommit=True) as lingering:
            assert server.create_database("pgserver_selftest") == url
            with pytest.raises(psycopg.OperationalError):
                lingering.execute("SELECT 1")
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('leftover')").fetchone() == (None,)
    finally:
        server.drop_database("pgserver_selftest")


def test_pg_database_url_is_fresh_and_distinct(pg_database_url: str, postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_database_url) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
    assert name is not None
    assert name[0].startswith("t_test_pgserver_test_pg_database_url")
    assert len(name[0].encode()) <= 63
    assert tables == (0,)
    assert pg_database_url != postgres_url


def test_restart_immediate_keeps_committed_data(postgres_server: PostgresServer | None) -> None:
    import psycopg

    server = _own_server(postgres_server)
    url = server.create_database("pgserver_crash")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
            conn.execute("INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 1000) g")
        uncommitted = psycopg.connect(url)
        uncommitted.execute("INSERT INTO t VALUES (0, 'never committed')")
        port = server.port

        server.restart(mode="immediate")  # crash: no shutdown checkpoint

        assert server.port == port
        uncommitted.close()  # its server process is gone
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*), min(id), max(id) FROM t").fetchone() == (
                1000,
                1,
                1000,
            )
        assert "database system was interrupted" in server.log_tail(200)
    finally:
        server.drop_database("pgserver_crash")


def test_start_with_settings_and_cleanup(postgres_server: PostgresServer | None) -> None:
    """A second, private server: settings reach postgres intact; cleanup removes it all."""
    import psycopg

    _own_server(postgres_server)  # only where we are allowed to start servers
    server = PostgresServer.start({"application_name": "it's a 'test' $HOME"})
    base: Path = server.base_dir
    try:
        with psycopg.connect(server.url) as conn:
            row = conn.execute("SHOW application_name").fetchone()
        assert row == ("it's a 'test' $HOME",)
        server.stop()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(server.url, connect_timeout=5)
        server.restart(mode="fast")  # also starts a stopped server
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.cleanup()
    assert not base.exists()
