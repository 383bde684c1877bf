"""txqueue.contrib.alembic: ``op.update_ddl`` upgrades and downgrades through Alembic's own
command API, on a migration environment written to a temporary directory, on both engines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("alembic")

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

import txqueue
from txqueue.contrib.alembic import UpdateDdlOp, txqueue_url
from txqueue.errors import FailedPrecondition, InvalidArgument, NotFound

ENV = """
from alembic import context
from sqlalchemy import create_engine

import txqueue.contrib.alembic  # noqa: F401  (registers op.update_ddl)

config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"))
try:
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            transaction_per_migration=config.attributes.get("transaction_per_migration", True),
        )
        with context.begin_transaction():
            context.run_migrations()
finally:
    engine.dispose()
"""

ORDERS = """
revision = "0001"
down_revision = None
import sqlalchemy as sa
from alembic import op

def upgrade():
    op.create_table("orders", sa.Column("orderid", sa.String(36), primary_key=True))
    {extra}

def downgrade():
    op.drop_table("orders")
"""

QUEUE = """
revision = "0002"
down_revision = "0001"
from alembic import op

def upgrade():
    {before}
    op.update_ddl(["CREATE QUEUE order_emails (orderid varchar(36) NOT NULL,"
                   " payload bytea NOT NULL, PRIMARY KEY (orderid))"], dialect="postgresql")

def downgrade():
    op.update_ddl(["DROP QUEUE order_emails"], dialect="postgresql")
"""


def sqlalchemy_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def environment(
    tmp_path: Path,
    url: str,
    *,
    before: str = "pass",
    extra: str = "pass",
    per_migration: bool = True,
) -> Config:
    """An Alembic environment in ``tmp_path``: orders (0001), then the queue (0002)."""
    scripts = tmp_path / "migrations"
    (scripts / "versions").mkdir(parents=True)
    (scripts / "env.py").write_text(ENV)
    (scripts / "versions" / "0001_orders.py").write_text(ORDERS.format(extra=extra))
    (scripts / "versions" / "0002_order_emails.py").write_text(QUEUE.format(before=before))
    config = Config()
    config.set_main_option("script_location", str(scripts))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url))
    config.attributes["transaction_per_migration"] = per_migration
    return config


def queue_names(url: str) -> list[str]:
    with txqueue.connect(url) as database:
        return [queue.name for queue in database.queues()]


def test_upgrade_creates_the_queue_and_downgrade_drops_it(
    database_url: str, tmp_path: Path
) -> None:
    config = environment(tmp_path, database_url)
    command.upgrade(config, "head")
    assert queue_names(database_url) == ["order_emails"]
    with txqueue.connect(database_url) as database, database.batch() as batch:
        batch.send("order_emails", ("o-1",), b"{}")  # a working queue, not just a table
    command.downgrade(config, "0001")
    with txqueue.connect(database_url) as database, pytest.raises(NotFound):
        database.queue_info("order_emails")
    command.upgrade(config, "head")  # and back up again
    assert queue_names(database_url) == ["order_emails"]
    command.downgrade(config, "base")
    assert queue_names(database_url) == []


def test_changes_before_it_in_the_same_transaction_are_refused(
    database_url: str, tmp_path: Path
) -> None:
    config = environment(
        tmp_path, database_url, before="op.execute(\"INSERT INTO orders VALUES ('o-1')\")"
    )
    with pytest.raises(FailedPrecondition, match=r"put op\.update_ddl first in its migration"):
        command.upgrade(config, "head")
    assert queue_names(database_url) == []


def test_one_transaction_for_all_migrations_is_refused_on_postgresql(
    pg_database_url: str, tmp_path: Path
) -> None:
    config = environment(tmp_path, pg_database_url, per_migration=False)
    with pytest.raises(FailedPrecondition, match="transaction_per_migration=True"):
        command.upgrade(config, "head")


def test_offline_sql_is_refused(sqlite_url: str, tmp_path: Path) -> None:
    config = environment(tmp_path, sqlite_url)
    with pytest.raises(InvalidArgument, match="cannot be written out as SQL"):
        command.upgrade(config, "0001:head", sql=True)


def test_urls_from_sqlalchemy(tmp_path: Path) -> None:
    assert txqueue_url(make_url(f"sqlite:///{tmp_path}/a.db")) == f"sqlite:///{tmp_path}/a.db"
    assert (
        txqueue_url(make_url("postgresql+psycopg://app:s%40cret@db:5432/shop?sslmode=require"))
        == "postgresql://app:s%40cret@db:5432/shop?sslmode=require"
    )


def test_an_in_memory_database_is_refused(tmp_path: Path) -> None:
    config = environment(tmp_path, "sqlite://")
    with pytest.raises(InvalidArgument, match="SQLite URL needs a file path"):
        command.upgrade(config, "head")


def test_statements_are_checked_before_anything_runs() -> None:
    with pytest.raises(InvalidArgument, match="non-empty list"):
        UpdateDdlOp("CREATE QUEUE q (id INT64 NOT NULL) PRIMARY KEY (id)")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="non-empty string"):
        UpdateDdlOp(["DROP QUEUE q", " "])


def test_without_the_extra_the_error_names_it() -> None:
    code = "import sys; sys.modules['alembic'] = None\nimport txqueue.contrib.alembic\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "pip install 'txqueue[alembic]'" in done.stderr, done.stderr
