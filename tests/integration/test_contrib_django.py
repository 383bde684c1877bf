"""txqueue.contrib.django: the example project's own tests on both engines, and the parts
that need no Django settings (URLs derived from DATABASES, the migration operation's checks).

The example project (examples/django_project) is run as its users run it, by Django's test
runner in its own process, on SQLite and on a PostgreSQL server of this session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("django")

from pgserver import with_database

from txqueue.contrib.django.operations import UpdateDdl
from txqueue.contrib.django.settings import url_from_django
from txqueue.errors import InvalidArgument

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "django_project"
ROOT = Path(__file__).resolve().parents[2]
TESTS = 11


def run_project_tests(database_url: str) -> str:
    environment = {
        **os.environ,
        "SHOP_DATABASE_URL": database_url,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "test", "shop", "--noinput", "-v", "2"],
        cwd=PROJECT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=110,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"Ran {TESTS} tests" in output, output
    return output


def test_example_project_on_sqlite(tmp_path: Path) -> None:
    output = run_project_tests(f"sqlite:///{tmp_path}/shop.db")
    assert "Applying shop.0002_order_emails_queue... OK" in output


def test_example_project_on_postgresql(postgres_url: str) -> None:
    # Django's runner makes (and drops) test_<name> itself, next to this unused name
    output = run_project_tests(with_database(postgres_url, f"shop_{uuid.uuid4().hex[:8]}"))
    assert "Applying shop.0002_order_emails_queue... OK" in output


def test_postgresql_url_from_django_settings() -> None:
    settings = {
        "NAME": "shop",
        "USER": "app user",
        "PASSWORD": "p@ss:word",
        "HOST": "db.internal",
        "PORT": 6432,
        "OPTIONS": {"sslmode": "require", "server_side_binding": True},
    }
    assert (
        url_from_django("psycopg", settings, "default")
        == "postgresql://app%20user:p%40ss%3Aword@db.internal:6432/shop?sslmode=require"
    )


def test_postgresql_socket_directory_goes_in_the_query() -> None:
    settings = {"NAME": "shop", "HOST": "/var/run/postgresql"}
    assert (
        url_from_django("psycopg", settings, "default")
        == "postgresql:///shop?host=%2Fvar%2Frun%2Fpostgresql"
    )


def test_sqlite_url_is_absolute(tmp_path: Path) -> None:
    url = url_from_django("sqlite3", {"NAME": tmp_path / "shop.db"}, "default")
    assert url == f"sqlite:///{tmp_path}/shop.db"


@pytest.mark.parametrize("name", [":memory:", "file:memorydb_default?mode=memory&cache=shared"])
def test_in_memory_sqlite_is_refused_with_the_fix(name: str) -> None:
    with pytest.raises(InvalidArgument, match=r"\['TEST'\]\['NAME'\] = a file path"):
        url_from_django("sqlite3", {"NAME": name}, "default")


@pytest.mark.parametrize("driver", ["psycopg2", "MySQLdb"])
def test_other_drivers_are_refused(driver: str) -> None:
    with pytest.raises(InvalidArgument, match=f"runs on the {driver} driver"):
        url_from_django(driver, {"NAME": "shop"}, "default")


def test_update_ddl_checks_its_statements() -> None:
    with pytest.raises(InvalidArgument, match="forward= must be a non-empty list"):
        UpdateDdl(forward="CREATE QUEUE Q (Id INT64 NOT NULL) PRIMARY KEY (Id)")
    with pytest.raises(InvalidArgument, match="backward= holds a non-string or empty"):
        UpdateDdl(forward=["DROP QUEUE Q"], backward=[""])


def test_update_ddl_deconstructs_for_the_migration_writer() -> None:
    operation = UpdateDdl(forward=["DROP QUEUE Q"], backward=None)
    assert operation.deconstruct() == ("UpdateDdl", [], {"forward": ["DROP QUEUE Q"]})
    assert not operation.reversible
    assert UpdateDdl(forward=["A"], backward=["B"]).reversible
