"""Mutations (Spanner's insert/update/insert_or_update/replace/delete, send, ack), both as a
batch and inside run_in_transaction: effects, errors, and all-or-nothing commits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from txqueue.errors import AlreadyExists, NotFound

from .support import Env

WRITERS = ["batch", "transaction"]


def apply(env: Env, writer_kind: str, write: Callable[[Any], None]) -> None:
    """Run ``write(writer)`` as one batch or one read-write transaction."""
    if writer_kind == "batch":
        with env.db.batch() as b:
            write(b)
    else:
        env.db.run_in_transaction(write)


@pytest.fixture(params=WRITERS)
def writer_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_insert_several_rows(env: Env, writer_kind: str) -> None:
    users, cols = env.names.users, env.names.user_columns

    apply(env, writer_kind, lambda w: w.insert(users, columns=cols, values=[(2, "b"), (1, "a")]))

    assert env.user_rows() == [(1, "a"), (2, "b")]


def test_insert_of_an_existing_key_is_already_exists_and_writes_nothing(
    env: Env, writer_kind: str
) -> None:
    users, cols = env.names.users, env.names.user_columns
    env.add_users(1)

    def write(w: Any) -> None:
        w.insert(users, columns=cols, values=[(2, "new")])
        w.send(queue=env.tasks, key=(1, "m"), payload=b"x")
        w.insert(users, columns=cols, values=[(1, "clash")])

    with pytest.raises(AlreadyExists) as caught:
        apply(env, writer_kind, write)

    assert caught.value.code == "ALREADY_EXISTS"
    assert env.state() == ([(1, "user 1")], [])


def test_update_changes_existing_rows(env: Env, writer_kind: str) -> None:
    users, cols = env.names.users, env.names.user_columns
    env.add_users(1, 2)

    apply(env, writer_kind, lambda w: w.update(users, columns=cols, values=[(2, "renamed")]))

    assert env.user_rows() == [(1, "user 1"), (2, "renamed")]


def test_update_of_a_missing_row_is_not_found_and_writes_nothing(
    env: Env, writer_kind: str
) -> None:
    users, cols = env.names.users, env.names.user_columns
    env.add_users(1)

    def write(w: Any) -> None:
        w.update(users, columns=cols, values=[(1, "changed")])
        w.update(users, columns=cols, values=[(99, "ghost")])

    with pytest.raises(NotFound) as caught:
        apply(env, writer_kind, write)

    assert caught.value.code == "NOT_FOUND"
    assert env.user_rows() == [(1, "user 1")]


def test_insert_or_update_inserts_new_and_updates_existing(env: Env, writer_kind: str) -> None:
    users, cols = env.names.users, env.names.user_columns
    env.add_users(1, 2)

    def write(w: Any) -> None:
        w.insert_or_update(users, columns=cols, values=[(1, "updated"), (3, "inserted")])
        # columns left out keep their value
        w.insert_or_update(users, columns=(env.names.user_id,), values=[(2,)])

    apply(env, writer_kind, write)

    assert env.user_rows() == [(1, "updated"), (2, "user 2"), (3, "inserted")]


def test_replace_writes_whole_rows(env: Env, writer_kind: str) -> None:
    users, cols = env.names.users, env.names.user_columns
    env.add_users(1, 2)

    def write(w: Any) -> None:
        w.replace(users, columns=cols, values=[(1, "replaced"), (3, "inserted")])
        # columns left out become NULL, unlike insert_or_update
        w.replace(users, columns=(env.names.user_id,), values=[(2,)])

    apply(env, writer_kind, write)

    assert env.user_rows() == [(1, "replaced"), (2, None), (3, "inserted")]


def test_delete_by_keys(env: Env, writer_kind: str) -> None:
    env.add_users(1, 2, 3)

    # a key that does not exist is not an error (Spanner's delete)
    apply(env, writer_kind, lambda w: w.delete(env.names.users, keys=[(1,), (3,), (99,)]))

    assert env.user_rows() == [(2, "user 2")]


def test_delete_cascades_to_interleaved_messages(env: Env, writer_kind: str) -> None:
    env.add_users(1, 2)
    env.send(1, "a")
    env.send(2, "b")

    apply(env, writer_kind, lambda w: w.delete(env.names.users, keys=[(2,)]))

    assert env.state() == ([(1, "user 1")], [(1, "a")])


def test_send_and_ack_as_mutations(env: Env, writer_kind: str) -> None:
    env.add_users(1)
    env.send(1, "old")

    def write(w: Any) -> None:
        w.ack(queue=env.tasks, key=(1, "old"))
        w.send(queue=env.tasks, key=(1, "next"), payload=b"n")

    apply(env, writer_kind, write)

    assert env.task_keys() == [(1, "next")]


def test_send_of_an_existing_key_is_already_exists_and_writes_nothing(
    env: Env, writer_kind: str
) -> None:
    env.add_users(1)
    env.send(1, "dup")

    def write(w: Any) -> None:
        w.insert(env.names.users, columns=env.names.user_columns, values=[(2, "two")])
        w.send(queue=env.tasks, key=(1, "dup"), payload=b"again")

    with pytest.raises(AlreadyExists):
        apply(env, writer_kind, write)

    assert env.state() == ([(1, "user 1")], [(1, "dup")])
    m = env.receive_one()
    assert m.payload == b"payload", "the original message must be untouched"


def test_sends_alone_with_one_taken_key_write_none_of_them(env: Env, writer_kind: str) -> None:
    """Sends that are the whole transaction (one flush, at commit) are undone together too."""
    env.add_users(1)
    env.send(1, "taken")

    def write(w: Any) -> None:
        w.send(queue=env.tasks, key=(1, "a"), payload=b"a")
        w.send(queue=env.tasks, key=(1, "taken"), payload=b"again")
        w.send(queue=env.tasks, key=(1, "b"), payload=b"b")

    with pytest.raises(AlreadyExists) as caught:
        apply(env, writer_kind, write)

    assert repr((1, "taken")) in str(caught.value)
    assert env.task_keys() == [(1, "taken")]


def test_one_key_sent_twice_in_a_transaction_is_already_exists(env: Env, writer_kind: str) -> None:
    env.add_users(1)

    def write(w: Any) -> None:
        w.send(queue=env.tasks, key=(1, "a"), payload=b"a")
        w.send(queue=env.tasks, key=(1, "twice"), payload=b"first")
        w.send(queue=env.tasks, key=(1, "twice"), payload=b"second")

    with pytest.raises(AlreadyExists) as caught:
        apply(env, writer_kind, write)

    assert repr((1, "twice")) in str(caught.value)
    assert env.task_keys() == []


def test_a_send_against_a_unique_index_of_the_queue_is_already_exists(
    env: Env, writer_kind: str
) -> None:
    """A unique index the application put on a queue refuses a send as the key would; the
    error is the index's (no key is taken), raised at once rather than retried."""
    env.db.update_ddl([f"CREATE UNIQUE INDEX TaskPayloads ON {env.tasks} (Payload)"])
    env.add_users(1)
    env.send(1, "first", b"same")
    attempts = []

    def write(w: Any) -> None:
        attempts.append(w)
        w.send(queue=env.tasks, key=(1, "fresh"), payload=b"other")
        w.send(queue=env.tasks, key=(1, "second"), payload=b"same")

    with pytest.raises(AlreadyExists):
        apply(env, writer_kind, write)

    assert len(attempts) == 1
    assert env.task_keys() == [(1, "first")]


def test_sending_a_key_again_after_its_ack_is_a_new_message(env: Env) -> None:
    env.add_users(1)
    env.send(1, "periodic", b"run 1")
    m = env.receive_one()

    with env.db.batch() as b:
        b.ack(queue=env.tasks, key=m.key, lease_token=m.lease_token)
        b.send(queue=env.tasks, key=(1, "periodic"), payload=b"run 2")

    again = env.receive_one()
    assert (again.key, again.payload, again.delivery_count) == ((1, "periodic"), b"run 2", 1)


def test_ack_of_a_missing_message_fails_the_whole_batch(env: Env, writer_kind: str) -> None:
    env.add_users(1)

    def write(w: Any) -> None:
        w.insert(env.names.users, columns=env.names.user_columns, values=[(2, "two")])
        w.ack(queue=env.tasks, key=(1, "missing"))

    with pytest.raises(NotFound):
        apply(env, writer_kind, write)

    assert env.user_rows() == [(1, "user 1")]


def test_mutations_apply_in_order(env: Env, writer_kind: str) -> None:
    users, cols = env.names.users, env.names.user_columns

    def write(w: Any) -> None:
        w.insert(users, columns=cols, values=[(1, "first")])
        w.update(users, columns=cols, values=[(1, "second")])
        w.send(queue=env.tasks, key=(1, "m"), payload=b"x")
        w.insert(users, columns=cols, values=[(2, "gone")])
        w.delete(users, keys=[(2,)])

    apply(env, writer_kind, write)

    assert env.state() == ([(1, "second")], [(1, "m")])


def test_batch_with_no_mutations_commits_nothing(env: Env) -> None:
    with env.db.batch():
        pass

    assert env.state() == ([], [])


def test_run_in_transaction_reads_and_writes(env: Env) -> None:
    env.add_users(1, 2)

    def rename_all(txn: Any) -> int:
        rows = [tuple(r) for r in txn.execute_sql("SELECT userid FROM users ORDER BY userid")]
        txn.update(
            env.names.users,
            columns=env.names.user_columns,
            values=[(user_id, f"renamed {user_id}") for (user_id,) in rows],
        )
        return len(rows)

    assert env.db.run_in_transaction(rename_all) == 2
    assert env.user_rows() == [(1, "renamed 1"), (2, "renamed 2")]
