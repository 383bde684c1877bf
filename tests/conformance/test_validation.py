"""Bad input (SPEC §2, §4, §7): a clear error of the right class, and nothing changed.

Also the dialect record: recorded by the first successful update_ddl, adopted on reconnect,
and an explicit different dialect refused (more in test_dialect_record.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

import txqueue
from txqueue.errors import FailedPrecondition, InvalidArgument, NotFound, TxqueueError

from .support import (
    OTHER_DIALECT,
    Env,
    Face,
    Names,
    dialect_name,
    is_spanner,
    receive_timed,
    seconds,
)

Write = Callable[[Env, Any], None]
BAD_VALUE = (InvalidArgument, FailedPrecondition)


def _send(**overrides: Any) -> Write:
    def write(env: Env, w: Any) -> None:
        kwargs: dict[str, Any] = {"queue": env.tasks, "key": (1, "m"), "payload": b"x"}
        kwargs.update(overrides)
        w.send(**kwargs)

    return write


def _ack(**overrides: Any) -> Write:
    def write(env: Env, w: Any) -> None:
        kwargs: dict[str, Any] = {"queue": env.tasks, "key": (1, "existing")}
        kwargs.update(overrides)
        w.ack(**kwargs)

    return write


def _insert_user(table: str | None = None, columns: Any = None, values: Any = None) -> Write:
    def write(env: Env, w: Any) -> None:
        w.insert(
            table or env.names.users,
            columns=columns if columns is not None else env.names.user_columns,
            values=values if values is not None else [(5, "five")],
        )

    return write


BAD_WRITES: dict[str, tuple[type[TxqueueError] | tuple[type[TxqueueError], ...], Write]] = {
    "queue name with a space": (InvalidArgument, _send(queue="User Tasks")),
    "queue name with SQL": (InvalidArgument, _send(queue="usertasks; DROP TABLE users")),
    "queue name quoted": (InvalidArgument, _send(queue='"usertasks"')),
    "queue name reserved": (InvalidArgument, _send(queue="txqueue_catalog")),
    "queue name not a string": (InvalidArgument, _send(queue=42)),
    "unknown queue": (NotFound, _send(queue="NoSuchQueue")),
    "send to a plain table": ((InvalidArgument, NotFound), _send(queue="users")),
    "key too short": (InvalidArgument, _send(key=(1,))),
    "key too long": (InvalidArgument, _send(key=(1, "m", "extra"))),
    "key empty": (InvalidArgument, _send(key=())),
    "key not a tuple": (InvalidArgument, _send(key=1)),
    "key str for INT64": (InvalidArgument, _send(key=("one", "m"))),
    "key int for STRING": (InvalidArgument, _send(key=(1, 2))),
    "key float for INT64": (InvalidArgument, _send(key=(1.5, "m"))),
    "key None": (BAD_VALUE, _send(key=(None, "m"))),
    # a NOT NULL or length violation may also be reported as Spanner does (FailedPrecondition)
    "key STRING too long": (BAD_VALUE, _send(key=(1, "x" * 37))),
    "payload str for BYTES": (InvalidArgument, _send(payload="text")),
    "payload int for BYTES": (InvalidArgument, _send(payload=123)),
    "payload None": (BAD_VALUE, _send(payload=None)),
    "deliver time naive": (InvalidArgument, _send(deliver_time=datetime(2030, 1, 1, 12))),
    "deliver time not a datetime": (InvalidArgument, _send(deliver_time=12345)),
    "ack key too short": (InvalidArgument, _ack(key=(1,))),
    "ack key wrong type": (InvalidArgument, _ack(key=("one", "existing"))),
    "ack bad queue name": (InvalidArgument, _ack(queue="user-tasks")),
    "ack unknown queue": (NotFound, _ack(queue="NoSuchQueue")),
    "insert bad table name": (InvalidArgument, _insert_user(table="users WHERE 1=1")),
    "insert unknown table": (NotFound, _insert_user(table="NoSuchTable")),
    "insert bad column name": (InvalidArgument, _insert_user(columns=("userid", "user name"))),
    "insert unknown column": ((InvalidArgument, NotFound), _insert_user(columns=("userid", "x"))),
    "insert row too short": (InvalidArgument, _insert_user(values=[(5,)])),
    "insert row too long": (InvalidArgument, _insert_user(values=[(5, "five", "extra")])),
    "insert wrong type": (InvalidArgument, _insert_user(values=[("five", "five")])),
    "insert NULL key": (BAD_VALUE, _insert_user(values=[(None, "five")])),
    "delete key too long": (
        InvalidArgument,
        lambda env, w: w.delete(env.names.users, keys=[(1, 2)]),
    ),
    "delete key wrong type": (
        InvalidArgument,
        lambda env, w: w.delete(env.names.users, keys=[("one",)]),
    ),
}


@pytest.fixture
def seeded(env: Env) -> Env:
    env.add_users(1)
    env.send(1, "existing")
    return env


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
@pytest.mark.parametrize("writer_kind", ["batch", "transaction"])
def test_bad_write_is_refused_and_changes_nothing(seeded: Env, writer_kind: str, case: str) -> None:
    env = seeded
    expected, bad = BAD_WRITES[case]
    before = env.state()

    def write(w: Any) -> None:
        # a valid write first: the refusal must take it down too
        w.insert(env.names.users, columns=env.names.user_columns, values=[(2, "two")])
        w.send(queue=env.tasks, key=(1, "valid"), payload=b"ok")
        bad(env, w)

    with pytest.raises(expected) as caught:
        if writer_kind == "batch":
            with env.db.batch() as b:
                write(b)
        else:
            env.db.run_in_transaction(write)

    assert caught.value.code in {"INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION"}
    assert str(caught.value), "the error must say what is wrong"
    assert env.state() == before


def test_names_given_to_the_mutation_api_are_case_insensitive(seeded: Env) -> None:
    """In both dialects (unquoted identifiers fold in Spanner's PostgreSQL dialect too)."""
    env = seeded
    columns = tuple(c.upper() for c in env.names.user_columns)
    with env.db.batch() as b:
        b.insert(env.names.users.upper(), columns=columns, values=[(3, "three")])
    assert (3, "three") in env.user_rows()


BAD_RECEIVES: dict[str, tuple[type[TxqueueError], dict[str, Any]]] = {
    "max_duration zero": (InvalidArgument, {"max_duration": timedelta(0)}),
    "max_duration negative": (InvalidArgument, {"max_duration": seconds(-1)}),
    "lease zero": (InvalidArgument, {"lease_duration": timedelta(0)}),
    "lease negative": (InvalidArgument, {"lease_duration": seconds(-5)}),
    "batch size zero": (InvalidArgument, {"max_batch_size": 0}),
    "batch size negative": (InvalidArgument, {"max_batch_size": -1}),
    "bad queue name": (InvalidArgument, {"queue": "user tasks"}),
    "unknown queue": (NotFound, {"queue": "NoSuchQueue"}),
}


@pytest.mark.parametrize("case", sorted(BAD_RECEIVES))
def test_bad_receive_is_refused_and_leases_nothing(seeded: Env, case: str) -> None:
    env = seeded
    expected, overrides = BAD_RECEIVES[case]
    kwargs: dict[str, Any] = {
        "max_duration": seconds(1),
        "max_batch_size": 1,
        "lease_duration": seconds(10),
    }
    kwargs.update(overrides)
    queue = kwargs.pop("queue", env.tasks)

    with pytest.raises(expected):
        receive_timed(env.db, queue, **kwargs)

    m = env.receive_one()
    assert (m.key, m.delivery_count) == ((1, "existing"), 1), "the refused receive leased it"


@pytest.mark.parametrize("extension", [timedelta(0), seconds(-1)], ids=["zero", "negative"])
def test_bad_renew_extension_is_refused_and_keeps_the_lease(
    seeded: Env, extension: timedelta
) -> None:
    env = seeded
    m = env.receive_one()

    with pytest.raises(InvalidArgument):
        env.db.renew_lease(env.tasks, [m.lease_token], extension=extension)

    env.ack(m.key, lease_token=m.lease_token)  # the token still holds the lease
    assert env.task_keys() == []


def test_renew_on_unknown_queue_is_not_found(seeded: Env) -> None:
    env = seeded
    m = env.receive_one()
    with pytest.raises(NotFound):
        env.db.renew_lease("NoSuchQueue", [m.lease_token])
    with pytest.raises(InvalidArgument):
        env.db.renew_lease("no such queue", [m.lease_token])
    env.ack(m.key, lease_token=m.lease_token)


def test_bad_ddl_is_refused_and_applies_nothing(env: Env) -> None:
    if env.dialect == "postgresql":
        table, column = "extra", "id"
        good = "CREATE TABLE extra (id bigint NOT NULL, PRIMARY KEY (id))"
        no_payload = "CREATE QUEUE broken (id bigint NOT NULL, PRIMARY KEY (id))"
        bad_name = "CREATE TABLE bad name (id bigint NOT NULL, PRIMARY KEY (id))"
    else:
        table, column = "Extra", "Id"
        good = "CREATE TABLE Extra (Id INT64 NOT NULL) PRIMARY KEY (Id)"
        no_payload = "CREATE QUEUE Broken (Id INT64 NOT NULL) PRIMARY KEY (Id)"
        bad_name = "CREATE TABLE bad name (Id INT64 NOT NULL) PRIMARY KEY (Id)"

    for bad in (no_payload, bad_name, "CREATE TABLE", "CREATE QUEUE"):
        with pytest.raises(InvalidArgument):
            env.db.update_ddl([good, bad])

    env.db.update_ddl([good])  # would be AlreadyExists had a refused batch created it
    with env.db.batch() as b:
        b.insert(table, columns=(column,), values=[(1,)])
    assert env.query("SELECT COUNT(*) FROM extra") == [(1,)]
    assert env.state() == ([], [])


def test_ddl_of_the_other_dialect_is_refused(env: Env) -> None:
    # the shared schema spelled in the other dialect: GoogleSQL has no bigint/bytea, and the
    # PostgreSQL dialect has no INT64/BYTES nor a PRIMARY KEY clause after the columns
    other = Names.for_dialect(OTHER_DIALECT[env.dialect])
    statement = other.ddl[0].replace("sers", "sers2", 1)

    with pytest.raises(InvalidArgument):
        env.db.update_ddl([statement])
    assert env.state() == ([], [])


# -- the dialect record ------------------------------------------------------------------


def test_default_dialect_follows_the_engine(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    with face.connect(database_url) as db:
        assert db.dialect == expected_dialect
        assert isinstance(db.dialect, txqueue.Dialect)
        assert isinstance(db.dialect, str)


def test_reconnecting_with_another_dialect_is_refused(face: Face, database_url: str) -> None:
    with face.connect(database_url) as db:
        recorded = dialect_name(db.dialect)
        db.update_ddl(list(Names.for_dialect(recorded).ddl))  # the first DDL records it

    with pytest.raises(InvalidArgument) as caught:
        face.connect(database_url, dialect=OTHER_DIALECT[recorded])
    assert caught.value.code == "INVALID_ARGUMENT"

    with face.connect(database_url, dialect=recorded) as db:
        assert db.dialect == recorded
    with face.connect(database_url) as db:
        assert db.dialect == recorded


def test_reconnecting_adopts_a_recorded_non_default_dialect(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    default = expected_dialect
    other = OTHER_DIALECT[default]
    if is_spanner(database_url):  # a Spanner database's dialect is fixed when it is made
        with pytest.raises(InvalidArgument, match="fixed when the database was created"):
            face.connect(database_url, dialect=other)
        return
    with face.connect(database_url, dialect=other) as db:
        assert db.dialect == other
        db.update_ddl(list(Names.for_dialect(other).ddl))  # the first DDL records it

    with face.connect(database_url) as db:
        assert db.dialect == other
    with pytest.raises(InvalidArgument):
        face.connect(database_url, dialect=default)


def test_unknown_dialect_is_refused_and_records_nothing(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    with pytest.raises(InvalidArgument):
        face.connect(database_url, dialect="mysql")

    with face.connect(database_url) as db:
        assert db.dialect == expected_dialect


def test_non_default_dialect_round_trip(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    other = OTHER_DIALECT[expected_dialect]
    if is_spanner(database_url):  # a Spanner database's dialect is fixed when it is made
        with pytest.raises(InvalidArgument, match="fixed when the database was created"):
            face.connect(database_url, dialect=other)
        return
    with face.connect(database_url, dialect=other) as db:
        env = Env(db, database_url, face)
        db.update_ddl(list(env.names.ddl))
        env.add_users(1)
        env.send(1, "cross", b"dialect")

        m = env.receive_one()

        assert (m.key, m.payload, m.delivery_count) == ((1, "cross"), b"dialect", 1)
        env.ack(m.key, lease_token=m.lease_token)
        assert env.receive(max_duration=seconds(1)) == []


def test_connect_as_context_manager_and_explicit_close(
    face: Face, database_url: str, expected_dialect: str
) -> None:
    db = face.connect(database_url)
    db.close()
    with face.connect(database_url) as db:
        assert db.dialect == expected_dialect
