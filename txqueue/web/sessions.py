"""The dashboard's browser sessions: random ids the server keeps, and the CSRF token of each.

A browser's session cookie holds only a random id (`secrets.token_urlsafe`); what it means
lives here, in memory. So logging out ends a session for good (the old cookie is refused), a
session expires after `IDLE_LIMIT` unused and `LIFETIME` in all, and at most `LIMIT`
sessions are kept (the least recently used one goes first). A session's CSRF token is an HMAC
of its id under a secret of this store: another port of the same host, which may set cookies
for the dashboard's host, can neither plant nor read one. A restart ends every session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

__all__ = ["IDLE_LIMIT", "LIFETIME", "LIMIT", "Sessions"]

#: A session unused for this long has ended.
IDLE_LIMIT = timedelta(hours=12)
#: A session ends this long after its login, however busy.
LIFETIME = timedelta(days=7)
#: The most sessions kept at once; a new one beyond it ends the least recently used.
LIMIT = 1000


@dataclass
class _Session:
    created: float
    last_used: float


class Sessions:
    """The live sessions of one dashboard, keyed by a digest of their id (a lookup takes no
    time that depends on how much of a guessed id is right)."""

    def __init__(
        self,
        *,
        idle_limit: timedelta = IDLE_LIMIT,
        lifetime: timedelta = LIFETIME,
        limit: int = LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_limit = idle_limit.total_seconds()
        self.lifetime = lifetime.total_seconds()
        self.limit = limit
        self.clock = clock  # seconds; tests pin it
        self._secret = secrets.token_bytes(32)
        self._live: OrderedDict[bytes, _Session] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    def create(self) -> str:
        """A new session; its id is what the cookie holds."""
        session_id = secrets.token_urlsafe(32)
        now = self.clock()
        with self._lock:
            while len(self._live) >= max(self.limit, 1):
                self._live.popitem(last=False)
            self._live[_digest(session_id)] = _Session(now, now)
        return session_id

    def touch(self, session_id: str | None) -> bool:
        """Whether ``session_id`` names a live session; if so it counts as used now."""
        if not session_id:
            return False
        key = _digest(session_id)
        now = self.clock()
        with self._lock:
            session = self._live.get(key)
            if session is None:
                return False
            if now - session.last_used > self.idle_limit or now - session.created > self.lifetime:
                del self._live[key]
                return False
            session.last_used = now
            self._live.move_to_end(key)
            return True

    def end(self, session_id: str | None) -> None:
        """Forget the session (logging out): its cookie is refused from now on."""
        if session_id:
            with self._lock:
                self._live.pop(_digest(session_id), None)

    def csrf_token(self, session_id: str) -> str:
        """The CSRF token of a session: forms and ``X-CSRF-Token`` headers must carry it."""
        return self.derived(b"csrf " + session_id.encode())

    def derived(self, purpose: bytes) -> str:
        """An HMAC of ``purpose`` under this store's secret (hex)."""
        return hmac.new(self._secret, purpose, hashlib.sha256).hexdigest()


def _digest(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()
