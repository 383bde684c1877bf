"""Wake-ups for Spanner receivers from each queue's insert-only change stream.

Every emulated queue has a change stream of its inserts (keys only; ``statements.create_table``
creates it with the queue, ``drop_table`` drops it). A driver whose receivers wait on a queue
runs one ``ChangeStreamWatcher`` for it: it reads the stream as Spanner documents, with the
change stream's table-valued function ``READ_<stream>`` in single-use read-only snapshots. The
first query (no partition token) names the stream's partitions; one thread per partition then
streams that partition's records (heartbeats keep an idle one talking) and follows its child
partitions when it splits or merges (each child is read once, by the first parent to name
it). Each data change record calls ``on_insert``, which wakes the receivers of the queue.

It is a wake-up, not a delivery path: a record missed (the watcher starting a moment after a
send, a partition failing) costs latency, never a message, because waiting receivers still
look at the queue themselves on a slow tick. A queue without a stream (made by an older
txqueue) or a stream that cannot be read leaves the watcher ``failed`` and its receivers on
their fast tick. ``stop`` ends every reader: it deletes their sessions, which ends their
queries on the server, and joins the threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from google.cloud.spanner_v1 import param_types

from txqueue.drivers.spanner.engine import SpannerDatabase
from txqueue.drivers.spanner.spelling import bind

__all__ = ["ChangeStreamWatcher"]

_log = logging.getLogger("txqueue.spanner")

#: How often an idle partition sends a heartbeat (Spanner's minimum is one second).
HEARTBEAT = timedelta(seconds=1)
#: How long one partition query runs before it is re-issued from where it ended.
WINDOW = timedelta(seconds=60)
#: How far back the first query starts: a send committed while the watcher was starting
#: still wakes the receivers (an extra wake-up costs one receive).
MARGIN = timedelta(seconds=1)
#: Pause before a partition query that failed is tried again.
RETRY_SECONDS = 1.0
#: Failures in a row after which a partition is given up and the watcher ``failed`` (the
#: stream was dropped with its queue, say); the driver starts a new watcher later.
FAILURES = 3
#: How long ``stop`` waits for the readers.
STOP_SECONDS = 5.0
#: Partition tokens remembered to start each child once (older ones are long finished).
REMEMBERED = 4096

_TYPES = {
    "start": param_types.TIMESTAMP,
    "end": param_types.TIMESTAMP,
    "token": param_types.STRING,
    "heartbeat": param_types.INT64,
}


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class ChangeStreamWatcher:
    """Calls ``on_insert`` for each insert that ``stream`` records, until ``stop``."""

    def __init__(
        self, database: SpannerDatabase, stream: str, on_insert: Callable[[], None]
    ) -> None:
        self._database = database
        self._spelling = database.spelling
        self._sql = database.spelling.read_stream(stream)
        self._on_insert = on_insert
        self._stopping = threading.Event()
        #: set once the partitions are known (``failed`` says whether that went wrong)
        self.ready = threading.Event()
        self.failed = False
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._sessions: set[Any] = set()
        self._started: dict[str, None] = {}

    @property
    def live(self) -> bool:
        """Whether the stream is being read (the receivers may look at the queue less often)."""
        return self.ready.is_set() and not self.failed and not self._stopping.is_set()

    def start(self) -> None:
        self._spawn(None, _utcnow() - MARGIN)

    def stop(self) -> None:
        """End every reader (their sessions are deleted, which ends their queries)."""
        self._stopping.set()
        with self._lock:
            sessions, self._sessions = set(self._sessions), set()
            threads = list(self._threads)
        for session in sessions:
            with contextlib.suppress(Exception):
                session.delete()
        for thread in threads:
            thread.join(STOP_SECONDS)

    # ---- readers -----------------------------------------------------------------------

    def _claim(self, token: str) -> bool:
        """Whether ``token`` is this caller's to read (a merged child is named by each of
        its parents: the first one claims it). Called with the lock held."""
        if token in self._started:
            return False
        self._started[token] = None
        while len(self._started) > REMEMBERED:
            del self._started[next(iter(self._started))]
        return True

    def _spawn(self, token: str | None, start: datetime) -> None:
        with self._lock:
            if self._stopping.is_set() or (token is not None and not self._claim(token)):
                return
            thread = threading.Thread(
                target=self._read, args=(token, start), name="txqueue-spanner-wakeup", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _read(self, token: str | None, start: datetime) -> None:
        """Read partition ``token`` (None: the stream's first partitions) until it ends."""
        early = token is None
        failures = 0
        while not self._stopping.is_set():
            end = start + (HEARTBEAT if token is None else WINDOW)
            try:
                children, start = self._query(token, start, end)
            except Exception as error:
                if self._stopping.is_set():
                    return
                if early and "start_timestamp" in str(error):
                    early, start = False, _utcnow()  # the stream is younger than MARGIN
                    continue
                failures += 1
                if token is None or failures >= FAILURES:
                    # no stream (an older queue, a dropped one) or no access: poll instead
                    _log.info("change stream unreadable, receivers poll instead: %s", error)
                    self.failed = True
                    self.ready.set()
                    return
                _log.debug("change stream partition failed, retried: %s", error)
                self._stopping.wait(RETRY_SECONDS)
                continue
            failures = 0
            if token is None:
                self.ready.set()
            if children:
                # this partition has ended; the first child goes on in this thread
                mine = None
                for child, child_start in children:
                    if mine is None:
                        with self._lock:
                            if self._claim(child):
                                mine = (child, child_start)
                                continue
                    self._spawn(child, child_start)
                if mine is None:
                    return
                token, start = mine
            elif token is None:
                return  # the first query names partitions, nothing else
            else:
                start = max(start, end)

    def _query(
        self, token: str | None, start: datetime, end: datetime
    ) -> tuple[list[tuple[str, datetime]], datetime]:
        """One partition query: its child partitions and how far it got."""
        children: list[tuple[str, datetime]] = []
        reached = start
        session = self._database.acquire()
        with self._lock:
            self._sessions.add(session)
        healthy = False
        try:
            sql, values, types = bind(
                self._spelling,
                self._sql,
                {
                    "start": start,
                    "end": end,
                    "token": token,
                    "heartbeat": int(HEARTBEAT / timedelta(milliseconds=1)),
                },
                dict(_TYPES),
            )
            rows = session.snapshot().execute_sql(sql, params=values, param_types=types)
            for row in rows:
                if self._stopping.is_set():
                    return children, reached
                if self._spelling.postgresql:  # one JSON record a row
                    reached = max(reached, self._take_json(row[0], children))
                    continue
                for record in row[0]:
                    reached = max(reached, self._take(record, children))
            healthy = True
        finally:
            with self._lock:
                self._sessions.discard(session)
            if self._stopping.is_set():
                healthy = False  # its query may still be streaming: delete, never reuse
            self._database.release(session, healthy)
        return children, reached

    def _take(self, record: Any, children: list[tuple[str, datetime]]) -> datetime:
        """Act on one ChangeRecord; returns the time it speaks for."""
        changes, heartbeats, partitions = record[0], record[1], record[2]
        moment = datetime.min.replace(tzinfo=timezone.utc)
        for change in changes:
            moment = max(moment, change[0])
            self._on_insert()
        for heartbeat in heartbeats:
            moment = max(moment, heartbeat[0])
        for partition in partitions:
            moment = max(moment, partition[0])
            children += [(child[0], partition[0]) for child in partition[2]]
        return moment

    def _take_json(self, record: Any, children: list[tuple[str, datetime]]) -> datetime:
        """Act on one record of a PostgreSQL-dialect stream (``spanner.read_json_<stream>``:
        a JSON object holding one data change, heartbeat or child partitions record)."""
        moment = datetime.min.replace(tzinfo=timezone.utc)
        change = record.get("data_change_record")
        if change:
            moment = _moment(change.get("commit_timestamp"), moment)
            self._on_insert()
        heartbeat = record.get("heartbeat_record")
        if heartbeat:
            moment = _moment(heartbeat.get("timestamp"), moment)
        partition = record.get("child_partitions_record")
        if partition:
            start = _moment(partition.get("start_timestamp"), moment)
            moment = max(moment, start)
            children += [(child["token"], start) for child in partition["child_partitions"]]
        return moment


def _moment(text: Any, floor: datetime) -> datetime:
    """A record's timestamp (RFC 3339 text, nanoseconds cut to microseconds), or ``floor``."""
    if not isinstance(text, str):
        return floor
    head, _, rest = text.partition(".")
    zone = ""
    digits = rest
    for sign in ("+", "-", "Z"):
        if sign in rest:
            digits, _, tail = rest.partition(sign)
            zone = sign + tail
            break
    fraction = f".{digits[:6]}" if rest else ""
    parsed = datetime.fromisoformat((head + fraction + zone).replace("Z", "+00:00"))
    return max(floor, parsed.astimezone(timezone.utc))
