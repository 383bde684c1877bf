"""The Cloud Spanner engine: ``spanner://projects/P/instances/I/databases/D``.

Design (GoogleSQL and PostgreSQL-dialect databases, queues emulated on tables or native):

- **Client and faces.** google-cloud-spanner is blocking; the blocking operations live in
  ``engine`` (sessions, explicit transactions, queries), ``catalog``, ``leasing``,
  ``dead_letters``, ``browse`` and ``transaction``. ``_async.py`` (by hand) runs them on worker
  threads behind ``AsyncDriver`` / ``AsyncDriverTransaction`` / ``AsyncReceiver``; ``_sync.py``
  is generated from it, as for SQLite. ``SPANNER_EMULATOR_HOST`` points the client at the
  emulator. ``GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW`` defaults to ``false``
  (multiplexed read-write sessions answer "Transaction not found" under concurrency on the
  emulator; pooled ones give clean ``Aborted``).
- **Dialect.** The database's own, read at connect from
  ``INFORMATION_SCHEMA.DATABASE_OPTIONS``; a ``dialect=`` that disagrees is InvalidArgument.
  Every statement is written once and spelled for it (``spelling``: quoting, types,
  functions, generated columns, index and change-stream forms, ``@name`` or ``$n``
  parameters); the driver's ``sql_engine`` names the SQL front end's target
  (``spanner`` or ``spanner_postgresql``). The PostgreSQL dialect has no
  ASSERT_ROWS_MODIFIED: the rows are counted first in the transaction (``assertion``).
- **Queues on plain tables** (``statements``): declared columns, ``DeliverTime`` defaulting to
  ``CURRENT_TIMESTAMP()``, hidden ``txqueue_*`` lease columns (Spanner names start with a
  letter), a stored generated ``txqueue_ready = COALESCE(txqueue_ready_at, DeliverTime)``, a
  stored generated ``txqueue_shard`` (a hash of the key into 8) leading the ready index (no
  hot spot at the index's end), a NULL_FILTERED index on the lease token and an insert-only
  change stream ``txqueue_wake_<queue>``. ``INTERLEAVE IN PARENT … ON
  DELETE CASCADE`` is Spanner's own. A lease sets ``txqueue_ready_at`` to its expiration
  plus the redelivery backoff, so "ready" alone says receivable. Tokens carry no locator: the
  token index finds the row.
- **Receive** is one read-write transaction: a SELECT of the ready rows in ready order (the
  oldest of every shard's heads; after an abort, a start shard of its own first; it
  also reads ``CURRENT_TIMESTAMP()``, or binds the pinned time), then update mutations that
  set token, expiration, ready time and delivery count. Read locks make competing receivers
  conflict; the loser is aborted and re-run, so a message is never leased twice. Renew,
  release and dead-letter moves are the same shape (SELECT by token, then mutations).
- **Transactions** are begun explicitly on a pooled (regular, not multiplexed) session and
  rolled back by txqueue on any error. Writes, sends and acks are mutations, applied at
  commit in order, as on Spanner; sends and acks are buffered as on the other engines and
  checked when applied (next statement, flush or commit): a send reads its keys
  (AlreadyExists naming the key), an ack reads the message in the transaction (NotFound, or
  FailedPrecondition for a lost lease: the read lock fences the lease holder); insert and
  update writes read their keys the same way. A transaction's queries do not see its own
  mutations (Spanner's rule). ``db.batch(connection=<Transaction>)`` joins the
  application's own open client transaction and never commits it.
- **Statements** go to Spanner as GoogleSQL (sqlglot's BigQuery writer, ``@name``
  parameters); engine SQL with ``?`` markers and a list of values (the traits' marker) is
  renumbered to ``@p1, @p2, …``.
- **Values.** BYTES cross the client as base64 (raw bytes would be silently mis-stored), JSON
  as text; results are decoded by their own column types (``codec``). Errors map to
  ``txqueue.errors`` with the client's as ``__cause__``.
- **Wake-ups** (``wakeup``). A receiver wakes on this process's commits at once and on
  others' through the queue's change stream, read in background threads of the driver;
  polling is the fallback.
- **Commit outcome** (``outcome``): a commit that writes carries a marker row (one insert
  mutation); a commit ending in DEADLINE_EXCEEDED / UNAVAILABLE is resolved by inserting the
  same marker again (AlreadyExists: committed; else Aborted, fenced), never guessed.
- **Native queues** (``native``, ``?queues=native|emulated|auto``): Spanner's CREATE QUEUE,
  Send / Ack mutations, RECEIVE_ / RENEWLEASE_; a fenced ack renews its token first.
"""
