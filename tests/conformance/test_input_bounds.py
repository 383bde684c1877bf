"""Input at and past the edge of what the engines store (SPEC §4, §7), on both engines: each
refused with an InvalidArgument naming its field before anything is written, never an
OverflowError or UnicodeEncodeError; the longest lease accepted works fully.

The pure rules are in ``tests/unit/test_input_bounds.py``; random adversarial input over the
same entry points is in ``test_adversarial.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import txqueue
from txqueue.errors import FailedPrecondition, InvalidArgument, NotFound

from .support import Env, Face, is_postgres, seconds

MAX_DURATION = timedelta(days=36_500)  # every duration argument's maximum (100 years)
STORED = "0" * 30


def _counts(env: Env) -> tuple[int, int, int]:
    info = env.db.queue_info(env.tasks)
    return info.ready, info.leased, info.scheduled


def _receive_sql(env: Env, arguments: str) -> list[Any]:
    name = env.tasks if env.dialect == "googlesql" else f"spanner.receive_{env.tasks}"
    if env.dialect == "googlesql":
        sql = f"SELECT * FROM RECEIVE_{name}({arguments})"
    else:
        sql = f"SELECT * FROM {name}({arguments.replace('=>', ' => ')})"
    with env.db.snapshot() as snapshot:
        return list(snapshot.execute_sql(sql))


@pytest.mark.parametrize("size", [2**63, 10**20])
def test_a_batch_size_beyond_int64_is_invalid_argument_and_leases_nothing(
    env: Env, size: int
) -> None:
    env.add_users(1)
    env.send(1, "m")
    with pytest.raises(InvalidArgument, match="max_batch_size"):
        env.db.receive_now(env.tasks, max_batch_size=size)
    with pytest.raises(InvalidArgument, match="max_batch_size"):
        list(env.db.receive(env.tasks, max_duration=seconds(0.1), max_batch_size=size))
    with pytest.raises(InvalidArgument, match="max_batch_size"):
        if env.dialect == "googlesql":
            _receive_sql(env, f"max_duration=>'1s', max_batch_size=>{size}")
        else:
            _receive_sql(env, f"max_batch_size=>{size}, max_duration=>'1s'")
    assert _counts(env) == (1, 0, 0)


@pytest.mark.parametrize("extension", [timedelta(days=900_000), MAX_DURATION + seconds(1)])
def test_a_lease_past_the_maximum_is_refused_on_receive_and_renew(
    env: Env, extension: timedelta
) -> None:
    env.add_users(1)
    env.send(1, "m")
    with pytest.raises(InvalidArgument, match="lease_duration must be at most 36500 days"):
        env.db.receive_now(env.tasks, lease_duration=extension)
    assert _counts(env) == (1, 0, 0)
    message = env.db.receive_now(env.tasks)[0]
    with pytest.raises(InvalidArgument, match="extension must be at most 36500 days"):
        env.db.renew_lease(env.tasks, [message.lease_token], extension=extension)
    env.ack(message.key, lease_token=message.lease_token)  # the lease was not touched


def test_the_longest_lease_works_fully_for_its_holder(env: Env) -> None:
    """The token of a 100-year lease names it: its holder can renew, release and ack it."""
    env.add_users(1)
    env.send(1, "m")
    message = env.db.receive_now(env.tasks, lease_duration=MAX_DURATION)[0]
    assert message.lease_expiration > datetime.now(timezone.utc) + MAX_DURATION - seconds(60)
    (renewal,) = env.db.renew_lease(env.tasks, [message.lease_token], extension=MAX_DURATION)
    assert renewal.new_token is not None
    assert env.db.release_lease(env.tasks, [renewal.new_token]) == 1
    again = env.db.receive_now(env.tasks, lease_duration=MAX_DURATION)[0]
    env.ack(again.key, lease_token=again.lease_token)
    assert env.task_keys() == []


@pytest.mark.parametrize("locator", ["ffffffffffffffff", "8000000000000000", "1000000000000"])
def test_a_token_whose_locator_no_row_can_have_holds_no_lease(env: Env, locator: str) -> None:
    env.add_users(1)
    env.send(1, "m")
    held = env.db.receive_now(env.tasks)[0]
    forged = f"{held.lease_token.partition('.')[0]}.{locator}"
    assert env.db.renew_lease(env.tasks, [forged]) in (
        [],
        [txqueue.LeaseRenewal(forged, None, None)],
    )
    assert env.db.release_lease(env.tasks, [forged]) == 0
    with pytest.raises(FailedPrecondition):
        env.ack(held.key, lease_token=forged)
    env.ack(held.key, lease_token=held.lease_token)


@pytest.mark.parametrize(
    ("key", "payload", "field"),
    [((1, "\ud800"), b"x", r"key\[1\]"), ((1, "a\udfffb"), b"x", r"key\[1\]")],
)
def test_a_lone_surrogate_in_a_key_is_invalid_argument_and_sends_nothing(
    env: Env, key: tuple[Any, ...], payload: bytes, field: str
) -> None:
    env.add_users(1)
    with pytest.raises(InvalidArgument, match=f"{field}.*lone surrogate"):
        env.send(*key, payload=payload)
    assert env.task_keys() == []


def test_a_lone_surrogate_in_a_string_payload_is_invalid_argument(env: Env) -> None:
    if env.dialect == "googlesql":
        ddl = "CREATE QUEUE Notes (Id STRING(MAX) NOT NULL, Payload STRING(MAX) NOT NULL) PRIMARY KEY (Id)"
    else:
        ddl = "CREATE QUEUE notes (id varchar NOT NULL, payload text NOT NULL, PRIMARY KEY (id))"
    env.db.update_ddl([ddl])
    with pytest.raises(InvalidArgument, match=r"payload.*lone surrogate"), env.db.batch() as batch:
        batch.send("notes", ("a",), "text \ud800")
    assert env.query("SELECT id FROM notes") == []


def test_a_deliver_time_after_9999_in_utc_is_invalid_argument(env: Env) -> None:
    env.add_users(1)
    late = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14)))
    with pytest.raises(InvalidArgument, match=r"deliver_time .* outside the years 1 to 9999"):
        env.send(1, "m", deliver_time=late)
    assert env.task_keys() == []


@pytest.mark.parametrize(
    ("value", "rule"), [(2**63, "outside the INT64 range"), ("\ud800", "lone surrogate")]
)
def test_a_query_parameter_no_engine_takes_is_invalid_argument(
    env: Env, value: Any, rule: str
) -> None:
    env.add_users(1)
    sql = (
        "SELECT userid FROM users WHERE username = @p"
        if env.dialect == "googlesql"
        else ("SELECT userid FROM users WHERE username = $1")
    )
    params: Any = {"p": value} if env.dialect == "googlesql" else [value]
    with pytest.raises(InvalidArgument, match=rule), env.db.snapshot() as snapshot:
        list(snapshot.execute_sql(sql, params))
    update = sql.replace("SELECT userid FROM users WHERE", "DELETE FROM users WHERE")
    with pytest.raises(InvalidArgument, match=rule):
        env.db.run_in_transaction(lambda txn: txn.execute_update(update, params))
    assert env.user_rows() == [(1, "user 1")]


def test_durations_past_the_maximum_are_invalid_argument(env: Env) -> None:
    with pytest.raises(InvalidArgument, match="retention"):
        env.db.expire_ledger(timedelta(days=999_999_999))
    with pytest.raises(InvalidArgument, match="retention '99999999999d' is longer"):
        env.db.expire_ledger("99999999999d")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="max_duration"):
        _receive_sql(env, "max_duration=>'99999999999d'")


def test_a_numeric_url_option_no_engine_takes_is_invalid_argument(face: Face, env: Env) -> None:
    option = "pool_size" if is_postgres(env.url) else "busy_timeout_ms"
    separator = "&" if "?" in env.url else "?"
    with pytest.raises(InvalidArgument, match=f"URL option {option}"):
        face.connect(f"{env.url}{separator}{option}=99999999999999999999999")


def test_publishing_event_data_nested_100000_deep_is_invalid_argument(env: Env) -> None:
    events = env.face.events(env.db)
    events.create_bus("orders")
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    event = {"id": "1", "source": "shop", "type": "order.paid"}
    for data in ({"items": deep}, deep):
        with pytest.raises(InvalidArgument, match="nested deeper than 80"):
            events.publish("orders", {**event, "data": data})
    assert events.messages() == []


def test_the_event_layer_of_a_fresh_database_has_nothing_and_publishes_to_no_bus(env: Env) -> None:
    """Before anything is configured its tables do not exist: empty lists and NotFound, not an
    InvalidArgument about the reserved name of a table nobody asked for."""
    events = env.face.events(env.db)
    assert events.list_buses() == []
    assert events.messages() == []
    with pytest.raises(NotFound, match="bus 'orders' does not exist"):
        events.publish("orders", {"id": "1", "source": "shop", "type": "order.paid"})


@pytest.mark.parametrize("name", [["p"], 42, None, "Not A Name"])
def test_a_resource_name_that_is_no_name_is_invalid_argument(env: Env, name: Any) -> None:
    events = env.face.events(env.db)
    events.create_bus("orders")
    with pytest.raises(InvalidArgument, match="pipeline name"):
        events.get_pipeline(name)
    with pytest.raises(InvalidArgument, match="pipeline name"):
        events.update_pipeline(name, max_attempts=3)
    with pytest.raises(InvalidArgument, match="bus name"):
        events.delete_bus(name)
    assert [bus.name for bus in events.list_buses()] == ["orders"]


def test_a_dead_letter_or_release_whose_error_text_no_engine_stores_is_invalid_argument(
    env: Env,
) -> None:
    env.add_users(1)
    env.send(1, "m")
    held = env.db.receive_now(env.tasks)[0]
    with pytest.raises(InvalidArgument, match="error is not valid Unicode"):
        env.db.dead_letter(env.tasks, held.key, held.lease_token, "failed \ud800")
    with pytest.raises(InvalidArgument, match="error is not valid Unicode"):
        env.db.release_lease(env.tasks, [held.lease_token], error="failed \udfff")
    with pytest.raises(FailedPrecondition):
        env.db.dead_letter(env.tasks, held.key, "\ud800", "failed")
    assert _counts(env) == (0, 1, 0)
    assert env.db.dead_letters(env.tasks) == []


def test_a_bus_retention_past_the_maximum_is_refused_and_the_event_layer_keeps_working(
    env: Env,
) -> None:
    """A retention the archive's "now - retention" cannot take used to be stored, and every
    later read of the configuration (list, publish, purge) failed with an OverflowError."""
    events = env.face.events(env.db)
    for retention in (timedelta.max, MAX_DURATION + seconds(1)):
        with pytest.raises(InvalidArgument, match="retention must be at most 36500 days"):
            events.create_bus("orders", retention=retention)
    events.create_bus("orders", retention=MAX_DURATION)
    with pytest.raises(InvalidArgument, match="retention must be at most 36500 days"):
        events.update_bus("orders", retention=timedelta.max)
    assert [bus.retention for bus in events.list_buses()] == [MAX_DURATION]
    assert events.purge() == (0, 0)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("attempt_timeout", timedelta.max),
        ("attempt_timeout", MAX_DURATION),
        ("purge_interval", timedelta(days=900_000)),
        ("config_refresh", timedelta(days=-1)),
    ],
)
def test_a_dispatcher_duration_past_the_maximum_is_invalid_argument(
    env: Env, option: str, value: timedelta
) -> None:
    with pytest.raises(InvalidArgument, match=option):
        txqueue.AsyncDispatcher(env.db, **{option: value})  # type: ignore[arg-type]


def test_an_event_time_whose_offset_has_seconds_is_published_in_utc_and_stays_readable(
    env: Env,
) -> None:
    """RFC 3339 offsets are whole minutes: one with seconds used to be archived as written,
    and every later listing of the archive failed to parse it back."""
    events = env.face.events(env.db)
    events.create_bus("orders")
    zone = timezone(-timedelta(hours=23, minutes=15, seconds=49, microseconds=999_817))
    when = datetime(1625, 12, 22, 13, 36, 41, 586, tzinfo=zone)
    events.publish("orders", {"id": "1", "source": "shop", "type": "order.paid", "time": when})
    (archived,) = events.messages()
    assert archived.event.get_time() == when


@pytest.mark.parametrize("value", [[[1]], [1, [2, [3]]], [2**63], ["\ud800"]])
def test_an_array_parameter_no_engine_takes_is_invalid_argument(env: Env, value: Any) -> None:
    if env.dialect == "googlesql":
        sql, params = "SELECT userid FROM users WHERE userid IN UNNEST(@p)", {"p": value}
    else:
        sql, params = "SELECT userid FROM users WHERE userid = ANY($1)", [value]
    with pytest.raises(InvalidArgument, match=r"parameter (@p|\$1)\[\d\]"), env.db.snapshot() as s:
        list(s.execute_sql(sql, params))
