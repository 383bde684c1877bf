"""Every SQL statement the PostgreSQL driver runs, built once per table from its schema.

Names are folded to lower case (Spanner names are case-insensitive, and so plain SQL such as
``INSERT INTO usertasks ...`` from the application's own connection finds the table) and
always quoted; values are always bound. The SQL sticks to what PostgreSQL-compatible
distributed engines also run: row locks with SKIP LOCKED, no advisory locks on the hot path.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

from txqueue.core.leases import (
    LOCATOR_SEPARATOR,
    MAX_BACKOFF_EXPONENT,
    MAX_BACKOFF_SECONDS,
    TOKEN_EXPIRATION_DIGITS,
    TOKEN_RANDOM_DIGITS,
)
from txqueue.core.lengths import constraint_name, limited
from txqueue.core.schema import Column, ColumnType, Index, Table
from txqueue.drivers.ddl import create_index as index_ddl

__all__ = [
    "CATALOG",
    "CHANNEL",
    "COMMIT_MARKER",
    "FORGET_COMMITS",
    "NOTIFY_SENT",
    "PAUSE",
    "PAUSED",
    "RECORDED_DIALECT",
    "RECORD_DIALECT",
    "RESUME",
    "STATISTICS_STALE",
    "ActionStatements",
    "QueueStatements",
    "action_statements",
    "create_index",
    "create_table",
    "ident",
    "queue_statements",
    "with_commit_marker",
]

#: The hidden column holding the W3C trace context of the send (NULL for plain SQL).
TRACE_CONTEXT = "_txq_trace_context"
#: Gives queues created before that column existed the column (run by every connect).
ADD_TRACE_COLUMNS = (
    "DO $$DECLARE queue regclass; BEGIN FOR queue IN SELECT c.oid::regclass"
    " FROM txqueue_objects AS o JOIN pg_class AS c ON c.oid = to_regclass(quote_ident(o.name))"
    " WHERE o.kind = 'queue' AND NOT EXISTS (SELECT 1 FROM pg_attribute AS a"
    f" WHERE a.attrelid = c.oid AND a.attname = '{TRACE_CONTEXT}' AND NOT a.attisdropped)"
    " LOOP EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS"
    f" {TRACE_CONTEXT} text', queue); END LOOP; END$$"
)

#: The LISTEN/NOTIFY channel; the payload is the queue's name.
CHANNEL = "txqueue"
#: Serialises catalog creation and DDL between processes (never on the message path).
DDL_LOCK = 7_401_000_001

CATALOG = (
    "CREATE TABLE IF NOT EXISTS txqueue_settings (name text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS txqueue_objects ("
    " name text PRIMARY KEY, kind text NOT NULL, definition text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS txqueue_dead_letters ("
    " queue text NOT NULL, key text NOT NULL, payload text NOT NULL,"
    " attempts integer NOT NULL, last_error text NOT NULL,"
    " first_failure timestamptz NOT NULL, last_failure timestamptz NOT NULL,"
    " PRIMARY KEY (queue, key))",
    "CREATE TABLE IF NOT EXISTS txqueue_ledger ("
    " key text PRIMARY KEY, recorded_at timestamptz NOT NULL DEFAULT now())",
    # One row per paused queue (lower-cased name): its receives lease nothing.
    "CREATE TABLE IF NOT EXISTS txqueue_paused (queue text PRIMARY KEY)",
    # One row per connection that committed writes: the token of its latest commit. A COMMIT
    # whose reply is lost is resolved by reading it once that connection's backend is gone.
    "CREATE TABLE IF NOT EXISTS txqueue_commits ("
    " slot text PRIMARY KEY, token bigint NOT NULL, touched timestamptz NOT NULL)",
    # Raised by the buffered send/ack statements of a commit's pipeline when an item cannot
    # apply, so that the COMMIT behind them never runs: "<kind>:<run>" tells the client which.
    # (Created once: replacing it on every connect would invalidate other sessions' plans.)
    "DO $$BEGIN IF to_regprocedure('txqueue_refuse(text, bigint)') IS NULL THEN"
    " CREATE FUNCTION txqueue_refuse(kind text, item bigint) RETURNS bigint"
    " LANGUAGE plpgsql AS $body$BEGIN RAISE EXCEPTION USING ERRCODE = 'TQ001',"
    " MESSAGE = 'txqueue refused item ' || item, DETAIL = kind || ':' || item; END$body$;"
    " END IF; END$$",
)

#: How a commit marker replaces its slot's token (one row per connection).
_MARKER_UPSERT = (
    " ON CONFLICT (slot) DO UPDATE SET token = excluded.token, touched = excluded.touched"
)
#: Records the commit token of a transaction that wrote (a read-only one stays read-only),
#: sent in the COMMIT's own pipeline: the token is known before COMMIT leaves the client.
COMMIT_MARKER = (
    "INSERT INTO txqueue_commits (slot, token, touched)"
    " SELECT %s, %s, now() WHERE pg_current_xact_id_if_assigned() IS NOT NULL" + _MARKER_UPSERT
)


@lru_cache(maxsize=64)
def with_commit_marker(statement: str) -> str:
    """``statement`` (a refusing run: ``WITH _done AS …``, or a plain ``INSERT``) also
    writing the commit marker, its first two parameters (slot, token): one statement fewer
    in a commit's pipeline. A data-modifying ``WITH`` runs whether or not it is read, and the
    statement writes anyway; ``COMMIT_MARKER``'s test for an assigned xid must stay out (the
    marker may run before the run's own write assigns one)."""
    marker = (
        "WITH _marker AS (INSERT INTO txqueue_commits (slot, token, touched)"
        f" VALUES (%s, %s, now()){_MARKER_UPSERT})"
    )
    if statement.startswith("WITH "):
        return f"{marker}, {statement[5:]}"
    assert statement.startswith("INSERT ")
    return f"{marker} {statement}"


#: NOTIFYs receivers of the queues a transaction sent to (delivered at COMMIT). Used inside
#: an application's own transaction only, whose COMMIT txqueue does not see.
NOTIFY_SENT = "SELECT count(pg_notify(%s, q)) FROM unnest(%s::text[]) AS q"
#: Whether the planner's estimate of a queue table's rows is below the first parameter while
#: the table has pages: statistics taken while the queue was empty (drivers.postgres.statistics).
#: The second parameter is the table's quoted name; -1 rows is "never analyzed", which the
#: planner estimates from the table's size instead.
STATISTICS_STALE = (
    "SELECT relpages > 0 AND reltuples >= 0 AND reltuples < %s"
    " FROM pg_class WHERE oid = to_regclass(%s)"
)
#: The commit resolver's own write, committed after it read a marker: its acknowledgement
#: says the synchronous standbys hold that marker's state too. A row per resolving backend:
#: a barrier whose connection was given up keeps its row locked while its COMMIT waits.
RESOLVER_BARRIER = (
    "INSERT INTO txqueue_commits (slot, token, touched)"
    " VALUES ('resolver@' || pg_backend_pid(), 0, now())" + _MARKER_UPSERT
)
#: The dialect the database records; a record on a database holding no table, queue or index
#: binds nothing (earlier versions recorded one at connect, before any DDL).
RECORDED_DIALECT = (
    "SELECT value FROM txqueue_settings WHERE name = 'dialect'"
    " AND EXISTS (SELECT 1 FROM txqueue_objects)"
)
#: Written by the first successful DDL, in its transaction (replaces a record that binds nothing).
RECORD_DIALECT = (
    "INSERT INTO txqueue_settings (name, value) VALUES ('dialect', %s)"
    " ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)
#: Pause a queue (idempotent), resume it, and whether it is paused: lower-cased names.
PAUSE = "INSERT INTO txqueue_paused (queue) VALUES (%s) ON CONFLICT DO NOTHING"
RESUME = "DELETE FROM txqueue_paused WHERE queue = %s"
PAUSED = "SELECT 1 FROM txqueue_paused WHERE queue = %s"
#: Marker slots of connections gone for a day (their rows are never needed again).
FORGET_COMMITS = "DELETE FROM txqueue_commits WHERE touched < now() - interval '1 day'"

_TYPES = {
    ColumnType.INT64: "bigint",
    ColumnType.FLOAT64: "double precision",
    ColumnType.FLOAT32: "real",
    ColumnType.BOOL: "boolean",
    ColumnType.STRING: "text",
    ColumnType.BYTES: "bytea",
    ColumnType.TIMESTAMP: "timestamptz",
    ColumnType.DATE: "date",
    ColumnType.JSON: "jsonb",
    ColumnType.NUMERIC: "numeric",
}


#: The longest name PostgreSQL keeps whole (NAMEDATALEN - 1 bytes).
NAME_MAX_BYTES = 63


def ident(name: str) -> str:
    """A quoted, lower-cased identifier."""
    return '"' + name.lower().replace('"', '""') + '"'


def object_name(table: str, purpose: str) -> str:
    """An index name derived from a table name, kept within PostgreSQL's 63 bytes."""
    name = f"{table.lower()}_txq_{purpose}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return f"{table.lower()[:40]}_{digest}_txq_{purpose}"


def _column(column: Column) -> str:
    kind = _TYPES[column.type]
    if column.type is ColumnType.STRING and column.length is not None and column.array:
        kind = f"varchar({column.length})"  # the engine checks each element
    if column.array:
        kind += "[]"
    return f"{ident(column.name)} {kind}{'' if column.nullable else ' NOT NULL'}{_length(column)}"


def _length(column: Column) -> str:
    """The named CHECK holding a declared length, in characters or bytes. STRING(n) is
    ``text`` with this check rather than ``varchar(n)``, whose refusal names no column."""
    if not limited(column):
        return ""
    measure = "char_length" if column.type is ColumnType.STRING else "octet_length"
    name = '"' + constraint_name(column, NAME_MAX_BYTES).replace('"', '""') + '"'
    return f" CONSTRAINT {name} CHECK ({measure}({ident(column.name)}) <= {column.length})"


#: How full inserts leave a queue table's pages. A lease (receive, renew) changes no indexed
#: column, so PostgreSQL updates the row in place on its page (a HOT update: no index entry
#: is added) when the page has room for the new version. Half-full pages have room for a
#: lease of each row of ~250 bytes; full ones made every lease a new version elsewhere with
#: an entry in each index (measured on a 20k drain: 8-10 against 14-18 µs of server CPU a
#: message to receive, 559 against 855 bytes of WAL). Waiting messages take twice the space.
QUEUE_FILLFACTOR = 50


def add_column(table: Table, column: Column) -> str:
    """ALTER TABLE … ADD COLUMN for a nullable column (none if another process added it)."""
    return f"ALTER TABLE {ident(table.name)} ADD COLUMN IF NOT EXISTS {_column(column)}"


def create_table(table: Table, deliver_time: str, parent: Table | None) -> list[str]:
    """CREATE TABLE (and, for queues, the hidden state and its indexes) for ``table``."""
    parts = [_column(c) for c in table.columns]
    if table.is_queue:
        parts += [
            f"{ident(deliver_time)} timestamptz NOT NULL DEFAULT now()",
            "_txq_ready_at timestamptz",
            "_txq_lease_expiration timestamptz",
            "_txq_lease_token text",
            "_txq_delivery_count integer NOT NULL DEFAULT 0",
            "_txq_last_error text",
            "_txq_first_failure timestamptz",
            "_txq_last_failure timestamptz",
            f"{TRACE_CONTEXT} text",
        ]
    parts.append(f"PRIMARY KEY ({', '.join(ident(k) for k in table.primary_key)})")
    if parent is not None:
        own = ", ".join(ident(k) for k in table.primary_key[: len(parent.primary_key)])
        theirs = ", ".join(ident(k) for k in parent.primary_key)
        action = " ON DELETE CASCADE" if table.on_delete_cascade else ""
        parts.append(f"FOREIGN KEY ({own}) REFERENCES {ident(parent.name)} ({theirs}){action}")
    name = ident(table.name)
    storage = f" WITH (fillfactor = {QUEUE_FILLFACTOR})" if table.is_queue else ""
    statements = [f"CREATE TABLE {name} ({', '.join(parts)}){storage}"]
    if table.is_queue:
        ready = f"(coalesce(_txq_ready_at, {ident(deliver_time)}))"
        # One index on readiness: the deliver time, or when a release put the message back.
        # A lease is not in it (see ``lease_gate``), so leasing changes no indexed column.
        # None on tokens: a token carries its row's location.
        statements.append(
            f"CREATE INDEX {ident(object_name(table.name, 'ready'))} ON {name} ({ready})"
        )
    return statements


def create_index(index: Index) -> str:
    """CREATE [UNIQUE] INDEX for a user index."""
    return index_ddl(index, ident)


def _array_type(column: Column) -> str:
    """The element type of a column's values when they travel as an array parameter."""
    return _TYPES[column.type]


def _token(expiration: str) -> str:
    """SQL for the stored part of a lease token carrying ``expiration``: what
    ``core.leases.new_stored_token`` builds, computed by the server from its clock."""
    micros = f"(extract(epoch FROM {expiration}) * 1000000)::bigint"
    return (
        f"lpad(to_hex({micros}), {TOKEN_EXPIRATION_DIGITS}, '0')"
        f" || substr(md5(random()::text), 1, {TOKEN_RANDOM_DIGITS})"
    )


def _handed_out(alias: str) -> str:
    """SQL for the token handed to the receiver: the stored token, ".", the row's location.

    The location is the row version's ctid as one hex number (page << 16 | item), so renew
    and release find the row by TID instead of by an index on tokens. That keeps the leasing
    UPDATE to one secondary index; a ctid goes stale only when the row is rewritten by
    something else (VACUUM FULL, CLUSTER, an UPDATE from plain SQL), and then the lease just
    cannot be renewed or released early; it expires as any lost lease does.
    """
    location = f"{alias}.ctid::text::point"
    return (
        f"{alias}._txq_lease_token || '{LOCATOR_SEPARATOR}' ||"
        f" to_hex(({location})[0]::bigint * 65536 + ({location})[1]::bigint)"
    )


def _refusing(statement: str) -> str:
    """``statement`` (a send/ack ``… RETURNING 1``) made to fail through ``txqueue_refuse``
    when it touched fewer rows than its second-to-last parameter says, so a COMMIT pipelined
    behind it never runs; the last parameter (the run's place in the buffer) names the run."""
    return (
        f"WITH _done AS ({statement}) SELECT CASE WHEN count(*) < %s"
        " THEN txqueue_refuse('short', %s) END FROM _done"
    )


def _backoff(count: str) -> str:
    """SQL for ``core.leases.redelivery_backoff(count)``: the delay once the ``count``-th
    lease expires."""
    exponent = f"least(greatest({count} - 1, 0), {MAX_BACKOFF_EXPONENT})"
    return f"interval '1 second' * least(1 << {exponent}, {MAX_BACKOFF_SECONDS})"


def not_paused(table: Table) -> str:
    """SQL true while ``table`` is not paused. It names no column of the queue, so the
    planner runs it once per statement, as a one-time filter above the ready index scan (no
    extra query, and the scan is skipped altogether while the queue is paused)."""
    name = table.name.lower().replace("'", "''")
    return f"NOT EXISTS (SELECT 1 FROM txqueue_paused WHERE queue = '{name}')"


def lease_gate(expiration: str, count: str) -> str:
    """SQL for when a leased message is receivable again: its lease's expiration plus the
    redelivery backoff after ``count`` leases (the one it is under included)."""
    return f"({expiration} + {_backoff(count)})"


@dataclass(frozen=True)
class QueueStatements:
    """The queue operations of one queue table."""

    receive: str
    receive_from: str
    next_ready: str
    renew: str
    release: str
    send: str
    exists: str
    counts: str
    dead_letter: str
    send_many: str
    send_many_now: str
    ack_many: str
    ack_leased: str
    send_refusing: str
    send_now_refusing: str
    ack_refusing: str
    ack_leased_refusing: str
    send_one_refusing: str
    ack_one_refusing: str
    ack_one_leased_refusing: str
    lease_held: str
    analyze: str
    trace: str
    #: the failure history, delivery count and time of a message a live lease holds, locked
    failures: str


@lru_cache(maxsize=512)
def queue_statements(table: Table, deliver_time: str) -> QueueStatements:
    """Build (once) the SQL for the queue operations of ``table``."""
    name = ident(table.name)
    keys = [ident(k) for k in table.primary_key]
    key_list = ", ".join(keys)
    key_match = " AND ".join(f"{k} = %s" for k in keys)
    payload = ident(table.payload_column.name)
    deliver = ident(deliver_time)
    ready = f"coalesce(_txq_ready_at, {deliver})"
    now = "coalesce(%(now)s::timestamptz, clock_timestamp())"
    statement_now = "coalesce(%(now)s::timestamptz, statement_timestamp())"
    returned = ", ".join(f"q.{c}" for c in [*keys, payload, deliver])
    key_aliases = [f"_k{i}" for i in range(len(keys))]
    key_types = [_array_type(c) for c in table.key_columns]
    insert_many = (
        f"INSERT INTO {name} ({', '.join([*keys, payload, deliver])})"
        f" SELECT {', '.join(key_aliases)}, _p, coalesce(_d, now())"
        f" FROM unnest({', '.join(f'%b::{t}[]' for t in key_types)},"
        f" %b::{_array_type(table.payload_column)}[], %b::timestamptz[])"
        f" AS _input({', '.join(key_aliases)}, _p, _d)"
    )
    # The same for a run where no send names a deliver time (most): one array fewer to
    # build and dump.
    insert_many_now = (
        f"INSERT INTO {name} ({', '.join([*keys, payload, deliver])})"
        f" SELECT {', '.join(key_aliases)}, _p, now()"
        f" FROM unnest({', '.join(f'%b::{t}[]' for t in key_types)},"
        f" %b::{_array_type(table.payload_column)}[])"
        f" AS _input({', '.join(key_aliases)}, _p)"
    )
    # Acks reach their rows through an array that drives the scan: the first key column (the
    # primary key's index), or, when every ack carries a token, the leases' locations (a TID
    # scan; the token's random part, shared by the rows one receive leased, then fences each
    # row with its key). Joined to unnest() alone, custom plans hash the whole table.
    key_input = ", ".join(f"%b::{t}[]" for t in key_types)
    key_equal = f"({', '.join(f'q.{k}' for k in keys)}) = ({', '.join(key_aliases)})"
    unexpired = "q._txq_lease_expiration > coalesce(%s::timestamptz, clock_timestamp())"
    ack_many = (
        f"DELETE FROM {name} AS q USING unnest({key_input}, %b::text[], %b::text[]::tid[])"
        f" AS _input({', '.join(key_aliases)}, _token, _location)"
        f" WHERE q.{keys[0]} = ANY(ARRAY(SELECT unnest(%b::{key_types[0]}[]))) AND {key_equal}"
        " AND (_token IS NULL OR q._txq_lease_token = _token AND q.ctid = _location"
        f" AND {unexpired})"
    )
    # The stored tokens and locations travel as binary text[] and tid[] built whole from
    # the tokens (codec.stored_token_array, codec.tid_array). The stored token stays joined
    # row by row even when the run shares one: compared with one value instead, generic
    # plans estimated a single row and re-read the input array for each (~2.5x the cost).
    ack_leased = (
        f"DELETE FROM {name} AS q USING unnest({key_input}, %b::text[])"
        f" AS _input({', '.join(key_aliases)}, _token)"
        " WHERE q.ctid = ANY(ARRAY(SELECT unnest(%b::tid[])))"
        f" AND {key_equal} AND q._txq_lease_token = _token AND {unexpired}"
    )
    insert_one = (
        f"INSERT INTO {name} ({', '.join([*keys, payload, deliver])})"
        f" VALUES ({', '.join(['%s'] * (len(keys) + 1))}, coalesce(%s::timestamptz, now()))"
    )
    # Outside the commit, a taken key must leave the transaction usable: ON CONFLICT skips
    # the row and RETURNING tells which were inserted.
    send_many = insert_many + " ON CONFLICT DO NOTHING"
    send_many_now = insert_many_now + " ON CONFLICT DO NOTHING"
    send_one = insert_one + " ON CONFLICT DO NOTHING"
    lease_match = (
        f"{key_match} AND _txq_lease_token = %s AND q.ctid = %s::tid"
        " AND _txq_lease_expiration > coalesce(%s::timestamptz, clock_timestamp())"
    )
    # A lease is its row's key, stored token and location (ctid) together: rows leased by
    # one statement share the stored token. statement_timestamp() (not clock_timestamp())
    # keeps "ready <= now" an index condition, so receive stops at the first message not
    # yet due. The stored token is computed once per statement: each row's own location
    # (RETURNING ctid, binary) completes the token handed out, so rows of one batch still
    # get distinct tokens. The locked rows are updated through a TID scan of their array.
    # The receive's candidates: due, oldest first, none locked by another receive.
    # A leased message stays where it is in the ready index; its lease gates it instead: it
    # is receivable again once the lease expired and its redelivery backoff passed.
    gate = lease_gate("_txq_lease_expiration", "_txq_delivery_count")
    leased_receivable = f"greatest({ready}, {gate})"  # of a row under a lease, expired or not
    due = (
        f"{ready} <= {statement_now}"
        f" AND (_txq_lease_expiration IS NULL OR {gate} <= {statement_now})"
        f" AND {not_paused(table)}"
    )
    pick = f" ORDER BY {ready} LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
    # The same from a floor (drivers.postgres.floors), past the acked rows' index entries.
    # The floor is a row comparison, which the index scan still starts at: a plain
    # `ready >= floor` would pair with `ready <= now` into a range the planner sizes at
    # 0.5 % of the table whenever one side is unknown (a parameter, statement_timestamp()),
    # and below the LIMIT it sorts the whole range instead (4-6 ms for 10k waiting).
    from_floor = f" AND ({ready}, 0) >= (%(floor)s::timestamptz, 0)"

    def receive(where: str) -> str:
        return (
            f"WITH lease AS (SELECT {statement_now} + %(lease)s AS expiration),"
            f" token AS (SELECT {_token('expiration')} AS stored FROM lease),"
            f" ready AS (SELECT ctid AS location FROM {name} WHERE {where}{pick})"
            f" UPDATE {name} AS q SET _txq_lease_token = token.stored,"
            " _txq_lease_expiration = lease.expiration,"
            " _txq_delivery_count = q._txq_delivery_count + 1"
            " FROM lease, token WHERE q.ctid = ANY(ARRAY(SELECT location FROM ready))"
            f" RETURNING {returned}, q._txq_lease_token, q._txq_delivery_count, q.ctid,"
            f" q.{TRACE_CONTEXT}"
        )

    return QueueStatements(
        receive=receive(due),
        receive_from=receive(due + from_floor),
        # The earliest a message becomes receivable: the first unleased one in the ready
        # index, or a leased one ahead of it whose lease gate comes sooner.
        next_ready=(
            f"WITH first AS (SELECT {ready} AS ready FROM {name}"
            f" WHERE _txq_lease_expiration IS NULL ORDER BY {ready} LIMIT 1)"
            f" SELECT extract(epoch FROM least((SELECT ready FROM first),"
            f" (SELECT min({leased_receivable}) FROM {name}"
            f" WHERE {ready} < coalesce((SELECT ready FROM first), 'infinity')"
            f" AND _txq_lease_expiration IS NOT NULL)) - {now})::float8"
            f" WHERE {not_paused(table)}"  # paused: no row, nothing becomes ready
        ),
        # Tokens arrive split (codec.stored_token, codec.token_location): stored part and ctid.
        renew=(
            f"WITH clock AS (SELECT {now} AS now),"
            " input AS (SELECT DISTINCT * FROM unnest(%(tokens)b::text[], %(stored)b::text[],"
            " %(locations)b::text[]::tid[]) AS i(old_token, stored, location)),"
            f" renewed AS (UPDATE {name} AS q SET"
            f" _txq_lease_token = {_token('clock.now + %(extension)s')},"
            " _txq_lease_expiration = clock.now + %(extension)s"
            " FROM input, clock WHERE q.ctid = ANY(ARRAY(SELECT location FROM input))"
            " AND q.ctid = input.location"
            " AND q._txq_lease_token = input.stored AND q._txq_lease_expiration > clock.now"
            f" RETURNING input.old_token, {_handed_out('q')} AS new_token,"
            " q._txq_lease_expiration)"
            " SELECT input.old_token, renewed.new_token, renewed._txq_lease_expiration,"
            " (extract(epoch FROM clock.now) * 1000000)::bigint"
            " FROM input CROSS JOIN clock LEFT JOIN renewed USING (old_token)"
        ),
        release=(
            f"WITH clock AS (SELECT {now} AS now)"
            f" UPDATE {name} AS q SET _txq_lease_token = NULL, _txq_lease_expiration = NULL,"
            " _txq_ready_at = clock.now + %(delay)s,"
            " _txq_last_error = coalesce(%(error)s::text, q._txq_last_error),"
            " _txq_first_failure = CASE WHEN %(error)s::text IS NULL THEN q._txq_first_failure"
            " ELSE coalesce(q._txq_first_failure, clock.now) END,"
            " _txq_last_failure = CASE WHEN %(error)s::text IS NULL THEN q._txq_last_failure"
            " ELSE clock.now END FROM clock"
            " WHERE q.ctid = ANY(%(locations)b::text[]::tid[])"
            " AND q._txq_lease_token = ANY(%(stored)b::text[])"
            " AND q._txq_lease_expiration > clock.now"
        ),
        send=send_one,
        exists=f"SELECT 1 FROM {name} WHERE {key_match}",
        # Many sends or acks in one statement: the rows travel as one array per column, in
        # binary (psycopg dumps a text array of 100 elements ~10x faster in binary).
        send_many=send_many + f" RETURNING {key_list}",
        send_many_now=send_many_now + f" RETURNING {key_list}",
        ack_many=ack_many + f" RETURNING {', '.join(f'q.{k}' for k in keys)}",
        ack_leased=ack_leased + f" RETURNING {', '.join(f'q.{k}' for k in keys)}",
        # The same, for the commit's own pipeline: an item that cannot apply fails the
        # statement inside the server (one count when all applied; the client then finds out
        # which item, after the rollback). Sends there are plain INSERTs, which a taken key
        # fails with unique_violation: ON CONFLICT's speculative insertion cost the server
        # ~40 % of a batch of 100 (62k vs 88k rows/s, 461 vs 415 bytes of WAL a row).
        send_refusing=insert_many,
        send_now_refusing=insert_many_now,
        ack_refusing=_refusing(ack_many + " RETURNING 1"),
        ack_leased_refusing=_refusing(ack_leased + " RETURNING 1"),
        # A run of one item, with plain parameters: dumping three one-element arrays cost
        # a lone send or ack ~40 µs of client CPU. Same checks as the arrays' forms.
        send_one_refusing=insert_one,
        ack_one_refusing=_refusing(f"DELETE FROM {name} AS q WHERE {key_match} RETURNING 1"),
        ack_one_leased_refusing=_refusing(
            f"DELETE FROM {name} AS q WHERE {lease_match} RETURNING 1"
        ),
        lease_held=f"SELECT 1 FROM {name} AS q WHERE {lease_match}",
        analyze=f"ANALYZE (SKIP_LOCKED) {name}",
        trace=f"UPDATE {name} SET {TRACE_CONTEXT} = %s WHERE {key_match}",
        dead_letter=(
            f"WITH clock AS (SELECT coalesce(%s::timestamptz, clock_timestamp()) AS now)"
            f" DELETE FROM {name} AS q USING clock WHERE {key_match}"
            " AND _txq_lease_token = %s AND q.ctid = %s::tid AND _txq_lease_expiration > clock.now"
            f" RETURNING {payload}, _txq_delivery_count, coalesce(_txq_first_failure, clock.now),"
            " clock.now, _txq_last_error"
        ),
        failures=(
            f"WITH clock AS (SELECT {now} AS now)"
            f" SELECT q._txq_last_error, q._txq_delivery_count, clock.now FROM {name} AS q, clock"
            " WHERE q.ctid = %(location)s::tid AND q._txq_lease_token = %(stored)s"
            " AND q._txq_lease_expiration > clock.now FOR UPDATE OF q"
        ),
        # Ready: receivable now; leased: under an unexpired lease; scheduled: the rest (due
        # later, or after an expired lease's backoff).
        counts=(
            f"WITH clock AS (SELECT {now} AS now),"
            f" q AS (SELECT {deliver} AS deliver, _txq_lease_expiration AS expiration,"
            f" CASE WHEN _txq_lease_expiration IS NULL THEN {ready}"
            f" ELSE {leased_receivable} END AS receivable FROM {name})"
            " SELECT count(*) FILTER (WHERE receivable <= clock.now),"
            " count(*) FILTER (WHERE expiration > clock.now),"
            " count(*) FILTER (WHERE receivable > clock.now"
            " AND coalesce(expiration <= clock.now, true)),"
            " extract(epoch FROM clock.now - min(deliver) FILTER"
            " (WHERE receivable <= clock.now))::float8"
            " FROM q, clock GROUP BY clock.now"
        ),
    )


@dataclass(frozen=True)
class ActionStatements:
    """Deleting chosen messages, or setting when they are ready: ``lock`` row-locks the
    messages of the keys (one array per key column) and tells each one's input place, whether
    a live lease holds it and its location; the change then goes by those locations."""

    lock: str
    delete: str
    make_ready: str


@lru_cache(maxsize=512)
def action_statements(table: Table, deliver_time: str) -> ActionStatements:
    """Build (once) the SQL acting on chosen messages of ``table``."""
    name = ident(table.name)
    keys = [ident(k) for k in table.primary_key]
    aliases = [f"_k{i}" for i in range(len(keys))]
    arrays = [f"%(k{i})s::{_array_type(c)}[]" for i, c in enumerate(table.key_columns)]
    now = "coalesce(%(now)s::timestamptz, clock_timestamp())"
    located = "ctid = ANY(%(locations)s::text[]::tid[])"
    return ActionStatements(
        # The first key column's array drives an index scan (joined to unnest() alone, a
        # plan may hash the whole table).
        lock=(
            f"WITH clock AS (SELECT {now} AS now)"
            f" SELECT _input._i, q._txq_lease_expiration > clock.now, q.ctid::text"
            f" FROM unnest({', '.join(arrays)}) WITH ORDINALITY"
            f" AS _input({', '.join(aliases)}, _i)"
            f" JOIN {name} AS q ON ({', '.join(f'q.{k}' for k in keys)}) ="
            f" ({', '.join(f'_input.{a}' for a in aliases)})"
            f" CROSS JOIN clock WHERE q.{keys[0]} = ANY({arrays[0]}) FOR UPDATE OF q"
        ),
        delete=f"DELETE FROM {name} WHERE {located}",
        make_ready=(
            f"UPDATE {name} SET {ident(deliver_time)} = coalesce(%(deliver)s::timestamptz,"
            f" {now}), _txq_ready_at = NULL, _txq_lease_token = NULL,"
            f" _txq_lease_expiration = NULL WHERE {located}"
        ),
    )
