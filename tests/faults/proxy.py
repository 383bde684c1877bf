"""A loopback TCP proxy for PostgreSQL that drops connections at COMMIT, on request.

The proxy sits between a client (txqueue's psycopg pool) and the server, listens on
127.0.0.1 only, and reads the frontend half of the wire protocol just far enough to see
every statement the client runs:

- the untyped startup packets (SSLRequest / GSSENCRequest, answered 'N' by a server without
  TLS, then the StartupMessage), after which every message is ``type byte + int32 length``;
- simple queries (``'Q'``: the text runs at once);
- the extended protocol: Parse (``'P'``: statement name -> text, kept per connection, since
  psycopg prepares a statement it has run five times and afterwards sends only
  Bind/Execute with the name), Bind (``'B'``: portal -> statement), Execute (``'E'``: the
  portal's statement runs now), Close (``'C'``) and Sync (``'S'``).

A transaction asks for a fault by carrying a marker — ``txq-fault:<mode>:<tag>`` — in any
statement's text (a comment) or in any parameter value it binds (a column value: txqueue
writes its own SQL, but the values are the caller's). The marker arms the connection; the
next COMMIT on it (as a simple query, the Execute of a portal whose statement is COMMIT, or
the Sync ending statements that ran outside BEGIN … COMMIT: an implicit transaction commits
there) is then:

``before``  never forwarded: both sockets are closed (the server sees EOF and rolls back);
``after``   forwarded (through the next Sync for the extended protocol), then the client
            socket is closed at once, before any reply byte can reach it; the server socket
            is closed after the forwarded bytes (FIN after data), so the server still runs
            the COMMIT;
``stall``   never forwarded, the client socket is closed, and the server socket is kept
            open and silent: a network partition. The server's transaction stays "in
            progress" until someone terminates its backend.
``fatal``   forwarded as for ``after``, then the client gets, instead of the server's reply,
            the FATAL a server sends when it is shut down (``57P01``, "terminating connection
            due to administrator command") and its socket is closed only 0.3 s later: a
            server that committed and then ended the session before its reply, as a fast
            shutdown can, heard by a client that has not yet seen the socket close.

BEGIN and ROLLBACK disarm a connection, so a marker never leaks into a later transaction,
and a tag drops once: a retry carrying the same marker (an ack of the same key) goes through.
Every drop is recorded as a `Drop` with the marker's tag, so a test can tell exactly which
transaction attempts lost their COMMIT reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
import threading
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["MODES", "CommitDropProxy", "Drop", "fault_marker"]

MODES = ("before", "after", "stall", "fatal")
_MARKER = re.compile(rb"txq-fault:(before|after|stall|fatal):([A-Za-z0-9_.-]+)")
#: The ErrorResponse a shutting-down server sends before it closes the session.
_ADMIN_SHUTDOWN = b"".join(
    field + text + b"\0"
    for field, text in (
        (b"S", b"FATAL"),
        (b"V", b"FATAL"),
        (b"C", b"57P01"),
        (b"M", b"terminating connection due to administrator command"),
    )
)
_FATAL_REPLY = b"E" + struct.pack("!i", len(_ADMIN_SHUTDOWN) + 5) + _ADMIN_SHUTDOWN + b"\0"
#: How long a ``fatal`` drop keeps the client's socket open after the FATAL.
_FATAL_HOLD = 0.3
_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102
_CHUNK = 65536


def fault_marker(mode: str, tag: str) -> str:
    """The text that arms a connection (as a value or in a comment): its next COMMIT drops."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return f"txq-fault:{mode}:{tag}"


def _is(text: bytes, word: bytes) -> bool:
    return text.strip().rstrip(b";").strip().upper() == word


@dataclass(frozen=True)
class Drop:
    """One injected drop: the marker's tag, the mode and how COMMIT was sent."""

    tag: str
    mode: str
    protocol: str  # "simple" ('Q'), "extended" (Parse/Bind/Execute) or "implicit" (Sync)


@dataclass
class _Connection:
    """What the proxy knows about one client connection."""

    ident: int
    statements: dict[bytes, bytes] = field(default_factory=dict)
    portals: dict[bytes, bytes] = field(default_factory=dict)
    armed: tuple[str, str] | None = None
    silenced: bool = False  # no server byte may reach the client any more
    in_block: bool = False  # between BEGIN and COMMIT/ROLLBACK
    executed: bool = False  # statements ran outside a block since the last Sync


class CommitDropProxy:
    """Forward 127.0.0.1:<port> to a PostgreSQL server, dropping armed COMMITs.

    Runs its own asyncio loop in a daemon thread; ``start()`` / ``stop()`` (or ``with``).
    ``drops`` lists the injected drops, ``commits`` counts every COMMIT seen by protocol, and
    with ``log=True`` ``messages`` keeps ``(connection, type, text)`` for Q/P/E messages.
    """

    def __init__(self, upstream_host: str, upstream_port: int, *, log: bool = False) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.drops: list[Drop] = []
        self.commits = {"simple": 0, "extended": 0, "implicit": 0}
        self.messages: list[tuple[int, str, str]] = []
        self._log = log
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._lock = threading.Lock()
        self._next_ident = 0
        self._admit: asyncio.Event | None = None  # cleared: new connections wait

    @classmethod
    def for_url(cls, url: str, *, log: bool = False) -> CommitDropProxy:
        """A proxy in front of the server of ``url`` (host and port taken from it)."""
        parts = urlsplit(url)
        return cls(parts.hostname or "127.0.0.1", parts.port or 5432, log=log)

    def url(self, url: str) -> str:
        """``url`` rewritten to go through the proxy (TLS and GSS off: the proxy reads bytes)."""
        parts = urlsplit(url)
        netloc = f"{parts.username}@" if parts.username else ""
        netloc += f"127.0.0.1:{self.port}"
        query = dict(parse_qsl(parts.query))
        query.update(sslmode="disable", gssencmode="disable")
        return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> CommitDropProxy:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._admit = asyncio.Event()
            self._admit.set()
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, "127.0.0.1", 0)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as error:  # pragma: no cover - reported to start()
                errors.append(error)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="commit-drop-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("proxy did not start within 10 s")
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            if self._admit is not None:
                self._admit.set()
            for writer in list(self._writers):
                writer.transport.abort()  # each handler then ends on its own
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if tasks:
                _, late = await asyncio.wait(tasks, timeout=5)
                for task in late:
                    task.cancel()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> CommitDropProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def hold_new_connections(self, hold: bool = True) -> None:
        """While held, new client connections are accepted but not connected to the server."""
        loop, admit = self._loop, self._admit
        assert loop is not None and admit is not None, "start() the proxy first"
        loop.call_soon_threadsafe(admit.clear if hold else admit.set)

    def drops_by_tag(self) -> dict[str, Drop]:
        with self._lock:
            return {drop.tag: drop for drop in self.drops}

    # ---- one connection -------------------------------------------------------------------

    async def _handle(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        with self._lock:
            self._next_ident += 1
            connection = _Connection(self._next_ident)
        self._writers.add(client_writer)
        try:
            assert self._admit is not None
            await self._admit.wait()
            server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.transport.abort()
            self._writers.discard(client_writer)
            return
        self._writers.add(server_writer)
        upstream = asyncio.ensure_future(
            self._server_to_client(connection, server_reader, client_writer)
        )
        try:
            keep_server = await self._client_to_server(
                connection, client_reader, client_writer, server_writer
            )
            if keep_server:  # stall: hold the server's socket until the server closes it
                connection.silenced = True
                await upstream
            else:
                upstream.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await upstream
        except (OSError, asyncio.IncompleteReadError):
            upstream.cancel()
        finally:
            for writer in (client_writer, server_writer):
                with contextlib.suppress(OSError, RuntimeError):
                    writer.close()
                self._writers.discard(writer)

    async def _server_to_client(
        self,
        connection: _Connection,
        server_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
    ) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = await server_reader.read(_CHUNK)
                if not data:
                    break
                if connection.silenced:
                    continue  # swallowed: the client already lost this connection
                client_writer.write(data)
                await client_writer.drain()
        if not connection.silenced:
            client_writer.transport.abort()

    async def _client_to_server(
        self,
        connection: _Connection,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        server_writer: asyncio.StreamWriter,
    ) -> bool:
        """Relay the client's messages; True when the server socket must be kept (stall)."""
        # Startup: untyped packets until the StartupMessage (or a CancelRequest).
        while True:
            header = await client_reader.readexactly(8)
            length, code = struct.unpack("!ii", header)
            rest = await client_reader.readexactly(length - 8)
            server_writer.write(header + rest)
            if code == _CANCEL_REQUEST:
                await server_writer.drain()
                return False
            if code not in (_SSL_REQUEST, _GSSENC_REQUEST):
                break
        # Typed messages.
        flush_after_sync: str | None = None  # "after" drop waiting for the batch's Sync
        while True:
            header = await client_reader.readexactly(5)
            kind = header[:1]
            (length,) = struct.unpack("!i", header[1:])
            body = await client_reader.readexactly(length - 4)
            message = header + body
            if flush_after_sync is not None:
                server_writer.write(message)
                if kind in (b"S", b"H"):
                    await self._end(flush_after_sync, client_writer, server_writer)
                    return False
                continue
            commit = self._inspect(connection, kind, body)
            if commit is not None and connection.armed is not None:
                mode, tag = connection.armed
                connection.armed = None
                with self._lock:
                    dropped = any(drop.tag == tag for drop in self.drops)
                    if not dropped:
                        self.drops.append(Drop(tag, mode, commit))
                if dropped:
                    server_writer.write(message)
                    await server_writer.drain()
                    continue
                if mode == "before":
                    client_writer.transport.abort()
                    server_writer.transport.abort()
                    return False
                if mode == "stall":
                    client_writer.transport.abort()
                    return True
                # after, fatal: the client must see no reply byte from here on.
                connection.silenced = True
                server_writer.write(message)
                if kind in (b"Q", b"S"):
                    await self._end(mode, client_writer, server_writer)
                    return False
                flush_after_sync = mode
                continue
            server_writer.write(message)
            if kind == b"X":
                await server_writer.drain()
                return False
            await server_writer.drain()

    @staticmethod
    async def _end(
        mode: str, client_writer: asyncio.StreamWriter, server_writer: asyncio.StreamWriter
    ) -> None:
        """End an ``after`` or ``fatal`` drop once COMMIT (and its Sync) is forwarded."""
        server_writer.close()  # FIN after the forwarded bytes: the server still reads COMMIT
        if mode == "fatal":
            client_writer.write(_FATAL_REPLY)
            with contextlib.suppress(OSError):
                await client_writer.drain()
            await asyncio.sleep(_FATAL_HOLD)
        client_writer.transport.abort()

    def _inspect(self, connection: _Connection, kind: bytes, body: bytes) -> str | None:
        """Track statements and markers; the protocol name when this message runs COMMIT."""
        if kind == b"Q":
            text = body[:-1]
            self._note(connection, "Q", text)
            return self._runs(connection, text, "simple")
        if kind == b"P":
            name, rest = body.split(b"\0", 1)
            text = rest.split(b"\0", 1)[0]
            connection.statements[name] = text
            self._note(connection, "P", text)
            self._arm(connection, text)
            return None
        if kind == b"B":
            portal, rest = body.split(b"\0", 1)
            statement, values = rest.split(b"\0", 1)
            connection.portals[portal] = connection.statements.get(statement, b"")
            self._arm(connection, values)  # a marker among the bound values
            return None
        if kind == b"E":
            portal = body.split(b"\0", 1)[0]
            text = connection.portals.get(portal, b"")
            self._note(connection, "E", text)
            if _is(text, b"COMMIT"):
                connection.in_block = False
                return self._runs(connection, text, "extended")
            if _is(text, b"BEGIN") or _is(text, b"BEGIN READ ONLY"):
                connection.in_block, connection.armed = True, None
            elif _is(text, b"ROLLBACK"):
                connection.in_block, connection.armed = False, None
            elif not connection.in_block:
                connection.executed = True
            return None
        if kind == b"S":  # statements run outside BEGIN … COMMIT commit at their Sync
            implicit, connection.executed = connection.executed, False
            if implicit and connection.armed is not None:
                with self._lock:
                    self.commits["implicit"] += 1
                return "implicit"
            return None
        if kind == b"C":
            what, name = body[:1], body[1:].split(b"\0", 1)[0]
            (connection.statements if what == b"S" else connection.portals).pop(name, None)
        return None

    def _runs(self, connection: _Connection, text: bytes, protocol: str) -> str | None:
        if _is(text, b"COMMIT"):
            with self._lock:
                self.commits[protocol] += 1
            return protocol
        if _is(text, b"BEGIN") or _is(text, b"ROLLBACK"):
            connection.armed = None
        self._arm(connection, text)
        return None

    @staticmethod
    def _arm(connection: _Connection, text: bytes) -> None:
        found = _MARKER.search(text)
        if found is not None:
            connection.armed = (found.group(1).decode(), found.group(2).decode())

    def _note(self, connection: _Connection, kind: str, text: bytes) -> None:
        if self._log:
            with self._lock:
                self.messages.append((connection.ident, kind, text[:200].decode(errors="replace")))
