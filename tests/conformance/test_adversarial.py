"""Property: whatever a caller passes to a public entry point, only ``txqueue.errors`` escape
(or the call succeeds), and a call that fails writes nothing (SPEC §4, §7).

Hypothesis draws adversarial arguments — huge and negative numbers, NaN and infinities, lone
surrogates, NUL, deep nesting, long strings, wrong types, times at the calendar's ends, forged
lease tokens — for send, receive_now, receive, renew_lease, release_lease, ack, dead_letter,
execute_sql, execute_update, create_pipeline, update_pipeline and publish, on every engine
(SQLite, PostgreSQL, Cloud Spanner in both dialects). Each test function reuses one database
for all its examples; a pinned clock keeps leases from expiring between the before and after
snapshots. The pure entry points (verify_signature, URL parsing, the CLI's duration options)
are covered at the end.

Examples run are counted per test and printed (``-rP`` shows them); the ``adversarial``
profile sets how many (``TXQUEUE_ADVERSARIAL_EXAMPLES``, default 40 per test and engine; the
event layer's test, five operations, three times that).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import txqueue
from txqueue.cli.main import main
from txqueue.errors import TxqueueError

from .support import Env, Face, Names, dialect_name, is_postgres, is_spanner

settings.register_profile(
    "adversarial",
    max_examples=int(os.environ.get("TXQUEUE_ADVERSARIAL_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
ADVERSARIAL = settings.get_profile("adversarial")
EXAMPLES: Counter[str] = Counter()
PINNED = datetime(2026, 1, 1, tzinfo=timezone.utc)

# ---- adversarial values ----------------------------------------------------------------------

SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
EDGE_INTS = st.sampled_from(
    [0, -1, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**20, 10**400]
)
INTS = st.one_of(EDGE_INTS, st.integers())
FLOATS = st.floats(allow_nan=True, allow_infinity=True)
TEXTS = st.one_of(
    st.text(max_size=12),
    st.lists(st.one_of(st.characters(), SURROGATE, st.just("\x00")), max_size=12).map("".join),
    st.sampled_from([2**16, 10 * 2**20 + 1]).map(lambda size: "x" * size),
)


class DeepList(list[Any]):
    """A list nested many levels deep whose repr stays one line: hypothesis prints arguments,
    and printing 100,000 levels would exhaust its own recursion."""

    depth = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} nested {self.depth} levels>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


class DeepDict(dict[str, Any]):
    """A dict nested many levels deep (see `DeepList`)."""

    depth = 0
    __repr__ = DeepList.__repr__  # type: ignore[assignment]
    _repr_pretty_ = DeepList._repr_pretty_


def nested(depth: int, as_dict: bool) -> Any:
    value: Any = {} if as_dict else []
    for _ in range(depth - 2):
        value = {"a": value} if as_dict else [value]
    outer: DeepList | DeepDict = DeepDict(a=value) if as_dict else DeepList([value])
    outer.depth = depth
    return outer


NESTED = st.builds(nested, st.sampled_from([80, 81, 1000, 100_000]), st.booleans())
DURATIONS = st.one_of(
    st.timedeltas(),
    st.sampled_from(
        [
            timedelta(0),
            timedelta(microseconds=1),
            timedelta(days=36_500),
            timedelta(days=36_500, microseconds=1),
            timedelta(days=900_000),
            timedelta.max,
            timedelta.min,
        ]
    ),
    st.sampled_from(["nan", "inf", "-1s", "99999999999d", "1" + "0" * 400 + "s", "20m", "0.5s"]),
)
ZONES = st.builds(
    timezone, st.timedeltas(min_value=timedelta(hours=-23.9), max_value=timedelta(hours=23.9))
)
TIMES = st.one_of(
    st.datetimes(timezones=ZONES),
    st.datetimes(),  # naive
    st.sampled_from(
        [
            datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14))),
            datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
            datetime.max.replace(tzinfo=timezone.utc),
            datetime.min.replace(tzinfo=timezone.utc),
        ]
    ),
)
HEX = st.text("0123456789abcdef", min_size=1, max_size=20)
TOKENS = st.one_of(
    TEXTS,
    st.builds(
        lambda stored, locator: f"{stored}.{locator}",
        st.text("0123456789abcdef", min_size=30, max_size=30),
        HEX,
    ),
    st.just("f" * 30),
    st.just("0" * 30 + ".ffffffffffffffff"),
)
ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    INTS,
    FLOATS,
    TEXTS,
    st.binary(max_size=16),
    DURATIONS,
    TIMES,
    NESTED,
    st.builds(object),
    st.lists(INTS, max_size=3),
    st.dictionaries(TEXTS, INTS, max_size=2),
)


def either(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly plausible values of the argument, often anything at all."""
    return st.one_of(valid, ANYTHING)


# ---- the database ---------------------------------------------------------------------------


@pytest.fixture
def pinned(face: Face, database_url: str) -> Iterator[Env]:
    """The shared schema on a database whose clock stands still (leases never run out)."""
    db = face.connect(database_url, clock=lambda: PINNED)
    try:
        db.update_ddl(list(Names.for_dialect(db.dialect).ddl))
        env = Env(db, database_url, face)
        env.add_users(1, 2)
        env.send(1, "a")
        env.send(1, "b", deliver_time=PINNED + timedelta(days=1))
        yield env
    finally:
        db.close()


def state(env: Env) -> Any:
    """Everything a failed call must leave as it was: rows, leases, dead letters."""
    info = env.db.queue_info(env.tasks)
    rows = env.query("SELECT userid, messageid, payload FROM usertasks ORDER BY userid, messageid")
    counts = (info.ready, info.leased, info.scheduled, info.dead_letters)
    return env.user_rows(), rows, counts


def count(env: Env, name: str) -> None:
    if is_spanner(env.url):  # a GoogleSQL or a PostgreSQL-dialect database
        engine = f"spanner {dialect_name(env.db.dialect)}"
    else:
        engine = "postgres" if is_postgres(env.url) else "sqlite"
    EXAMPLES[f"{name} [{engine}]"] += 1


def attempt(env: Env, name: str, call: Callable[[], Any]) -> None:
    """Run ``call``: success, or a txqueue error with ``state`` unchanged; anything else fails."""
    count(env, name)
    before = state(env)
    try:
        call()
    except TxqueueError:
        assert state(env) == before, f"{name} failed but changed the database"


def report(name: str) -> None:
    print(f"{name}: {EXAMPLES[name]} examples")


def leased(env: Env) -> txqueue.Message | None:
    """A message under lease to use as a plausible key and token (sent anew if none is ready)."""
    got = env.db.receive_now(env.tasks)
    if not got:
        with env.db.batch() as batch:
            batch.send(env.tasks, (2, f"m{sum(EXAMPLES.values())}"), b"p")
        got = env.db.receive_now(env.tasks)
    return got[0] if got else None


KEYS = either(st.tuples(st.sampled_from([1, 2]), st.sampled_from(["a", "b", "new"])))


# ---- the queue's entry points ---------------------------------------------------------------


@ADVERSARIAL
@given(
    key=either(st.tuples(INTS, TEXTS)),
    payload=either(st.binary(max_size=64)),
    deliver_time=st.one_of(st.none(), TIMES),
    queue=either(st.just("usertasks")),
)
def test_send_raises_only_txqueue_errors_and_writes_nothing_on_error(
    pinned: Env, key: Any, payload: Any, deliver_time: Any, queue: Any
) -> None:
    def send() -> None:
        with pinned.db.batch() as batch:
            batch.send(queue, key, payload, deliver_time=deliver_time)

    attempt(pinned, "send", send)
    # a send that succeeded is removed again, so the queue stays small
    pinned.db.run_in_transaction(
        lambda txn: txn.execute_update(
            "DELETE FROM usertasks WHERE userid > 2 OR userid < 1 OR messageid NOT IN ('a', 'b')"
        )
    )


@ADVERSARIAL
@given(
    max_batch_size=either(st.integers(1, 3)),
    lease_duration=either(DURATIONS),
    max_duration=either(DURATIONS),
    priority=st.one_of(st.none(), ANYTHING),
    now=st.booleans(),
)
def test_receive_raises_only_txqueue_errors_and_leases_nothing_on_error(
    pinned: Env,
    max_batch_size: Any,
    lease_duration: Any,
    max_duration: Any,
    priority: Any,
    now: bool,
) -> None:
    def receive() -> None:
        if now:
            got = pinned.db.receive_now(pinned.tasks, max_batch_size, lease_duration)
        else:
            stream = pinned.db.receive(
                pinned.tasks, max_duration, max_batch_size, lease_duration, priority
            )
            # arguments are checked eagerly; read only when that cannot wait long
            short = isinstance(max_duration, timedelta) and max_duration <= timedelta(seconds=0.05)
            got = list(stream) if short else []
            stream.close()  # type: ignore[attr-defined]
        pinned.db.release_lease(pinned.tasks, [m.lease_token for m in got])

    attempt(pinned, "receive", receive)


@ADVERSARIAL
@given(
    tokens=either(st.lists(either(TOKENS), max_size=3)),
    extension=either(DURATIONS),
    delay=either(DURATIONS),
    error=st.one_of(st.none(), TEXTS),
    renew=st.booleans(),
)
def test_renew_and_release_raise_only_txqueue_errors(
    pinned: Env, tokens: Any, extension: Any, delay: Any, error: Any, renew: bool
) -> None:
    held = leased(pinned)
    if held is not None and isinstance(tokens, list):
        tokens = [*tokens, held.lease_token]
    if renew:
        attempt(
            pinned, "renew_lease", lambda: pinned.db.renew_lease(pinned.tasks, tokens, extension)
        )
    else:
        attempt(
            pinned,
            "release_lease",
            lambda: pinned.db.release_lease(pinned.tasks, tokens, delay, error),
        )
    if held is not None:  # give back whatever is still leased
        pinned.db.release_lease(pinned.tasks, [held.lease_token])


@ADVERSARIAL
@given(
    key=KEYS,
    token=st.one_of(st.none(), TOKENS),
    error=either(TEXTS),
    ignore_not_found=either(st.booleans()),
    dead_letter=st.booleans(),
)
def test_ack_and_dead_letter_raise_only_txqueue_errors(
    pinned: Env, key: Any, token: Any, error: Any, ignore_not_found: Any, dead_letter: bool
) -> None:
    held = leased(pinned)
    if held is not None and token is None and dead_letter:
        token = held.lease_token
    if dead_letter:
        attempt(
            pinned, "dead_letter", lambda: pinned.db.dead_letter(pinned.tasks, key, token, error)
        )
    else:

        def ack() -> None:
            with pinned.db.batch() as batch:
                batch.ack(pinned.tasks, key, ignore_not_found, token)

        attempt(pinned, "ack", ack)
    # put the fixture's messages back for the next example
    pinned.db.release_lease(pinned.tasks, [] if held is None else [held.lease_token])
    pinned.db.replay_dead_letters(pinned.tasks)
    for key_present in ((1, "a"), (1, "b")):
        if key_present not in {tuple(row[:2]) for row in pinned.task_keys()}:
            with pinned.db.batch() as batch:
                batch.send(pinned.tasks, key_present, b"p")


STATEMENTS = st.sampled_from(
    [
        "SELECT userid FROM users WHERE userid = {p}",
        "SELECT userid FROM users WHERE username = {p}",
        "SELECT {p}",
        "DELETE FROM users WHERE userid = {p} AND userid > 100",
        "UPDATE users SET username = {p} WHERE userid = 1000",
        "INSERT INTO users (userid, username) VALUES (3, {p})",
        "DELETE FROM usertasks WHERE messageid = {p} AND userid > 100",
        "SELECT * FROM {receive}(max_duration=>{p})",
        "SELECT * FROM {receive}(max_duration=>'0.01s', max_batch_size=>{p})",
    ]
)


@ADVERSARIAL
@given(statement=STATEMENTS, value=ANYTHING, update=st.booleans())
def test_execute_sql_and_update_raise_only_txqueue_errors(
    pinned: Env, statement: str, value: Any, update: bool
) -> None:
    if pinned.dialect == "googlesql":
        sql = statement.format(p="@p", receive="RECEIVE_usertasks")
        params: Any = {"p": value}
    else:
        sql = statement.format(p="$1", receive="spanner.receive_usertasks")
        sql, params = sql.replace("=>", " => "), [value]

    def run() -> None:
        if update:
            pinned.db.run_in_transaction(lambda txn: txn.execute_update(sql, params))
        else:
            with pinned.db.snapshot() as snapshot:
                result = snapshot.execute_sql(sql, params)
                if "receive" not in sql.lower():  # a RECEIVE's arguments are checked by now;
                    list(result)  # reading it could wait for as long as its max_duration

    attempt(pinned, "execute_sql/update", run)
    pinned.db.run_in_transaction(
        lambda txn: txn.execute_update("DELETE FROM users WHERE userid = 3")
    )


# ---- the event layer ------------------------------------------------------------------------

EVENT_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "id": either(st.just("1")),
        "source": either(st.just("shop")),
        "type": either(st.just("order.paid")),
        "time": either(st.just("2026-01-01T00:00:00Z")),
        "datacontenttype": either(st.just("application/json")),
        "data": either(st.dictionaries(st.text(max_size=3), INTS, max_size=2)),
        "extension": ANYTHING,
    },
)


@settings(ADVERSARIAL, max_examples=3 * ADVERSARIAL.max_examples)  # five operations share it
@given(
    fields=EVENT_FIELDS,
    name=either(st.sampled_from(["p1", "p2"])),
    destination=either(
        st.sampled_from(["bus:orders", "http://127.0.0.1:9/hook", "queue:usertasks"])
    ),
    max_attempts=st.one_of(st.none(), INTS),
    delay=st.one_of(st.none(), DURATIONS),
    retention=st.one_of(st.none(), DURATIONS),
    operation=st.sampled_from(
        ["publish", "create_pipeline", "update_pipeline", "create_bus", "update_bus"]
    ),
)
def test_event_layer_raises_only_txqueue_errors_and_writes_nothing_on_error(
    pinned: Env,
    fields: dict[str, Any],
    name: Any,
    destination: Any,
    max_attempts: Any,
    delay: Any,
    retention: Any,
    operation: str,
) -> None:
    events = pinned.face.events(pinned.db)
    if not events.list_buses():
        events.create_bus("orders")

    def configuration() -> Any:
        buses = [(bus.name, bus.archive, bus.retention) for bus in events.list_buses()]
        pipelines = [(p.name, str(p.destination), p.retry) for p in events.list_pipelines()]
        return buses, pipelines

    before = configuration(), len(events.messages())

    def call() -> None:
        if operation == "publish":
            events.publish("orders", {"id": "1", "source": "s", "type": "t", **fields})
        elif operation == "create_pipeline":
            events.create_pipeline(name, destination, allow_private=True)
        elif operation == "update_pipeline":
            events.update_pipeline(
                name, max_attempts=max_attempts, min_retry_delay=delay, max_retry_delay=delay
            )
        elif operation == "create_bus":
            events.create_bus(name, retention=retention)
        else:
            events.update_bus("orders", retention=retention)
        events.purge()  # every bus's retention back from now

    count(pinned, operation)
    try:
        call()
    except TxqueueError:
        assert (configuration(), len(events.messages())) == before


SIZES = st.one_of(st.integers(0, 40), st.sampled_from([255, 256, 257, 2000, 20_000, 30_000]))
DEPTHS = st.one_of(st.integers(0, 18), st.sampled_from([95, 96, 97, 500]))
PIECES = st.sampled_from(
    [
        "true",
        'message.type == "t"',
        'message.source.startsWith("s")',
        "size(message) > 1",
        'has(message.subject) && message.subject != ""',
        '"ab" + message.type != ""',
        "message.exists(k, k == 'type')",
    ]
)


@st.composite
def cel_conditions(draw: st.DrawFn) -> str:
    """CEL conditions of random sizes and nestings: long operator chains, deep brackets,
    nested and chained comprehensions, costly patterns, and arbitrary text."""
    kind = draw(
        st.sampled_from(
            ["chain", "brackets", "comprehensions", "growth", "pattern", "pieces", "text"]
        )
    )
    size, depth = draw(SIZES), draw(DEPTHS)
    if kind == "chain":
        operator, operand = draw(
            st.sampled_from(
                [("+", "1"), ("&&", "true"), ("||", "false"), ("-", "1"), (".", "a"), ("==", "1")]
            )
        )
        if operator == ".":
            return "message" + ".a" * size + " == 1"
        return f" {operator} ".join([operand] * max(size, 1)) + (" > 0" if operand == "1" else "")
    if kind == "brackets":
        opening, closing, tail = draw(
            st.sampled_from([("(", ")", " > 0"), ("size(", ")", " > 0"), ("[", "]", " != []")])
        )
        inner = "1" if opening == "(" else "'a'" if opening == "size(" else "1"
        return opening * depth + inner + closing * depth + tail
    if kind == "comprehensions":
        items = "[" + ",".join(str(number) for number in range(max(size, 1) % 200 + 1)) + "]"
        ranges = draw(st.sampled_from([items, "message"]))
        names = [f"v{level}" for level in range(depth % 9 + 1)]
        body = " + ".join(names) if ranges == items else " + ".join(f"{n}" for n in names)
        test = f"{body} != 0" if ranges == items else f'{body} != ""'
        return "".join(f"{ranges}.all({name}, " for name in names) + test + ")" * len(names)
    if kind == "growth":
        return '["ab"]' + ".map(x, x + x)" * (depth % 30) + ".size() > 0"
    if kind == "pattern":
        pattern = draw(st.sampled_from(["\\\\w", "\\\\pL", "a", ".", "(a{10})"]))
        return f'message.type.matches("{pattern}{{{size}}}")'
    if kind == "pieces":
        parts = draw(st.lists(PIECES, min_size=1, max_size=8))
        return draw(st.sampled_from([" && ", " || "])).join(f"({part})" for part in parts)
    return draw(TEXTS)


@settings(ADVERSARIAL, max_examples=2 * ADVERSARIAL.max_examples)
@given(
    condition=either(cel_conditions()),
    attributes=st.sampled_from([0, 5, 300, 3000]),
    longest=st.sampled_from([1, 1000, 2**20]),
)
def test_cel_conditions_raise_only_txqueue_errors_and_never_stall_a_publish(
    pinned: Env, condition: Any, attributes: int, longest: int
) -> None:
    """Any condition: created (then each publish succeeds in bounded time, whatever the
    event) or refused with a txqueue error; never a crash, never a publish that runs on."""
    events = pinned.face.events(pinned.db)
    if not events.list_buses():
        events.create_bus("orders")
        events.create_pipeline("p1", "bus:orders")
    count(pinned, "create_enrollment (CEL)")
    before = [(e.name, e.cel_match) for e in events.list_enrollments()]
    started = time.monotonic()
    try:
        events.create_enrollment("cel", bus="orders", pipeline="p1", cel_match=condition)
    except TxqueueError:
        assert [(e.name, e.cel_match) for e in events.list_enrollments()] == before
        assert time.monotonic() - started < 10
        return
    try:
        event = {"id": "1", "source": "s", "type": "t", "subject": "s" * longest}
        event.update({f"x{number}": "v" for number in range(attributes)})
        started = time.monotonic()
        with contextlib.suppress(TxqueueError):
            events.publish("orders", event)
        assert time.monotonic() - started < 10, f"publish took {time.monotonic() - started} s"
    finally:
        events.delete_enrollment("cel")
        events.purge()


# ---- pure entry points ----------------------------------------------------------------------


@ADVERSARIAL
@given(
    secret=either(st.just(b"secret")),
    headers=either(
        st.fixed_dictionaries(
            {
                "webhook-id": either(TEXTS),
                "webhook-timestamp": either(st.one_of(INTS.map(str), TEXTS)),
                "webhook-signature": either(TEXTS.map(lambda text: f"v1,{text}")),
            }
        )
    ),
    body=either(st.binary(max_size=16)),
    tolerance=either(DURATIONS),
)
def test_verify_signature_raises_only_invalid_argument(
    secret: Any, headers: Any, body: Any, tolerance: Any
) -> None:
    EXAMPLES["verify_signature"] += 1
    with pytest.raises(txqueue.errors.InvalidArgument):
        txqueue.verify_signature(secret, headers, body, tolerance)


OPTIONS = st.sampled_from(["busy_timeout_ms", "synchronous", "pool_size", "nothing"])


@ADVERSARIAL
@given(
    scheme=st.sampled_from(["sqlite:///", "postgresql://h/", "x://", ""]),
    path=TEXTS,
    option=OPTIONS,
    value=st.one_of(INTS.map(str), TEXTS),
)
def test_url_parsing_raises_only_txqueue_errors(
    scheme: str, path: str, option: str, value: str
) -> None:
    from txqueue.core.url import integer_option
    from txqueue.drivers.engines import parse_url

    EXAMPLES["connect URL"] += 1
    try:
        parsed = parse_url(f"{scheme}{path}?{option}={value}")
        for name, default in (("busy_timeout_ms", 1), ("pool_size", 1)):
            integer_option(parsed, name, default)
    except TxqueueError:
        pass


DURATION_TEXT = st.one_of(
    st.sampled_from(
        ["nan", "inf", "-inf", "99999999999d", "1e999s", "NaNs", "1" + "0" * 400 + "d"]
    ),
    st.builds(
        lambda number, unit: f"{number}{unit}",
        st.one_of(INTS, FLOATS),
        st.sampled_from(["", "s", "d", "ms"]),
    ),
    TEXTS.filter(lambda text: "\x00" not in text and len(text) < 1000),
)


@pytest.fixture(scope="module")
def cli_database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database that exists (read-only commands refuse to create one)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('cli')}/cli.db"
    txqueue.connect(url).close()
    return url


@ADVERSARIAL
@given(
    option=st.sampled_from(
        [
            ("buses", "create", "b", "--retention"),
            ("events", "purge", "--older-than"),
            ("events", "undelivered", "--since"),
            ("worker", "tests.nowhere:app", "--grace"),
        ]
    ),
    text=DURATION_TEXT,
)
def test_cli_duration_options_fail_as_usage_errors(
    cli_database: str, option: tuple[str, ...], text: str
) -> None:
    EXAMPLES["CLI durations"] += 1
    *command, flag = option
    result = CliRunner().invoke(main, [*command, f"{flag}={text}", "--database", cli_database])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    if text in ("nan", "inf", "-inf", "99999999999d", "1e999s") or "\ud800" <= text[:1] <= "\udfff":
        assert result.exit_code == 2, result.output
        assert flag in result.output


def test_every_entry_point_saw_examples() -> None:
    """Printed last (``-rP`` shows it): how many examples each entry point got."""
    for name in sorted(EXAMPLES):
        report(name)
    if EXAMPLES:  # run with the tests above
        assert all(count > 0 for count in EXAMPLES.values())
