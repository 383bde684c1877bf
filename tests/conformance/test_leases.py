"""Leases (SPEC §3): expiry and redelivery with backoff, renewal, stale tokens, ack rules."""

from __future__ import annotations

import string
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import txqueue
from txqueue.errors import FailedPrecondition, NotFound

from .support import (
    SKEW,
    BackgroundReceiver,
    Env,
    is_postgres,
    is_spanner,
    seconds,
    sleep_until,
    utcnow,
)


def test_expired_lease_redelivers_after_backoff_with_delivery_count_2(env: Env) -> None:
    env.add_users(1)
    env.send(1, "flaky", b"work")
    first = env.receive_one(lease_duration=seconds(1))
    assert first.delivery_count == 1

    received = env.receive_timed(max_duration=seconds(10), limit=1, lease_duration=seconds(10))

    assert len(received) == 1, "an expired lease must make the message receivable again"
    second, arrived = received[0]
    assert second.key == (1, "flaky")
    assert second.payload == b"work"
    assert second.delivery_count == 2
    assert second.lease_token != first.lease_token
    # not before the lease ran out plus the first backoff (2^0 s = 1 s)
    assert arrived >= first.lease_expiration + seconds(1) - SKEW


def test_backoff_doubles_with_each_expired_lease(env: Env) -> None:
    env.add_users(1)
    env.send(1, "flaky")
    first = env.receive_one(lease_duration=seconds(1))
    second = env.receive_one(max_duration=seconds(10), lease_duration=seconds(1))
    assert second.delivery_count == 2

    received = env.receive_timed(max_duration=seconds(12), limit=1)

    assert len(received) == 1
    third, arrived = received[0]
    assert third.delivery_count == 3
    assert len({first.lease_token, second.lease_token, third.lease_token}) == 3
    # second expired lease: backoff 2^1 s = 2 s
    assert arrived >= second.lease_expiration + seconds(2) - SKEW


def test_old_token_of_an_expired_lease_cannot_ack_the_redelivered_message(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    stale = env.receive_one(lease_duration=seconds(1))
    current = env.receive_one(max_duration=seconds(10))
    assert current.delivery_count == 2

    with pytest.raises(FailedPrecondition) as caught:
        env.ack(stale.key, lease_token=stale.lease_token)

    assert caught.value.code == "FAILED_PRECONDITION"
    assert env.task_keys() == [(1, "a")]
    env.ack(current.key, lease_token=current.lease_token)
    assert env.task_keys() == []


def test_renew_returns_a_new_token_and_the_old_one_stops_working(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one(lease_duration=seconds(5))

    renewals = env.db.renew_lease(env.tasks, [m.lease_token], extension=seconds(30))
    renewed_at = utcnow()

    assert len(renewals) == 1
    r = renewals[0]
    assert isinstance(r, txqueue.LeaseRenewal)
    assert r.old_token == m.lease_token
    assert isinstance(r.new_token, str)
    assert r.new_token
    assert r.new_token != m.lease_token
    assert r.lease_expiration is not None
    assert r.lease_expiration.utcoffset() is not None
    assert renewed_at + seconds(30) - seconds(2) <= r.lease_expiration
    assert r.lease_expiration <= renewed_at + seconds(30) + SKEW

    # the old token can neither renew nor ack any more
    stale = env.db.renew_lease(env.tasks, [m.lease_token], extension=seconds(30))
    assert len(stale) <= 1
    assert all(row.new_token is None for row in stale)
    with pytest.raises(FailedPrecondition):
        env.ack(m.key, lease_token=m.lease_token)
    assert env.task_keys() == [(1, "a")]

    env.ack(m.key, lease_token=r.new_token)
    assert env.task_keys() == []


def test_renew_extends_by_ten_seconds_by_default(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one(lease_duration=seconds(2))

    before = utcnow()
    [r] = env.db.renew_lease(env.tasks, [m.lease_token])
    after = utcnow()

    assert r.new_token
    assert before + seconds(10) - SKEW <= r.lease_expiration <= after + seconds(10) + SKEW


def test_renewing_keeps_the_message_from_redelivery(env: Env) -> None:
    env.add_users(1)
    env.send(1, "long-job")
    m = env.receive_one(lease_duration=seconds(3))
    # Without renewal the message would come back at lease expiration + 1 s backoff,
    # well inside this rival's window.
    rival = BackgroundReceiver(env.url, env.tasks, face=env.face, max_duration=seconds(6)).start()

    token = m.lease_token
    expiration = m.lease_expiration
    for _ in range(3):
        time.sleep(1.0)  # pacing: renew well inside each lease
        # 10 s: the last lease outlives the rival's window by seconds, so the ack below
        # holds it however late a loaded machine lets the rival end.
        renewals = env.db.renew_lease(env.tasks, [token], extension=seconds(10))
        assert len(renewals) == 1
        assert renewals[0].old_token == token
        assert renewals[0].new_token not in (None, token)
        assert renewals[0].lease_expiration > expiration
        token, expiration = renewals[0].new_token, renewals[0].lease_expiration

    rival.join(timeout=30)
    assert rival.keys() == [], "a renewed lease was handed to another receiver"
    assert rival.ended_at is not None
    assert rival.ended_at > m.lease_expiration + seconds(1) + SKEW, "window too short to tell"

    env.ack(m.key, lease_token=token)
    assert env.task_keys() == []


def test_expired_token_renews_nothing_and_cannot_ack(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one(lease_duration=seconds(1))
    sleep_until(m.lease_expiration + seconds(0.3))

    assert env.db.renew_lease(env.tasks, [m.lease_token]) == []
    with pytest.raises(FailedPrecondition):
        env.ack(m.key, lease_token=m.lease_token)

    assert env.task_keys() == [(1, "a")]
    again = env.receive_one(max_duration=seconds(10))
    assert again.delivery_count == 2


def test_garbage_token_renews_nothing(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one()

    assert env.db.renew_lease(env.tasks, ["garbage"]) == []
    mixed = env.db.renew_lease(env.tasks, ["not-a-token", m.lease_token, "garbage"])

    assert [r.old_token for r in mixed] == [m.lease_token]
    assert mixed[0].new_token


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(token=st.text(max_size=80))
@example(token="\x00")
@example(token="")
@example(token="' OR '1'='1")
def test_no_made_up_token_renews_anything(env: Env, token: str) -> None:
    rows = env.db.renew_lease(env.tasks, [token])

    assert all(r.new_token is None for r in rows)
    if not set(token) <= set(string.hexdigits):
        assert rows == [], "an unparseable token gets no row"


def test_renewing_an_acked_message_gives_no_new_token(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one()
    env.ack(m.key, lease_token=m.lease_token)

    renewals = env.db.renew_lease(env.tasks, [m.lease_token])

    assert len(renewals) == 1
    assert renewals[0].old_token == m.lease_token
    assert renewals[0].new_token is None


def test_renew_several_tokens_at_once(env: Env) -> None:
    env.add_users(1)
    for name in ("a", "b", "c"):
        env.send(1, name)
    received = env.receive(max_batch_size=3, limit=3)
    acked = received[1]
    env.ack(acked.key, lease_token=acked.lease_token)
    tokens = [m.lease_token for m in received]

    renewals = {r.old_token: r for r in env.db.renew_lease(env.tasks, tokens)}

    assert set(renewals) == set(tokens)
    assert renewals[acked.lease_token].new_token is None
    live = [renewals[t].new_token for t in tokens if t != acked.lease_token]
    assert all(live)
    assert len(set(live)) == 2


def test_second_ack_raises_not_found(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one()
    env.ack(m.key, lease_token=m.lease_token)

    with pytest.raises(NotFound) as caught:
        env.ack(m.key, lease_token=m.lease_token)
    assert caught.value.code == "NOT_FOUND"
    with pytest.raises(NotFound):
        env.ack(m.key)


def test_ack_of_missing_message_with_ignore_not_found(env: Env) -> None:
    env.add_users(1)
    env.send(1, "present")

    env.ack((1, "never-sent"), ignore_not_found=True)
    env.ack((1, "never-sent"), lease_token="garbage", ignore_not_found=True)

    assert env.task_keys() == [(1, "present")]


def test_ack_without_token_deletes_a_leased_message(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    env.receive_one()

    env.ack((1, "a"))

    assert env.task_keys() == []


def test_ack_with_a_token_of_another_message_is_refused(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    env.send(1, "b")
    first, second = env.receive(max_batch_size=2, limit=2)

    with pytest.raises(FailedPrecondition):
        env.ack(first.key, lease_token=second.lease_token)

    assert env.task_keys() == [(1, "a"), (1, "b")]


def test_acks_of_two_receives_apply_together_and_each_keeps_its_fence(env: Env) -> None:
    """Rows leased by one statement share their token's stored part; acks of several
    receives in one transaction carry several, and each ack is still checked against its
    own message's lease."""
    env.add_users(1)
    for name in "abcd":
        env.send(1, name)
    first = env.receive(max_batch_size=2, limit=2)
    second = env.receive(max_batch_size=2, limit=2)
    assert len(first) == len(second) == 2
    for wrong in (second[1].lease_token, first[1].lease_token):  # two receives' parts, one's
        with pytest.raises(FailedPrecondition), env.db.batch() as b:
            b.ack(queue=env.tasks, key=first[0].key, lease_token=first[0].lease_token)
            b.ack(queue=env.tasks, key=second[0].key, lease_token=wrong)
        assert len(env.task_keys()) == 4

    with env.db.batch() as b:
        for message in [*first, *second]:
            b.ack(queue=env.tasks, key=message.key, lease_token=message.lease_token)

    assert env.task_keys() == []


def test_ack_and_business_write_commit_together(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one()

    with pytest.raises(txqueue.errors.AlreadyExists), env.db.batch() as b:
        b.ack(queue=env.tasks, key=m.key, lease_token=m.lease_token)
        b.insert(env.names.users, columns=env.names.user_columns, values=[(1, "duplicate")])

    assert env.task_keys() == [(1, "a")], "the ack must not commit without its business write"
    env.ack(m.key, lease_token=m.lease_token)
    assert env.task_keys() == []


def test_a_refused_ack_among_buffered_mutations_commits_nothing(env: Env) -> None:
    """On PostgreSQL the buffered sends and acks travel in one round trip with COMMIT: an item
    that cannot apply must still stop the commit, and the error must name that item."""
    env.add_users(1)
    env.send(1, "a")
    env.send(1, "b")
    first, second = sorted(env.receive(max_batch_size=2, limit=2), key=lambda m: m.key)

    with pytest.raises(FailedPrecondition) as caught, env.db.batch() as b:
        b.insert(env.names.users, columns=env.names.user_columns, values=[(2, "new")])
        b.send(queue=env.tasks, key=(1, "c"), payload=b"c")
        b.ack(queue=env.tasks, key=second.key, lease_token=second.lease_token)
        b.ack(queue=env.tasks, key=first.key, lease_token=second.lease_token)
        b.ack(queue=env.tasks, key=(1, "never-sent"), ignore_not_found=True)

    assert repr(first.key) in str(caught.value)
    assert env.task_keys() == [(1, "a"), (1, "b")]
    assert [row[0] for row in env.user_rows()] == [1]


def test_an_ignored_missing_ack_among_acks_lets_the_rest_apply(env: Env) -> None:
    """A run of acks where one misses is applied again row by row: the missing one is
    ignored, the others ack, and the transaction goes on to its later statements."""
    env.add_users(1)
    env.send(1, "a")
    env.send(1, "b")
    first, second = sorted(env.receive(max_batch_size=2, limit=2), key=lambda m: m.key)

    with env.db.batch() as b:
        b.ack(queue=env.tasks, key=first.key, lease_token=first.lease_token)
        b.ack(queue=env.tasks, key=(1, "never-sent"), ignore_not_found=True)
        b.send(queue=env.tasks, key=(1, "c"), payload=b"c")
    assert env.task_keys() == [(1, "b"), (1, "c")]

    def work(t: txqueue.Transaction) -> None:
        t.ack(queue=env.tasks, key=(1, "never-sent"), ignore_not_found=True)
        t.ack(queue=env.tasks, key=second.key, lease_token=second.lease_token)
        t.flush()
        t.insert(env.names.users, columns=env.names.user_columns, values=[(2, "after")])

    env.db.run_in_transaction(work)
    assert env.task_keys() == [(1, "c")]
    assert [row[0] for row in env.user_rows()] == [1, 2]


def test_a_rewritten_table_and_the_leases_in_it(env: Env) -> None:
    """PostgreSQL tokens carry their row's ctid, which VACUUM FULL changes: the lease is lost
    (no renewal, no fenced ack), as when it expires. SQLite tokens carry the rowid, which its
    VACUUM keeps: the lease survives (as on Spanner, which has no such rewrite). On all, the
    key alone still acks."""
    env.add_users(1)
    env.send(1, "a")
    env.send(1, "b")
    a, b = sorted(env.receive(max_batch_size=2), key=lambda m: m.key)
    if is_postgres(env.url):
        import psycopg

        with psycopg.connect(env.url, autocommit=True) as raw:
            raw.execute(f"VACUUM FULL {env.tasks.lower()}")

        assert all(r.new_token is None for r in env.db.renew_lease(env.tasks, [a.lease_token]))
        with pytest.raises(FailedPrecondition):
            env.ack(a.key, lease_token=a.lease_token)
    else:
        if not is_spanner(env.url):  # Spanner rewrites no table (its tokens name no row)
            import sqlite3

            raw = sqlite3.connect(env.url.split("///", 1)[1].split("?", 1)[0])
            try:
                raw.execute("VACUUM")
            finally:
                raw.close()

        (renewal,) = env.db.renew_lease(env.tasks, [a.lease_token])
        assert renewal.new_token is not None
        env.ack(a.key, lease_token=renewal.new_token)
    env.ack(b.key)
    remaining = [a.key] if is_postgres(env.url) else []
    assert env.task_keys() == remaining
