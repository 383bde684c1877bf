"""The dialect record (SPEC §4): written with the first successful update_ddl, never by a
connect or a failed DDL; a type of the other dialect names the database's dialect and how to
choose the other. Both engines, both faces.

A Cloud Spanner database's dialect is its own, fixed when it was created: there the other
dialect is refused at connect (InvalidArgument naming both), and nothing changes it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from txqueue.errors import InvalidArgument

from .support import (
    GOOGLESQL_DDL,
    OTHER_DIALECT,
    POSTGRESQL_DDL,
    Face,
    is_spanner,
)

QUICK_START_DDL = [
    "CREATE TABLE IF NOT EXISTS Users (UserId INT64 NOT NULL, UserName STRING(MAX)) PRIMARY KEY (UserId)",
    "CREATE QUEUE IF NOT EXISTS UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId),"
    " INTERLEAVE IN PARENT Users ON DELETE CASCADE",
]
DDL = {"googlesql": list(GOOGLESQL_DDL), "postgresql": list(POSTGRESQL_DDL)}
ANOTHER_TABLE = {
    "googlesql": "CREATE TABLE Others (Id INT64 NOT NULL) PRIMARY KEY (Id)",
    "postgresql": "CREATE TABLE others (id bigint NOT NULL, PRIMARY KEY (id))",
}
#: How Spanner refuses the dialect its database was not created in.
FIXED = "differs from the Cloud Spanner database's recorded dialect"


def test_a_connect_records_nothing(face: Face, database_url: str, expected_dialect: str) -> None:
    default = expected_dialect
    other = OTHER_DIALECT[default]
    if is_spanner(database_url):
        with pytest.raises(InvalidArgument, match=f"{other}.*{FIXED} '{default}'"):
            face.connect(database_url, dialect=other)
    else:
        with face.connect(database_url, dialect=other) as db:
            assert db.dialect == other
    with face.connect(database_url) as db:  # nothing recorded: the URL's default
        assert db.dialect == default
    with face.connect(database_url, dialect=default) as db:
        assert db.dialect == default


def test_the_first_successful_update_ddl_records_the_dialect(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    default = expected_dialect
    other = OTHER_DIALECT[default]
    if is_spanner(database_url):  # recorded when the database was made: DDL changes nothing
        with face.connect(database_url) as db:
            db.update_ddl(DDL[default])
        with face.connect(database_url) as db:
            assert db.dialect == default
        with pytest.raises(InvalidArgument, match=FIXED):
            face.connect(database_url, dialect=other)
        return
    with face.connect(database_url, dialect=other) as db:
        db.update_ddl(DDL[other])
    with face.connect(database_url) as db:
        assert db.dialect == other
    with pytest.raises(InvalidArgument, match="recorded dialect"):
        face.connect(database_url, dialect=default)


def test_a_type_of_the_other_dialect_names_both_and_records_nothing(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    default = expected_dialect
    other = OTHER_DIALECT[default]
    with face.connect(database_url) as db, pytest.raises(InvalidArgument) as caught:
        db.update_ddl(DDL[other])
    message = str(caught.value)
    assert f"this database uses the {default} dialect" in message, message
    assert f'dialect="{other}"' in message, message
    if is_spanner(database_url):  # the failed DDL changed nothing
        with face.connect(database_url) as db:
            assert db.dialect == default
            assert db.queues() == []
        return
    # The failed DDL recorded nothing: the other dialect is still open to this database.
    with face.connect(database_url, dialect=other) as db:
        db.update_ddl(DDL[other])
    with face.connect(database_url) as db:
        assert db.dialect == other


def test_the_quick_start_runs_with_googlesql_on_either_url(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    """The README's quick start names dialect="googlesql", so only the URL changes (but a
    PostgreSQL-dialect Cloud Spanner database refuses GoogleSQL at connect)."""
    if is_spanner(database_url) and expected_dialect == "postgresql":
        with pytest.raises(InvalidArgument, match=f"googlesql.*{FIXED} 'postgresql'"):
            face.connect(database_url, dialect="googlesql")
        return
    for _ in range(2):  # a second connect adopts the record the first update_ddl wrote
        with face.connect(database_url, dialect="googlesql") as db:
            db.update_ddl(QUICK_START_DDL)
            with db.batch() as batch:
                batch.insert_or_update("Users", ("UserId", "UserName"), [(124, "New User")])
                batch.send("UserTasks", (124, "welcome-email-id"), b'{"type": "welcome"}')
            received = list(db.receive("UserTasks", max_duration=timedelta(seconds=2)))
            assert [m.key for m in received] == [(124, "welcome-email-id")]
            message = received[0]
            with db.batch() as batch:
                batch.ack("UserTasks", message.key, lease_token=message.lease_token)
    with face.connect(database_url) as db:
        assert db.dialect == "googlesql"


def test_two_connections_racing_to_record_different_dialects(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    default = expected_dialect
    other = OTHER_DIALECT[default]
    first = face.connect(database_url)
    if is_spanner(database_url):  # the other dialect never gets a connection
        try:
            with pytest.raises(InvalidArgument, match=FIXED):
                face.connect(database_url, dialect=other)
            first.update_ddl(DDL[default])
        finally:
            first.close()
    else:
        second = face.connect(database_url, dialect=other)
        try:
            first.update_ddl(DDL[default])
            with pytest.raises(InvalidArgument, match="recorded dialect"):
                second.update_ddl(ANOTHER_TABLE[other])
        finally:
            first.close()
            second.close()
    with face.connect(database_url) as db:
        assert db.dialect == default
        assert sorted(t.name.lower() for t in db.queues()) == ["usertasks"]
